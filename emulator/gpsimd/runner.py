"""Runs GpSimd compute functions in an isolated, persistent worker process per library.

The host copies the input tensors into a shared arena, sends one small JSON request, and waits
with a time limit. A worker that crashes (segfault, abort) or runs past the limit is killed and
replaced, and the call raises a Python exception naming the op; the host process is never at risk.
The same worker answers the library's other requests (registration table, shape functions:
see library.py) through `GpSimdRunner.request`.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import weakref
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence, TextIO, Union

import numpy as np

from emulator import dtypes as records
from emulator.gpsimd import abi, args, control, protocol, store
from emulator.gpsimd.args import TensorSpec
from emulator.gpsimd.cost import CostEstimate, estimate
from emulator.gpsimd.descriptor import OpDescriptor
from emulator.gpsimd.errors import GpSimdError, KernelCrash, KernelError, KernelTimeout
from emulator.gpsimd.process import WorkerDied, WorkerProcess, WorkerTimedOut
from emulator.limits import setting_or_default

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = setting_or_default("NEURON_CUSTOMCALL_GPSIMD_TIMEOUT", 300.0)
#: Time limit of user code that must be quick: loading a library (its static initialisers) and
#: each shape call.
DEFAULT_SHAPE_TIMEOUT = setting_or_default("NEURON_CUSTOMCALL_GPSIMD_SHAPE_TIMEOUT", 60.0)


@dataclass(frozen=True)
class TensorValue:
    """An input tensor: its spec and either a C-contiguous buffer holding exactly its bytes or a
    callable that writes them into the writable memoryview it is given (so a framework can use
    its own, possibly parallel, copy straight into shared memory)."""

    spec: TensorSpec
    data: object
    location: tuple[protocol.SharedFile, int] | None = None  # already in shared memory here

    def write_to(self, view: memoryview) -> None:
        if callable(self.data):
            self.data(view)
        else:
            view[:] = memoryview(self.data).cast("B")


Argument = Union[TensorValue, float, int, bool]


@dataclass
class RunResult:
    """One execution: the output bytes (a uint8 array viewing shared memory, reused once it is
    garbage; view it by the output spec), the counters and the printf output."""

    output: np.ndarray
    spec: TensorSpec
    counters: dict[str, int]
    text: str
    ncores: int
    seconds: float = 0.0

    @property
    def cost(self) -> CostEstimate:
        """The cost model's estimate of this execution on a real GpSimd engine."""
        return estimate(self.counters, self.ncores)


class PreparedCall:
    """One op with fixed argument kinds, shapes and scalars, and a shared file of its own that
    holds its inputs (at `inputs`, typed views to copy into) and its output (`output`, reused by
    every call). Made by `GpSimdRunner.prepare`, registered with each worker at its first call
    there, run by `GpSimdRunner.call` through the control page (control.py)."""

    def __init__(self, ident: int, op: OpDescriptor, out: TensorSpec, ncores: int, file: protocol.SharedFile,
                 inputs: list[np.ndarray], output: np.ndarray, request: bytes) -> None:
        self.id, self.op, self.out, self.ncores, self.file = ident, op, out, ncores, file
        self.inputs, self.output = inputs, output
        #: The prepare request (JSON) sent to each worker this call is registered with.
        self.request = request
        self.worker: WorkerProcess | None = None


def _arena_offsets(values: Sequence[Argument], kinds: Sequence[str]) -> tuple[list[int | None], int]:
    """Each argument's offset in the arena (None: a scalar, or a tensor already in shared
    memory) and the arena size they need."""
    offset, offsets = 0, []
    for kind, value in zip(kinds, values):
        if kind == "tensor":
            if not isinstance(value, TensorValue):
                raise GpSimdError("a tensor argument needs a TensorValue")
            if value.location is None:
                offsets.append(offset)
                offset = protocol.align(offset + value.spec.nbytes)
                continue
        offsets.append(None)
    return offsets, max(offset, 1)


def _layout(values: Sequence[Argument], kinds: Sequence[str], offsets: Sequence[int | None],
            arena: protocol.SharedFile) -> list[dict]:
    """The arguments' descriptions, the tensors at `offsets` in `arena` or where they lie."""
    specs = []
    for kind, value, offset in zip(kinds, values, offsets):
        if kind != "tensor":
            specs.append(args.scalar_fields(kind, value))
        elif offset is None:
            # An earlier op's output, passed where it lies: the worker maps it copy-on-write, so
            # whatever the kernel does to it (fill_ on a const input, a raw pointer) stays there.
            shared, at = value.location
            specs.append({**args.tensor_fields(value.spec, at), **shared.describe(), "private": 1})
        else:
            specs.append({**args.tensor_fields(value.spec, offset), **arena.describe()})
    return specs


def _argument_key(kind: str, value: Argument) -> tuple:
    """What an argument contributes to a run request's bytes (a float by its repr: -0.0 is
    not 0.0 to a kernel)."""
    if kind != "tensor":
        return (kind, type(value), repr(value))
    where = None if value.location is None else (value.location[0].key, value.location[1])
    return (value.spec.dtype, tuple(value.spec.shape), where)


#: Encoded run requests kept per runner: a model's step repeats a few, byte for byte.
BODIES_KEPT = 64
_NUMPY = {name: r.numpy for name, r in records.BY_GPSIMD.items()}
#: Prepared calls alive per runner at most (a worker keeps as many); beyond, calls take the
#: JSON run request.
PREPARED_KEPT = 1024


def _kernel_failure(op: OpDescriptor, limit: float, failure: WorkerTimedOut | WorkerDied) -> GpSimdError:
    """A worker's death or time-out during `op`'s run, as the exception that names the op."""
    if isinstance(failure, WorkerTimedOut):
        return KernelTimeout(f"op '{op.name}' ran past its time limit of {limit:g} s on the emulated "
                             "GpSimd engine; its worker was killed")
    return KernelCrash(f"op '{op.name}' crashed its emulated GpSimd core ({failure.signal}): an invalid "
                       "pointer, an abort, or a stack overflow beyond the declared STACK_SIZE" + failure.suffix())


def print_device_output(op: OpDescriptor, text: str, lost: int, stream: TextIO | None = None) -> None:
    """Prints a kernel's printf output after execution under a header line, as the device does."""
    out = stream or sys.stdout
    out.write(f"----- GpSimd printf output: {op.library}::{op.name} (core 0) -----\n")
    if lost:
        out.write(f"[{lost} bytes of older output lost: the device printf buffer overflowed]\n")
    out.write(text if text.endswith("\n") else text + "\n")
    out.flush()


class GpSimdRunner:
    """Runs the ops of one library (given by path or by bytes) on the emulated GpSimd engine.

    The library is copied into the private library store (store.py) and its worker loads that
    copy after checking its hash, so a file changed or planted later is never run.
    `timeout` limits each compute call, `load_timeout` the loading of the library in a new worker
    (its static initialisers); `label` is how messages name the library (default: its file name;
    the loader passes the file the user built, not the content-addressed copy it runs).
    `requests` counts the requests sent to workers, by command.
    """

    def __init__(
        self,
        library: str | os.PathLike[str] | bytes,
        timeout: float = DEFAULT_TIMEOUT,
        load_timeout: float | None = None,
        label: str | None = None,
    ) -> None:
        if isinstance(library, (bytes, bytearray)):
            self.library_path, self.sha256 = store.install(bytes(library))
            default_label = self.library_path.name
        else:
            self.library_path, self.sha256 = store.install_file(library)
            default_label = Path(library).name
        self.label = label or default_label
        self.timeout = timeout
        self.load_timeout = DEFAULT_SHAPE_TIMEOUT if load_timeout is None else load_timeout
        self.requests: Counter[str] = Counter()
        self._worker: WorkerProcess | None = None
        self._lock = threading.Lock()
        self._slabs = protocol.SlabPool()
        self._bodies: dict[tuple, bytes] = {}
        self._next_prepared = 0
        self._prepared_count = 0
        self._forgotten: list[int] = []
        self._forget_lock = threading.Lock()
        #: Set by `close`: the registry has let go of this runner (a reload evicted it).
        self.closed = False

    def _ensure_worker(self) -> WorkerProcess:
        if self._worker is None or not self._worker.alive():
            if self._worker is not None:
                self._worker.close()  # reaps it and kills what its kernels forked
            if self.closed:
                raise GpSimdError(f"the runner of GpSimd library {self.label} was closed (the library "
                                  "was reloaded or unloaded)")
            self._worker = WorkerProcess(self.library_path, self.sha256, self.load_timeout, self.label,
                                         cpu_seconds=abi.CORE_COUNT * max(self.timeout, self.load_timeout))
        return self._worker

    def _send(self, worker: WorkerProcess, message: dict | bytes, timeout: float, cmd: str | None = None) -> dict:
        """Sends `message` (or its encoded body, of command `cmd`) and returns the reply."""
        self.requests[cmd or message["cmd"]] += 1
        return worker.request(message, timeout)

    def _run_body(self, op: OpDescriptor, ncores: int, values: Sequence[Argument], offsets: Sequence[int | None],
                  out: TensorSpec, slab: protocol.SharedFile, arena: protocol.SharedFile) -> bytes:
        """The encoded run request, built once per distinct content: encoding the arguments'
        descriptions took ~12 us of a ~55 us call on small tensors (a training step makes four)."""
        key = (op.index, op.symbol, ncores, tuple(_argument_key(k, v) for k, v in zip(op.args, values)),
               out.dtype, tuple(out.shape), slab.key, arena.key)
        body = self._bodies.get(key)
        if body is None:
            head = protocol.encode({"cmd": "run", "index": op.index, "symbol": op.symbol, "ncores": ncores})
            out_spec = {**args.tensor_fields(out), **slab.describe()}
            body = b"".join((head[:-1], b',"args":', protocol.encode(_layout(values, op.args, offsets, arena)),
                             b',"out":', protocol.encode(out_spec), b"}"))
            if len(self._bodies) >= BODIES_KEPT:
                self._bodies.clear()
            self._bodies[key] = body
        return body

    def request(self, message: dict, timeout: float) -> dict:
        """Sends one library-level request (``info``, ``demangle``, ``shape``) to the worker,
        starting one if needed. Raises `WorkerDied` or `WorkerTimedOut` (the worker is gone and
        the next request starts a fresh one) and `LibraryError` when the library fails to load."""
        with self._lock:
            return self._send(self._ensure_worker(), message, timeout)

    def run(
        self,
        op: OpDescriptor,
        values: Sequence[Argument],
        out: TensorSpec,
        timeout: float | None = None,
        print_output: bool = True,
    ) -> RunResult:
        """Executes `op` once (or once per core in multicore mode) and returns its output."""
        if len(values) != len(op.args):
            raise GpSimdError(f"op '{op.name}' takes {len(op.args)} arguments, got {len(values)}")
        ncores = abi.CORE_COUNT if op.multicore else 1
        offsets, size = _arena_offsets(values, op.args)
        slab = self._slabs.acquire(max(out.nbytes, 1))
        try:
            with self._lock:
                worker = self._ensure_worker()
                with worker.arena.ensure(size) as view:
                    for value, start in zip(values, offsets):
                        if start is not None:
                            with view[start : start + value.spec.nbytes] as slot:
                                value.write_to(slot)
                assert worker.arena.file is not None
                body = self._run_body(op, ncores, values, offsets, out, slab, worker.arena.file)
                start_time = time.perf_counter()
                limit = timeout or self.timeout
                try:
                    reply = self._send(worker, body, limit, "run")
                except (WorkerTimedOut, WorkerDied) as failure:
                    raise _kernel_failure(op, limit, failure) from None
                seconds = time.perf_counter() - start_time
        except BaseException:
            self._slabs.release(slab)
            raise
        if reply["ok"]:
            output = self._slabs.view(slab, out.nbytes)
        else:
            self._slabs.release(slab)
            output = np.empty(0, dtype=np.uint8)
        counters = reply["counters"]
        if print_output and reply["text"]:
            print_device_output(op, reply["text"], counters["printf_lost_bytes"])
        if not reply["ok"]:
            raise KernelError(reply["error"], reply["kind"])
        return RunResult(output, out, counters, reply["text"], ncores, seconds)

    def prepare(self, op: OpDescriptor, arguments: Sequence[Union[TensorSpec, float, int, bool]],
                out: TensorSpec) -> PreparedCall | None:
        """A prepared call of `op` with these arguments (TensorSpecs for its tensors, values for
        the rest) and output; None when this runner already has `PREPARED_KEPT` alive (the
        caller then sends run requests). Nothing is sent before its first `call`."""
        if len(arguments) != len(op.args):
            raise GpSimdError(f"op '{op.name}' takes {len(op.args)} arguments, got {len(arguments)}")
        with self._forget_lock:
            self._prepared_count += 1
            if self._prepared_count > PREPARED_KEPT:
                self._prepared_count -= 1
                return None
            ident = self._next_prepared
            self._next_prepared += 1
        offset, places = 0, []
        for kind, value in zip(op.args, arguments):
            if kind == "tensor":
                if not isinstance(value, TensorSpec):
                    raise GpSimdError(f"op '{op.name}': a tensor argument needs a TensorSpec")
                places.append(offset)
                offset = protocol.align(offset + value.nbytes)
            else:
                places.append(None)
        file = protocol.SharedFile(offset + out.nbytes, minimum=4096)
        specs = [args.scalar_fields(kind, value) if at is None else args.tensor_fields(value, at)
                 for kind, value, at in zip(op.args, arguments, places)]
        inputs = [np.frombuffer(file.map, dtype=_NUMPY[v.dtype], count=v.nbytes // abi.DTYPES[v.dtype].itemsize,
                                offset=at).reshape(v.shape)
                  for v, at in zip(arguments, places) if at is not None]
        output = np.frombuffer(file.map, dtype=np.uint8, count=out.nbytes, offset=offset)
        request = protocol.encode({"cmd": "prepare", "id": ident, "index": op.index, "symbol": op.symbol,
                                   "ncores": abi.CORE_COUNT if op.multicore else 1, **file.describe(),
                                   "args": specs, "out": args.tensor_fields(out, offset)})
        prepared = PreparedCall(ident, op, out, abi.CORE_COUNT if op.multicore else 1, file, inputs, output,
                                request)
        weakref.finalize(prepared, self._forget, ident, file)
        return prepared

    def _forget(self, ident: int, file: protocol.SharedFile) -> None:
        """A prepared call is garbage: its worker entry goes with the next registration."""
        with self._forget_lock:
            self._forgotten.append(ident)
            self._prepared_count -= 1
        file.close()

    def _register(self, worker: WorkerProcess, prepared: PreparedCall) -> None:
        """Sends `prepared`'s request to `worker` (and drops the worker's forgotten calls)."""
        with self._forget_lock:
            forgotten, self._forgotten = self._forgotten, []
        if forgotten:
            self._send(worker, {"cmd": "forget", "ids": forgotten}, self.load_timeout)
        try:
            reply = self._send(worker, prepared.request, self.load_timeout, "prepare")
        except (WorkerTimedOut, WorkerDied) as failure:
            raise _kernel_failure(prepared.op, self.load_timeout, failure) from None
        if not reply.get("ok"):
            raise KernelError(str(reply.get("error")), str(reply.get("kind", "usage")))
        prepared.worker = worker

    def call(self, prepared: PreparedCall, arrays: Sequence[np.ndarray], timeout: float | None = None,
             print_output: bool = True) -> RunResult:
        """Runs a prepared call on `arrays` (its tensor arguments, of its dtypes and shapes, in
        order): they are copied into the call's file, the call goes through the control page,
        and the result's output views the call's file (valid until its next call)."""
        op = prepared.op
        limit = timeout or self.timeout
        with self._lock:
            worker = self._ensure_worker()
            if prepared.worker is not worker:
                self._register(worker, prepared)
            for place, array in zip(prepared.inputs, arrays):
                np.copyto(place, array, casting="no")
            start_time = time.perf_counter()
            try:
                code = worker.call(prepared.id, limit)
            except (WorkerTimedOut, WorkerDied) as failure:
                raise _kernel_failure(op, limit, failure) from None
            seconds = time.perf_counter() - start_time
            page = worker.control
            text = page.text()
            counters = dict(zip(abi.COUNTER_FIELDS, page.counters()))
            error = page.error() if code else ""
            if text is None or (code and code not in abi.ERROR_KINDS and code != control.REFUSED):
                worker.kill()
                raise GpSimdError(f"op '{op.name}': the GpSimd worker's reply was corrupt (a kernel wrote "
                                  "over the control page?); the worker was killed")
            self.requests["call"] += 1
        if print_output and text:
            print_device_output(op, text, counters["printf_lost_bytes"])
        if code == control.REFUSED:
            raise GpSimdError(f"op '{op.name}': {error}")
        if code:
            raise KernelError(error, abi.ERROR_KINDS[code])
        return RunResult(prepared.output, prepared.out, counters, text, prepared.ncores, seconds)

    def prime(self, graph: int, run: int) -> None:
        """A run of compiled graph `graph` that calls this library starts (WorkerProcess.prime).
        Skipped while another thread holds the runner: its call keeps the worker awake anyway."""
        if not self._lock.acquire(blocking=False):
            return
        try:
            worker = self._worker
            if worker is not None and not self.closed:
                worker.prime(graph, run)
        finally:
            self._lock.release()

    def close(self) -> None:
        with self._lock:
            self.closed = True
            if self._worker is not None:
                self._worker.close()
                self._worker = None
        self._slabs.close()


#: The one registry of runners: one per library content (its SHA-256), shared by torch eager
#: calls, JAX calls and compiled graphs, so that a library has one worker however it is called.
_RUNNERS: dict[str, GpSimdRunner] = {}
_RUNNERS_LOCK = threading.Lock()


def runner_for(library: str | os.PathLike[str] | bytes, label: str | None = None) -> GpSimdRunner:
    """The process-wide runner (and so the persistent worker) of a library, given by its file or
    its bytes; `label` names the library in messages when the runner is created."""
    image = bytes(library) if isinstance(library, (bytes, bytearray)) else store.read_regular(Path(library))
    sha = store.digest(image)
    with _RUNNERS_LOCK:
        runner = _RUNNERS.get(sha)
        if runner is None or runner.closed:
            runner = _RUNNERS[sha] = GpSimdRunner(image, label=label or (
                None if isinstance(library, (bytes, bytearray)) else Path(library).name))
        return runner


def evict(runner: GpSimdRunner) -> None:
    """Removes a runner from the registry and stops its worker (a reloaded library's old code)."""
    with _RUNNERS_LOCK:
        if _RUNNERS.get(runner.sha256) is runner:
            del _RUNNERS[runner.sha256]
    runner.close()
