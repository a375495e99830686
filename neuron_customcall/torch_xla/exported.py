"""When the torch_xla adapter may name kernel images by hash, and torch_xla's HLO getters that
put the images back (kernels/references.py; docs/backend-config.md, "References").

Why: a reference is valid only in this process. HLO that reaches our compiler is expanded there
(the PJRT plugin and backend), but torch_xla also hands HLO to the user: the Python getters
(``_get_xla_tensors_hlo``, ``_get_xla_tensors_text``, ``_get_xla_tensors_hlo_proto``,
``_get_stablehlo``, behind ``xm.get_stablehlo`` and torch_xla's debug tools) are wrapped here to
expand, and ``torch_xla.stablehlo.exported_program_to_stablehlo`` traces with inline images. Dumps
that torch_xla writes from C++ can not be wrapped: with ``XLA_SAVE_TENSORS_FILE`` or an
``--xla_dump_to`` in ``XLA_FLAGS`` set, references are not used at all. Nor are they on
torch_xla's CPU device (XLA:CPU can not run these calls anyway), nor with
``NEURON_CUSTOMCALL_KERNEL_REFS=0``.

A framework adapter module: it may import torch_xla.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
from typing import Any, Callable, Iterator

import torch_xla
import torch_xla.runtime
import torch_xla.stablehlo

from neuron_customcall.kernels import references

log = logging.getLogger(__name__)

#: Set to 0 to emit every kernel's image inline.
ENV = "NEURON_CUSTOMCALL_KERNEL_REFS"
#: The getters of torch_xla's HLO whose results may hold kernel configs.
TEXT_GETTERS = ("_get_xla_tensors_hlo", "_get_xla_tensors_text")

_scope = threading.local()
_installed = False
_install_lock = threading.Lock()


@functools.lru_cache(maxsize=1)
def _settings_allow() -> bool:
    """Whether the environment allows references: not turned off, and torch_xla (or XLA) writes
    no HLO to files from C++, where no reference is expanded. Read once per process (torch_xla
    reads its own settings once too), because it is asked on every custom-call."""
    return os.environ.get(ENV, "1") != "0" and not os.environ.get("XLA_SAVE_TENSORS_FILE") \
        and "xla_dump_to" not in os.environ.get("XLA_FLAGS", "")


@functools.lru_cache(maxsize=1)
def _on_cpu_runtime() -> bool:
    """Whether this process's torch_xla runtime is PJRT_DEVICE=CPU (fixed once it runs)."""
    return torch_xla.runtime.device_type() == "CPU"


def references_allowed() -> bool:
    """Whether a custom-call emitted now may name its image by hash (the module docstring).
    Asked at every C++ custom-call traced: once the process-wide answer is known (it is fixed
    once torch_xla runs, see `_settings_allow`), only this thread's `inline_kernels` scope is
    looked at (0.41 -> 0.1 us a call)."""
    if getattr(_scope, "depth", 0):
        return False
    if _installed:
        return True
    if not _settings_allow() or _on_cpu_runtime():
        return False
    _install()
    return True


@contextlib.contextmanager
def inline_kernels() -> Iterator[None]:
    """Within the block, this thread's custom-calls carry their images inline (HLO traced here is
    self-contained wherever it goes)."""
    _scope.depth = getattr(_scope, "depth", 0) + 1
    try:
        yield
    finally:
        _scope.depth -= 1


def _expanding_text(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def getter(*args: Any, **kwargs: Any) -> Any:
        return references.expand_text(fn(*args, **kwargs))
    return getter


def _expanding_proto(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def getter(*args: Any, **kwargs: Any) -> Any:
        import hlo

        data = fn(*args, **kwargs)
        proto, _ = hlo.read_module_proto(bytes(data))
        return proto.SerializeToString() if references.expand_proto(proto) else data
    return getter


def _expanding_stablehlo(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def getter(*args: Any, **kwargs: Any) -> Any:
        if len(args) != 4 or kwargs:  # not the (tensors, device, devices, bytecode) torch_xla passes
            return fn(*args, **kwargs)
        tensors, device, devices, emit_bytecode = args
        if not emit_bytecode:
            return references.expand_text(fn(tensors, device, devices, False).decode("utf-8")).encode("utf-8")
        text = fn(tensors, device, devices, False).decode("utf-8")
        if any(ref in text for ref in references.emitted()):
            raise NotImplementedError(
                "StableHLO bytecode of a graph whose Neuron C++ kernels name their library image by hash "
                "(valid in this process only): trace the graph inside "
                "neuron_customcall.torch_xla.exported.inline_kernels(), or run with "
                f"{ENV}=0, to export it self-contained (xm.get_stablehlo gives the text form as it is)")
        return fn(tensors, device, devices, True)
    return getter


def _install() -> None:
    """Wraps torch_xla's HLO getters (once per process, before the first reference is emitted)."""
    global _installed
    with _install_lock:
        if _installed:
            return
        xlac = torch_xla._XLAC
        for name in TEXT_GETTERS:
            setattr(xlac, name, _expanding_text(getattr(xlac, name)))
        xlac._get_xla_tensors_hlo_proto = _expanding_proto(xlac._get_xla_tensors_hlo_proto)
        xlac._get_stablehlo = _expanding_stablehlo(xlac._get_stablehlo)
        export = torch_xla.stablehlo.exported_program_to_stablehlo

        @functools.wraps(export)
        def exported_program_to_stablehlo(*args: Any, **kwargs: Any) -> Any:
            with inline_kernels():
                return export(*args, **kwargs)

        torch_xla.stablehlo.exported_program_to_stablehlo = exported_program_to_stablehlo
        _installed = True
        log.debug("torch_xla's HLO getters expand kernel image references")
