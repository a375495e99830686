"""NKI kernels on JAX arrays: ``nki_call`` and ``kernel[grid](jax_arrays)``.

Inside ``jax.jit`` a kernel call becomes one HLO custom-call with target
``AwsNeuronCustomNativeKernel`` and ``api_version=API_VERSION_STATUS_RETURNING`` whose
backend_config is the kernel descriptor (docs/backend-config.md); our backend inlines the kernel.
Concrete arrays outside jit run on the emulator. Rules of the primitive: jax/primitive.py.

    c = nki_tensor_add_kernel_[2, 2](a, b)                  # inside jax.jit
    c = nki_call(kernel, a, b, grid=(2, 2), out_shape=jax.ShapeDtypeStruct(a.shape, a.dtype))
"""
from __future__ import annotations

from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from emulator.kernel_exec import run_kernel
from neuron_customcall.jax.primitive import KernelRef, is_array, make_primitive
from neuron_customcall.kernels import build, dtypes
from neuron_customcall.nki import NKIError
from neuron_customcall.nki.jit import Kernel, register_framework

nki_call_p = make_primitive("nki_call")


def _spec(x: Any) -> Any:
    return build.nki_spec(x.shape, dtypes.hlo_name_of(x.dtype)) if is_array(x) else x


def _structs(out_shape: Any) -> list[Any]:
    if out_shape is None:
        return []
    return list(out_shape) if isinstance(out_shape, (tuple, list)) else [out_shape]


def _kernel_ref(call: build.NkiCall) -> KernelRef:
    program = call.traced.program

    def batched(size: int) -> KernelRef | None:
        whole = build.batched_nki_call(call, size)
        return None if whole is None else _ref_of(whole)

    return KernelRef(call.traced.ir.name, call.config, call.outputs,
                     lambda arrays: run_kernel(program, arrays), batched, tuple(call.traced.ir.grid))


_REFS: dict[int, tuple[build.NkiCall, KernelRef]] = {}


def _ref_of(call: build.NkiCall) -> KernelRef:
    """One KernelRef per traced call, so that repeated calls hit JAX's caches."""
    hit = _REFS.get(id(call))
    if hit is None or hit[0] is not call:
        hit = _REFS[id(call)] = (call, _kernel_ref(call))
    return hit[1]


def nki_call(kernel: Kernel | Any, *args: Any, grid: int | Sequence[int] = (1,),
             out_shape: Any = None, **kwargs: Any) -> Any:
    """Call an NKI kernel on JAX arrays (under jit: one custom-call).

    ``kernel`` is an ``nki.jit`` kernel or a plain kernel function; non-array arguments are
    static. ``out_shape`` (a ``jax.ShapeDtypeStruct`` or a sequence of them), if given, is checked
    against the kernel's results; a kernel that takes its outputs as trailing parameters and
    returns nothing (the SDK's older style) gets them allocated from ``out_shape``.
    """
    kernel = kernel if isinstance(kernel, Kernel) else Kernel(kernel)
    grid = tuple(int(g) for g in (grid if isinstance(grid, (tuple, list)) else (grid,)))
    structs = _structs(out_shape)
    required = [p for p in kernel.signature.parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    if structs and not kwargs and len(required) == len(args) + len(structs):
        args = (*args, *(jnp.zeros(s.shape, s.dtype) for s in structs))  # outputs as parameters
    call = build.nki_call(kernel, grid, [_spec(a) for a in args],
                          {k: _spec(v) for k, v in kwargs.items()})
    named = build.bind_tensors(kernel, args, kwargs)
    outs = nki_call_p.bind(*[jnp.asarray(named[n]) for n in call.operands], **_ref_of(call).params())
    if structs:
        got = [(tuple(o.shape), np.dtype(o.dtype)) for o in outs]
        want = [(tuple(s.shape), np.dtype(s.dtype)) for s in structs]
        if got != want:
            raise NKIError(f"kernel {kernel.func.__name__!r}: out_shape {want} disagrees with the "
                           f"kernel's results {got}")
    if call.returns == "tuple" or len(outs) > 1 or isinstance(out_shape, (tuple, list)):
        return tuple(outs)
    return outs[0]


def _accepts(args: Sequence[Any]) -> bool:
    return any(isinstance(a, (jax.Array, jax.core.Tracer)) for a in args)


def _run(kernel: Kernel, grid: tuple[int, ...], args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    return nki_call(kernel, *args, grid=grid, **kwargs)


register_framework(_accepts, _run)
__all__ = ["nki_call", "nki_call_p"]
