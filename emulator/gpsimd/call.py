"""The one call path of a GpSimd op, used by torch eager calls, JAX calls and compiled graphs.

Every caller gives the op's arguments as (kind, value) pairs in the op's order, with value None
for each tensor, and the tensors as `TensorValue`s in order (a framework builds its own, to copy
its data straight into shared memory; NumPy arrays take `array_value`). The runner comes from
the one registry (`runner.runner_for`), so a library has one worker however it is called, and
the output comes back as a typed NumPy array viewing shared memory (`output_array`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from emulator import dtypes as records
from emulator.gpsimd import protocol
from emulator.gpsimd.args import TensorSpec
from emulator.gpsimd.descriptor import OpDescriptor
from emulator.gpsimd.errors import GpSimdError
from emulator.gpsimd.runner import Argument, GpSimdRunner, PreparedCall, RunResult, TensorValue, runner_for

#: GpSimd runtime dtype names (abi.DTYPES) and their NumPy storage, from the dtype record.
NUMPY_DTYPES: dict[str, np.dtype] = {name: r.numpy for name, r in records.BY_GPSIMD.items()}
_NAMES = {dt: r.gpsimd for dt, r in records.BY_NUMPY_GPSIMD.items()}


def array_value(array: Any) -> TensorValue:
    """A NumPy array as a tensor argument: passed where it lies when it is (a contiguous part of)
    an earlier op's output in shared memory, else copied into the runner's arena."""
    a = np.ascontiguousarray(array)
    if a.dtype not in _NAMES:
        raise GpSimdError(f"dtype {a.dtype} is not a GpSimd dtype ({', '.join(NUMPY_DTYPES)})")
    spec = TensorSpec(_NAMES[a.dtype], tuple(a.shape))
    if spec.nbytes:
        found = protocol.locate(a.ctypes.data, spec.nbytes)
        if found is not None:
            return TensorValue(spec, None, location=found)
    # Raw bytes: memoryviews refuse ml_dtypes such as bfloat16.
    return TensorValue(spec, a.reshape(-1).view(np.uint8))


def merge(arguments: Sequence[tuple[str, Any]], tensors: Iterable[TensorValue]) -> list[Argument]:
    """The op's argument list: each tensor slot of `arguments` takes the next of `tensors`."""
    operands = iter(tensors)
    values: list[Argument] = []
    for kind, value in arguments:
        if kind != "tensor":
            values.append(value)
            continue
        try:
            values.append(next(operands))
        except StopIteration:
            raise GpSimdError("fewer tensors than the op's tensor arguments") from None
    if next(operands, None) is not None:
        raise GpSimdError("more tensors than the op's tensor arguments")
    return values


def invoke(runner: GpSimdRunner, op: OpDescriptor, arguments: Sequence[tuple[str, Any]],
           tensors: Iterable[TensorValue], out: TensorSpec) -> RunResult:
    """Runs `op` once with `arguments` ((kind, value), None for tensors) and `tensors`."""
    return runner.run(op, merge(arguments, tensors), out)


def output_array(result: RunResult) -> np.ndarray:
    """The output as an array of its dtype and shape, viewing shared memory (kept alive by it)."""
    spec = result.spec
    return result.output[:spec.nbytes].view(NUMPY_DTYPES[spec.dtype]).reshape(spec.shape)


class OpCall:
    """One op of one library with its non-tensor arguments and output fixed (a custom-call of a
    compiled graph, or a traced JAX call): called with the tensor operands as NumPy arrays, it
    returns the output as a fresh array. Keeps the latest run (counters for the cost model).

    Each combination of operand dtypes and shapes becomes a prepared call of the runner (its
    request sent once per worker, then a call number through the control page: control.py);
    past the runner's limit of prepared calls, a call is a JSON run request. The runner is
    looked up in the registry at the first call, and again after a reload of the library
    evicted it."""

    def __init__(self, library: bytes | str, op: OpDescriptor, arguments: Sequence[tuple[str, Any]],
                 out: TensorSpec) -> None:
        self.library, self.op, self.out = library, op, out
        self.arguments = list(arguments)
        self.last: RunResult | None = None
        self._runner: GpSimdRunner | None = None
        #: Per operand (dtype, shape) key, the runner's prepared call (None: not prepared).
        self._prepared: dict[tuple, tuple[PreparedCall | None, np.ndarray | None]] = {}
        self._lock = threading.Lock()  # one prepared call (and output buffer) per key: one user at a time

    @property
    def runner(self) -> GpSimdRunner:
        runner = self._runner
        if runner is None or runner.closed:
            runner = self._runner = runner_for(self.library)
            self._prepared = {}
        return runner

    def _prepare(self, runner: GpSimdRunner, arrays: Sequence[np.ndarray]) -> tuple[PreparedCall | None,
                                                                                   np.ndarray | None]:
        specs = []
        for a in arrays:
            if a.dtype not in _NAMES:
                raise GpSimdError(f"dtype {a.dtype} is not a GpSimd dtype ({', '.join(NUMPY_DTYPES)})")
            specs.append(TensorSpec(_NAMES[a.dtype], tuple(a.shape)))
        prepared = runner.prepare(self.op, merge(self.arguments, specs), self.out)
        if prepared is None:
            return None, None
        spec = self.out
        return prepared, prepared.output.view(NUMPY_DTYPES[spec.dtype]).reshape(spec.shape)

    def prime(self, graph: int, run: int) -> None:
        """Run `run` of compiled graph `graph` starts and will call this op (GpSimdRunner.prime);
        nothing before the op's first call has started its worker."""
        runner = self._runner
        if runner is not None and not runner.closed:
            runner.prime(graph, run)

    def __call__(self, *operands: Any) -> np.ndarray:
        runner = self.runner
        arrays = [a if type(a) is np.ndarray else np.asarray(a) for a in operands]
        key = tuple((a.dtype, a.shape) for a in arrays)
        entry = self._prepared.get(key)
        if entry is None:
            entry = self._prepared[key] = self._prepare(runner, arrays)
        prepared, output = entry
        if prepared is None:
            result = invoke(runner, self.op, self.arguments, map(array_value, arrays), self.out)
            self.last = result
            return np.array(output_array(result), copy=True)
        # The prepared call's output is one buffer per OpCall: a second thread running this op
        # (devices of run_devices, PJRT executes) would overwrite it before this copy.
        with self._lock:
            self.last = runner.call(prepared, arrays)
            return output.copy()
