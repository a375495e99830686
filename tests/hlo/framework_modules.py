"""A registry of real HLO modules produced by JAX and torch_xla, for tests that need live input.

Why: readers, the IR and the compiler must be tested on what the frameworks really emit, not on
hand-written protos. Each entry is a small function that builds one graph; the registry lowers it
and returns the serialized HloModuleProto bytes (and, for torch_xla, also the protobuf text and
JSON that torch_xla prints for the same module). Results are cached per process.

Adding a graph::

    @jax_module("jax/my_case")
    def _my_case():
        import jax.numpy as jnp
        return (lambda x: jnp.tanh(x) * 2), (np.ones((4,), np.float32),)

    @torch_xla_module("torch_xla/my_case")
    def _my_case_t(dev):
        x = _t(dev, (4, 4))
        return [x.tanh() * 2]

A JAX builder returns ``(function, example_args)``; the function is lowered with ``jax.jit``. A
torch_xla builder receives the XLA device and returns the output tensors to lower. Imports of the
frameworks stay inside builders, so importing this module is cheap.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# The frameworks read these at import time; tests must never look for accelerators.
os.environ.setdefault("PJRT_DEVICE", "CPU")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

JAX = "jax"
TORCH_XLA = "torch_xla"


@dataclass(frozen=True)
class Lowered:
    """One module as the framework gave it: binary proto, and text forms where it offers them."""

    proto: bytes
    text: str | None = None  # protobuf text format (torch_xla's LoweringContext.hlo_text())
    # protobuf JSON (torch_xla's LoweringContext.hlo_json()); note that Python's json_format refuses
    # the "-3.40282347e+38" XLA prints for the lowest float, so parse it with care.
    json: str | None = None
    # HLO text as the framework prints it (JAX as_hlo_text(), torch_xla _get_xla_tensors_hlo()).
    hlo_text: str | None = None


@dataclass(frozen=True)
class FrameworkModule:
    """A registry entry: a name, the framework that produces it, and how to lower it."""

    name: str
    framework: str
    lower: Callable[[], Lowered]


REGISTRY: dict[str, FrameworkModule] = {}


def _register(name: str, framework: str, lower: Callable[[], Lowered]) -> None:
    if name in REGISTRY:
        raise ValueError(f"framework module {name!r} registered twice")
    REGISTRY[name] = FrameworkModule(name, framework, functools.cache(lower))


def names(framework: str | None = None) -> list[str]:
    """Registered module names, optionally only those of one framework (JAX or TORCH_XLA)."""
    return sorted(n for n, m in REGISTRY.items() if framework in (None, m.framework))


def lowered(name: str) -> Lowered:
    """All forms of the named module (cached)."""
    return REGISTRY[name].lower()


def serialized(name: str) -> bytes:
    """The named module as serialized HloModuleProto bytes (cached)."""
    return lowered(name).proto


# --------------------------------------------------------------------------------------------
# JAX


JaxBuilder = Callable[[], tuple[Callable[..., Any], Sequence[Any]]]


def jax_module(name: str) -> Callable[[JaxBuilder], JaxBuilder]:
    """Register a builder returning (function, example_args); it is lowered with jax.jit."""

    def register(builder: JaxBuilder) -> JaxBuilder:
        def lower() -> Lowered:
            import jax

            fn, args = builder()
            ir = jax.jit(fn).lower(*args).compiler_ir("hlo")
            return Lowered(proto=ir.as_serialized_hlo_module_proto(), hlo_text=ir.as_hlo_text(print_large_constants=True))

        _register(name, JAX, lower)
        return builder

    return register


def _f32(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@jax_module("jax/mlp_grad")
def _jax_mlp_grad() -> tuple[Callable[..., Any], Sequence[Any]]:
    import jax
    import jax.numpy as jnp

    def loss(w1, w2, x):
        h = jax.nn.relu(x @ w1)
        return jnp.mean(jax.nn.log_softmax(h @ w2))

    return jax.grad(loss, argnums=(0, 1)), (_f32(8, 16), _f32(16, 4, seed=1), _f32(2, 8, seed=2))


@jax_module("jax/while_loop")
def _jax_while_loop() -> tuple[Callable[..., Any], Sequence[Any]]:
    from jax import lax

    def f(x, n):
        return lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 1.5), (0, x))[1]

    return f, (_f32(4), np.int32(5))


@jax_module("jax/conv")
def _jax_conv() -> tuple[Callable[..., Any], Sequence[Any]]:
    from jax import lax

    def f(x, k):
        return lax.conv_general_dilated(
            x, k, window_strides=(2, 1), padding="SAME", rhs_dilation=(1, 2),
            dimension_numbers=("NCHW", "OIHW", "NCHW"),
        )

    return f, (_f32(1, 3, 8, 8), _f32(4, 3, 3, 3, seed=1))


@jax_module("jax/gather_scatter")
def _jax_gather_scatter() -> tuple[Callable[..., Any], Sequence[Any]]:
    def f(x, idx):
        return x[idx].sum(0) + x.at[idx].add(1.0)[0]

    return f, (_f32(6, 5), np.array([3, 0, 5], np.int32))


@jax_module("jax/sort")
def _jax_sort() -> tuple[Callable[..., Any], Sequence[Any]]:
    from jax import lax

    def f(keys, vals):
        return lax.sort((keys, vals), dimension=0, num_keys=1, is_stable=True)

    return f, (_f32(7), np.arange(7, dtype=np.int32))


@jax_module("jax/custom_vjp")
def _jax_custom_vjp() -> tuple[Callable[..., Any], Sequence[Any]]:
    import jax
    import jax.numpy as jnp

    @jax.custom_vjp
    def clip_grad(x):
        return jnp.sin(x)

    clip_grad.defvjp(
        lambda x: (jnp.sin(x), jnp.cos(x)),
        lambda cos_x, g: (jnp.clip(g * cos_x, -0.5, 0.5),),
    )
    return jax.grad(lambda x: clip_grad(x).sum()), (_f32(5),)


@jax_module("jax/custom_call")
def _jax_custom_call() -> tuple[Callable[..., Any], Sequence[Any]]:
    """An FFI custom-call with our target name: lowering needs no registration."""
    import jax

    def f(x):
        out = jax.ffi.ffi_call(
            "AwsNeuronCustomNativeKernel", jax.ShapeDtypeStruct(x.shape, x.dtype)
        )(x, kernel=np.int64(7))
        return out * 2

    return f, (_f32(4, 4),)


# --------------------------------------------------------------------------------------------
# torch_xla


TorchXlaBuilder = Callable[[Any], Sequence[Any]]


def torch_xla_module(name: str) -> Callable[[TorchXlaBuilder], TorchXlaBuilder]:
    """Register a builder taking the XLA device and returning output tensors to lower."""

    def register(builder: TorchXlaBuilder) -> TorchXlaBuilder:
        def lower() -> Lowered:
            import torch_xla

            outputs = list(builder(torch_xla.device()))
            ctx = torch_xla._XLAC.lowering.LoweringContext()
            ctx.build(outputs)
            return Lowered(proto=ctx.hlo(), text=ctx.hlo_text(), json=ctx.hlo_json(),
                           hlo_text=torch_xla._XLAC._get_xla_tensors_hlo(outputs))

        _register(name, TORCH_XLA, lower)
        return builder

    return register


def _t(dev: Any, shape: tuple[int, ...], seed: int = 0) -> Any:
    """A device tensor with fixed values (a graph parameter, not an in-graph RNG)."""
    import torch

    return torch.from_numpy(_f32(*shape, seed=seed)).to(dev)


@torch_xla_module("torch_xla/linear_relu")
def _tx_linear_relu(dev: Any) -> Sequence[Any]:
    import torch

    x, w, b = _t(dev, (4, 8)), _t(dev, (16, 8), 1), _t(dev, (16,), 2)
    y = torch.nn.functional.linear(x, w, b).relu()
    return [y.softmax(-1), y.sum(0)]


@torch_xla_module("torch_xla/conv2d")
def _tx_conv2d(dev: Any) -> Sequence[Any]:
    import torch

    x, k = _t(dev, (1, 3, 8, 8)), _t(dev, (4, 3, 3, 3), 1)
    return [torch.nn.functional.max_pool2d(torch.nn.functional.conv2d(x, k, padding=1), 2)]


@torch_xla_module("torch_xla/index_sort")
def _tx_index_sort(dev: Any) -> Sequence[Any]:
    import torch

    x = _t(dev, (6, 5))
    idx = torch.tensor([4, 1, 1], device=dev)
    vals, order = torch.sort(x[idx], dim=-1)
    return [vals, order, torch.topk(x, 2).values]


@torch_xla_module("torch_xla/custom_call")
def _tx_custom_call(dev: Any) -> Sequence[Any]:
    import torch
    from torch_xla.experimental.stablehlo_custom_call import stablehlo_custom_call

    x = _t(dev, (4, 4))
    out = stablehlo_custom_call(  # one output shape: returns the tensor itself
        [x], "AwsNeuronCustomNativeKernel", [[4, 4]], [torch.float32],
        backend_config="e30=", has_side_effect=True,
        frontend_attributes={"neuron_kernel": "demo"},
    )
    return [out + 1]
