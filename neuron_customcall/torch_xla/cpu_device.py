"""A clear error when a Neuron custom-call reaches torch_xla's own CPU device (PJRT_DEVICE=CPU).

Why: XLA:CPU can not run ``AwsNeuronCustomNativeKernel`` calls; compiling a graph holding one
fails in XLA's thunk emitter with "Unknown custom-call API version enum value: 0
(API_VERSION_UNSPECIFIED)", which names neither the kernel nor the fix. The call itself must still
be emitted on that device: ``neuron_customcall.torch_xla.mark_step``/``to_cpu`` run such graphs on
the emulator from any torch_xla device. So the error is translated where torch_xla syncs from
Python (``xm.mark_step()``, ``torch_xla.sync()``, ``xm.wait_device_ops``' sync, dynamo's and the
optimizers' syncs all go through ``_xla_step_marker`` / ``_xla_sync_multi``), once a Neuron kernel
has been emitted on a CPU device in this process; until then nothing is wrapped. Reads that
compile from C++ (``.cpu()``, ``.item()``, ``print``) can not be intercepted and raise torch_xla's
own error; if it ends the program, the exception hook (installed at the same moment, chained to
the previous one) prints ours after the traceback.

A framework adapter module: it may import torch_xla.
"""
from __future__ import annotations

import functools
import logging
import sys
import threading
from types import TracebackType
from typing import Any, Callable

import torch_xla
import torch_xla.runtime

from neuron_customcall.kernels.descriptor import DescriptorError, decode

log = logging.getLogger(__name__)

#: The text XLA:CPU's compile error carries for a custom-call of API version 0.
XLA_CPU_MESSAGE = "Unknown custom-call API version enum value: 0"
#: torch_xla's sync entry points reached from Python.
SYNC_FUNCTIONS = ("_xla_step_marker", "_xla_sync_multi")


class NeuronKernelOnCpuDeviceError(RuntimeError):
    """A graph holding Neuron kernels was compiled for torch_xla's CPU device (XLA:CPU)."""


_kernels: dict[str, str] = {}  # backend_config -> kernel name, of calls emitted on a CPU device
_lock = threading.Lock()
_wrapped = False


@functools.lru_cache(maxsize=1)
def _on_cpu_runtime() -> bool:
    """Whether this process's torch_xla runtime is PJRT_DEVICE=CPU (fixed once the runtime runs)."""
    return torch_xla.runtime.device_type() == "CPU"


def note_kernel(config: str) -> None:
    """Records a Neuron custom-call (its backend_config) emitted in this process; on a CPU
    runtime, makes the sync entry points translate XLA:CPU's error."""
    if config in _kernels or not _on_cpu_runtime():
        return
    try:
        name = decode(config).name
    except DescriptorError:
        name = "(a custom-call whose backend_config is not a kernel descriptor)"
    with _lock:
        first = not _kernels
        _kernels[config] = name
        _wrap_sync_functions()
    if first:
        # Said at once: a read that compiles in C++ may abort the interpreter inside XLA:CPU
        # before any of our messages could be shown (docs/troubleshooting.md).
        log.warning("Neuron kernel %r called on torch_xla's CPU device (PJRT_DEVICE=CPU), which "
                    "can not run it: run with PJRT_DEVICE=NEURON, the emulated NeuronCore. On this "
                    "device read results with neuron_customcall.torch_xla.to_cpu()/mark_step(); "
                    "torch.allclose, .cpu() or print of them fail, and can abort the process "
                    "inside XLA:CPU", name)


def message() -> str:
    names = ", ".join(repr(k) for k in dict.fromkeys(_kernels.values())) or "(unknown)"
    return (f"a graph holding Neuron kernel custom-calls (AwsNeuronCustomNativeKernel; kernels emitted on "
            f"this device: {names}) was compiled for torch_xla's CPU device, and XLA:CPU can not run "
            "Neuron kernels. Run with PJRT_DEVICE=NEURON (the emulated NeuronCore), or materialise such "
            "graphs with neuron_customcall.torch_xla.mark_step()/to_cpu() on this device.")


def _translating(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def sync(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (ValueError, RuntimeError) as e:
            if XLA_CPU_MESSAGE in str(e):
                raise NeuronKernelOnCpuDeviceError(message()) from e
            raise

    sync.__wrapped_neuron__ = fn  # type: ignore[attr-defined]
    return sync


def _explaining(previous: Callable[..., Any]) -> Callable[..., Any]:
    def hook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        previous(kind, value, tb)
        if XLA_CPU_MESSAGE in str(value):
            sys.stderr.write(f"\n{NeuronKernelOnCpuDeviceError.__name__}: {message()}\n")

    return hook


def _wrap_sync_functions() -> None:
    """Replaces torch_xla's sync entry points by translating ones and chains the exception hook
    (once; `_lock` held)."""
    global _wrapped
    if _wrapped:
        return
    for attr in SYNC_FUNCTIONS:
        fn = getattr(torch_xla._XLAC, attr)
        if not hasattr(fn, "__wrapped_neuron__"):
            setattr(torch_xla._XLAC, attr, _translating(fn))
    sys.excepthook = _explaining(sys.excepthook)
    _wrapped = True
    log.debug("Neuron kernel on torch_xla's CPU device: its sync errors are translated")
