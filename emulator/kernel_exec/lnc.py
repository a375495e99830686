"""A logical NeuronCore of two physical cores (LNC=2): ``core_barrier``, ``sendrecv`` and the races
that spreading a grid over two cores creates.

Which programs go where (KernelIR.lnc, from ``nl.nc(2)`` in the launch grid): program ``p``'s
core is ``(p[axis] // stride) % 2``, so ``[nl.spmd_dim(n, nl.nc(2)), m]`` puts even and odd
``program_id(0)`` on cores 0 and 1 (AWS's multi-core tensor-add tutorial) and beta 2's
``kernel[2]`` one program on each. The two cores share HBM and run at once.

Why no second thread: the grid runs vectorised in lockstep (each instruction for every program
before the next instruction), which is one interleaving the two cores may produce. For a kernel
without races every interleaving gives the same result, so that result is the hardware's; a
``core_barrier`` is then already honoured (every write before it is done for both cores before
anything after it runs) and a ``sendrecv`` is a permutation along the program axis. The races are
what lockstep would hide, so ``core_race`` finds them before the kernel runs: an element of a
shared HBM tensor (inputs, outputs, ``shared_hbm``) that one core writes and the other reads or
writes between the same two barriers (atomic accumulations, ``nl.atomic_rmw``, do not race with
each other). It is an error, not a warning: the hardware's result is undefined there, and the
emulator's lockstep answer would look right. A kernel with barriers or ``sendrecv`` runs one
program per core (``kernel[2]``, ``[nl.nc(2)]``), where lockstep is the barrier's meaning.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Iterator

import numpy as np

from emulator import machine, platforms
from emulator.kernel_ir import Access, Instruction, KernelIR, Loop, Statement, affine_from_json
from emulator.kernel_ir.ir import program_symbol

from .access import Context, eval_affine, eval_mask

if TYPE_CHECKING:
    from .runner import Runner

log = logging.getLogger(__name__)

#: Instructions that only make sense between the two cores of a logical NeuronCore.
LOCKSTEP = frozenset({"core_barrier", "sendrecv"})

#: Positions (programs x iterations x tile elements) beyond which an access is not judged.
MAX_POSITIONS = 1 << 24


def cores_of(kernel: KernelIR) -> np.ndarray:
    """The core of every program, an int array of the grid's shape."""
    axis, stride, cores = kernel.lnc
    ids = np.indices(tuple(kernel.grid))[axis]
    return (ids // stride) % cores


def lockstep_reason(kernel: KernelIR) -> str | None:
    """Why a kernel with core_barrier / sendrecv can not run (None: it can)."""
    ins = next((i for i in _walk(kernel.body) if i.op in LOCKSTEP), None)
    if ins is None:
        return None
    if kernel.lnc is None:
        return f"{ins.op} at {ins.loc} synchronises two cores, and the launch is on one"
    if math.prod(kernel.grid) != kernel.lnc[2]:
        return (f"{ins.op} at {ins.loc} in a grid of {list(kernel.grid)}: with core_barrier or "
                f"sendrecv each core runs one program (launch kernel[2] or [nl.nc(2)])")
    return None


def _walk(body: list[Statement]) -> Iterator[Instruction]:
    for st in body:
        if isinstance(st, Loop):
            yield from _walk(st.body)
        else:
            yield st


# --- handlers --------------------------------------------------------------------------------------

def run_core_barrier(r: Runner, ins: Instruction) -> None:
    """Lockstep execution has already completed every earlier instruction on both cores."""
    r.write(ins, np.zeros((1,) * len(ins.dst.shape), dtype=np.uint8))


def run_sendrecv(r: Runner, ins: Instruction) -> None:
    """dst of core c = src of core recv_from(c), checking that core's send_to is c."""
    ctx = r.ctx
    kernel = r.kernel
    axis = kernel.lnc[0]
    p = program_symbol(axis)
    if p not in ctx.batch_syms:
        raise r.error("sendrecv", "the two cores' programs do not run side by side")
    src = ins.srcs[0]
    value = r.read(src, src.shape)
    nb = len(ctx.batch_shape)
    tile = (1,) * len(ins.dst.shape)
    send = np.broadcast_to(eval_affine(affine_from_json(ins.attrs["send_to"]), ctx, tile),
                           ctx.batch_shape + tile).reshape(ctx.batch_shape + (-1,))[..., 0]
    recv = np.broadcast_to(eval_affine(affine_from_json(ins.attrs["recv_from"]), ctx, tile),
                           ctx.batch_shape + tile).reshape(ctx.batch_shape + (-1,))[..., 0]
    k = ctx.batch_syms.index(p)
    cores = ctx.batch_shape[k]
    send, recv = np.moveaxis(send, k, 0), np.moveaxis(recv, k, 0)
    for c in range(cores):
        frm = recv[c]
        if np.any((frm < 0) | (frm >= cores)):
            raise r.error("sendrecv rank", f"core {c} receives from rank {int(frm.flat[0])}: "
                          f"ranks are 0..{cores - 1}")
        if np.any(np.take_along_axis(send, frm[None], 0)[0] != c):
            raise r.error("sendrecv pairing", f"core {c} receives from core "
                          f"{int(frm.flat[0])}, which sends to core "
                          f"{int(send[int(frm.flat[0])].flat[0])}")
    got = np.take_along_axis(np.moveaxis(value, k, 0),
                             recv.reshape(recv.shape + (1,) * (value.ndim - nb)), 0)
    value = np.moveaxis(got, 0, k)
    if tuple(src.shape) != tuple(ins.dst.shape):
        value = value.reshape(value.shape[:nb] + tuple(ins.dst.shape))
    r.write(ins, value)


# --- races -----------------------------------------------------------------------------------------

def _shared(kernel: KernelIR, name: str) -> bool:
    t = kernel.tensors[name]
    return t.memory in (machine.HBM, machine.SHARED_HBM) and (
        name in kernel.inputs or t.role in ("output", "constant") or t.memory == machine.SHARED_HBM)


def _accesses(kernel: KernelIR, body: list[Statement], loops: tuple[tuple[str, int], ...],
              epoch: list[int], out: list) -> bool:
    """(instruction, access, kind, loops, epoch) of every shared-HBM access; False when a barrier
    sits inside a loop (then each iteration is an epoch: not judged)."""
    for st in body:
        if isinstance(st, Loop):
            if any(i.op == "core_barrier" for i in _walk(st.body)):
                return False
            if not _accesses(kernel, st.body, loops + ((st.var, st.extent),), epoch, out):
                return False
            continue
        if st.op == "core_barrier":
            epoch[0] += 1
            continue
        if st.dst is not None and _shared(kernel, st.dst.tensor):
            out.append((st, st.dst, "atomic" if st.acc is not None else "write", loops, epoch[0]))
        for s in st.srcs:
            if isinstance(s, Access) and _shared(kernel, s.tensor):
                out.append((st, s, "read", loops, epoch[0]))
    return True


def _touched(kernel: KernelIR, ins: Instruction, a: Access, loops, cores: np.ndarray
             ) -> list[np.ndarray] | None:
    """Per core, the flat indices of the elements the access touches over every program and
    iteration, with repeats (None: too many positions, or addresses that are data)."""
    if "indirect" in ins.attrs:
        return None
    grid = tuple(kernel.grid)
    syms = tuple(program_symbol(i) for i in range(len(grid))) + tuple(v for v, _ in loops)
    shape = grid + tuple(n for _, n in loops)
    if math.prod(shape) * math.prod(a.shape) > MAX_POSITIONS:
        return None
    ctx = Context(syms, shape, {}, dict(zip(syms, shape)))
    tile = tuple(a.shape)
    full = shape + tile
    dims = tuple(kernel.tensors[a.tensor].shape)
    strides = np.cumprod((1,) + dims[:0:-1])[::-1]
    # int32 positions where the tensor allows (half the memory of a 16M-position access)
    small = math.prod(dims) < 1 << 30 and all(
        abs(c) < 1 << 20 for e in a.index for c in (e.const, *(k for _, k in e.terms)))
    itype = np.int32 if small else np.int64
    flat = np.zeros((1,) * len(full), dtype=itype)
    for expr, st in zip(a.index, strides):
        flat = flat + eval_affine(expr, ctx, tile).astype(itype) * itype(st)
    flat = np.broadcast_to(flat, full)
    keep = np.ones(full, dtype=bool)
    if ins.mask and a is ins.dst:
        keep = np.broadcast_to(eval_mask(ins.mask, ctx, tile), full)
    owner = np.broadcast_to(cores.reshape(grid + (1,) * (len(full) - len(grid))), full)
    return [flat[keep & (owner == c)] for c in range(int(kernel.lnc[2]))]


def platform_reason(kernel: KernelIR) -> str | None:
    """Why the selected platform can not run this launch over two cores, or None. The launch's
    core count must fit the logical NeuronCore (NKI: the LNC of ``kernel[n]`` must match
    NEURON_LOGICAL_NC_CONFIG, else a runtime error): trn2 at LNC=1 has one physical core per
    device; trn1 and inf2 keep the chip's two (emulator/platforms.py, ``launch_cores``). Read
    at each launch, as the runtime checks at load."""
    if kernel.lnc is None:
        return None
    topo = platforms.current()
    if kernel.lnc[2] <= topo.launch_cores:
        return None
    return (f"the launch spreads its programs over {kernel.lnc[2]} physical NeuronCores (nl.nc(2) / "
            f"kernel[2]) but a {topo.kind} device of {topo.describe()} has {topo.launch_cores}; set "
            f"{platforms.LNC_ENV}=2 or launch on one core")


KINDS = ("write", "atomic", "read")


def core_race(kernel: KernelIR) -> str | None:
    """The first race between the two cores (module docstring), described; None if none.
    Per shared tensor and stretch between barriers, a mask of the elements each core writes,
    accumulates into and reads; tensors no instruction writes are skipped."""
    if kernel.lnc is None:
        return None
    found: list = []
    if not _accesses(kernel, kernel.body, (), [0], found):
        log.debug("kernel %r: a core_barrier inside a loop; core races are not judged",
                  kernel.name)
        return None
    written = {a.tensor for _, a, kind, _, _ in found if kind != "read"}
    cores = cores_of(kernel)
    groups: dict[tuple[str, int], list] = {}
    for ins, a, kind, loops, epoch in found:
        if a.tensor in written:
            groups.setdefault((a.tensor, epoch), []).append((ins, a, kind, loops))
    for (tensor, _), items in groups.items():
        size = math.prod(kernel.tensors[tensor].shape)
        marks = {(k, c): np.zeros(size, dtype=bool) for k in KINDS for c in (0, 1)}
        touched = []
        for ins, a, kind, loops in items:
            sets = _touched(kernel, ins, a, loops, cores)
            if sets is None:
                log.debug("kernel %r: %s at %s on %r is not judged for core races (too many "
                          "positions or indirect)", kernel.name, ins.op, ins.loc, a.tensor)
                continue
            touched.append((ins, kind, sets))
            for c, flat in enumerate(sets):
                marks[kind, c][flat[(flat >= 0) & (flat < size)]] = True
        for c, o in ((0, 1), (1, 0)):
            bad = marks["write", c] & (marks["write", o] | marks["atomic", o] | marks["read", o])
            bad |= marks["atomic", c] & marks["read", o]
            hit = np.flatnonzero(bad)
            if hit.size:
                e = int(hit[0])
                one = next((ins, kind, c) for ins, kind, sets in touched
                           if kind != "read" and np.any(sets[c] == e))
                other = next((ins, kind, o) for ins, kind, sets in touched
                             if np.any(sets[o] == e) and (one[1] == "write" or kind != "atomic"))
                return _describe(kernel, tensor, e, one, other)
    return None


def _describe(kernel: KernelIR, tensor: str, flat: int, one, other) -> str:
    where = list(np.unravel_index(flat, kernel.tensors[tensor].shape))
    verbs = {"write": "writes", "atomic": "accumulates into", "read": "reads"}
    parts = [f"{ins.op} at {ins.loc} on core {c} {verbs[kind]} it" for ins, kind, c in (one, other)]
    return (f"element {[int(v) for v in where]} of shared tensor {tensor!r}: {parts[0]} and "
            f"{parts[1]}, with no nki.isa.core_barrier between them. The two cores of a logical "
            "NeuronCore run at once, so the result is undefined on hardware")
