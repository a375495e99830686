"""The kernel-IR instruction set: one ``InstructionSpec`` per instruction, the only list of them.

A spec says what an instruction reads (its sources, in order, and which may be constants), which
attributes it carries (name, kind, required or not), whether it may accumulate into its
destination, and which NeuronCore engine runs it. Everything else derives from it:

* ``validate`` checks deserialised IR against the specs, and the NKI builder checks every
  instruction it emits against them while tracing (a front-end bug is a trace error, not a
  wrong answer at run time);
* the engine names the executor's handler module (``emulator/kernel_exec/handlers/<engine>.py``,
  which must register a handler for every instruction of its engine) and the cost rule
  (``emulator/cost/kernel_ir.py``, one rule per engine).

Only names and plain Python live here: the IR serialises without NumPy. Adding an instruction is
one entry in ``SPECS`` plus its handler, its front-end function and tests (docs/kernel-ir.md,
"Adding an instruction").
"""

from __future__ import annotations

from dataclasses import dataclass

from emulator import machine
from emulator.machine import DMA, GPSIMD, SCALAR, TENSOR, VECTOR

from . import ops

__all__ = ["DMA", "GPSIMD", "SCALAR", "TENSOR", "VECTOR", "NONE", "ENGINES", "SPECS",
           "InstructionSpec", "Source", "Attr", "spec", "by_engine", "UnknownInstructionError"]

# --- engines ---------------------------------------------------------------------------------------

#: The engines of a NeuronCore that run kernel instructions (emulator/machine.py, whose names
#: the cost model's engine tracks use too), and ``none`` for bookkeeping that no engine runs.
NONE = "none"
ENGINES: tuple[str, ...] = machine.ENGINES + (NONE,)

# --- operands and attributes -----------------------------------------------------------------------

#: Source kinds: an on-chip or HBM access only, an access or a scalar constant, a constant only.
TILE = "tile"
VALUE = "value"
CONST = "const"


@dataclass(frozen=True)
class Source:
    """One operand position: its name (for messages and docs) and what it may hold."""

    name: str
    kind: str = TILE


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_affine(v: object) -> bool:
    return (isinstance(v, list) and len(v) == 2 and _is_int(v[0]) and isinstance(v[1], list)
            and all(isinstance(t, list) and len(t) == 2 and isinstance(t[0], str) and _is_int(t[1])
                    for t in v[1]))


#: The longest string attribute (a device_print prefix): text read from bytes stays bounded.
MAX_TEXT = 4096

#: Attribute kind -> (test of a JSON value, what the kind is, for messages).
ATTR_KINDS: dict[str, tuple] = {
    "alu": (lambda v: v in ops.ALU_OPS, "an ALU operator name (kernel_ir/ops.py ALU_OPS)"),
    "activation": (lambda v: v in ops.ACTIVATIONS,
                   "an activation name (kernel_ir/ops.py ACTIVATIONS)"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "int": (_is_int, "an integer"),
    "number": (_is_number, "a number"),
    "scalar": (lambda v: isinstance(v, (bool, int, float)), "a number or a boolean"),
    "axes": (lambda v: isinstance(v, list) and all(_is_int(a) for a in v), "a list of axes"),
    "ints": (lambda v: isinstance(v, list) and all(_is_int(a) for a in v), "a list of integers"),
    "affine": (_is_affine, "an affine expression [const, [[symbol, coef], ...]]"),
    "affines": (lambda v: isinstance(v, list) and all(_is_affine(a) for a in v),
                "a list of affine expressions"),
    "engine": (lambda v: v in ENGINES, f"an engine name {list(ENGINES)}"),
    "text": (lambda v: isinstance(v, str) and len(v) <= MAX_TEXT, f"a string of at most "
             f"{MAX_TEXT} characters"),
}

#: Kinds whose value holds affine expressions over the destination tile's axes and the symbols
#: in scope (validated like a mask).
AFFINE_KINDS = frozenset({"affine", "affines"})


@dataclass(frozen=True)
class Attr:
    name: str
    kind: str
    required: bool = False


@dataclass(frozen=True)
class InstructionSpec:
    """What one kernel-IR instruction is (see the module docstring)."""

    name: str
    engine: str
    sources: tuple[Source, ...] = ()
    #: How many leading sources every instance has (the rest are optional, trailing).
    min_sources: int | None = None
    attrs: tuple[Attr, ...] = ()
    #: May carry ``acc`` (``dst = acc(dst, value)``).
    accumulates: bool = False
    #: Other engines the instruction may run on, chosen by ``attrs["engine"]`` (NKI's
    #: ``engine=`` argument); the handler is the default engine's, the cost the chosen one's.
    alt_engines: tuple[str, ...] = ()
    #: The result keeps part of ``dst`` (the handler reads it): even a whole, unmasked write
    #: needs ``dst``'s earlier value, so it never stands in for the allocation.
    reads_dst: bool = False
    doc: str = ""

    def __post_init__(self) -> None:
        if self.min_sources is None:
            object.__setattr__(self, "min_sources", len(self.sources))
        if self.engine not in ENGINES or any(e not in ENGINES for e in self.alt_engines):
            raise ValueError(f"instruction {self.name!r}: unknown engine")
        if any(a.kind not in ATTR_KINDS for a in self.attrs):
            raise ValueError(f"instruction {self.name!r}: unknown attribute kind")
        if self.alt_engines and "engine" not in {a.name for a in self.attrs}:
            raise ValueError(f"instruction {self.name!r}: alternative engines need an 'engine' "
                             "attribute")

    def attr(self, name: str) -> Attr | None:
        for a in self.attrs:
            if a.name == name:
                return a
        return None

    def engine_of(self, attrs: dict) -> str:
        """The engine an instance runs on: ``attrs["engine"]`` when the spec allows a choice."""
        chosen = attrs.get("engine") if self.alt_engines else None
        return chosen if chosen in self.alt_engines else self.engine

    def problems(self, srcs: tuple, attrs: dict, acc: str | None) -> list[str]:
        """What is wrong with an instance's operands and attributes (empty: nothing).
        ``srcs`` are kinds per source: "access" or "const"."""
        out = []
        if not self.min_sources <= len(srcs) <= len(self.sources):
            want = (str(len(self.sources)) if self.min_sources == len(self.sources)
                    else f"{self.min_sources} to {len(self.sources)}")
            out.append(f"takes {want} sources ({', '.join(s.name for s in self.sources)}), "
                       f"got {len(srcs)}")
        for spec, kind in zip(self.sources, srcs):
            if spec.kind == TILE and kind != "access":
                out.append(f"source {spec.name!r} must be a tile, got a constant")
            elif spec.kind == CONST and kind != "const":
                out.append(f"source {spec.name!r} must be a constant, got a tile")
        for name, value in attrs.items():
            a = self.attr(name)
            if a is None:
                out.append(f"unknown attribute {name!r} (known: "
                           f"{', '.join(x.name for x in self.attrs) or 'none'})")
            elif not ATTR_KINDS[a.kind][0](value):
                out.append(f"attribute {name!r} must be {ATTR_KINDS[a.kind][1]}, got {value!r}")
        for a in self.attrs:
            if a.required and a.name not in attrs:
                out.append(f"attribute {a.name!r} is required")
        if acc is not None and not self.accumulates:
            out.append("does not accumulate into its destination")
        elif acc is not None and acc not in ops.ALU_OPS:
            out.append(f"unknown accumulation {acc!r}")
        return out


def _specs(*specs: InstructionSpec) -> dict[str, InstructionSpec]:
    table: dict[str, InstructionSpec] = {}
    for s in specs:
        if s.name in table:
            raise ValueError(f"instruction {s.name!r} is specified twice")
        table[s.name] = s
    return table


_ENGINE_ATTR = Attr("engine", "engine")
#: Indirect DMA (NKI's ``a[idx_tile, i_f]`` in ``nl.load`` / ``nl.store``): the HBM access'
#: dimension ``indirect`` adds, at each tile position, the value of the integer ``offsets`` tile
#: there (one index per partition, broadcast along the free axes) to its affine index.
_INDIRECT_ATTR = Attr("indirect", "int")
#: With ``indirect``: positions whose index falls outside the tensor are skipped (not read, the
#: destination keeps its value; not written) instead of being an error (``oob_mode.skip``).
_OOB_SKIP_ATTR = Attr("oob_skip", "bool")

#: Every kernel-IR instruction, by name.
SPECS: dict[str, InstructionSpec] = _specs(
    # --- bookkeeping ---
    InstructionSpec("alloc", NONE, attrs=(Attr("fill", "scalar"),),
                    doc="start a tensor's lifetime: NaN on chip, or the constant `fill`"),
    # --- DMA ---
    InstructionSpec("load", DMA, (Source("src"), Source("offsets")), min_sources=1,
                    attrs=(_INDIRECT_ATTR, _OOB_SKIP_ATTR),
                    doc="HBM -> SBUF; `indirect`: an indirect (gather) load, see below, which "
                        "may also write HBM (nisa.dma_copy of a view at a dynamic offset)"),
    InstructionSpec("store", DMA, (Source("value", VALUE), Source("offsets")), min_sources=1,
                    accumulates=True, attrs=(_INDIRECT_ATTR, _OOB_SKIP_ATTR),
                    doc="SBUF/PSUM (or a constant) -> HBM; with `acc`, an atomic read-modify-write;"
                        " `indirect`: an indirect (scatter) store, see below"),
    InstructionSpec("device_print", DMA, (Source("data"),), attrs=(Attr("prefix", "text", True),),
                    doc="write `prefix` and the tile's values (any memory) to the debug stream, "
                        "one line per program and iteration; dst is a one-element token"),
    InstructionSpec("collective", DMA, (Source("src"), Source("src1")), min_sources=1,
                    attrs=(Attr("kind", "text", True), Attr("groups", "ints"),
                           Attr("group_size", "int"), Attr("pairs", "ints"), Attr("op", "alu"),
                           Attr("dim", "int"), Attr("rdispls", "bool")), reads_dst=True,
                    doc="exchange with the other NeuronCores (nki.collectives; "
                        "emulator/kernel_exec/collective.py): `kind` all_reduce, all_gather, "
                        "reduce_scatter, all_to_all over the replica `groups` (flat, "
                        "`group_size` ranks each) along `dim`, reduced with `op`; permute along "
                        "`pairs` (flat source, target); ring / ring_reduce to the successor in "
                        "the group (ring_reduce sends op(src, src1)); all_gather_v / "
                        "all_to_all_v of flat chunks placed by the uint32 metadata `src1`, and "
                        "recv_counts_<that> writing the received counts (metadata row 2)"),
    InstructionSpec("rank_id", DMA, attrs=(Attr("groups", "ints"), Attr("group_size", "int"),
                                           Attr("step", "affine")),
                    doc="this NeuronCore's rank as an int32 register; with `groups` and `step`, "
                        "the rank whose data a ring holds after `step` steps"),
    InstructionSpec("sendrecv", DMA, (Source("src"),),
                    attrs=(Attr("send_to", "affine", True), Attr("recv_from", "affine", True)),
                    doc="LNC=2: dst takes the src of core `recv_from` while this core's src goes "
                        "to core `send_to` (program-id expressions; emulator/kernel_exec/lnc.py)"),
    InstructionSpec("dma_copy", DMA, (Source("src"),), accumulates=True,
                    doc="HBM/SBUF -> HBM/SBUF, converting the dtype; the element counts match and "
                        "the elements are taken in row-major order (shapes may differ)"),
    # --- VectorE ---
    InstructionSpec("tensor_copy", VECTOR, (Source("src", VALUE), Source("offsets")),
                    min_sources=1, accumulates=True,
                    attrs=(Attr("bitcast", "bool"), _ENGINE_ATTR, _INDIRECT_ATTR,
                           Attr("indirect_dst", "bool")), alt_engines=(SCALAR, GPSIMD),
                    doc="on-chip copy converting the dtype, broadcasting; `bitcast` reinterprets "
                        "the bits instead; `indirect`: a dynamic offset (the `offsets` tile, one "
                        "register value) added to that dimension of src (dst with "
                        "`indirect_dst`), bounds checked when it runs"),
    InstructionSpec("memset", VECTOR, (Source("value", CONST),), attrs=(_ENGINE_ATTR,),
                    alt_engines=(GPSIMD,), doc="fill with a constant"),
    InstructionSpec("random", VECTOR, (Source("seed"),), min_sources=0,
                    attrs=(Attr("seed", "int"), Attr("bits", "bool"), Attr("outer", "ints")),
                    doc="uniform [0, 1) values from a counter-based generator; with a seed tile "
                        "(nl.random_seed), its value and attrs['seed'] (the draw's position "
                        "since seeding) choose the stream; `bits`: the 32 random bits as uint32 "
                        "instead (nki.isa.rng); `outer`: loops (N of lN) around the seeding, "
                        "whose iterations do not change the draw"),
    InstructionSpec("tensor_tensor", VECTOR, (Source("data0"), Source("data1")),
                    attrs=(Attr("op", "alu", True),), doc="op(data0, data1)"),
    InstructionSpec("tensor_scalar", VECTOR,
                    (Source("data"), Source("operand0", VALUE), Source("operand1", VALUE)),
                    min_sources=2,
                    attrs=(Attr("op0", "alu", True), Attr("reverse0", "bool"), Attr("op1", "alu"),
                           Attr("reverse1", "bool")),
                    doc="op1(op0(data, operand0), operand1); reverseN swaps opN's operands"),
    InstructionSpec("select", VECTOR,
                    (Source("cond", VALUE), Source("on_true", VALUE), Source("on_false", VALUE)),
                    doc="where(cond, on_true, on_false)"),
    InstructionSpec("quantize_mx", VECTOR, (Source("src"),),
                    attrs=(Attr("scales", "bool"), Attr("element", "text")),
                    doc="MX quantization of [P, F] in groups of 8 partitions x 4 elements: dst is "
                        "the packed *_x4 data [P, F/4]; with `scales`, the groups' E8M0 scales "
                        "[P/8, F/4] for the `element` type instead (kernel_exec/mx.py)"),
    InstructionSpec("tensor_reduce", VECTOR, (Source("data"),),
                    attrs=(Attr("op", "alu", True), Attr("axes", "axes", True),
                           Attr("keepdims", "bool"), Attr("negate", "bool")),
                    doc="reduce free axes"),
    InstructionSpec("bn_stats", VECTOR, (Source("data"),),
                    doc="per-partition (count, mean, variance) of each half of the free axis"),
    InstructionSpec("bn_aggr", VECTOR, (Source("data"),),
                    doc="aggregate bn_stats groups into mean and variance"),
    InstructionSpec("tensor_tensor_scan", VECTOR,
                    (Source("data0"), Source("data1"), Source("initial", VALUE)),
                    attrs=(Attr("op0", "alu", True), Attr("op1", "alu", True),
                           Attr("reverse0", "bool"), Attr("reverse1", "bool")),
                    doc="running op1(op0(data0, prev), data1) along the free axis; reverseN "
                        "swaps opN's operands"),
    InstructionSpec("gather_flattened", GPSIMD, (Source("data"), Source("indices")),
                    doc="out[p, j...] = data[p].flatten()[indices[p, j...]] (uint32 indices); "
                        "an index past the partition's end reads the uninitialised value"),
    InstructionSpec("max8", VECTOR, (Source("src"),),
                    doc="the 8 largest values of each partition, descending, compared in fp32: "
                        "[P, ...] -> [P, 8]"),
    InstructionSpec("stream_shuffle", VECTOR, (Source("src"),),
                    attrs=(Attr("shuffle", "ints", True),), reads_dst=True,
                    doc="in each quadrant of 32 partitions, partition i from partition shuffle[i] "
                        "(255: dst's partition i unchanged)"),
    InstructionSpec("find_index8", VECTOR, (Source("data"), Source("vals")),
                    attrs=(Attr("reverse", "bool"),),
                    doc="per partition, the index of the first unclaimed element equal to each of "
                        "the 8 vals (in order, or from the last with `reverse`); all ones if none"),
    InstructionSpec("match_replace8", VECTOR, (Source("data"), Source("vals")),
                    attrs=(Attr("imm", "number", True),),
                    doc="data with the first unclaimed occurrence of each of the 8 vals (from the "
                        "last) replaced by `imm`"),
    # --- ScalarE ---
    InstructionSpec("activation", SCALAR,
                    (Source("data"), Source("bias", VALUE), Source("scale")), min_sources=1,
                    attrs=(Attr("func", "activation", True), Attr("scale", "number")),
                    doc="func(data * scale + bias), fp32; a [P, 1] `scale` tile replaces the "
                        "constant"),
    # --- GpSimd ---
    InstructionSpec("iota", GPSIMD, attrs=(Attr("expr", "affine", True),),
                    doc="the affine expression `expr` as values (index arithmetic used as data)"),
    InstructionSpec("affine_select", GPSIMD, (Source("on_true"), Source("on_false", CONST)),
                    attrs=(Attr("pred", "affines", True),),
                    doc="on_true where every affine predicate is >= 0, else the constant"),
    InstructionSpec("local_gather", GPSIMD, (Source("src"), Source("index")),
                    attrs=(Attr("elems", "int", True), Attr("valid", "int", True)),
                    doc="per group of 16 partitions, the first `valid` indices of the group "
                        "(partition-major), `elems` contiguous elements of each partition's "
                        "flattened row from each"),
    InstructionSpec("sequence_bounds", GPSIMD, (Source("segment_ids"),),
                    doc="per element, the start and (exclusive) end of its run of equal segment "
                        "ids: [P, n] -> [P, 2, n]; id 0 is padding (n, -1)"),
    InstructionSpec("nonzero_with_count", GPSIMD, (Source("src"),),
                    attrs=(Attr("offset", "int"), Attr("padding", "int")), reads_dst=True,
                    doc="on partitions 0, 16, ..., 112: the positions (+offset) of the non-zero "
                        "elements, padding, then their count; other partitions keep dst"),
    InstructionSpec("topk", GPSIMD, (Source("src"),), attrs=(Attr("n", "int", True),),
                    doc="per group of 16 partitions, the snake's first `n` elements (element e at "
                        "partition e % 16, column e // 16): its K largest, every partition of the "
                        "group gets them ascending as [P, 2, K] (values, then their indices e)"),
    InstructionSpec("partition_reduce", GPSIMD, (Source("data"),),
                    attrs=(Attr("op", "alu", True),),
                    doc="reduce across partitions: [P, F] -> [1, F]"),
    InstructionSpec("core_barrier", GPSIMD, (Source("data"),),
                    doc="LNC=2: both cores reach it before either goes on; `data` is the shared "
                        "HBM tensor they synchronise on; dst is a one-element token"),
    # --- TensorE ---
    InstructionSpec("matmul", TENSOR, (Source("stationary"), Source("moving")),
                    attrs=(Attr("transpose", "bool"),),
                    doc="stationary.T @ moving, fp32 into PSUM; `transpose`: the PE array's "
                        "transpose mode (moving is the identity)"),
    InstructionSpec("matmul_mx", TENSOR,
                    (Source("stationary"), Source("moving"), Source("stationary_scale"),
                     Source("moving_scale")),
                    doc="dequantized stationary.T @ moving of packed MX tiles [K, M], [K, N] with "
                        "their scales [K/8, >= M], [K/8, >= N]: fp32 [M, N] into PSUM, contracting "
                        "the partitions and each word's 4 elements"),
    InstructionSpec("transpose", TENSOR, (Source("data"),), attrs=(_ENGINE_ATTR,),
                    alt_engines=(VECTOR,), doc="swap the partition and free axes of a 2-D tile"),
)


class UnknownInstructionError(KeyError):
    """An op name with no spec."""


def spec(op: str) -> InstructionSpec:
    try:
        return SPECS[op]
    except KeyError:
        raise UnknownInstructionError(f"unknown kernel-IR instruction {op!r}") from None


def by_engine(engine: str) -> frozenset[str]:
    """The instructions whose handler lives in ``engine``'s handler module."""
    return frozenset(n for n, s in SPECS.items() if s.engine == engine)
