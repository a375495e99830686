"""The JAX primitives of Neuron kernels: one custom-call each, whatever the kernel's kind.

Why one module for both kinds: an NKI kernel and a C++ (GpSimd) op look the same to JAX: operands
in, arrays out, a backend_config (the kernel descriptor) and an eager way to run on concrete
arrays. ``KernelRef`` carries exactly that; ``make_primitive`` gives a primitive with abstract
evaluation, the custom-call lowering (``API_VERSION_STATUS_RETURNING``, as the SDK's JAX path
emits), a ``vmap`` rule (the kernel batched along a new grid axis when it offers that, else one
call per batch element, stacked) and an eager implementation. Differentiating a kernel call is
an error that points to ``jax.custom_vjp``, the seed's way to train through a kernel.

On JAX's own CPU backend (``JAX_PLATFORMS=cpu``, ``jax.devices("cpu")``) XLA:CPU has no
implementation of the Neuron custom-call ("No registered implementation for untyped custom call
to AwsNeuronCustomNativeKernel for Host"), so there a kernel call lowers to JAX's host callback
instead: the kernel runs on the emulator with the call's NumPy operands, the rest of the program
on XLA:CPU, and a kernel error reaches the caller as JAX's runtime error carrying ours. Lowering
*for our backend* on a CPU host (neuron_customcall.jax.jit; tests that read the HLO) keeps the
custom-call: that code runs inside ``neuron_lowering()``.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax._src import config as jax_config
from jax._src.interpreters import mlir
from jax.extend.core import Primitive
from jax.interpreters import ad, batching

from neuron_customcall.kernels import dtypes
from neuron_customcall.kernels.descriptor import TARGET, TensorSig

API_VERSION_STATUS_RETURNING = 2

#: True while a program is lowered for our backend rather than for XLA:CPU (see the docstring).
#: A JAX configuration state, not a plain context variable: JAX caches traces and lowerings, and
#: only configuration in the trace context is part of those caches' keys, so a program lowered
#: both ways keeps two entries instead of handing one the other's module.
_FOR_NEURON = jax_config.bool_state(
    "neuron_customcall_lowering", False,
    "Lower Neuron kernel calls as custom-calls for neuron_customcall's backend even for the CPU "
    "platform (set by neuron_customcall.jax.jit; not for users)",
    include_in_jit_key=True, include_in_trace_context=True)


@contextlib.contextmanager
def neuron_lowering() -> Iterator[None]:
    """Within it, kernel calls lowered for the "cpu" platform stay Neuron custom-calls (for
    neuron_customcall's backend) instead of host callbacks (for XLA:CPU)."""
    with _FOR_NEURON(True):
        yield


@dataclass(eq=False)
class KernelRef:
    """A primitive parameter: one traced kernel call. Hashed and compared by identity, so JAX's
    caches key on it without hashing the kernel. ``run`` executes it on NumPy arrays."""

    name: str
    config: str
    outputs: tuple[TensorSig, ...]
    run: Callable[[list[np.ndarray]], list[np.ndarray]]
    #: The same call on `size` stacked operand sets as one kernel, if the kernel can (vmap).
    batched: Callable[[int], "KernelRef | None"] | None = None
    grid: tuple[int, ...] = (1,)

    def __repr__(self) -> str:
        return self.name

    def avals(self) -> tuple[jax.core.ShapedArray, ...]:
        return tuple(jax.core.ShapedArray(o.shape, dtypes.HLO_DTYPES[o.dtype]) for o in self.outputs)

    def params(self) -> dict[str, Any]:
        """The primitive's parameters: the call, plus its grid and result shapes, which only show
        in the HLO metadata (``nki_call[func=... grid=(2, 2) out_shape=(...)]`` as on the SDK)."""
        structs = tuple(jax.ShapeDtypeStruct(o.shape, dtypes.HLO_DTYPES[o.dtype]) for o in self.outputs)
        return {"func": self, "grid": self.grid, "out_shape": structs}


def make_primitive(name: str) -> Primitive:
    """A multiple-results primitive whose parameters are ``KernelRef.params()``."""
    prim = Primitive(name)
    prim.multiple_results = True

    def abstract_eval(*args: Any, func: KernelRef, **_: Any) -> tuple:
        return func.avals()

    def impl(*args: Any, func: KernelRef, **_: Any) -> list:
        return [jnp.asarray(o) for o in func.run([np.asarray(a) for a in args])]

    def lowering(ctx: Any, *args: Any, func: KernelRef, **_: Any) -> Any:
        types = [mlir.aval_to_ir_type(ctx.module_context, a) for a in ctx.avals_out]
        op = mlir.custom_call(TARGET, result_types=types, operands=list(args),
                              backend_config=func.config, api_version=API_VERSION_STATUS_RETURNING)
        return op.results

    def batch(args: Sequence[Any], dims: Sequence[Any], *, func: KernelRef, **params: Any) -> tuple[list, list]:
        size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
        moved = [a if d is None else jnp.moveaxis(a, d, 0) for a, d in zip(args, dims)]
        whole = func.batched(size) if func.batched is not None else None
        if whole is not None:  # one kernel with a batch grid axis
            stacked = [jnp.broadcast_to(a, (size, *a.shape)) if d is None else a for a, d in zip(moved, dims)]
            outs = prim.bind(*stacked, **whole.params())
            return list(outs), [0] * len(outs)
        rows = [prim.bind(*[a if d is None else a[i] for a, d in zip(moved, dims)], func=func, **params)
                for i in range(size)]
        outs = [jnp.stack([r[k] for r in rows]) for k in range(len(rows[0]))]
        return outs, [0] * len(outs)

    def jvp(primals: Sequence[Any], tangents: Sequence[Any], *, func: KernelRef, **_: Any) -> Any:
        raise TypeError(f"kernel {func.name} has no derivative of its own: differentiate it "
                        "through jax.custom_vjp with a backward kernel or function (as in the "
                        "NKI custom-op guide)")

    def cpu_lowering(ctx: Any, *args: Any, func: KernelRef, **params: Any) -> Any:
        if _FOR_NEURON.value:
            return lowering(ctx, *args, func=func, **params)
        shapes = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in ctx.avals_out]

        def host(*arrays: Any) -> tuple:
            outs = func.run([np.asarray(a) for a in arrays])
            return tuple(np.asarray(o, dtype=s.dtype) for o, s in zip(outs, shapes))

        def call(*xs: Any) -> Any:
            return jax.pure_callback(host, shapes, *xs, vmap_method="sequential")

        return mlir.lower_fun(call, multiple_results=True)(ctx, *args)

    prim.def_abstract_eval(abstract_eval)
    ad.primitive_jvps[prim] = jvp
    prim.def_impl(impl)
    mlir.register_lowering(prim, lowering)
    mlir.register_lowering(prim, cpu_lowering, platform="cpu")
    batching.primitive_batchers[prim] = batch
    return prim


def is_array(x: Any) -> bool:
    """A JAX array, tracer or shape struct: a tensor argument of a kernel."""
    return isinstance(x, (jax.Array, jax.core.Tracer, jax.ShapeDtypeStruct))
