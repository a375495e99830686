"""Registration of a loaded library's ops as torch.ops.<lib>.<op>.

Each op gets a schema from its registered argument kinds, a CPU kernel that runs the compute
function on the emulated GpSimd engine, and a fake (Meta) kernel that runs the shape function, so
torch.compile and torch.export can trace it. Kernels look the library up by name at call time, so
reloading a rebuilt library with the same signatures takes effect without re-registering.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any, Callable

import numpy as np
import torch

from emulator import host
from emulator.gpsimd import OpDescriptor, TensorSpec, call, protocol
from emulator.gpsimd.runner import TensorValue
from neuron_customcall import torch_dtypes
from neuron_customcall.cpp import loader
from neuron_customcall.cpp.errors import BuildError

log = logging.getLogger(__name__)

#: torch dtype -> GpSimd dtype name, for the types the GpSimd runtime has (the torch table).
TORCH_DTYPES: dict[torch.dtype, str] = {t: n for n, t in torch_dtypes.BY_GPSIMD.items()}
DTYPE_NAMES: dict[str, torch.dtype] = torch_dtypes.BY_GPSIMD

# Argument kind -> schema type.
SCHEMA_TYPES = {"tensor": "Tensor", "scalar": "Scalar", "double": "float", "int64": "int"}

_LIBRARIES: dict[str, torch.library.Library] = {}
_SCHEMAS: dict[str, str] = {}
#: Callbacks (library object, library name, op name) giving each op more kernels: the torch_xla
#: adapter adds its XLA kernel this way (so that loading a library never imports torch_xla).
_REGISTRARS: list[Callable[[torch.library.Library, str, str], None]] = []


def add_registrar(registrar: Callable[[torch.library.Library, str, str], None]) -> None:
    """Calls `registrar` for every op registered so far and every op registered later."""
    _REGISTRARS.append(registrar)
    for qualified in _SCHEMAS:
        library, name = qualified.split("::", 1)
        registrar(_LIBRARIES[library], library, name)


def schema(op: OpDescriptor, names: Sequence[str] | None = None) -> str:
    """The op's torch schema; arguments carry `names` (the C++ parameter names, cpp/param_names.py)
    or, without them, the positional ``a0, a1, ...``."""
    names = names if names is not None and len(names) == len(op.args) else [f"a{k}" for k in range(len(op.args))]
    params = ", ".join(f"{SCHEMA_TYPES[kind]} {name}" for kind, name in zip(op.args, names))
    return f"{op.name}({params}) -> Tensor"


def _types(text: str) -> str:
    """A schema without its argument names: what a reload must keep (torch can not redefine an
    op, but a parameter renamed in the source is no reason to refuse the rebuilt library)."""
    return re.sub(r"(\w+) \w+(?=[,)])", r"\1", text)


def tensor_spec(t: torch.Tensor, op: OpDescriptor) -> TensorSpec:
    if t.dtype not in TORCH_DTYPES:
        raise TypeError(f"op '{op.library}::{op.name}': dtype {t.dtype} is not supported on GpSimd "
                        f"(supported: {', '.join(map(str, TORCH_DTYPES))})")
    return TensorSpec(TORCH_DTYPES[t.dtype], tuple(t.shape))


def _specs(op: OpDescriptor, args: tuple) -> list[Any]:
    return [tensor_spec(a, op) if kind == "tensor" else a for kind, a in zip(op.args, args)]


#: Below this many bytes a copy into the arena is never split over threads (torch's own grain).
_PARALLEL_COPY_BYTES = 256 * 1024


def _value(t: torch.Tensor, spec: TensorSpec) -> TensorValue:
    """An input passed where it is when it already lives in shared memory (the output of an
    earlier op), else one copied straight into the runner's arena: by torch, over its threads,
    when other processes leave us more than one core free, else by one thread (NumPy). Strided
    sources (an expanded gradient) always take torch's copy.

    Why not always torch's parallel copy: beside a busy process on a 2-core host, its second
    thread is descheduled and the copy waits for it; a 4 MB input then took 0.14 ms at best but
    12-16 ms in one copy of ten, against a steady 0.27 ms on one thread (measured here)."""
    if t.is_contiguous() and spec.nbytes:
        found = protocol.locate(t.data_ptr(), spec.nbytes)
        if found is not None:
            return TensorValue(spec, None, location=found)
    source = t.detach().reshape(-1)

    def write(slot: memoryview) -> None:
        if not len(slot):
            return
        if not source.is_contiguous() or (len(slot) >= _PARALLEL_COPY_BYTES and host.free_cpus() > 1):
            target = torch.frombuffer(slot, dtype=source.dtype)
            target.copy_(source)
            del target
        else:
            np.copyto(np.frombuffer(slot, dtype=np.uint8), source.view(torch.uint8).numpy())

    return TensorValue(spec, write)


def _cpu_kernel(library: str, name: str) -> Callable[..., torch.Tensor]:
    def kernel(*args: Any) -> torch.Tensor:
        loaded = loader.get(library)
        op = loaded.descriptor.op(name)
        specs = _specs(op, args)
        out = loaded.host.shape(op, specs)
        arguments = [(kind, None if kind == "tensor" else a) for kind, a in zip(op.args, args)]
        tensors = [_value(a, s) for kind, a, s in zip(op.args, args, specs) if kind == "tensor"]
        result = call.invoke(loaded.runner, op, arguments, tensors, out)
        loaded.last_runs[name] = result
        if not out.nbytes:
            return torch.empty(out.shape, dtype=DTYPE_NAMES[out.dtype])
        # Zero-copy: the tensor views the output's shared memory and keeps it alive.
        return torch.from_numpy(result.output).view(DTYPE_NAMES[out.dtype]).reshape(out.shape)

    kernel.__name__ = f"{library}_{name}_gpsimd"
    return kernel


def _fake_kernel(library: str, name: str) -> Callable[..., torch.Tensor]:
    def fake(*args: Any) -> torch.Tensor:
        loaded = loader.get(library)
        op = loaded.descriptor.op(name)
        out = loaded.host.shape(op, _specs(op, args))
        device = next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("meta"))
        return torch.empty(out.shape, dtype=DTYPE_NAMES[out.dtype], device=device)

    fake.__name__ = f"{library}_{name}_shape"
    return fake


def register(loaded: loader.LoadedLibrary, arg_names: Mapping[str, Sequence[str]] | None = None) -> None:
    """Defines every op of the library under torch.ops.<lib>, once per op and schema; `arg_names`
    (op name -> C++ parameter names) names the schema's arguments."""
    desc = loaded.descriptor
    lib = _LIBRARIES.get(desc.library)
    if lib is None:
        lib = torch.library.Library(desc.library, "FRAGMENT")
        _LIBRARIES[desc.library] = lib
    for op in desc.ops:
        qualified = f"{desc.library}::{op.name}"
        text = schema(op, (arg_names or {}).get(op.name))
        if qualified in _SCHEMAS:
            if _types(_SCHEMAS[qualified]) != _types(text):
                raise BuildError(f"op {qualified} was loaded before as {_SCHEMAS[qualified]}; it can "
                                 f"not change to {text} in the same process")
            continue
        lib.define(text)
        lib.impl(op.name, _cpu_kernel(desc.library, op.name), "CPU")
        torch.library.register_fake(qualified, _fake_kernel(desc.library, op.name), lib=lib)
        _SCHEMAS[qualified] = text
        for registrar in _REGISTRARS:
            registrar(lib, desc.library, op.name)
        log.debug("registered torch.ops.%s.%s", desc.library, op.name)
