"""From a Neuron custom-call to an emulator kernel payload: the compiler's half of inlining.

The compiler calls ``payload_for(inst)`` for each ``AwsNeuronCustomNativeKernel`` custom-call. It
decodes the backend_config (neuron_customcall.kernels.descriptor), checks the descriptor against
the instruction (operand and result shapes and dtypes) and against its own payload (the NKI IR's
signature and grid, the GpSimd op's arguments), and returns the emulator-native payloads
(emulator.kernel_payload) that the artifact embeds, each named after what it holds (the NKI kernel's
function, ``library::op``, the library), so that `inspect` and `profile` show the kernel a user
wrote and not the framework's instruction name: the one the instruction runs, last, after
those it refers to (a GpSimd op's library, which the artifact then stores once however many ops
and calls use it, although every custom-call's backend_config carries it). Why here and not in the emulator: every
mismatch is then a compile error naming the instruction, before anything runs.
"""
from __future__ import annotations

from typing import Any

from emulator import kernel_payload
from emulator.gpsimd.args import TensorSpec as GpSimdSpec
from emulator.gpsimd.descriptor import OpDescriptor
from emulator.kernel_ir import serialise
from neuron_customcall.compiler.errors import CompileError
from neuron_customcall.kernels import dtypes
from neuron_customcall.kernels.descriptor import (GPSIMD, NKI, DescriptorError, KernelDescriptor,
                                                  TensorSig, decode)


def _array_type(shape: Any) -> tuple[str, tuple[int, ...]]:
    return shape.element_type.lower(), tuple(int(d) for d in shape.dimensions)


def _show(sig: TensorSig) -> str:
    return f"{sig.dtype}{list(sig.shape)}"


def _check_signature(inst: Any, desc: KernelDescriptor) -> None:
    where = f"kernel {desc.name!r}"
    if len(inst.operands) != len(desc.inputs):
        raise CompileError(f"{where} takes {len(desc.inputs)} inputs, the custom-call has "
                           f"{len(inst.operands)} operands", inst)
    for k, (operand, sig) in enumerate(zip(inst.operands, desc.inputs)):
        if operand.shape.is_tuple or _array_type(operand.shape) != (sig.dtype, sig.shape):
            raise CompileError(f"{where}: operand {k} is {operand.shape}, the kernel's input "
                               f"{sig.name!r} is {_show(sig)}", inst)
    shape = inst.shape
    results = list(shape.tuple_shapes) if shape.is_tuple else [shape]
    if len(results) != len(desc.outputs) or any(
            r.is_tuple or _array_type(r) != (sig.dtype, sig.shape) for r, sig in zip(results, desc.outputs)):
        raise CompileError(f"{where}: the custom-call's result {shape} disagrees with the kernel's "
                           f"outputs {[_show(s) for s in desc.outputs]}", inst)


def _nki_payload(inst: Any, desc: KernelDescriptor) -> list[tuple[str, str, bytes]]:
    try:
        ir = serialise.from_bytes(desc.payload)
    except (serialise.KernelIRFormatError, KeyError, TypeError, ValueError) as e:
        raise CompileError(f"kernel {desc.name!r}: the NKI payload is not kernel IR: {e}", inst) from None
    try:
        actual = ([TensorSig(n, tuple(ir.tensors[n].shape), dtypes.nki_to_hlo(ir.tensors[n].dtype))
                   for n in ir.inputs],
                  [TensorSig(n, tuple(ir.tensors[n].shape), dtypes.nki_to_hlo(ir.tensors[n].dtype))
                   for n in ir.outputs])
    except (KeyError, dtypes.KernelDtypeError) as e:
        raise CompileError(f"kernel {desc.name!r}: the NKI payload's signature is invalid: {e}", inst) from None
    if actual != (list(desc.inputs), list(desc.outputs)) or tuple(ir.grid) != desc.grid:
        raise CompileError(f"kernel {desc.name!r}: the descriptor's signature or grid disagrees with "
                           "its kernel IR", inst)
    return [(desc.name, kernel_payload.NKI_IR, desc.payload)]


def _gpsimd_payload(inst: Any, desc: KernelDescriptor) -> list[tuple[str, str, bytes]]:
    try:
        op = OpDescriptor(**{**desc.op, "args": tuple(desc.op["args"])})
        out = GpSimdSpec(dtypes.hlo_to_gpsimd(desc.outputs[0].dtype), desc.outputs[0].shape)
        for sig in desc.inputs:
            dtypes.hlo_to_gpsimd(sig.dtype)
    except (TypeError, dtypes.KernelDtypeError) as e:
        raise CompileError(f"kernel {desc.name!r}: invalid GpSimd op: {e}", inst) from None
    header = kernel_payload.pack_gpsimd_op(kernel_payload.GpSimdPayload(
        op, tuple(a.to_json() for a in desc.arguments), out, desc.payload))
    return [(op.library, kernel_payload.GPSIMD_LIBRARY, desc.payload),
            (desc.name, kernel_payload.GPSIMD_OP, header)]


#: descriptor kind -> (instruction, descriptor) -> [(payload name, emulator payload kind, payload bytes)]
PAYLOADS = {NKI: _nki_payload, GPSIMD: _gpsimd_payload}


def payload_for(inst: Any) -> tuple[str, list[tuple[str, str, bytes]]]:
    """(kernel name, [(payload name, emulator payload kind, payload bytes)]) of a Neuron kernel custom-call:
    the instruction runs the last payload; those before it are payloads it refers to."""
    config = inst.attributes.backend_config
    try:
        desc = decode(config if isinstance(config, bytes) else str(config))
    except DescriptorError as e:
        raise CompileError(f"invalid kernel descriptor in backend_config: {e}", inst) from None
    _check_signature(inst, desc)
    return desc.name, PAYLOADS[desc.kind](inst, desc)
