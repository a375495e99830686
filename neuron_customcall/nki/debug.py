"""Stepping through NKI kernels: see every tile's value, at any line, while the kernel runs.

On Trainium a kernel's tiles are out of reach; on the emulator they are NumPy arrays. `watch`
hands them to you: inside ``with debug.watch(...)``, every instruction of a matching kernel
(run on NumPy arrays, or inside a jax.jit / torch_xla graph on the emulator) calls your callback
with a `Step` after it ran, or, without a callback, is recorded into the list the ``with``
gives you.

    from neuron_customcall.nki import debug

    with debug.watch(kernel=rmsnorm, line=14) as steps:     # record the instructions of line 14
        rmsnorm(x, w)
    print(steps[0].text, steps[0].value(p0=0))              # the tile written there, program 0

    def stop(step):                                         # a breakpoint: stop in pdb
        breakpoint()                                        # step.values / step.inputs hold tiles
    with debug.watch(stop, kernel=rmsnorm, line=14):
        rmsnorm(x, w)

What the run looks like while watched is in emulator/kernel_exec/watch.py: same results, one host
thread, every instruction's result in its own tile. The programs of the SPMD grid and iterations of
``affine_range`` loops still run together: a step has one value per program and iteration
(``step.values``), labelled like ``nl.device_print``'s lines (``p0`` for program ids, ``l<n>``
for loop variables).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterable, Iterator

from emulator.kernel_exec import watch as _watch
from emulator.kernel_exec.watch import Step

from .errors import NKIError
from .jit import Kernel, Launch

__all__ = ["watch", "Step"]

#: Recorded steps kept at most, per ``watch`` without a callback: a watch left on over a long
#: loop must not grow without bound. Past it, the oldest are dropped and ``dropped`` counts them.
MAX_RECORDED_STEPS = 100_000


class Recording(list):
    """The steps a callback-less `watch` recorded, oldest first (at most MAX_RECORDED_STEPS)."""

    def __init__(self) -> None:
        super().__init__()
        self.dropped = 0
        self._lock = threading.Lock()

    def record(self, step: Step) -> None:
        with self._lock:
            if len(self) >= MAX_RECORDED_STEPS:
                del self[0]
                self.dropped += 1
            self.append(step)


def _kernel_name(kernel: Any) -> str | None:
    """The name the kernel IR carries for ``kernel``: its Python function's name."""
    if kernel is None or isinstance(kernel, str):
        return kernel
    if isinstance(kernel, Launch):
        kernel = kernel.kernel
    if isinstance(kernel, Kernel):
        kernel = kernel.func
    name = getattr(kernel, "__name__", None)
    if not isinstance(name, str):
        raise NKIError(f"debug.watch: kernel= takes an @nki.jit kernel, a function or a kernel "
                       f"name, got {type(kernel).__name__}")
    return name


def _items(value: Any, single: type) -> tuple | None:
    """``value`` as a tuple: one ``single`` or an iterable of them; None when it is neither."""
    if isinstance(value, single):
        return (value,)
    try:
        return tuple(value)
    except TypeError:
        return None


def _numbers(what: str, value: int | Iterable[int] | None) -> frozenset[int] | None:
    if value is None:
        return None
    items = _items(value, int)
    if not items or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0
                            for v in items):
        raise NKIError(f"debug.watch: {what}= takes positive source line numbers, got {value!r}")
    return frozenset(items)


def _ops(value: str | Iterable[str] | None) -> frozenset[str] | None:
    if value is None:
        return None
    items = _items(value, str)
    if not items or not all(isinstance(v, str) for v in items):
        raise NKIError(f"debug.watch: op= takes instruction names such as 'matmul', got {value!r}")
    return frozenset(items)


@contextlib.contextmanager
def watch(callback: Callable[[Step], None] | None = None, *, kernel: Any = None,
          line: int | Iterable[int] | None = None,
          op: str | Iterable[str] | None = None) -> Iterator[Recording]:
    """Call ``callback(step)`` after each matching instruction of kernels run inside the block;
    without a callback, record the steps into the list the block receives.

    ``kernel``: the @nki.jit kernel (or function, or name) to watch; None watches every kernel.
    ``line``: source line number(s) of the kernel file; None, every instruction. ``op``:
    instruction name(s), as `Step.op` and the kernel IR print them (``load``, ``matmul``...).
    An exception from the callback stops the kernel and reaches the caller unchanged."""
    recording = Recording()
    if callback is not None and not callable(callback):
        raise NKIError(f"debug.watch: the callback must be callable, got {type(callback).__name__}")
    handle = _watch.Watch(callback if callback is not None else recording.record,
                          _kernel_name(kernel), _numbers("line", line), _ops(op))
    _watch.add(handle)
    try:
        yield recording
    finally:
        _watch.remove(handle)
