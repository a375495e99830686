"""Watching a kernel run: a callback after each instruction, handed the tiles as NumPy arrays.

Why: ``nl.device_print`` shows only what the kernel's author thought to print before the run. A
developer chasing a wrong value wants to stop at a line and look at every tile there, or to walk
a kernel instruction by instruction; on hardware that is impossible, here the tiles are NumPy
arrays already. A *watch* is that hook: while one is registered, every kernel whose name (and
instruction line) it matches calls it after each instruction with a `Step`.

What a step holds. The runner executes programs of the SPMD grid and iterations of independent
loops together, as batch axes; a step splits them again, so ``step.values`` has one entry per
program and iteration, each with the indices that name it (``{"p0": 1, "l2": 3}``, as
``device_print`` labels its lines). Values are copies: keeping them is safe, and changing them
does not change the run.

What watching changes. Watched runs give the same results, more slowly: the grid runs on one
host thread (the callback is never called from two threads at once), and an instruction's
result is written to its own tile even where the runner would otherwise hand it straight to the
next instruction (see Program.forward), so that the step can show it. Watches are process-wide,
not per thread: kernels inside a compiled graph run on the framework's execution thread, and a
watch registered by the user's thread must see them.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

import numpy as np

from emulator.kernel_ir import Instruction
from emulator.kernel_ir.printer import format_instruction, format_operand

_lock = threading.Lock()
_watches: tuple["Watch", ...] = ()


@dataclass(frozen=True)
class Step:
    """One executed instruction of a watched kernel."""

    kernel: str
    #: The instruction's op (``load``, ``tensor_tensor``, ``matmul``...).
    op: str
    #: ``file:line`` of the kernel source the instruction was traced from ("" when unknown).
    where: str
    line: int | None
    #: The instruction as ``format_kernel`` prints it.
    text: str
    #: The destination tensor's IR name (None for instructions without one).
    dst: str | None
    #: (indices naming the program/iteration, destination value after the instruction), one per
    #: program and iteration run together in this step.
    values: tuple[tuple[dict[str, int], np.ndarray], ...]
    #: The same for each source operand that is a tensor (constants are left out), read just
    #: before the instruction ran: (operand text, per-program values).
    inputs: tuple[tuple[str, tuple[tuple[dict[str, int], np.ndarray], ...]], ...] = ()

    def value(self, **indices: int) -> np.ndarray:
        """The destination value of the program/iteration with these indices (``p0=1``); with
        no indices, of the only one. Raises KeyError naming the indices there are."""
        for idx, arr in self.values:
            if all(idx.get(k) == v for k, v in indices.items()):
                if indices or len(self.values) == 1:
                    return arr
                break
        names = ", ".join(" ".join(f"{k}={v}" for k, v in idx.items()) or "(none)"
                          for idx, _ in self.values)
        raise KeyError(f"step {self.where or self.op} has no single value for {indices or 'no indices'}"
                       f"; its programs/iterations: {names}")


@dataclass(eq=False)
class Watch:
    """A registered hook: ``callback(step)`` for each instruction of matching kernels.

    ``kernel``: the kernel's name (None: every kernel). ``lines``: source line numbers to stop
    at (None: every instruction). ``ops``: instruction ops to stop at (None: every op)."""

    callback: Callable[[Step], None]
    kernel: str | None = None
    lines: frozenset[int] | None = None
    ops: frozenset[str] | None = None

    def wants(self, ins: Instruction) -> bool:
        if self.lines is not None and (ins.loc is None or ins.loc.line not in self.lines):
            return False
        return self.ops is None or ins.op in self.ops


def add(watch: Watch) -> Watch:
    """Register ``watch`` (process-wide) until `remove`."""
    global _watches
    with _lock:
        _watches = _watches + (watch,)
    return watch


def remove(watch: Watch) -> None:
    global _watches
    with _lock:
        _watches = tuple(w for w in _watches if w is not watch)


def for_kernel(name: str) -> tuple[Watch, ...]:
    """The watches a run of kernel ``name`` must call (empty, and free, when nobody watches)."""
    watches = _watches
    if not watches:
        return ()
    return tuple(w for w in watches if w.kernel is None or w.kernel == name)


def split(value: np.ndarray, batch_syms: tuple[str, ...], batch_shape: tuple[int, ...],
          offsets: dict[str, int], bound: dict[str, int], tile_ndim: int
          ) -> tuple[tuple[dict[str, int], np.ndarray], ...]:
    """A batched value (``batch_shape + tile``, possibly broadcast) as one copy per program and
    iteration, each labelled with the bound indices and its position along the batch axes."""
    value = np.asarray(value)
    tile = value.shape[value.ndim - tile_ndim:] if tile_ndim else ()
    value = np.broadcast_to(value, tuple(batch_shape) + tuple(tile))
    fixed = dict(sorted(bound.items()))
    out = []
    for pos in np.ndindex(*batch_shape):
        idx = dict(fixed)
        idx.update((s, offsets.get(s, 0) + i) for s, i in zip(batch_syms, pos))
        out.append((idx, np.array(value[pos])))
    return tuple(out)


def describe(ins: Instruction) -> tuple[str, int | None, str]:
    """(``file:line``, line, text) of an instruction, for a step."""
    if ins.loc is None:
        return "", None, format_instruction(ins)
    return f"{ins.loc.file}:{ins.loc.line}", ins.loc.line, format_instruction(ins)


def deliver(watches: Iterable[Watch], step: Step) -> None:
    for w in watches:
        w.callback(step)


def matching(watches: tuple[Watch, ...], ins: Instruction) -> Iterator[Watch]:
    return (w for w in watches if w.wants(ins))
