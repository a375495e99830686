"""Test helper: run a JAX function or a torch_xla graph through our backend and through XLA:CPU.

    ours, ref = run_jax(f, *args)         # lists of NumPy arrays (leaves of the result)
    assert_close(ours, ref)               # bit-exact for integers and bools, per-dtype tolerances

The reference is XLA:CPU itself: `jax.jit(f)` on `jax.devices("cpu")` for JAX; for torch_xla,
`.cpu()` of the lazy tensors on the PJRT CPU device. Ours is compile_module(hlo.load(proto)) ->
load_artifact -> run (the direct path, as the suite runs these tests) or, with
NEURON_DIFF_THROUGH_PLUGIN=1 in a process whose JAX has the neuron PJRT device
(JAX_PLATFORMS=neuron,cpu: tests/neuron_customcall/pjrt/test_diff_through_plugin.py), the same
programs through the plugin: jax.jit on the neuron device, and HLO modules compiled and run by its
PJRT client. The oracle is the CPU device named explicitly, since neuron is then JAX's default.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("PJRT_DEVICE", "CPU")

import hlo  # noqa: E402
from emulator import load_artifact  # noqa: E402
from neuron_customcall.compiler import CompileFlags, compile_module  # noqa: E402

#: (rtol, atol) per float dtype name.
TOLERANCES = {"float64": (1e-9, 1e-9), "float32": (2e-5, 2e-5), "float16": (2e-3, 2e-3),
              "bfloat16": (2e-2, 2e-2), "complex64": (2e-5, 2e-5), "complex128": (1e-9, 1e-9)}


def through_plugin() -> bool:
    """Whether "ours" runs on the neuron PJRT device (see the module docstring)."""
    return os.environ.get("NEURON_DIFF_THROUGH_PLUGIN", "") == "1"


class _PluginExecutable:
    """A module compiled by the direct path (its compile errors and artifact stay what the tests
    check) whose `run` goes through the neuron PJRT plugin: compiled there too, on first run."""

    def __init__(self, proto: bytes, direct: Any) -> None:
        self._proto = proto
        self._direct = direct
        self._plugin: Any = None

    def run(self, inputs: Sequence[Any]) -> list[np.ndarray]:
        """The outputs as the direct path gives them (writeable copies: the caller-owned outputs
        of Executable.run are the direct path's contract, checked where the suite runs it)."""
        if self._plugin is None:
            self._plugin = _plugin_executable(self._proto)
        return [np.array(o) for o in self._plugin.run([np.asarray(x) for x in inputs])]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._direct, name)


#: jaxlib's own error when it can not serialize a module for a PJRT plugin (StableHLO portable
#: artifact), raised in the framework before the plugin sees anything: modules holding HLO-only
#: constructs (bitcast, domain, scan, add-dependency, copy of a tuple) reach a plugin only as HLO
#: protos (torch_xla's way), which jaxlib's client does not send.
CLIENT_CANNOT_SERIALIZE = "CHLO => [StableHLO+Shape] => StableHLO failed"
SKIP_REASON = "HLO-only module: jaxlib can not send it to a PJRT plugin as StableHLO"


def _plugin_executable(proto: bytes) -> Any:
    import pytest

    from neuron_customcall.jax.xla_cpu import PjrtHloExecutable

    try:
        return PjrtHloExecutable(proto, "neuron")
    except Exception as e:  # noqa: BLE001 - jaxlib's JaxRuntimeError
        if CLIENT_CANNOT_SERIALIZE in str(e):
            pytest.skip(SKIP_REASON)
        raise


def compile_proto(proto: bytes, flags: CompileFlags | None = None) -> Any:
    exe = load_artifact(compile_module(hlo.load(proto), flags))
    return _PluginExecutable(bytes(proto), exe) if through_plugin() and flags is None else exe


def jax_proto(f: Callable[..., Any], *args: Any) -> bytes:
    """The HLO of `f` for our backend: kernel calls as Neuron custom-calls (plain jax.jit on the
    CPU platform would lower them to XLA:CPU host callbacks)."""
    import jax

    from neuron_customcall.jax.primitive import neuron_lowering

    with neuron_lowering():
        return jax.jit(f, keep_unused=True).lower(*args).compiler_ir("hlo").as_serialized_hlo_module_proto()


def _leaves(x: Any) -> list[np.ndarray]:
    import jax

    return [np.asarray(v) for v in jax.tree_util.tree_leaves(x)]


def run_jax(f: Callable[..., Any], *args: Any, x64: bool = False) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(ours, XLA:CPU's) outputs of f(*args), as leaves in order (x64: with jax_enable_x64)."""
    import jax

    with jax.enable_x64(x64):
        cpu = jax.devices("cpu")[0]
        ref = _leaves(jax.jit(f, keep_unused=True)(*jax.device_put(args, cpu)))
        if through_plugin():
            (neuron,) = jax.devices("neuron")[:1]
            out = jax.jit(f, keep_unused=True)(*jax.device_put(args, neuron))
            assert all(d.platform == "neuron" for leaf in jax.tree_util.tree_leaves(out) for d in leaf.devices())
            return _leaves(out), ref
        exe = compile_proto(jax_proto(f, *args))
    flat = [np.asarray(a) for a in jax.tree_util.tree_leaves(args)]
    return exe.run(flat), ref


def case(name: str, f: Callable[..., Any], *args: Any, x64: bool = False, rtol: float | None = None,
         atol: float | None = None) -> Any:
    """A pytest parameter for `check_case`: one function with its example arguments."""
    import pytest

    return pytest.param(f, args, x64, rtol, atol, id=name)


CASE_ARGS = "f,args,x64,rtol,atol"


def check_case(f: Callable[..., Any], args: Sequence[Any], x64: bool, rtol: float | None, atol: float | None) -> None:
    ours, ref = run_jax(f, *args, x64=x64)
    assert_close(ours, ref, rtol, atol)


def rand(*shape: int, dtype: Any = np.float32, seed: int = 0, scale: float = 1.0, low: float | None = None,
         high: float | None = None) -> np.ndarray:
    """Reproducible test data: normal floats (or uniform in [low, high)), or integers in a range."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        lo = int(low) if low is not None else max(info.min, -100)
        hi = int(high) if high is not None else min(info.max, 100)
        return rng.integers(lo, hi, size=shape, endpoint=True).astype(dt)
    if dt == np.bool_:
        return rng.random(shape) < 0.5
    if low is not None:
        return rng.uniform(low, high, size=shape).astype(dt)
    return (rng.standard_normal(shape) * scale).astype(dt)


def run_torch_xla(build: Callable[[Any], Sequence[Any]]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """build(device) -> output tensors; ours runs the LoweringContext HLO on the same parameters."""
    import torch_xla

    dev = torch_xla.device()
    outs = list(build(dev))
    ctx = torch_xla._XLAC.lowering.LoweringContext()
    ctx.build(outs)
    proto = ctx.hlo()
    mapping = ctx.parameter_id_tensor_mapping()
    inputs = [_to_numpy(mapping[k].cpu()) for k in sorted(mapping)]
    ref = [_to_numpy(o.cpu()) for o in outs]
    exe = compile_proto(proto)
    ours = exe.run(inputs)
    # torch_xla computes some integer results (indices) in s32/u32 and widens them to int64 when it
    # copies them to the CPU; compare in the HLO's type (the widening must have been lossless)
    for k, (o, r) in enumerate(zip(ours, ref)):
        if o.dtype != r.dtype and o.dtype.kind in "iu" and r.dtype.kind in "iu":
            narrowed = r.astype(o.dtype)
            assert np.array_equal(narrowed.astype(r.dtype), r), f"output {k}: {r.dtype} values do not fit {o.dtype}"
            ref[k] = narrowed
    return ours, ref


def _to_numpy(t: Any) -> np.ndarray:
    import torch

    t = t.detach()
    if t.dtype == torch.bfloat16:
        import ml_dtypes

        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def assert_close(ours: Sequence[np.ndarray], ref: Sequence[np.ndarray], rtol: float | None = None,
                 atol: float | None = None) -> None:
    assert len(ours) == len(ref), f"{len(ours)} outputs, XLA gave {len(ref)}"
    for k, (a, b) in enumerate(zip(ours, ref)):
        b = np.asarray(b)
        assert a.shape == b.shape, f"output {k}: shape {a.shape} vs XLA {b.shape}"
        assert a.dtype == b.dtype, f"output {k}: dtype {a.dtype} vs XLA {b.dtype}"
        name = a.dtype.name
        if name in TOLERANCES:
            r, t = TOLERANCES[name]
            r, t = rtol if rtol is not None else r, atol if atol is not None else t
            wide = np.complex128 if a.dtype.kind == "c" else np.float64
            np.testing.assert_allclose(a.astype(wide), b.astype(wide), rtol=r, atol=t, equal_nan=True,
                                       err_msg=f"output {k}")
        else:
            np.testing.assert_array_equal(a, b, err_msg=f"output {k}")
