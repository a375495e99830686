"""``core_barrier``, ``sendrecv`` and ``dma_compute``, and virtual registers.

The emulator runs one NeuronCore (LNC=1): a barrier or an exchange whose group is this core
alone completes at once (``core_barrier`` over ``(0,)``; ``sendrecv`` to and from rank 0 is a
copy), and any other group is refused by name until several cores are emulated (issue 18).
Virtual registers (``register_alloc``/``move``/``load``/``store``) are int32 [1, 1] on-chip
tensors: their values are data, so they move like tiles; they steer the kernel through
data-dependent loops only (``registers.py``).
"""

from __future__ import annotations

import math

from emulator import machine

from ..lang.operands import operand
from ..registers import VirtualRegister, new_register
from ..tile import Tile
from ..tracer import current
from ..unsupported import refuse
from .emit import alu, fail, fit, tile
from .movement import dma_copy

_HBM = (machine.HBM, machine.SHARED_HBM)


def _multi_core(api: str, what: str) -> None:
    refuse(api, f"{what} needs several NeuronCores; the emulator runs one (multi-core is "
                "issue 18)")


def core_barrier(data, cores, engine=None, *, api="nki.isa.core_barrier") -> None:
    """A barrier among ``cores``: with this core alone it is reached at once."""
    t = tile(data, "data", api)
    if t.buffer not in _HBM:
        raise fail("core_barrier data", f"{api}: data is the shared HBM tensor the cores "
                   f"synchronise on, got a {t.buffer} tile")
    try:
        group = sorted({int(c) for c in cores})
    except TypeError:
        raise fail("core_barrier cores", f"{api}: cores is a tuple of core indices, got "
                   f"{cores!r}") from None
    if group != [0]:
        _multi_core(api, f"a barrier among cores {tuple(group)}")


def sendrecv(src, dst, send_to_rank, recv_from_rank, pipe_id, dma_engine=None, *,
             api="nki.isa.sendrecv") -> Tile:
    """Send ``src`` to ``send_to_rank`` while receiving ``dst`` from ``recv_from_rank``: with
    rank 0 (this core) on both sides, ``dst = src``."""
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
    if int(send_to_rank) != 0 or int(recv_from_rank) != 0:
        _multi_core(api, f"an exchange with rank {send_to_rank}/{recv_from_rank}")
    current().emit("tensor_copy", dst, fit(s, dst.shape, api) if s.shape != dst.shape else s)
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
