"""The ``kernel`` instruction: runs a kernel payload of the artifact (see emulator.kernel_payload).

A table maps each payload kind to a factory. Everything that depends only on the payload (the
NKI program's analysis, the GpSimd library file and its worker) is prepared when the artifact is
loaded, so a run costs the kernel's own execution.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from emulator.artifact import ArtifactError
from emulator.kernel_payload import (GPSIMD, GPSIMD_OP, NKI_IR, KernelPayloadError, libraries,
                                     unpack_gpsimd, unpack_gpsimd_op)
from emulator.program.context import HandlerContext
from emulator.program.ops import handles

log = logging.getLogger(__name__)


def _nki(name: str, data: bytes, kernels: Sequence[Any]) -> Callable[..., list]:
    from emulator.kernel_exec import run_kernel
    from emulator.kernel_exec.program import prepare
    from emulator.kernel_ir import serialise

    try:
        program = prepare(serialise.from_bytes(data))
    except serialise.KernelIRFormatError as e:
        raise ArtifactError(f"kernel payload {name!r}: {e}") from None
    return lambda *args: run_kernel(program, [np.asarray(a) for a in args])


def _gpsimd(name: str, data: bytes, kernels: Sequence[Any]) -> Callable[..., list]:
    """A format 1.0 payload: the op's header and its library image in one."""
    try:
        payload = unpack_gpsimd(data)
    except KernelPayloadError as e:
        raise ArtifactError(f"kernel payload {name!r}: {e}") from None
    return _gpsimd_run(payload)


def _gpsimd_op(name: str, data: bytes, kernels: Sequence[Any]) -> Callable[..., list]:
    """An op header naming its library, a gpsimd-library payload stored once per artifact."""
    try:
        payload = unpack_gpsimd_op(data, libraries((k.kind, k.data) for k in kernels))
    except KernelPayloadError as e:
        raise ArtifactError(f"kernel payload {name!r}: {e}") from None
    return _gpsimd_run(payload)


class GpSimdCall:
    """Calls one GpSimd op payload through the engine's one call path (emulator.gpsimd.call);
    keeps the counters of its latest execution (what the cost model needs: GpSimd costs are
    known only after the kernel ran)."""

    def __init__(self, payload: Any) -> None:
        from emulator.gpsimd.call import OpCall

        arguments = [(a["kind"], a.get("value")) for a in payload.arguments]
        self._call = OpCall(payload.library, payload.op, arguments, payload.output)
        self.last_counters: dict[str, int] | None = None
        self.last_ncores = 1

    def __call__(self, *args: Any) -> list:
        result = self._call(*args)
        run = self._call.last
        self.last_counters, self.last_ncores = run.counters, run.ncores
        return [result]

    def prime(self, graph: int, run: int) -> None:
        """The program's run-start hook (HandlerContext.run_start): the worker is woken ahead of
        the run's first call (emulator/gpsimd/control.py: a graph's runs)."""
        self._call.prime(graph, run)

    def counters(self) -> tuple[dict[str, int], int] | None:
        """(counters, cores) of the latest execution; None before the first."""
        return None if self.last_counters is None else (self.last_counters, self.last_ncores)


def _gpsimd_run(payload: Any) -> Callable[..., list]:
    return GpSimdCall(payload)


#: payload kind -> loader(payload name, payload bytes, all the artifact's payloads) ->
#: callable(*operands) -> list of results
PAYLOADS: dict[str, Callable[[str, bytes, Sequence[Any]], Callable[..., list]]] = {
    NKI_IR: _nki, GPSIMD: _gpsimd, GPSIMD_OP: _gpsimd_op,
}


@handles("kernel")
def _kernel(ctx: HandlerContext) -> Callable[..., Any]:
    """A kernel payload's callable, prepared once per loaded program (a kernel called several
    times shares it); a runner with counters (GpSimdCall) leaves its probe in the context for the
    profiler."""
    index = ctx.attrs["payload"]
    kernels = ctx.program.kernels
    if not 0 <= index < len(kernels):
        raise ArtifactError(f"instruction {ctx.name}: kernel payload {index} does not exist "
                            f"(the artifact has {len(kernels)})")
    key = ("kernel payload", index)
    run = ctx.program.shared.get(key)
    if run is None:
        payload = kernels[index]
        factory = PAYLOADS.get(payload.kind)
        if factory is None:
            raise ArtifactError(f"kernel payload {payload.name!r} has kind {payload.kind!r}; this "
                                f"emulator runs {sorted(PAYLOADS)}")
        run = ctx.program.shared[key] = factory(payload.name, payload.data, kernels)
    probe = getattr(run, "counters", None)  # GpSimdCall: costs known only after each run
    if callable(probe):
        ctx.counters = probe
    start = getattr(run, "prime", None)  # GpSimdCall: its worker woken as the program's run begins
    if callable(start):
        ctx.run_start = start
    if ctx.type[0] == "tuple":
        return lambda *args: tuple(run(*args))
    return lambda *args: run(*args)[0]
