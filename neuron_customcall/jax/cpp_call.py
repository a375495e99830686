"""C++ custom ops (GpSimd) on JAX arrays: ``cpp_call("lib::op", *args)``.

The SDK offers C++ custom ops to PyTorch only; here a library loaded in the process (by
``custom_op.load`` / ``load_library``, or ``neuron_customcall.cpp.loader.load`` without torch) is
callable from JAX too. The op's shape function gives the result's shape and dtype at trace time;
under ``jax.jit`` the call is one ``AwsNeuronCustomNativeKernel`` custom-call whose descriptor
carries the library itself, and concrete arrays run on the emulated GpSimd engine. Non-array
arguments (Scalar, double, int64 parameters) are folded into the call as constants.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from emulator.gpsimd.args import TensorSpec
from emulator.gpsimd.call import OpCall
from neuron_customcall.cpp import loader
from neuron_customcall.jax.primitive import KernelRef, is_array, make_primitive
from neuron_customcall.kernels import build, dtypes
from neuron_customcall.kernels.descriptor import TensorSig

cpp_call_p = make_primitive("neuron_cpp_call")


def _split_name(op: str) -> tuple[str, str]:
    for sep in ("::", "."):
        if sep in op:
            library, name = op.split(sep, 1)
            return library, name
    raise ValueError(f"name the op as 'library::op' (the NEURON_LIBRARY name), got {op!r}")


def _runner(library: str, op_name: str, values: list[Any], out: TensorSpec):
    """Concrete arrays run through the engine's one call path, on the library's registered runner
    (the one torch calls and compiled graphs of the same library use)."""
    loaded = loader.get(library)
    desc = loaded.descriptor.op(op_name)
    arguments = [("tensor", None) if isinstance(v, TensorSpec) else (kind, v) for kind, v in zip(desc.args, values)]
    op_call = OpCall(str(loaded.host.path), desc, arguments, out)

    def run(arrays: list[np.ndarray]) -> list[np.ndarray]:
        return [op_call(*arrays)]
    return run


def cpp_call(op: str, *args: Any) -> Any:
    """Call C++ custom op ``op`` ("library::op") on JAX arrays and Python numbers."""
    library, op_name = _split_name(op)
    loaded = loader.get(library)
    desc = loaded.descriptor.op(op_name)
    if len(args) != len(desc.args):
        raise TypeError(f"op {op} takes {len(desc.args)} arguments, got {len(args)}")
    values: list[Any] = []
    for kind, a in zip(desc.args, args):
        if kind == "tensor":
            if not is_array(a):
                raise TypeError(f"op {op}: a tensor argument must be an array, got {type(a).__name__}")
            values.append(TensorSpec(dtypes.hlo_to_gpsimd(dtypes.hlo_name_of(a.dtype)), tuple(a.shape)))
        else:
            values.append(a)
    out = loaded.host.shape(desc, values)
    config = build.gpsimd_config(desc, loaded.host.path, values, out)
    ref = _REFS.get(config)
    if ref is None:
        outputs = (TensorSig("out", tuple(out.shape), dtypes.gpsimd_to_hlo(out.dtype)),)
        ref = _REFS[config] = KernelRef(op, config, outputs, _runner(library, op_name, values, out))
    operands = [a for kind, a in zip(desc.args, args) if kind == "tensor"]
    return cpp_call_p.bind(*operands, **ref.params())[0]


_REFS: dict[str, KernelRef] = {}
__all__ = ["cpp_call", "cpp_call_p"]
