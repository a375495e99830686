"""``core_barrier``, ``sendrecv`` and ``dma_compute``, and virtual registers.

On one core a barrier over ``(0,)`` is reached at once and ``sendrecv`` with rank 0 on both sides
is a copy; between the two cores of a logical NeuronCore (LNC=2: a grid with ``nl.nc(2)``, or
beta 2's ``kernel[2]``) they are the ``core_barrier`` and ``sendrecv`` instructions
(emulator/kernel_exec/lnc.py).
Virtual registers (``register_alloc``/``move``/``load``/``store``) are int32 [1, 1] on-chip
tensors: their values are data, so they move like tiles; they steer the kernel through
data-dependent loops only (``registers.py``).
"""

from __future__ import annotations

import math

import numpy as np

from emulator import machine
from emulator.kernel_ir import Affine, affine_to_json

from ..indexing import Idx
from ..lang.operands import operand
from ..registers import VirtualRegister, new_register
from ..tile import Tile
from ..tracer import current
from .emit import alu, fail, fit, tile
from .movement import dma_copy

_HBM = (machine.HBM, machine.SHARED_HBM)


def _two_cores(api: str) -> None:
    """The launch is a logical NeuronCore of two cores: a grid with ``nl.nc(2)``, or beta 2's
    ``kernel[2]`` (the LNC guide's launch on two cores), which becomes one here."""
    tr = current()
    if tr.lnc is None and tuple(tr.grid) == (2,):
        tr.lnc = (0, 1, 2)
    if tr.lnc is None:
        raise fail("two cores", f"{api} between cores 0 and 1 needs a launch on two cores "
                   f"(kernel[2], or a grid with nl.nc(2)); the grid is {list(tr.grid)}")


def _rank(x, what: str, api: str):
    """A rank as an affine expression of the program ids (an int 0 or 1, or e.g.
    ``(nl.program_id(0) + 1) % 2``)."""
    if isinstance(x, Idx):
        return x.to_affine(2)
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool) and int(x) in (0, 1):
        return Affine(int(x), ())
    raise fail("sendrecv rank", f"{api}: {what} is 0 or 1 (or an expression of program_id), "
               f"got {x!r}")


def core_barrier(data, cores, engine=None, *, api="nki.isa.core_barrier") -> None:
    """Both cores of the logical NeuronCore reach this point before either goes on (with this
    core alone it is reached at once). The emulator runs the two cores in lockstep, so every
    write before the barrier is visible after it; the barriers delimit the stretches in which
    the cores must not touch the same shared HBM (emulator/kernel_exec/lnc.py)."""
    t = tile(data, "data", api)
    if t.buffer not in _HBM:
        raise fail("core_barrier data", f"{api}: data is the shared HBM tensor the cores "
                   f"synchronise on, got a {t.buffer} tile")
    try:
        group = sorted({int(c) for c in cores})
    except TypeError:
        raise fail("core_barrier cores", f"{api}: cores is a tuple of core indices, got "
                   f"{cores!r}") from None
    if group == [0]:
        return
    if group != [0, 1]:
        raise fail("core_barrier cores", f"{api}: only cores=(0, 1) is supported (the two "
                   f"cores of a logical NeuronCore), got {tuple(cores)}")
    _two_cores(api)
    current().new("core_barrier", (1, 1), "uint8", t)


def sendrecv(src, dst, send_to_rank, recv_from_rank, pipe_id, dma_engine=None, *,
             api="nki.isa.sendrecv") -> Tile:
    """Send ``src`` to core ``send_to_rank`` while receiving ``dst`` from core
    ``recv_from_rank`` (the two cores of a logical NeuronCore); with rank 0 on both sides on
    one core, ``dst = src``."""
    s = tile(src, "src", api)
    if not isinstance(dst, Tile):
        raise fail("dst", f"{api}: dst must be an SBUF tile")
    for t, what in ((s, "src"), (dst, "dst")):
        if t.buffer != machine.SBUF:
            raise fail("sendrecv location", f"{api}: {what} must be in SBUF, got {t.buffer}")
    if s.dtype_name != dst.dtype_name or s.shape[0] != dst.shape[0] \
            or math.prod(s.shape) != math.prod(dst.shape):
        raise fail("sendrecv operands", f"{api}: src and dst have the same dtype, partitions and "
                   f"elements per partition; got {s.dtype_name}{list(s.shape)} and "
                   f"{dst.dtype_name}{list(dst.shape)}")
    send, recv = _rank(send_to_rank, "send_to_rank", api), _rank(recv_from_rank,
                                                                 "recv_from_rank", api)
    value = fit(s, dst.shape, api) if s.shape != dst.shape else s
    tr = current()
    if send == recv == Affine(0, ()) and tr.lnc is None and tuple(tr.grid) != (2,):
        tr.emit("tensor_copy", dst, value)
        return dst
    _two_cores(api)
    tr.emit("sendrecv", dst, value, send_to=affine_to_json(send), recv_from=affine_to_json(recv))
    return dst


def dma_compute(dst, srcs, reduce_op, scales=None, unique_indices=True, oob_mode=None, *,
                api="nki.isa.dma_compute") -> Tile:
    """``dst = srcs[0] + srcs[1] + ...`` computed by the DMA engines in fp32 (``reduce_op`` add,
    every scale 1.0: the reference's only values); sources and ``dst`` hold equal element counts."""
    if alu(reduce_op, api) != "add":
        raise fail("dma_compute reduce_op", f"{api}: reduce_op must be nl.add")
    items = list(srcs)
    if not 1 <= len(items) <= 16:
        raise fail("dma_compute srcs", f"{api}: 1 to 16 source tensors, got {len(items)}")
    if scales is not None and (len(scales) != len(items) or any(float(v) != 1.0 for v in scales)):
        raise fail("dma_compute scales", f"{api}: every scale must be 1.0, got {scales!r}")
    if not isinstance(dst, Tile):
        raise fail("dst", f"{api}: dst must be a tensor")
    tr = current()
    acc = dst
    if dst.dtype_name != "float32":
        acc = Tile(tr, tr.declare(dst.shape, "float32", machine.HBM))
    for i, s in enumerate(items):
        dma_copy(acc, tile(s, f"srcs[{i}]", api), dst_rmw_op="add" if i else None,
                 oob_mode=oob_mode, api=api)
    if acc is not dst:
        dma_copy(dst, acc, api=api)
    return dst


def _register_value(x, api: str):
    if isinstance(x, VirtualRegister):
        return x.tile
    v = operand(x)
    if isinstance(v, Tile):
        raise fail("register operand", f"{api}: a register, an int, or (register_load) a tile")
    return int(v)


def register_alloc(x=None, *, api="nki.isa.register_alloc") -> VirtualRegister:
    reg = new_register()
    if x is not None:
        current().emit("memset", reg.tile, _register_value(x, api))
    return reg


def register_move(dst, src, *, api="nki.isa.register_move") -> None:
    if not isinstance(dst, VirtualRegister):
        raise fail("register_move dst", f"{api}: dst must be a VirtualRegister")
    v = _register_value(src, api)
    current().emit("tensor_copy" if isinstance(v, Tile) else "memset", dst.tile, v)


def register_load(dst, src, *, api="nki.isa.register_load") -> None:
    """The register takes the value of a one-element tile (converted to int32)."""
    if not isinstance(dst, VirtualRegister):
        raise fail("register_load dst", f"{api}: dst must be a VirtualRegister")
    t = tile(src, "src", api)
    if math.prod(t.shape) != 1:
        raise fail("register_load src", f"{api}: src holds one value, got {list(t.shape)}")
    if t.buffer in _HBM:
        current().emit("load", dst.tile, fit(t, (1, 1), api))
    else:
        current().emit("tensor_copy", dst.tile, t)


def register_store(dst, src, *, api="nki.isa.register_store") -> None:
    """A one-element tile takes the register's value (converted to its dtype)."""
    if not isinstance(src, VirtualRegister):
        raise fail("register_store src", f"{api}: src must be a VirtualRegister")
    if not isinstance(dst, Tile) or math.prod(dst.shape) != 1:
        raise fail("register_store dst", f"{api}: dst is a one-element tensor")
    op = "store" if dst.buffer in _HBM else "tensor_copy"
    current().emit(op, dst, src.tile)


__all__ = ["VirtualRegister", "core_barrier", "sendrecv", "dma_compute", "register_alloc",
           "register_move", "register_load", "register_store"]
