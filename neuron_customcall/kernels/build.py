"""Kernel descriptors from the two front ends, framework-free: an NKI kernel traced for argument
specs, or a GpSimd op of a loaded library with its argument specs. Adapters (torch_xla, JAX) turn
their tensors into specs, call these, and put ``encode(descriptor)`` in the custom-call.

Encoded configs are memoised: a training loop calls the same kernel with the same shapes every
step, and base64 of a library image is not free.
"""
from __future__ import annotations

import inspect
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from emulator.gpsimd import OpDescriptor
from emulator.gpsimd.args import TensorSpec as GpSimdSpec
from emulator.kernel_ir import serialise
from neuron_customcall.kernels import dtypes
from neuron_customcall.kernels.batching import batch_ir
from neuron_customcall.kernels.descriptor import (GPSIMD, NKI, Argument, DescriptorError,
                                                  KernelDescriptor, TensorSig, decode, encode)
from neuron_customcall.nki.errors import NKIError
from neuron_customcall.nki.jit import Kernel, TensorSpec, TracedKernel


@dataclass(frozen=True)
class NkiCall:
    """What an adapter needs to emit one NKI custom-call."""

    config: str                     # the backend_config
    operands: tuple[str, ...]       # kernel parameter names, in custom-call operand order
    outputs: tuple[TensorSig, ...]  # result shapes and HLO dtypes
    returns: str                    # "single" | "tuple" | "none" (results are written inputs)
    traced: TracedKernel


_NKI_MEMO: dict[int, tuple[TracedKernel, NkiCall]] = {}


def _sig(ir: Any, name: str) -> TensorSig:
    decl = ir.tensors[name]
    return TensorSig(name, tuple(decl.shape), dtypes.nki_to_hlo(decl.dtype))


def nki_call(kernel: Kernel, grid: tuple[int, ...], args: Sequence[Any],
             kwargs: dict[str, Any] | None = None) -> NkiCall:
    """Trace ``kernel`` (cached by the kernel) for args whose tensors are ``TensorSpec``s."""
    traced = kernel.trace(args, kwargs or {}, tuple(grid))
    if traced.chip_results:
        raise NKIError(
            f"kernel {traced.ir.name!r} returns on-chip tiles (now {list(traced.chip_results)}): "
            "in a framework graph a kernel's outputs must be HBM tensors (NKI memory hierarchy: "
            "'input and output parameters to NKI kernels must be HBM tensor references'); "
            "nl.store the tile into an nl.ndarray(..., buffer=nl.shared_hbm) and return that. "
            "Only the NumPy simulator reads an on-chip result back")
    hit = _NKI_MEMO.get(id(traced))
    if hit is not None and hit[0] is traced:
        return hit[1]
    call = _describe(traced)
    _NKI_MEMO[id(traced)] = (traced, call)
    return call


def _describe(traced: TracedKernel) -> NkiCall:
    ir = traced.ir
    desc = KernelDescriptor(
        kind=NKI, name=ir.name, grid=tuple(ir.grid),
        inputs=tuple(_sig(ir, n) for n in ir.inputs),
        outputs=tuple(_sig(ir, n) for n in ir.outputs),
        payload=serialise.to_bytes(ir))
    return NkiCall(encode(desc), tuple(ir.inputs), desc.outputs, traced.returns, traced)


def nki_call_from_config(config: str) -> NkiCall:
    """The call an NKI backend_config describes, rebuilt from the descriptor alone (a graph
    loaded from a file, in a process that never traced the kernel): the kernel IR comes from the
    payload. Results are a tuple, in the kernel's output order. Refuses other descriptor kinds."""
    desc = decode(config)
    if desc.kind != NKI:
        raise DescriptorError(f"kernel {desc.name!r} is a {desc.kind} kernel, not an NKI kernel: "
                              "an NKI call carries kernel IR only")
    try:
        ir = serialise.from_bytes(desc.payload)
    except (serialise.KernelIRFormatError, KeyError, TypeError, ValueError) as e:
        raise DescriptorError(f"kernel {desc.name!r}: the payload is not kernel IR: {e}") from None
    if tuple(ir.inputs) != tuple(s.name for s in desc.inputs) or tuple(_sig(ir, n) for n in ir.outputs) != desc.outputs:
        raise DescriptorError(f"kernel {desc.name!r}: the descriptor's signature disagrees with its kernel IR")
    outputs = tuple(TensorSpec(tuple(ir.tensors[n].shape), ir.tensors[n].dtype) for n in ir.outputs)
    return NkiCall(config, tuple(ir.inputs), desc.outputs, "tuple", TracedKernel(ir, outputs, "tuple"))


_BATCHED: dict[tuple[int, int], tuple[NkiCall, NkiCall]] = {}
MAX_GRID_DIMS = 3


def batched_nki_call(call: NkiCall, size: int) -> NkiCall | None:
    """``call`` for ``size`` stacked sets of operands as one kernel on a grid with one more axis
    (kernels/batching.py); None when the grid has no room for another axis."""
    if len(call.traced.ir.grid) >= MAX_GRID_DIMS:
        return None
    hit = _BATCHED.get((id(call), size))
    if hit is not None and hit[0] is call:
        return hit[1]
    ir = batch_ir(call.traced.ir, size)
    outputs = tuple(TensorSpec((size, *o.shape), o.dtype) for o in call.traced.outputs)
    batched = _describe(TracedKernel(ir, outputs, call.traced.returns))
    _BATCHED[(id(call), size)] = (call, batched)
    return batched


def bind_tensors(kernel: Kernel, args: Sequence[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Parameter name -> argument, as the kernel's signature binds the call."""
    return dict(inspect.signature(kernel.func).bind(*args, **kwargs).arguments)


def nki_spec(shape: Sequence[int], hlo_dtype: str) -> TensorSpec:
    """A tracing spec from a framework tensor's shape and HLO element type name."""
    if hlo_dtype not in dtypes.HLO_TO_NKI:
        raise dtypes.KernelDtypeError(f"element type {hlo_dtype} is not an NKI dtype; use one of "
                                      f"{sorted(dtypes.HLO_TO_NKI)}")
    return TensorSpec(tuple(int(s) for s in shape), dtypes.HLO_TO_NKI[hlo_dtype])


_GPSIMD_MEMO: dict[tuple, str] = {}
_IMAGES: dict[Path, bytes] = {}


def gpsimd_config(op: OpDescriptor, library: Path, values: Sequence[Any], out: GpSimdSpec) -> str:
    """The backend_config of one call of GpSimd ``op``: ``values`` are the op's arguments with
    tensors as GpSimd TensorSpecs (operands, in order) and scalars as Python numbers (inline)."""
    key = (op, str(library), tuple((v.dtype, v.shape) if isinstance(v, GpSimdSpec) else
                                   ("value", type(v).__name__, v) for v in values), out)
    hit = _GPSIMD_MEMO.get(key)
    if hit is not None:
        return hit
    image = _IMAGES.get(library)
    if image is None:
        image = _IMAGES[library] = Path(library).read_bytes()
    inputs, arguments = [], []
    for k, (kind, v) in enumerate(zip(op.args, values)):
        if kind == "tensor":
            inputs.append(TensorSig(f"a{k}", tuple(v.shape), dtypes.gpsimd_to_hlo(v.dtype)))
            arguments.append(Argument("tensor"))
        else:
            arguments.append(Argument(kind, v.item() if hasattr(v, "item") else v))
    desc = KernelDescriptor(
        kind=GPSIMD, name=f"{op.library}::{op.name}", grid=(1,),
        inputs=tuple(inputs),
        outputs=(TensorSig("out", tuple(out.shape), dtypes.gpsimd_to_hlo(out.dtype)),),
        payload=image, op=json.loads(op.to_json()), arguments=tuple(arguments))
    config = _GPSIMD_MEMO[key] = encode(desc)
    return config
