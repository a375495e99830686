"""The instruction set: the one registry of graph ops, each with every fact about it.

One definition, used by the compiler (to emit, check, drop, lift and place instructions), by the
loader (to validate a program before running it), by the executor (to bind handlers, fold
constants, choose the BLAS thread policy) and by the cost model, so that none of them keeps its
own list of op names. An op that is an HLO opcode has that opcode's name ("exponential",
"get-tuple-element"): the compiler lowers such opcodes without a rename table. Ops of our own
(LAPACK routines, kernel payloads) have names no HLO opcode has.

Each handler module of `emulator.ops` registers its handler factory with `handles` beside the
handler; `emulator.ops` checks that every op has exactly one.

Attribute kinds: "int", "ints" (list of int), "intss" (list of list of int), "float", "str",
"bool", "comp" (index of a computation of the program), "comps" (list of those). An attribute
kind is checked when an artifact is loaded; a wrong kind is an ArtifactError, not a crash in a
handler.

Properties:
* `cost`: the name of the op's cost rule (emulator.cost.graph.RULES); "free" costs nothing.
* `elementwise`: result element i depends on operand element i only (and no operand shape).
* `liftable`: may appear in a computation applied element-wise to whole arrays (reducers,
  comparators, scatter updates, map); the element-wise ops and the plumbing around them.
* `pure`: no effect besides its result, so an instruction whose value nobody reads is dropped.
* `foldable`: with constant operands (or none) evaluated once, when the computation is loaded.
* `hoistable`: deterministic and without effect (the same operands give the same result), so a
  while body whose instance of it reads only loop invariants runs it once, before the loop
  (emulator.codegen). Not the generators, kernels (they may print), control flow, in-place
  updates or barriers.
* `blas`: may call BLAS or LAPACK; a program without such ops skips the BLAS thread policy (an op
  keeps it unless it declares otherwise).
* `fresh`: the handler always returns a new array that nothing else views.
* `in_place`: operand positions whose dead buffer the handler can write its result into.
* `lifts`: attributes naming computations the handler runs element-wise on whole arrays.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: A handler factory: HandlerContext (emulator.program.context) -> callable over NumPy values.
Factory = Callable[[Any], Callable[..., Any]]


@dataclass
class OpSpec:
    """An op: name, operand count (None: any), attribute kinds, properties and its handler."""

    name: str
    arity: int | None
    attrs: dict[str, str] = field(default_factory=dict)
    doc: str = ""
    cost: str = "free"
    elementwise: bool = False
    liftable: bool = False
    pure: bool = False
    foldable: bool = False
    hoistable: bool = False
    blas: bool = True
    fresh: bool = False
    in_place: tuple[int, ...] = ()
    lifts: tuple[str, ...] = ()
    handler: Factory | None = field(default=None, repr=False, compare=False)


def _ew(name: str, arity: int, cost: str = "vector", *, fast: bool = False, attrs: dict[str, str] | None = None,
        doc: str = "") -> OpSpec:
    """An element-wise op; `fast`: its handler returns fresh arrays and can work in place."""
    return OpSpec(name, arity, attrs or {}, doc or ("element-wise unary" if arity == 1 else "element-wise binary"),
                  cost, elementwise=True, liftable=True, pure=True, hoistable=True, blas=False, fresh=fast,
                  in_place=tuple(range(arity)) if fast else ())


def _move(name: str, arity: int | None, attrs: dict[str, str] | None = None, doc: str = "", cost: str = "dma",
          **props: Any) -> OpSpec:
    """A data-movement op: no arithmetic, no effect (dead ones are dropped)."""
    return OpSpec(name, arity, attrs or {}, doc, cost, pure=True, blas=False, **{"hoistable": True, **props})


_WINDOW = {"size": "ints", "stride": "ints", "pad_low": "ints", "pad_high": "ints",
           "base_dilation": "ints", "window_dilation": "ints"}
_BN = {"epsilon": "float", "feature_index": "int"}
_COLLECTIVE = {"mode": "str", "groups": "intss"}

_SPECS: list[OpSpec] = [
    # element-wise (HLO's element-wise opcodes); transcendentals run on ScalarE ("activation")
    _ew("abs", 1, fast=True), _ew("negate", 1, fast=True), _ew("exponential", 1, "activation", fast=True),
    _ew("exponential-minus-one", 1, "activation", fast=True), _ew("log", 1, "activation", fast=True),
    _ew("log-plus-one", 1, "activation", fast=True), _ew("sqrt", 1, "activation", fast=True),
    _ew("rsqrt", 1, "activation"), _ew("cbrt", 1, "activation"), _ew("tanh", 1, "activation", fast=True),
    _ew("logistic", 1, "activation"), _ew("sine", 1, "activation", fast=True),
    _ew("cosine", 1, "activation", fast=True), _ew("tan", 1, "activation"), _ew("floor", 1, fast=True),
    _ew("ceil", 1, fast=True), _ew("round-nearest-afz", 1), _ew("round-nearest-even", 1), _ew("sign", 1),
    _ew("not", 1), _ew("is-finite", 1), _ew("popcnt", 1), _ew("count-leading-zeros", 1),
    _ew("erf", 1, "activation"), _ew("real", 1), _ew("imag", 1),
    _ew("add", 2, fast=True), _ew("subtract", 2, fast=True), _ew("multiply", 2, fast=True),
    _ew("divide", 2, fast=True), _ew("remainder", 2), _ew("maximum", 2, fast=True), _ew("minimum", 2, fast=True),
    _ew("power", 2, "activation", fast=True), _ew("atan2", 2, "activation", fast=True), _ew("and", 2),
    _ew("or", 2), _ew("xor", 2), _ew("shift-left", 2), _ew("shift-right-arithmetic", 2),
    _ew("shift-right-logical", 2), _ew("complex", 2),
    _ew("compare", 2, attrs={"direction": "str", "total_order": "bool"}, doc="element-wise comparison"),
    OpSpec("select", 3, doc="pred ? on_true : on_false", cost="vector", elementwise=True, liftable=True, pure=True,
           blas=False, fresh=True, in_place=(1, 2), hoistable=True),  # not the predicate: it is read while the result is written
    _ew("clamp", 3, doc="min(max(x, lo), hi) with operands (lo, x, hi)"),
    OpSpec("convert", 1, doc="element type conversion with XLA's saturating float->int", cost="vector",
           elementwise=True, liftable=True, pure=True, blas=False, foldable=True, hoistable=True),
    _ew("stochastic-convert", 2, attrs={"bits": "int"},
        doc="float -> signed integer of `bits` bits (held in the result type), rounded up where the unsigned random "
            "operand is below the scaled fraction (XLA's StochasticConvertDecomposer)"),
    _ew("reduce-precision", 1, attrs={"exponent_bits": "int", "mantissa_bits": "int"},
        doc="round to a narrower float format"),
    OpSpec("copy", 1, doc="a copy", cost="dma", elementwise=True, liftable=True, pure=True, blas=False, hoistable=True),
    # data movement
    _move("bitcast-convert", 1, doc="reinterpret bits; a trailing dim appears/vanishes when widths differ",
          cost="free"),
    _move("bitcast-bits", 1, {"src_bits": "int", "dst_bits": "int"},
          doc="bitcast-convert where a type is narrower than a byte (held one to a byte): packs or unpacks the "
              "trailing dim little-endian", cost="vector"),
    _move("constant", 0, {"index": "int"}, "a value from the constants section", cost="free", liftable=True,
          foldable=True),
    _move("tuple", None, doc="a tuple of its operands", cost="free", liftable=True),
    _move("get-tuple-element", 1, {"index": "int"}, cost="free", liftable=True),
    _move("opt-barrier", 1, doc="identity", cost="free", liftable=True, hoistable=False),
    _move("after-all", None, doc="a token: orders side effects, carries no data", cost="free", hoistable=False),
    _move("add-dependency", 2, doc="operand 0, after operand 1 (a token or value) exists", cost="free",
          hoistable=False),
    _move("broadcast", 1, {"dims": "ints"}, "operand dim i becomes output dim dims[i]", cost="broadcast",
          foldable=True),
    _move("reshape", 1, doc="row-major reshape to the output shape", cost="free", foldable=True),
    _move("bitcast", 1, {"src_order": "ints", "dst_order": "ints"},
          doc="reinterpret the buffer: the operand's elements (bytes, when the element type changes) in its physical "
              "(major-to-minor) order, read back in the result's", foldable=True),
    _move("transpose", 1, {"perm": "ints"}, foldable=True),
    _move("slice", 1, {"start": "ints", "limit": "ints", "stride": "ints"}, foldable=True),
    _move("concatenate", None, {"axis": "int"}),
    _move("pad", 2, {"low": "ints", "high": "ints", "interior": "ints"}, "negative low/high crop"),
    _move("reverse", 1, {"dims": "ints"}),
    _move("iota", 0, {"dim": "int"}, cost="vector", foldable=True),
    _move("get-dimension-size", 1, {"dimension": "int"}, "operand dimension k's size (static shapes), s32",
          cost="free"),
    # the device a program runs as (emulator.collectives.context): read at run time, never folded,
    # so one loaded program serves every device
    _move("replica-id", 0, doc="this device's replica id, u32", cost="free"),
    _move("partition-id", 0, doc="this device's partition id, u32", cost="free"),
    _move("dynamic-slice", None, {"sizes": "ints"}, "start indices clamped as XLA does"),
    OpSpec("dynamic-update-slice", None, doc="start indices clamped as XLA does; in place on loop state",
           cost="dma_update", blas=False),
    OpSpec("gather", 2, {"offset_dims": "ints", "collapsed_slice_dims": "ints", "start_index_map": "ints",
                         "index_vector_dim": "int", "operand_batching_dims": "ints",
                         "start_indices_batching_dims": "ints", "slice_sizes": "ints"}, cost="dma", blas=False, hoistable=True),
    OpSpec("scatter", None, {"update_window_dims": "ints", "inserted_window_dims": "ints",
                             "scatter_dims_to_operand_dims": "ints", "index_vector_dim": "int",
                             "input_batching_dims": "ints", "scatter_indices_batching_dims": "ints",
                             "computation": "comp", "reducer": "str"}, cost="dma_scatter", blas=False,
           lifts=("computation",), hoistable=True),
    # reductions and sorts (their computations run lifted)
    OpSpec("reduce", None, {"dims": "ints", "computation": "comp", "reducer": "str"},
           "operands: n inputs then n init values", cost="over_inputs", blas=False, lifts=("computation",), hoistable=True,
           foldable=True),  # of constants: once at load (XLA's constant folding), no larger than its inputs
    OpSpec("reduce-window", None, {**_WINDOW, "computation": "comp", "reducer": "str"}, cost="windowed",
           blas=False, lifts=("computation",), hoistable=True),
    OpSpec("select-and-scatter", 3, {**_WINDOW, "select": "comp", "scatter": "comp", "reducer": "str"},
           cost="windowed", blas=False, lifts=("select", "scatter"), hoistable=True),
    OpSpec("map", None, {"computation": "comp"}, cost="vector", blas=False, lifts=("computation",), hoistable=True),
    OpSpec("sort", None, {"dim": "int", "stable": "bool", "computation": "comp", "fast": "str", "key": "int"},
           "fast: lt/gt sorts by operand 0 (or by the key computation `key` >= 0 applied to (x, x)...)",
           cost="sort", blas=False, lifts=("computation", "key"), hoistable=True),
    OpSpec("topk", 1, {"k": "int", "largest": "bool"}, cost="sort", blas=False, hoistable=True),
    OpSpec("rng-bit-generator", 1, {"algorithm": "str"}, cost="vector", blas=False),
    # stateful generators: neither pure nor foldable, so each run draws anew (as on XLA:CPU)
    OpSpec("rng", None, {"distribution": "str"}, "uniform in [a, b) or normal(mu=a, sigma=b), a fresh draw each run",
           cost="vector", blas=False),
    OpSpec("rng-seed", 0, doc="a fresh u64 seed each run (XLA's GetRngSeed custom-call)", cost="free", blas=False),
    OpSpec("rng-get-and-update-state", 0, {"delta": "int"},
           "the generator state u64[2] (this instruction's own), then advanced by delta", cost="free", blas=False),
    # linear algebra (BLAS)
    OpSpec("dot", 2, {"lhs_contracting": "ints", "rhs_contracting": "ints", "lhs_batch": "ints",
                      "rhs_batch": "ints", "out_perm": "ints"},
           "dot_general; out_perm (if not empty) transposes the result, as a fused transpose", cost="dot",
           fresh=True, hoistable=True),
    OpSpec("convolution", 2, {**_WINDOW, "window_reversal": "ints",
                              "feature_group_count": "int", "batch_group_count": "int",
                              "input_batch": "int", "input_feature": "int", "input_spatial": "ints",
                              "kernel_input_feature": "int", "kernel_output_feature": "int",
                              "kernel_spatial": "ints", "output_batch": "int", "output_feature": "int",
                              "output_spatial": "ints"}, cost="convolution", hoistable=True),
    OpSpec("fft", 1, {"fft_type": "str", "length": "ints"}, cost="fft", hoistable=True),
    OpSpec("batch-norm-training", 3, _BN, cost="three_passes", blas=False, hoistable=True),
    OpSpec("batch-norm-inference", 5, _BN, cost="two_passes", blas=False, hoistable=True),
    OpSpec("batch-norm-grad", 5, _BN, cost="four_passes", blas=False, hoistable=True),
    # collectives (emulator/ops/collective.py): an exchange with the other devices of the group
    # (emulator.collectives), then NumPy on this device. mode: XLA's group mode
    # (emulator.collectives.groups); groups: explicit replica groups (the compiler expands the iota
    # form), empty for all; start: an async -start whose value is (operands, results, zeros...).
    # Not pure: every device must reach every collective, used or not.
    OpSpec("all-reduce", None, {**_COLLECTIVE, "computation": "comp", "reducer": "str"},
           "reduce each operand over the group, in group order", cost="collective", blas=False,
           fresh=True, lifts=("computation",)),
    OpSpec("all-gather", None, {**_COLLECTIVE, "dim": "int", "start": "bool"},
           "concatenate each operand of the group's devices along dim, in group order", cost="collective",
           blas=False),
    OpSpec("reduce-scatter", None, {**_COLLECTIVE, "dim": "int", "computation": "comp", "reducer": "str"},
           "all-reduce, then this device's piece along dim (its position in the group)", cost="collective",
           blas=False, fresh=True, lifts=("computation",)),
    OpSpec("all-to-all", None, {**_COLLECTIVE, "split_dim": "int"},
           "split_dim >= 0: chunk i to device i, received chunks concatenated; -1: operand i to device i",
           cost="collective", blas=False),
    OpSpec("ragged-all-to-all", 6, dict(_COLLECTIVE),
           "(input, output, input_offsets, send_sizes, output_offsets, recv_sizes): rows "
           "input[input_offsets[j]:+send_sizes[j]] to group member j, written at output_offsets[j] of "
           "its output ([n] or [n, updates] offsets); the rest of output unchanged", cost="collective",
           blas=False, fresh=True),
    OpSpec("collective-permute", None, {"mode": "str", "pairs": "intss", "start": "bool"},
           "the operand of this device's source (zeros without one)", cost="collective", blas=False),
    OpSpec("collective_permute_in_place", 4, {"mode": "str", "pairs": "intss", "start": "bool",
                                              "slice_sizes": "intss"},
           "(input, output, input starts, output starts): the pairs in len(slice_sizes)/leaves groups; in "
           "group k each source's slice of input leaf e at its input start [e][k] is written into its "
           "target's copy of output leaf e at the target's output start [e][k]; the rest of output kept",
           cost="collective", blas=False, fresh=True),
    OpSpec("collective-broadcast", None, dict(_COLLECTIVE), "the operand of the group's first device",
           cost="collective", blas=False, fresh=True),
    # point-to-point halves (emulator/ops/send_recv.py): the exchange happens at send, where every
    # device is; targets keep the value in their mailbox under (channel, pairs) for recv-done
    OpSpec("send", 2, {"channel": "int", "pairs": "intss"},
           "(data, token) -> (data, u32 0, token); sources send data to their targets (pairs: replica ids with "
           "several replicas, else partition ids); each target keeps what it gets for its recv-done",
           cost="collective", blas=False),
    OpSpec("recv", 1, doc="token -> (zeros, u32 0, token): the receive is posted; recv-done gives the data",
           cost="free", pure=True, blas=False),
    OpSpec("recv-done", 1, {"channel": "int", "pairs": "intss"},
           "recv -> (data, token): what this device's source sent at the matching send (channel and pairs), "
           "zeros when no pair targets this device", cost="free", blas=False, fresh=True),
    # control flow: sub-programs (their instructions are costed when they run)
    OpSpec("while", 1, {"cond": "comp", "body": "comp"}, blas=False),
    OpSpec("conditional", None, {"branches": "comps", "by_index": "bool"}, blas=False),
    OpSpec("call", None, {"computation": "comp"}, liftable=True, pure=True, blas=False),
    OpSpec("scan", None, {"dim": "int", "num_carries": "int", "reverse": "bool", "computation": "comp"},
           "operands: inputs then carry inits; the computation maps (elements..., carries...) to "
           "(outputs..., carries...); result: (outputs stacked along dim..., final carries...)", blas=False),
    # blas=False: a kernel keeps no BLAS policy of the graph's. An NKI kernel's runner applies the
    # policy itself around its matmuls (emulator/kernel_exec/runner.py), and a GpSimd kernel runs
    # in its worker process; a graph of small dots around C++ kernels (a training step's) then
    # skips the policy's /proc reads and thread settings, about 20 us of every run under load.
    OpSpec("kernel", None, {"payload": "int"}, "run kernel payload N (emulator.kernel_payload)", cost="kernel",
           blas=False),
    # LAPACK routines behind JAX's CPU linear algebra (lapack_*_ffi custom-calls): leading dims
    # are a batch, each op's results are those of the custom-call (emulator/ops/lapack.py)
    *(OpSpec(name, arity, attrs, doc, cost="lapack", hoistable=True) for name, arity, attrs, doc in (
        ("lapack_getrf", 1, {}, "LU with partial pivoting -> (lu, 1-based s32 ipiv, s32 info)"),
        ("lapack_trsm", 2, {"left_side": "bool", "lower": "bool", "transpose": "str", "unit_diagonal": "bool"},
         "triangular solve op(a) x = b (or x op(a) = b); transpose N/T/C"),
        ("lapack_potrf", 1, {"lower": "bool"}, "Cholesky -> (factor, info)"),
        ("cholesky", 1, {"lower": "bool"},
         "HLO cholesky: the factor, the other triangle zero, all NaN where not positive definite"),
        ("lapack_syevd", 1, {"lower": "bool", "vectors": "bool"},
         "symmetric/Hermitian eigendecomposition -> (vectors, values, info)"),
        ("lapack_gesvd", 1, {"driver": "str", "job": "str"}, "SVD by gesdd or gesvd, job A/S/N -> (a', s, u, vt, info)"),
        ("lapack_geqrf", 1, {}, "Householder QR -> (a', tau)"),
        ("lapack_orgqr", 2, {}, "Q from geqrf's (a', tau) (orgqr/ungqr)"),
        ("lapack_geev", 1, {"left": "bool", "right": "bool"},
         "general eigendecomposition -> (wr, wi, vl, vr, info) real, (w, vl, vr, info) complex"),
        ("lapack_gees", 1, {"vectors": "bool"},
         "Schur form -> (t, vs, wr, wi, sdim, info) real, (t, vs, w, sdim, info) complex"),
        ("lapack_gehrd", 1, {"low": "int", "high": "int"}, "Hessenberg reduction -> (a', tau, info)"),
        ("lapack_sytrd", 1, {"lower": "bool"}, "tridiagonal reduction (sytrd/hetrd) -> (a', d, e, tau, info)"),
        ("lapack_geqp3", 2, {}, "QR with column pivoting (a, jpvt) -> (a', 1-based jpvt, tau)"),
        ("lapack_ormqr", 3, {"left": "bool", "transpose": "bool"},
         "Q c, Q^H c, c Q or c Q^H from (a', tau) (ormqr/unmqr)"),
    )),
    # O(n) per right-hand side column
    OpSpec("lapack_gtsv", 4, doc="tridiagonal solve (dl, d, du, b) -> (dl', d', du', x, info)",
           cost="over_inputs", hoistable=True),
    OpSpec("tridiagonal_solve_perturbed", 4, doc="tridiagonal solve perturbing tiny pivots (jaxlib's, not LAPACK's)",
           cost="over_inputs", hoistable=True),
]

#: op name -> its spec; the instruction set.
OPS: dict[str, OpSpec] = {s.name: s for s in _SPECS}
assert len(OPS) == len(_SPECS), "an op is declared twice"


def handles(name: str) -> Callable[[Factory], Factory]:
    """Register the decorated handler factory as op `name`'s (one handler per op)."""
    def register(factory: Factory) -> Factory:
        spec = OPS.get(name)
        if spec is None:
            raise KeyError(f"handler for {name!r}, which the instruction set does not have")
        if spec.handler is not None:
            raise ValueError(f"op {name} has two handlers")
        spec.handler = factory
        return factory
    return register


def check_attr(kind: str, value: object) -> bool:
    """Whether `value` (decoded from JSON) is of attribute kind `kind`."""
    if kind in ("int", "comp"):
        return type(value) is int
    if kind in ("ints", "comps"):
        return type(value) is list and all(type(v) is int for v in value)
    if kind == "intss":
        return type(value) is list and all(type(v) is list and all(type(x) is int for x in v) for v in value)
    if kind == "float":
        return type(value) in (int, float)
    if kind == "str":
        return type(value) is str
    if kind == "bool":
        return type(value) is bool
    return False
