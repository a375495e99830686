"""Constants and small types of ``nki.language``: ``tile_size``, ``MemoryRegion`` and the
``is_*`` buffer tests, the operator constants (``bypass``, ``prelu``, ``average``), the base
types ``NKIObject``/``NkiTensor``.

The numbers come from the machine model (emulator/machine.py), so that the checks, the executor
and what a kernel reads from ``nl.tile_size`` never disagree.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from emulator import machine

from ..tile import Tile


class _TileSize:
    """``nl.tile_size``: NeuronCore-v2 tile limits, under both generations' names (beta 2
    deprecates ``psum_fmax`` and ``total_available_sbuf_size`` but keeps them)."""

    pmax = machine.NUM_PARTITIONS
    psum_fmax = machine.PSUM_FMAX
    psum_bank_fmax = machine.PSUM_FMAX
    psum_bank_fmax_bytes = machine.PSUM_BANK_BYTES_PER_PARTITION
    psum_num_banks = machine.PSUM_NUM_BANKS
    gemm_stationary_fmax = machine.GEMM_STATIONARY_FMAX
    gemm_moving_fmax = machine.GEMM_MOVING_FMAX
    bn_stats_fmax = machine.BN_STATS_FMAX
    psum_min_align = machine.PSUM_MIN_ALIGN
    sbuf_min_align = machine.SBUF_MIN_ALIGN
    #: "Total SBUF capacity in bytes (all partitions combined)."
    sbuf_size_bytes = machine.NUM_PARTITIONS * machine.SBUF_BYTES_PER_PARTITION
    #: The usable bytes of one partition (the compiler keeps the rest).
    sbuf_fmax_bytes = machine.SBUF_USABLE_BYTES_PER_PARTITION
    sbuf_fmax = machine.SBUF_USABLE_BYTES_PER_PARTITION // 4
    #: Deprecated in beta 2: despite its name, the usable bytes *per partition*.
    total_available_sbuf_size = machine.SBUF_USABLE_BYTES_PER_PARTITION

    def __repr__(self) -> str:
        return "nl.tile_size"


tile_size = _TileSize()


class MemoryRegion(Enum):
    """Where a tensor lives (beta 2's ``nl.MemoryRegion``); ``nl.sbuf`` etc. are accepted
    wherever a member is."""

    sbuf = "sbuf"
    psum = "psum"
    private_hbm = "private_hbm"
    shared_hbm = "shared_hbm"

    @property
    def memory(self) -> str:
        """The kernel IR's memory space."""
        return _IR_MEMORY[self.value]


_IR_MEMORY = {"sbuf": machine.SBUF, "psum": machine.PSUM, "private_hbm": machine.HBM,
              "hbm": machine.HBM, "shared_hbm": machine.SHARED_HBM}


def memory_of(buffer: Any) -> str:
    """The IR memory space of anything a kernel passes as ``buffer``: ``nl.sbuf``, a
    ``MemoryRegion``, an ``nki.compiler`` allocator, a tensor (its buffer)."""
    if isinstance(buffer, Tile):
        return buffer.buffer
    name = getattr(buffer, "memory", buffer)
    if isinstance(name, str) and name in _IR_MEMORY:
        return _IR_MEMORY[name]
    raise TypeError(f"{buffer!r} is not a buffer (nl.sbuf, nl.psum, nl.hbm, nl.private_hbm, "
                    "nl.shared_hbm or an nl.MemoryRegion)")


def is_hbm(buffer) -> bool:
    """True for any HBM buffer (private or shared)."""
    return memory_of(buffer) in (machine.HBM, machine.SHARED_HBM)


def is_on_chip(buffer) -> bool:
    """True for SBUF and PSUM."""
    return memory_of(buffer) in machine.ON_CHIP


def is_psum(buffer) -> bool:
    return memory_of(buffer) == machine.PSUM


def is_sbuf(buffer) -> bool:
    return memory_of(buffer) == machine.SBUF


class _OperatorConstant:
    """An operator named by a constant (``op=nl.bypass``): it carries the IR name the ISA
    front end looks up, and is not callable on tiles itself."""

    def __init__(self, name: str, kind: str, doc: str):
        self.name = name
        setattr(self, kind, name)
        self.__doc__ = doc

    def __repr__(self) -> str:
        return f"nl.{self.name}"


#: "No-op operator that passes data through unchanged" (op0/op1 of tensor-scalar instructions).
bypass = _OperatorConstant("bypass", "_nki_alu", "pass data through unchanged")
#: Parametric ReLU, an activation function (``relu_param`` gives the negative slope).
prelu = _OperatorConstant("prelu", "_nki_act", "parametric ReLU activation")
#: The averaging operator of the ISA's reductions.
average = _OperatorConstant("average", "_nki_alu", "average")


class NKIObject:
    """Base class of NKI kernel dataclasses and configuration objects (beta 2): keyword
    arguments become attributes."""

    def __init__(self, **kwargs: Any) -> None:
        for key, value in kwargs.items():
            setattr(self, key, value)


#: Beta 2's tensor type: every tensor and tile a kernel handles is one of ours.
NkiTensor = Tile

__all__ = ["tile_size", "MemoryRegion", "memory_of", "is_hbm", "is_on_chip", "is_psum", "is_sbuf",
           "bypass", "prelu", "average", "NKIObject", "NkiTensor"]
