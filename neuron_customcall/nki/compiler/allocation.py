"""Direct allocation (``nki.compiler.sbuf/psum.alloc``, ``mod_alloc``, ``auto_alloc``) and the
``address=`` of ``nl.ndarray``: checked as NKI's reference states the rules, placement not
modelled.

On hardware these choose where each logical tile of a tensor sits in SBUF or PSUM; two logical
tiles mapped to one physical tile (``mod_alloc``'s double buffering) share storage. A correct
kernel never reads one logical tile through another, so the emulator gives every tensor its own
storage and the results are the same: what it can honour is the rules, which it checks when the
tensor is declared (errors name the kernel and line):

* sbuf: ``start_partition`` 0 for tiles of more than 64 partitions, 0/64 for 33-64, 0/32/64/96
  for up to 32; a byte address below 192 KiB - 16 KiB (the compiler keeps 16 KiB);
* psum: a bank below 8, ``start_partition`` and ``byte_addr`` 0, at most 2 KiB per partition;
* ``mod_alloc``: ``base_partition`` (and psum's ``base_addr``) 0, ``num_*_tiles`` empty or one
  entry per block dimension;
* one kernel does not mix automatic (``nl.sbuf``, ``auto_alloc()``) and direct allocation in one
  memory.

``nki.compiler.force_auto_alloc`` turns all of this off for its kernel ("ignore any direct
allocation").
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Callable

from emulator import machine
from emulator.kernel_ir import dtypes as ir_dtypes

#: At most this many logical blocks are passed to an ``alloc`` function to check its placements.
MAX_CHECKED_BLOCKS = 4096


@dataclass(frozen=True)
class Allocation:
    """What ``sbuf.mod_alloc(...)`` etc. return: a buffer for ``nl.ndarray(buffer=...)``."""

    memory: str
    kind: str  # "auto", "alloc" or "mod_alloc"
    func: Callable[..., Any] | None = None
    #: mod_alloc's checked arguments, as sorted items (hashable: kernels take allocations as
    #: static arguments, which key the trace cache).
    items: tuple[tuple[str, Any], ...] = ()

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.items)

    @property
    def name(self) -> str:
        return self.memory

    def __repr__(self) -> str:
        return f"nki.compiler.{self.memory}.{self.kind}({self.params or ''})"


def _int_tuple(what: str, v) -> tuple[int, ...]:
    if not isinstance(v, (tuple, list)) or not all(isinstance(x, int) and x >= 1 for x in v):
        raise ValueError(f"{what} must be a tuple of positive integers, got {v!r}")
    return tuple(v)


def mod_alloc_params(memory: str, **kw) -> tuple[tuple[str, Any], ...]:
    """The arguments of ``mod_alloc``, checked against the reference's current-release rules."""
    api = f"nki.compiler.{memory}.mod_alloc"
    for key in ("base_addr", "base_partition") + (("base_bank",) if memory == machine.PSUM else ()):
        if not isinstance(kw[key], int) or kw[key] < 0:
            raise ValueError(f"{api}: {key} must be a non-negative integer, got {kw[key]!r}")
    if kw["base_partition"] != 0:
        raise ValueError(f"{api}: base_partition must be 0 in the current version")
    if memory == machine.PSUM:
        if kw["base_addr"] != 0:
            raise ValueError(f"{api}: base_addr must be 0 in the current version")
        if kw["base_bank"] >= machine.PSUM_NUM_BANKS:
            raise ValueError(f"{api}: base_bank {kw['base_bank']} is not one of the "
                             f"{machine.PSUM_NUM_BANKS} PSUM banks")
    elif kw["base_addr"] >= machine.SBUF_USABLE_BYTES_PER_PARTITION:
        raise ValueError(f"{api}: base_addr {kw['base_addr']} is beyond the usable "
                         f"{machine.SBUF_USABLE_BYTES_PER_PARTITION} bytes of a partition")
    for key in ("num_par_tiles", "num_free_tiles") + (
            ("num_bank_tiles",) if memory == machine.PSUM else ()):
        kw[key] = _int_tuple(f"{api}: {key}", kw[key])
    return tuple(sorted(kw.items()))


def _layout(shape: tuple[int, ...], par_axis: int, itemsize: int) -> tuple[tuple[int, ...], int, int]:
    """(block dims, partitions, bytes per partition) of a tensor whose partition axis is
    ``par_axis``: dims before it are blocks, after it the free dims."""
    return shape[:par_axis], shape[par_axis], math.prod(shape[par_axis + 1:]) * itemsize


def _sbuf_start_ok(pdim: int, start: int) -> bool:
    if pdim > 64:
        return start == 0
    if pdim > 32:
        return start in (0, 64)
    return start in (0, 32, 64, 96)


def check_tensor(alloc: Allocation, shape: tuple[int, ...], par_axis: int, dtype: str) -> None:
    """Check one declaration against its allocation's rules (ValueError naming the rule)."""
    blocks, pdim, fbytes = _layout(shape, par_axis, ir_dtypes.itemsize(dtype))
    api = f"nki.compiler.{alloc.memory}.{alloc.kind}"
    if alloc.memory == machine.PSUM and fbytes > machine.PSUM_BANK_BYTES_PER_PARTITION:
        raise ValueError(f"{api}: a PSUM tile of {fbytes} bytes per partition spans more than one "
                         f"{machine.PSUM_BANK_BYTES_PER_PARTITION}-byte bank")
    if alloc.kind == "mod_alloc":
        for key in ("num_par_tiles", "num_free_tiles", "num_bank_tiles"):
            n = alloc.params.get(key, ())
            if n and len(n) != len(blocks):
                raise ValueError(f"{api}: {key}={n} must be empty or have one entry per block "
                                 f"dimension ({len(blocks)})")
        if alloc.memory == machine.SBUF and alloc.params["base_addr"] + fbytes > \
                machine.SBUF_USABLE_BYTES_PER_PARTITION:
            raise ValueError(f"{api}: base_addr {alloc.params['base_addr']} + {fbytes} bytes per "
                             f"partition is beyond the usable "
                             f"{machine.SBUF_USABLE_BYTES_PER_PARTITION} bytes")
    elif alloc.kind == "alloc":
        for idx in itertools.islice(itertools.product(*(range(b) for b in blocks)),
                                    MAX_CHECKED_BLOCKS):
            _check_placement(api, alloc.memory, alloc.func(idx, pdim, fbytes), idx, pdim, fbytes)


def _check_placement(api: str, memory: str, place, idx, pdim: int, fbytes: int) -> None:
    width = 3 if memory == machine.PSUM else 2
    if not isinstance(place, (tuple, list)) or len(place) != width or \
            not all(isinstance(v, int) for v in place):
        raise ValueError(f"{api}: the allocation function must return {width} integers for block "
                         f"{idx}, got {place!r}")
    if memory == machine.PSUM:
        bank, start, addr = place
        if not 0 <= bank < machine.PSUM_NUM_BANKS:
            raise ValueError(f"{api}: block {idx} in PSUM bank {bank}; there are "
                             f"{machine.PSUM_NUM_BANKS}")
        if start != 0 or addr != 0:
            raise ValueError(f"{api}: block {idx}: start_partition and byte_addr must both be 0 "
                             f"in the current release, got {start} and {addr}")
        return
    start, addr = place
    if not _sbuf_start_ok(pdim, start):
        raise ValueError(f"{api}: block {idx}: a tile of {pdim} partitions can not start at "
                         f"partition {start}")
    check_address(api, machine.SBUF, (start, addr), pdim, fbytes)


def check_address(api: str, memory: str, address, pdim: int, fbytes: int) -> None:
    """``nl.ndarray(address=(partition_offset, free_offset))`` and sbuf placements: inside the
    partitions and the usable bytes of each, aligned to ``tile_size.sbuf_min_align`` (PSUM:
    its 16 KiB per partition, ``psum_min_align``)."""
    if not isinstance(address, (tuple, list)) or len(address) != 2 or \
            not all(isinstance(v, int) and v >= 0 for v in address):
        raise ValueError(f"{api}: address must be (partition_offset, free_offset) of "
                         f"non-negative integers, got {address!r}")
    start, addr = address
    usable, align = ((machine.PSUM_BYTES_PER_PARTITION, machine.PSUM_MIN_ALIGN)
                     if memory == machine.PSUM else
                     (machine.SBUF_USABLE_BYTES_PER_PARTITION, machine.SBUF_MIN_ALIGN))
    if start + pdim > machine.NUM_PARTITIONS:
        raise ValueError(f"{api}: partitions {start}..{start + pdim - 1} exceed the "
                         f"{machine.NUM_PARTITIONS} partitions")
    if addr + fbytes > usable or addr % align:
        raise ValueError(f"{api}: bytes {addr}..{addr + fbytes} of a partition are not inside "
                         f"the usable {usable} of {memory} (aligned to {align})")


def place(tr, shape_arg, shape: tuple[int, ...], dtype: str, memory: str, buffer,
          address) -> None:
    """Check a declaration's ``buffer`` allocation and ``address`` (see the module docstring);
    a broken rule is the trace error ``allocation`` naming the kernel and line."""
    if getattr(getattr(tr, "func", None), "_nki_force_auto_alloc", False):
        return
    direct = isinstance(buffer, Allocation) and buffer.kind != "auto" or address is not None
    explicit_auto = buffer is not None and not direct
    if memory not in machine.ON_CHIP:
        if address is not None:
            raise tr.error("allocation", f"address= places on-chip tensors; this one is in {memory}")
        return
    styles = tr.__dict__.setdefault("allocation_styles", {})
    if direct or explicit_auto:
        style = "direct" if direct else "automatic"
        if styles.setdefault(memory, style) != style:
            raise tr.error("allocation", f"one kernel can not mix automatic and direct allocation "
                           f"of {memory} tensors (nki.compiler.{memory}.auto_alloc vs alloc/"
                           "mod_alloc/address=)")
    if not direct:
        return
    par_axis = next((i for i, s in enumerate(shape_arg) if type(s).__name__ == "par_dim"), 0) \
        if isinstance(shape_arg, (tuple, list)) else 0
    try:
        if isinstance(buffer, Allocation) and buffer.kind != "auto":
            check_tensor(buffer, shape, par_axis, dtype)
        if address is not None:
            _, pdim, fbytes = _layout(shape, par_axis, ir_dtypes.itemsize(dtype))
            check_address("nl.ndarray", memory, address, pdim, fbytes)
    except ValueError as e:
        raise tr.error("allocation", str(e)) from None
