"""Sort, top-k, the random-number opcodes, batch norm, and custom-calls (Neuron kernels become kernel
payloads of the artifact: see neuron_customcall.compiler.inline)."""
from __future__ import annotations

from typing import Any

from neuron_customcall.compiler.errors import CompileError
from neuron_customcall.compiler.inline import payload_for
from neuron_customcall.compiler.lowering.context import LowerCtx, called, sort_fast_path, sort_key_view
from neuron_customcall.compiler.lowering.lapack import XLA_LINALG_TARGETS, is_lapack_target, lower_lapack, lower_xla_linalg
from neuron_customcall.compiler.lowering.registry import fail, lowers, shape_rule, shapes
from neuron_customcall.kernels.descriptor import TARGET

#: Custom-call targets that only annotate their operand (sharding, placement, XLA's layout pin):
#: identities here, where values have no physical layout.
IDENTITY_TARGETS = frozenset({"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape",
                              "annotate_device_placement", "MoveToHost", "MoveToDevice", "LayoutConstraint"})
#: XLA's custom-call for the run's random seed (its rng expanders read one from it): u64[], new each run
RNG_SEED_TARGET = "GetRngSeed"
_RNG = {0: "DEFAULT", 1: "THREE_FRY", 2: "PHILOX"}


@lowers("sort")
def _sort(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    comp = called(inst, 0, "comparator")
    fast, key = sort_fast_path(comp), -1
    if not fast:
        view = sort_key_view(comp)
        if view is not None:
            key = ctx.computation(view[0], lifted=True)
            fast = view[1]
    return "sort", {"dim": int(inst.attributes.dimensions[0]), "stable": bool(inst.attributes.is_stable),
                    "computation": ctx.computation(comp, lifted=True), "fast": fast, "key": key}


@lowers("topk")
def _topk(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    return "topk", {"k": int(inst.attributes.k), "largest": bool(inst.attributes.largest)}


@lowers("rng-bit-generator")
def _rng_bit_generator(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    algo = int(inst.attributes.rng_algorithm)
    if algo not in _RNG:
        raise CompileError(f"unknown rng algorithm {algo}", inst)
    return "rng-bit-generator", {"algorithm": _RNG[algo]}


_DISTRIBUTIONS = {1: "uniform", 2: "normal"}


@lowers("rng")
def _rng(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    dist = _DISTRIBUTIONS.get(int(inst.attributes.distribution))
    if dist is None:
        raise CompileError("rng needs distribution=rng_uniform or rng_normal", inst)
    return "rng", {"distribution": dist}


@lowers("rng-get-and-update-state")
def _rng_get_and_update_state(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    return "rng-get-and-update-state", {"delta": int(inst.attributes.delta)}


@lowers("batch-norm-training", "batch-norm-inference", "batch-norm-grad")
def _batch_norm(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    return inst.opcode, {"epsilon": float(inst.attributes.epsilon), "feature_index": int(inst.attributes.feature_index)}


@lowers("custom-call")
def _custom_call(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    target = inst.attributes.custom_call_target
    if target == "TopK" and len(inst.operands) == 1:
        k = inst.shape.tuple_shapes[0].dimensions[-1] if inst.shape.is_tuple else None
        if k is not None:
            return "topk", {"k": int(k), "largest": True}
    if target in IDENTITY_TARGETS and len(inst.operands) == 1 and not inst.shape.is_tuple:
        return "copy", {}
    if target == RNG_SEED_TARGET:
        if inst.operands or inst.shape.is_tuple or inst.shape.element_type != "U64" or inst.shape.dimensions:
            raise CompileError(f"custom-call {RNG_SEED_TARGET} takes no operand and returns u64[], not {inst.shape}",
                               inst)
        return "rng-seed", {}
    if is_lapack_target(target):  # JAX's CPU linear algebra (typed-FFI calls into jaxlib's LAPACK)
        return lower_lapack(inst, ctx)
    if target in XLA_LINALG_TARGETS:  # XLA's own QR targets (its QrExpander's)
        return lower_xla_linalg(inst, ctx)
    if target != TARGET:
        raise CompileError(f"custom-call target {target!r} is not supported", inst)
    _name, payloads = payload_for(inst)  # decoded, checked against inst, emulator-native
    *referenced, (name, kind, data) = payloads
    for ref_name, ref_kind, ref_data in referenced:  # e.g. a GpSimd op's library: stored once per artifact
        ctx.kernel(ref_name, ref_kind, ref_data)
    return "kernel", {"payload": ctx.kernel(name, kind, data)}


# -- shape rules (XLA's; run by the verifier before lowering) ------------------------------
_RNG_TYPES = ("F16", "BF16", "F32", "F64", "S8", "S16", "S32", "S64", "U8", "U16", "U32", "U64")


@shape_rule("rng")
def _rng_shapes(inst: Any) -> None:
    ops, out = shapes(inst)
    if len(ops) != 2:
        fail(inst, f"rng takes two parameters (a, b), not {len(ops)}")
    a, b = ops
    if out.is_tuple or out.element_type not in _RNG_TYPES:
        fail(inst, f"rng gives a float or integer array, not {out}")
    if a.rank or b.rank or a.element_type != out.element_type or b.element_type != out.element_type:
        fail(inst, f"rng parameters must be scalars of the result type {out.element_type}, not {a} and {b}")


@shape_rule("rng-get-and-update-state")
def _rng_state_shapes(inst: Any) -> None:
    if inst.shape.is_tuple or inst.shape.element_type != "U64" or tuple(inst.shape.dimensions) != (2,):
        fail(inst, f"rng-get-and-update-state gives u64[2], not {inst.shape}")
