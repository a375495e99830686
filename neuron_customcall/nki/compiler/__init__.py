"""``nki.compiler`` (NKI beta 1): allocation control and kernel decorators.

``sbuf``/``psum`` hold the direct-allocation APIs (``alloc``, ``mod_alloc``, ``auto_alloc``),
checked as ``allocation.py`` explains. The decorators steer the real compiler's middle end and
allocator, which decide speed and placement, never values: on the emulator they return the kernel
unchanged, except that ``force_auto_alloc`` turns the direct-allocation checks off (its documented
effect) and ``enable_stack_allocator`` insists on ``skip_middle_end_transformations`` as the
reference requires.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable

from . import psum, sbuf
from .allocation import Allocation


def _func(kernel: Any) -> Any:
    """The Python function under an ``nki.jit`` kernel (or the function itself)."""
    return getattr(kernel, "func", kernel)


def _decorator(mark: Callable[[Any], None]) -> Callable:
    def decorate(func=None, **_options):
        def apply(f):
            mark(f)
            return f
        return apply if func is None else apply(func)
    return decorate


def _mark(attr: str) -> Callable[[Any], None]:
    def mark(f) -> None:
        setattr(_func(f), attr, True)
    return mark


def _require_skip(f) -> None:
    if not getattr(_func(f), "_nki_skip_middle_end", False):
        raise ValueError("nki.compiler.enable_stack_allocator must be used together with "
                         "nki.compiler.skip_middle_end_transformations (apply that one first, "
                         "i.e. below it)")


#: "Skip all middle end transformations on the kernel": the emulator has none to skip.
skip_middle_end_transformations = _decorator(_mark("_nki_skip_middle_end"))
#: "Use stack allocator to allocate the psum and sbuf tensors": placement only.
enable_stack_allocator = _decorator(_require_skip)
#: "Ignore any direct allocation inside the kernel": turns the allocation checks off.
force_auto_alloc = _decorator(_mark("_nki_force_auto_alloc"))


@contextlib.contextmanager
def allocation_scope():
    """A scope for tensor allocation (placement only: no effect on the emulator's values)."""
    yield


@contextlib.contextmanager
def multi_buffer(factor: int = 2):
    """Multi-buffered allocation of the tensors declared inside (placement only)."""
    if not isinstance(factor, int) or factor < 1:
        raise ValueError(f"nki.compiler.multi_buffer: factor must be a positive integer, got {factor!r}")
    yield


@contextlib.contextmanager
def no_reorder():
    """Keep the block's operations in program order: the emulator always runs in program order."""
    yield


__all__ = ["sbuf", "psum", "Allocation", "skip_middle_end_transformations",
           "enable_stack_allocator", "force_auto_alloc", "allocation_scope", "multi_buffer",
           "no_reorder"]
