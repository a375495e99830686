"""NeuronCore hardware rules, checked while a kernel traces (so errors point at the user's line).

Rules and their numbers come from emulator/machine.py (sources: ../shared/reference/nki-api.md):

* partition dimension of an on-chip tile <= 128;
* a PSUM tensor <= 16 KiB per partition (8 banks of 2 KiB); what must fit one 2 KiB bank per
  partition is each TensorE result (a matmul or transpose writes into one bank: 512 fp32), as
  the architecture guide states: a [128, 2048] fp32 PSUM tile written 512 columns at a time, as
  the attention tutorials do, is legal;
* matmul: operands in SBUF, result in PSUM, stationary [K<=128, M<=128], moving [K<=128, N<=512];
* tensor_scalar operands, activation bias and scale: scalars or [P, 1] (or [P]) tiles;
* load moves HBM -> on-chip, store on-chip -> HBM, engines only read on-chip tiles; tensor_tensor
  may not read two PSUM tiles;
* reductions only over free axes (any of them);
* unmasked on-chip accesses inside their tile (all extents are known while tracing);
* SBUF (192 KiB per partition) and PSUM (16 KiB per partition, 2 KiB banks) capacity over the
  allocations live at once. The SDK's own simulator does not check capacity.

And one warning: plain stores that programs of the grid may make to the same elements of a
shared tensor (a write race: programs run in no fixed order on hardware, while the SDK's
simulator runs them one after another and so always shows the last program's value).
"""

from __future__ import annotations

import itertools
import logging
import math

import numpy as np

from emulator import machine
from emulator.kernel_ir import (Access, Affine, Instruction, KernelIR, Loop, Statement,
                                TensorDecl, dtypes as ir_dtypes)
from emulator.kernel_ir import divmod as dm

from emulator.kernel_exec.vectorise import iteration_disjoint, shared_writes

from .errors import HardwareRuleError, KernelTraceError

log = logging.getLogger(__name__)


def _fail(trace, rule: str, detail: str) -> HardwareRuleError:
    return trace.error(rule, detail, HardwareRuleError)


def bytes_per_partition(decl: TensorDecl) -> int:
    free = math.prod(decl.shape[1:]) if len(decl.shape) > 1 else 1
    return free * ir_dtypes.itemsize(decl.dtype)


def block_layout(trace, decl: TensorDecl) -> tuple[int, int]:
    """(number of blocks, bytes per partition of one block) of an on-chip tensor: dimensions
    declared before ``nl.par_dim`` are blocks (separate tiles sharing a name), which the builder
    records and lays out as axes 1..k after the partition axis."""
    k = getattr(trace, "blocks", {}).get(decl.name, 0)
    nblocks = math.prod(decl.shape[1:1 + k]) if k else 1
    per_block = math.prod(decl.shape[1 + k:]) * ir_dtypes.itemsize(decl.dtype)
    return nblocks, per_block


# --- tensors ---------------------------------------------------------------------------------------

def check_declaration(trace, decl: TensorDecl) -> None:
    if decl.memory not in machine.ON_CHIP:
        return
    if not decl.shape:
        raise _fail(trace, "tile rank", f"on-chip tensor {decl.name!r} needs at least one "
                    "dimension (the partition dimension)")
    if decl.shape[0] > machine.NUM_PARTITIONS:
        raise _fail(trace, "partition dimension limit",
                    f"partition dimension {decl.shape[0]} of {decl.memory} tile {decl.name!r} "
                    f"exceeds the architecture limit of {machine.NUM_PARTITIONS}")
    if decl.memory == machine.PSUM:
        n = bytes_per_partition(decl)
        if n > machine.PSUM_BYTES_PER_PARTITION:
            raise _fail(trace, "PSUM tile size limit",
                        f"PSUM tile {decl.name!r} {decl.dtype}{list(decl.shape)} needs {n} bytes "
                        f"per partition; a PSUM partition holds "
                        f"{machine.PSUM_BYTES_PER_PARTITION} bytes ({machine.PSUM_NUM_BANKS} "
                        f"banks of {machine.PSUM_BANK_BYTES_PER_PARTITION} bytes)")


# --- instructions ----------------------------------------------------------------------------------

def _mem(trace, a) -> str | None:
    return trace.tensors[a.tensor].memory if isinstance(a, Access) else None


def check_instruction(trace, ins: Instruction) -> None:
    op = ins.op
    if op == "alloc":
        return
    dst_mem = _mem(trace, ins.dst) if ins.dst is not None else None
    src_mems = [_mem(trace, s) for s in ins.srcs]
    hbm = (machine.HBM, machine.SHARED_HBM)
    if op == "load":
        # an indirect load (a DMA gather, nisa.dma_copy) may also land in HBM
        dsts = machine.ON_CHIP | (frozenset(hbm) if "indirect" in ins.attrs else frozenset())
        if src_mems[0] not in hbm or dst_mem not in dsts:
            raise _fail(trace, "load location",
                        f"nl.load moves HBM to SBUF; got {src_mems[0]} -> {dst_mem}")
    elif op == "dma_copy":
        if machine.PSUM in (dst_mem, src_mems[0]):
            raise _fail(trace, "dma_copy location",
                        f"DMA moves data between HBM and SBUF; got {src_mems[0]} -> {dst_mem}")
    elif op == "store":
        if dst_mem not in hbm:
            raise _fail(trace, "store location",
                        f"nl.store writes to HBM; destination {ins.dst.tensor!r} is {dst_mem}")
        if src_mems[0] in hbm:
            raise _fail(trace, "store location",
                        "nl.store takes an on-chip value; HBM to HBM copies are not an instruction")
    elif op not in ("device_print", "collective", "core_barrier"):  # any memory: the debug
        # stream, the collective engines (nki/collectives.py checks their memories), the HBM
        # tensor two cores synchronise on
        for a, m in [(ins.dst, dst_mem)] + list(zip(ins.srcs, src_mems)):
            if m in hbm:
                raise _fail(trace, "engine operand location",
                            f"{op} accesses {m} tensor {a.tensor!r}; compute engines only read and "
                            "write SBUF/PSUM tiles (nl.load it first, nl.store the result)")
    _RULES.get(op, lambda t, i, d, s: None)(trace, ins, dst_mem, src_mems)
    if not ins.mask:
        for a, m in [(ins.dst, dst_mem)] + list(zip(ins.srcs, src_mems)):
            if m in machine.ON_CHIP:
                _check_static_bounds(trace, ins, a)


def drop_always_true(trace, affs: tuple[Affine, ...], tile: tuple[int, ...]
                     ) -> tuple[Affine, ...]:
    """The mask conditions (``expr >= 0``) of an instruction with destination tile ``tile``
    that may fail for some program id, loop value or tile position; those that hold for all
    of them are dropped, so that a mask that is always true (``i * 128 + ix < n`` when the grid
    covers ``n`` exactly) costs nothing when the kernel runs. Symbols of unknown extent keep
    their condition."""
    ext = dict(trace.extents)
    ext.update({f"t{j}": n for j, n in enumerate(tile)})
    kept = []
    for a in affs:
        if all(dm.base_of(s) in ext for s, _ in a.terms) and expr_range(a, ext)[0] >= 0:
            continue
        kept.append(a)
    return tuple(kept)


#: Largest extent of a symbol whose terms are evaluated exactly (below) rather than bounded.
_EXACT_RANGE_MAX = 1 << 16


def expr_range(expr, ext: dict[str, int]) -> tuple[int, int]:
    """Smallest and largest value of an affine expression over its symbols' extents. Terms of
    one symbol that include derived ones (``//``, ``%``) are evaluated over the symbol's values
    together, so that a merged reshape axis ``t // 4 - 3 * (t // 12)`` gets its exact range
    0..2 rather than the independent bounds' -3..5; other terms add their own ranges."""
    lo = hi = expr.const
    groups: dict[str, list[tuple[str, int]]] = {}
    for sym, c in expr.terms:
        groups.setdefault(dm.base_of(sym), []).append((sym, c))
    for base, terms in groups.items():
        n = ext.get(base)
        if len(terms) > 1 and n is not None and 0 < n <= _EXACT_RANGE_MAX:
            x = np.arange(n)
            vals = sum(c * (dm.value(dm.parse(sym), x) if dm.is_derived(sym) else x)
                       for sym, c in terms)
            lo += int(vals.min())
            hi += int(vals.max())
            continue
        for sym, c in terms:
            smin, smax = dm.term_range(sym, ext)  # derived symbols (// and %): their range
            lo += min(c * smin, c * smax)
            hi += max(c * smin, c * smax)
    return lo, hi


def _check_static_bounds(trace, ins: Instruction, a: Access) -> None:
    """An unmasked on-chip access must stay inside its tile for every program id, loop value and
    tile position; all their extents are known while tracing, so this is a trace-time error.
    (HBM accesses are checked when the kernel runs, against the actual arrays.)"""
    shape = trace.tensors[a.tensor].shape
    ext = dict(trace.extents)
    ext.update({f"t{j}": n for j, n in enumerate(a.shape)})
    for d, (expr, n) in enumerate(zip(a.index, shape)):
        lo, hi = expr_range(expr, ext)
        if lo < 0 or hi >= n:
            raise trace.error("out-of-bounds tile access",
                              f"{ins.op} accesses {a.tensor}[...] axis {d} at indices {lo}..{hi}, "
                              f"outside its extent {n} ({trace.tensors[a.tensor].memory} tile "
                              f"{list(shape)})")


def check_matmul_operands(trace, stationary: Access, moving: Access,
                          transpose: bool = False) -> None:
    """Operand rules of TensorE, checked before the result tile is allocated. In transpose mode
    (``nc_matmul(..., is_transpose=True)``) ``moving`` is the identity that carries
    ``stationary`` through the PE array: square, as tall as ``stationary``, and of its dtype."""
    for role, a in (("stationary", stationary), ("moving", moving)):
        m = _mem(trace, a)
        if m != machine.SBUF:
            raise _fail(trace, "matmul operand location",
                        f"matmul {role} operand {a.tensor!r} is in {m}; TensorE reads both "
                        "operands from SBUF")
        if len(a.shape) != 2:
            raise _fail(trace, "matmul operand shape",
                        f"matmul {role} operand must be 2-D [partition, free], got {list(a.shape)}")
        if a.shape[0] > machine.NUM_PARTITIONS:
            raise _fail(trace, "partition dimension limit",
                        f"matmul {role} contraction (partition) size {a.shape[0]} exceeds the "
                        f"architecture limit of {machine.NUM_PARTITIONS}")
    if stationary.shape[1] > machine.GEMM_STATIONARY_FMAX:
        raise _fail(trace, "matmul stationary size",
                    f"matmul stationary free size {stationary.shape[1]} exceeds "
                    f"gemm_stationary_fmax = {machine.GEMM_STATIONARY_FMAX}")
    if moving.shape[1] > machine.GEMM_MOVING_FMAX:
        raise _fail(trace, "matmul moving size",
                    f"matmul moving free size {moving.shape[1]} exceeds "
                    f"gemm_moving_fmax = {machine.GEMM_MOVING_FMAX}")
    if stationary.shape[0] != moving.shape[0]:
        raise _fail(trace, "matmul contraction",
                    f"contraction (partition) sizes differ: stationary {list(stationary.shape)}, "
                    f"moving {list(moving.shape)}")
    if transpose:
        _check_transpose_mode(trace, stationary, moving)
        return
    for role, a in (("stationary", stationary), ("moving", moving)):
        dt = trace.tensors[a.tensor].dtype
        if dt not in MATMUL_DTYPES:
            raise _fail(trace, "matmul operand dtype",
                        f"matmul {role} operand {a.tensor!r} is {dt}; TensorE multiplies "
                        f"{', '.join(sorted(MATMUL_DTYPES))} (transpose mode passes any dtype)")


#: Input dtypes of TensorE matmuls (the SDK's nc_matmul); the transpose mode takes any dtype.
MATMUL_DTYPES = frozenset({"float8_e4m3", "float8_e5m2", "bfloat16", "float16", "tfloat32",
                           "float32"})


def _check_transpose_mode(trace, stationary: Access, moving: Access) -> None:
    k = stationary.shape[0]
    if tuple(moving.shape) != (k, k):
        raise _fail(trace, "matmul transpose operand",
                    f"is_transpose=True needs moving to be the [{k}, {k}] identity matrix "
                    f"(stationary is {list(stationary.shape)}), got {list(moving.shape)}")
    st_dt = trace.tensors[stationary.tensor].dtype
    mv_dt = trace.tensors[moving.tensor].dtype
    if st_dt != mv_dt:
        raise _fail(trace, "matmul transpose dtype",
                    f"is_transpose=True passes stationary through the PE array unchanged: the "
                    f"identity (moving, {mv_dt}) must have the stationary's dtype ({st_dt})")


def _check_matmul(trace, ins: Instruction, dst_mem, src_mems) -> None:
    st, mv = ins.srcs[0], ins.srcs[1]
    transpose = bool(ins.attrs.get("transpose"))
    check_matmul_operands(trace, st, mv, transpose)
    if dst_mem != machine.PSUM:
        raise _fail(trace, "matmul result location",
                    f"matmul writes its fp32 result to PSUM, not {dst_mem}")
    if transpose and trace.tensors[ins.dst.tensor].dtype != trace.tensors[st.tensor].dtype:
        raise _fail(trace, "matmul transpose dtype",
                    f"a transpose-mode matmul result has the stationary's dtype "
                    f"({trace.tensors[st.tensor].dtype}), not "
                    f"{trace.tensors[ins.dst.tensor].dtype}")
    if tuple(ins.dst.shape) != (st.shape[1], mv.shape[1]):
        raise _fail(trace, "matmul result shape",
                    f"result tile {list(ins.dst.shape)} should be [{st.shape[1]}, {mv.shape[1]}]")
    _check_psum_bank(trace, ins, dst_mem)


def _check_psum_bank(trace, ins: Instruction, dst_mem) -> None:
    """A TensorE result in PSUM lies within one 2 KiB bank of each partition, for every program
    id and loop value (banks start at multiples of 2 KiB of the tensor's partition row; each
    block of a block tensor starts a bank). When the offsets of the access' loop and program
    terms are multiples of the bank there is one case to check; otherwise up to 4096
    combinations are enumerated, and beyond that nothing is claimed."""
    if dst_mem != machine.PSUM:
        return
    dst = ins.dst
    decl = trace.tensors[dst.tensor]
    k = getattr(trace, "blocks", {}).get(decl.name, 0)
    isz = ir_dtypes.itemsize(decl.dtype)
    bank = machine.PSUM_BANK_BYTES_PER_PARTITION
    const, tile_terms, other = 0, {}, {}
    stride = 1
    for d in range(len(decl.shape) - 1, k, -1):
        a = dst.index[d]
        const += a.const * stride
        for sym, c in a.terms:
            into = tile_terms if dm.base_of(sym).startswith("t") else other
            into[sym] = into.get(sym, 0) + c * stride
        stride *= decl.shape[d]
    tile_ext = {f"t{j}": n for j, n in enumerate(dst.shape)}
    lo, hi = expr_range(Affine.make(0, tile_terms), tile_ext)
    ext = dict(trace.extents)
    if all((c * isz) % bank == 0 for c in other.values()) or not other:
        bases = [const]
    else:
        syms = sorted({dm.base_of(s) for s in other})
        if math.prod(ext.get(s, 1) for s in syms) > 4096 or any(s not in ext for s in syms):
            return
        other_expr = Affine.make(const, other)
        bases = []
        for values in itertools.product(*(range(ext[s]) for s in syms)):
            env = dict(zip(syms, values))
            bases.append(other_expr.const + sum(
                c * (dm.value(dm.parse(s), env[dm.base_of(s)]) if dm.is_derived(s) else env[s])
                for s, c in other_expr.terms))
    for b in bases:
        first, last = (b + lo) * isz, (b + hi) * isz + isz - 1
        if first // bank != last // bank:
            raise _fail(trace, "PSUM bank",
                        f"{ins.op} writes bytes {first}.."
                        f"{last} of each partition of PSUM tile {decl.name!r} "
                        f"{decl.dtype}{list(decl.shape)}, across a {bank}-byte bank boundary; a "
                        f"TensorE result must fit one PSUM bank per partition "
                        f"({machine.PSUM_FMAX} fp32 elements, starting at a multiple of "
                        f"{bank} bytes)")


def _check_transpose_bank(trace, ins, dst_mem, src_mems) -> None:
    _check_transpose(trace, ins, dst_mem, src_mems)
    _check_psum_bank(trace, ins, dst_mem)


def _check_tensor_tensor(trace, ins, dst_mem, src_mems) -> None:
    if src_mems.count(machine.PSUM) == 2:
        raise _fail(trace, "tensor_tensor operand location",
                    "tensor_tensor can not read both operands from PSUM; copy one to SBUF first")


def _check_reduce(trace, ins, dst_mem, src_mems) -> None:
    """Reductions run along free axes only (each partition reduces its own elements). Any set of
    free axes is accepted, not only trailing ones: the engines read a tile through an access
    pattern that can visit its free axes in any order, so ``nl.sum(x, axis=1)`` of a
    ``[P, A, B]`` tile costs the same as a trailing one."""
    axes = sorted(int(a) for a in ins.attrs["axes"])
    if 0 in axes:
        raise _fail(trace, "reduction over the partition axis",
                    f"reduction axis 0 is the partition dimension of a {list(ins.srcs[0].shape)} "
                    "tile; reductions run along free axes (1, 2, ...) only: transpose first "
                    "(nisa.nc_transpose), or reduce across partitions with "
                    "nisa.tensor_partition_reduce or a matmul by a ones vector")


def _check_transpose(trace, ins, dst_mem, src_mems) -> None:
    src = ins.srcs[0]
    if len(src.shape) != 2:
        raise _fail(trace, "transpose shape", f"transpose needs a 2-D tile, got {list(src.shape)}")
    limit = machine.TENSOR_ENGINE_TRANSPOSE_MAX
    if max(src.shape) > limit:
        raise _fail(trace, "transpose size",
                    f"transpose of {list(src.shape)} exceeds {limit}x{limit} (TensorE)")


def _check_max8(trace, ins, dst_mem, src_mems) -> None:
    src = ins.srcs[0]
    free = math.prod(src.shape[1:])
    if not machine.MAX8_MIN_FREE <= free <= machine.MAX8_MAX_FREE:
        raise _fail(trace, "max8 free size",
                    f"max8 reads {free} elements per partition of a {list(src.shape)} tile; it "
                    f"takes {machine.MAX8_MIN_FREE} to {machine.MAX8_MAX_FREE}")
    if len(src.shape) > 5:
        raise _fail(trace, "max8 source rank", f"max8 takes a source tile of up to 5 dimensions, "
                                               f"got {len(src.shape)}")


def _check_per_partition_operands(trace, ins, dst_mem, src_mems) -> None:
    """tensor_scalar's operands and activation's bias and scale are scalars or per-partition
    vectors: one value per partition of the data, a ``[P, 1]`` tile (or ``[P]``, which NKI
    reads as ``[P, 1]``), broadcast along the free axes at no cost."""
    data = ins.srcs[0]
    role = "operand" if ins.op == "tensor_scalar" else "bias/scale"
    for src in ins.srcs[1:]:
        if not isinstance(src, Access):
            continue
        shape = tuple(src.shape)
        if not shape or shape[0] != data.shape[0] or math.prod(shape[1:]) != 1:
            raise _fail(trace, f"{ins.op} {role} shape",
                        f"{ins.op} {role} tile {src.tensor!r} {list(shape)} must be a scalar or "
                        f"a per-partition vector [{data.shape[0]}, 1] (or [{data.shape[0]}]) "
                        f"for data of shape {list(data.shape)}")


_RULES = {
    "matmul": _check_matmul,
    "tensor_scalar": _check_per_partition_operands,
    "activation": _check_per_partition_operands,
    "tensor_tensor": _check_tensor_tensor,
    "tensor_reduce": _check_reduce,
    "transpose": _check_transpose_bank,
    "max8": _check_max8,
}


# --- capacity --------------------------------------------------------------------------------------

def check_kernel(trace, kernel: KernelIR) -> None:
    """SBUF and PSUM capacity over the tensors live at once.

    A tensor is live from the first to the last instruction that touches it; one used inside a
    loop but created before it stays live to the loop's end (every iteration needs it). PSUM is
    allocated in whole 2 KiB banks.
    """
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    locs: list = []

    def visit(body: list[Statement], loops: list[tuple[int, list]]) -> None:
        for st in body:
            if isinstance(st, Loop):
                start = len(locs)
                inner: list[str] = []
                visit(st.body, loops + [(start, inner)])
                end = len(locs) - 1
                for name in inner:
                    if first[name] < start:
                        last[name] = max(last[name], end)
                for _, outer_names in loops:
                    outer_names.extend(inner)
                continue
            pos = len(locs)
            locs.append(st.loc)
            for a in [st.dst, *st.srcs]:
                if isinstance(a, Access):
                    first.setdefault(a.tensor, pos)
                    last[a.tensor] = pos
                    if loops:
                        loops[-1][1].append(a.tensor)

    visit(kernel.body, [])
    for memory, cap in machine.CAPACITY_PER_PARTITION.items():
        events: list[tuple[int, int, str]] = []
        for name, decl in kernel.tensors.items():
            if decl.memory != memory or name not in first:
                continue
            n = bytes_per_partition(decl)
            if memory == machine.PSUM:  # each block in whole banks
                bank = machine.PSUM_BANK_BYTES_PER_PARTITION
                nblocks, per_block = block_layout(trace, decl)
                n = nblocks * (-(-per_block // bank) * bank)
            events.append((first[name], n, name))
            events.append((last[name] + 1, -n, name))
        events.sort(key=lambda e: (e[0], e[1]))
        live: dict[str, int] = {}
        total = 0
        for pos, n, name in events:
            if n > 0:
                live[name] = n
            else:
                live.pop(name, None)
            total += n
            if total > cap:
                top = sorted(live.items(), key=lambda kv: -kv[1])[:5]
                desc = ", ".join(f"{nm} ({sz / 1024:g} KiB, {kernel.tensors[nm].loc})"
                                 for nm, sz in top)
                loc = locs[pos] if pos < len(locs) else None
                raise HardwareRuleError(
                    kernel.name, loc, f"{memory.upper()} capacity",
                    f"{total / 1024:g} KiB per partition live at once exceeds the "
                    f"{cap // 1024} KiB per partition of {memory.upper()}; largest live: {desc}")


# --- races between programs ----------------------------------------------------------------------

def store_races(kernel: KernelIR) -> list[str]:
    """Plain (non-accumulating) stores to a shared tensor that two programs of the grid may make
    to a common element, each described with its line: the stride-versus-span test of the
    executor's vectorisation analysis, over the program ids. Accesses with ``//``/``%`` indices
    are skipped (the test is not exact for them; no false alarms)."""
    grid = tuple(kernel.grid)
    programs = {f"p{i}" for i, g in enumerate(grid) if g > 1}
    if not programs:
        return []
    found: list[str] = []
    for st, ext in shared_writes(kernel):
        dst = st.dst
        if (st.op != "store" or st.acc is not None or "indirect" in st.attrs
                or any(dm.is_derived(sym) for a in dst.index for sym, _ in a.terms)):
            continue
        if not iteration_disjoint(dst, programs, ext):
            what = (f"the kernel's output {kernel.outputs.index(dst.tensor)}"
                    if dst.tensor in kernel.outputs else
                    f"{kernel.tensors[dst.tensor].memory} tensor {dst.tensor!r}")
            found.append(f"store at {st.loc} to {what} ({dst})")
    return found


def warn_store_races(kernel: KernelIR) -> None:
    """Log a warning for each store ``store_races`` finds (once per trace)."""
    for race in store_races(kernel):
        log.warning("kernel %r on grid %s: %s may write the same elements from several programs;"
                    " programs run in no fixed order on hardware, so which value lands is "
                    "undefined (the SDK's simulator always shows the last program's). Index the "
                    "store by program_id, or accumulate with nl.atomic_rmw.", kernel.name,
                    list(kernel.grid), race)


# --- outputs left unwritten ------------------------------------------------------------------------

#: Most store positions (program ids x loop values x tile elements) enumerated to find the
#: elements of an output no store reaches; beyond it the check is skipped (logged at debug).
UNWRITTEN_CHECK_MAX_POINTS = 1 << 24


def unwritten_outputs(kernel: KernelIR, covered: frozenset[str] | set[str] = frozenset()
                      ) -> list[tuple[str, int, int]]:
    """``(output, elements never written, elements)`` for each output of ``kernel`` that its
    plain (non-accumulating) stores leave partly or wholly unwritten, over every program of the
    grid and every loop iteration, masks included: what would come back as the uninitialised
    fill (NaN). ``covered`` names outputs already proven fully written (the executor's
    analysis). Outputs with an indirect store, or too many store positions to enumerate, are
    not judged."""
    outputs = {n for n in kernel.outputs if kernel.tensors[n].role == "output"} - set(covered)
    if not outputs:
        return []
    stores: dict[str, list[tuple[Instruction, dict[str, int]]]] = {n: [] for n in outputs}

    def visit(body: list[Statement], ext: dict[str, int]) -> None:
        for st in body:
            if isinstance(st, Loop):
                # A data-dependent loop may run: its stores count once (no false warning).
                visit(st.body, {**ext, st.var: 1 if st.data_dependent else st.extent})
            elif st.dst is not None and st.dst.tensor in stores and st.acc is None:
                stores[st.dst.tensor].append((st, ext))

    visit(kernel.body, {f"p{i}": int(g) for i, g in enumerate(kernel.grid)})
    found = []
    for name in sorted(outputs):
        shape = tuple(kernel.tensors[name].shape)
        total = math.prod(shape)
        if any("indirect" in ins.attrs for ins, _ in stores[name]):
            continue
        points = sum(math.prod(ext.values()) * math.prod(ins.dst.shape)
                     for ins, ext in stores[name])
        if points > UNWRITTEN_CHECK_MAX_POINTS:
            log.debug("kernel %r: output %r not checked for unwritten elements (%d store "
                      "positions)", kernel.name, name, points)
            continue
        written = np.zeros(total, dtype=bool)
        for ins, ext in stores[name]:
            _mark_written(written, shape, ins, ext)
        missing = total - int(np.count_nonzero(written))
        if missing:
            found.append((name, missing, total))
    return found


def _mark_written(written: np.ndarray, shape: tuple[int, ...], ins: Instruction,
                  ext: dict[str, int]) -> None:
    """Set the flat positions of ``shape`` that ``ins`` (a store) writes, inside its mask."""
    dst = ins.dst
    syms = {**{s: n for s, n in ext.items() if n > 0},
            **{f"t{j}": n for j, n in enumerate(dst.shape)}}
    if any(n == 0 for n in ext.values()):
        return  # an empty loop stores nothing
    names = list(syms)
    grids = np.meshgrid(*(np.arange(syms[s]) for s in names), indexing="ij", sparse=True)
    env = dict(zip(names, grids))

    def value(a: Affine):
        v = np.asarray(a.const)
        for sym, c in a.terms:
            if dm.is_derived(sym):
                v = v + c * dm.value(dm.parse(sym), env[dm.base_of(sym)])
            else:
                v = v + c * env.get(sym, 0)
        return v

    full = tuple(syms[s] for s in names)
    idx = [np.broadcast_to(value(a), full) for a in dst.index]
    keep = np.ones(full, dtype=bool)
    for m in ins.mask:
        keep &= np.broadcast_to(value(m) >= 0, full)
    for ix, n in zip(idx, shape):
        keep &= (ix >= 0) & (ix < n)
    written[np.ravel_multi_index(tuple(ix[keep] for ix in idx), shape)] = True


def warn_unwritten_outputs(kernel: KernelIR, covered: frozenset[str] | set[str] = frozenset()
                           ) -> None:
    """Log a warning for each output that ``unwritten_outputs`` finds (once per trace): an
    output left partly unwritten comes back holding the uninitialised fill (NaN) there."""
    for name, missing, total in unwritten_outputs(kernel, covered):
        decl = kernel.tensors[name]
        what = (f"is never written: all its {total} elements" if missing == total else
                f"is only partly written: {missing} of its {total} elements "
                f"({100.0 * missing / total:.1f}%) are never stored to and")
        log.warning("kernel %r on grid %s: output %d (%r, %s%s) %s come back as the "
                    "uninitialised fill (NaN). Is the grid too small, or a store missing?",
                    kernel.name, list(kernel.grid), kernel.outputs.index(name), name,
                    decl.dtype, list(decl.shape), what)


__all__ = ["check_declaration", "check_instruction", "check_kernel", "check_matmul_operands",
           "bytes_per_partition", "store_races", "warn_store_races", "unwritten_outputs",
           "warn_unwritten_outputs", "KernelTraceError"]
