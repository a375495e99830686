"""``nki.compiler.psum``: direct allocation of PSUM tensors (rules in allocation.py)."""

from __future__ import annotations

from typing import Any, Callable

from emulator import machine

from .allocation import Allocation, mod_alloc_params

_MEMORY = machine.PSUM


def alloc(func: Callable[..., Any]) -> Allocation:
    """Place each logical block where ``func(idx, pdim_size, fdim_size)`` says."""
    if not callable(func):
        raise TypeError(f"nki.compiler.psum.alloc takes a callable, not {type(func).__name__}")
    return Allocation(_MEMORY, "alloc", func=func)


def mod_alloc(*, base_bank, base_addr=0, base_partition=0, num_bank_tiles=(), num_par_tiles=(),
              num_free_tiles=()) -> Allocation:
    """Modulo allocation of the logical blocks (double buffering and the like)."""
    return Allocation(_MEMORY, "mod_alloc", items=mod_alloc_params(
        _MEMORY, base_bank=base_bank, base_addr=base_addr, base_partition=base_partition,
        num_bank_tiles=num_bank_tiles, num_par_tiles=num_par_tiles, num_free_tiles=num_free_tiles))


def auto_alloc() -> Allocation:
    """Let the compiler place the tensor (what ``buffer=nl.psum`` means)."""
    return Allocation(_MEMORY, "auto")
