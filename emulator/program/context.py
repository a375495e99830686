"""What a handler factory may know about its instruction (HandlerContext), and what it may ask of
the loaded program it belongs to (LoadedProgramView).

Why here and not in the executor: handlers (emulator.ops), the cost model (emulator.cost) and the
executor all need the context; with it in the program package none of them imports another to
get it, and the executor is the only one that imports the handlers.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from emulator.program.dtypes import DTYPES
from emulator.program.model import Program, ValueType

#: (counters, cores) of a GpSimd kernel's latest execution, or None before its first.
CountersProbe = Callable[[], "tuple[Mapping[str, int], int] | None"]
#: Told (graph, run) as each run of the loaded program begins: numbers the executor gives, one per
#: loaded program and one per run.
RunStartHook = Callable[[int, int], None]


class LoadedProgramView(Protocol):
    """The loaded program as handlers see it (emulator.executor.LoadedProgram)."""

    program: Program
    kernels: Sequence[Any]
    #: per loaded program, state its handlers share (e.g. a kernel payload prepared once)
    shared: dict[Any, Any]

    def runner(self, index: int) -> Callable[..., Any]: ...

    def constant(self, index: int) -> np.ndarray: ...

    #: whether computations run as plain generated code (no profiling, no type checks)
    plain: bool

    def loop_runner(self, cond: int, body: int, size: int, overdue: Callable[[float, int], None],
                    own: Callable[[Any, bool], Any] | None) -> Callable[[Any], Any]: ...


@dataclass
class HandlerContext:
    """An instruction as its handler factory sees it: attributes and value types. A handler whose
    cost is known only after it ran (a GpSimd kernel) leaves a `counters` probe for the profiler;
    one that gains from knowing when a run of its program begins (a GpSimd kernel, whose worker
    is then woken ahead of its call) leaves a `run_start` hook."""

    op: str
    name: str
    attrs: dict[str, Any]
    type: ValueType
    in_types: list[ValueType]
    program: LoadedProgramView
    reuse: int = -1  # operand position the handler may overwrite with its result (see buffers.py)
    counters: CountersProbe | None = None
    run_start: RunStartHook | None = None

    @property
    def dtype(self) -> np.dtype:
        return DTYPES[self.type[0]]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.type[1])

    def in_dtype(self, k: int) -> np.dtype:
        return DTYPES[self.in_types[k][0]]

    def in_shape(self, k: int) -> tuple[int, ...]:
        return tuple(self.in_types[k][1])

    def computation(self, key: str) -> Callable[..., Any]:
        """The callable running the sub-program named by attribute `key`."""
        return self.program.runner(self.attrs[key])

    def constant(self, index: int) -> np.ndarray:
        return self.program.constant(index)
