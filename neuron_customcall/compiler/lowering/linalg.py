"""Dot, convolution and FFT."""
from __future__ import annotations

from typing import Any

from neuron_customcall.compiler.errors import CompileError
from neuron_customcall.compiler.lowering.registry import lowers
from neuron_customcall.compiler.lowering.context import LowerCtx
from neuron_customcall.compiler.lowering.reduce import window_attrs


@lowers("dot")
def _dot(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    d = inst.attributes.dot_dimension_numbers
    return "dot", {"lhs_contracting": list(d.lhs_contracting_dimensions),
                   "rhs_contracting": list(d.rhs_contracting_dimensions),
                   "lhs_batch": list(d.lhs_batch_dimensions), "rhs_batch": list(d.rhs_batch_dimensions),
                   "out_perm": ctx.fused_transposes.get(id(inst), [])}


@lowers("convolution")
def _convolution(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    c = inst.attributes.convolution_dimension_numbers
    nsp = len(c.input_spatial_dimensions)
    w = window_attrs(inst, nsp) if inst.attributes.window.dimensions or nsp else {
        k: [] for k in ("size", "stride", "pad_low", "pad_high", "base_dilation", "window_dilation")}
    return "convolution", {
        **w, "window_reversal": [int(d.window_reversal) for d in inst.attributes.window.dimensions],
        "feature_group_count": int(inst.attributes.feature_group_count or 1),
        "batch_group_count": int(inst.attributes.batch_group_count or 1),
        "input_batch": c.input_batch_dimension, "input_feature": c.input_feature_dimension,
        "input_spatial": list(c.input_spatial_dimensions),
        "kernel_input_feature": c.kernel_input_feature_dimension,
        "kernel_output_feature": c.kernel_output_feature_dimension,
        "kernel_spatial": list(c.kernel_spatial_dimensions),
        "output_batch": c.output_batch_dimension, "output_feature": c.output_feature_dimension,
        "output_spatial": list(c.output_spatial_dimensions),
    }


_FFT_TYPES = {0: "FFT", 1: "IFFT", 2: "RFFT", 3: "IRFFT"}


@lowers("fft")
def _fft(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    return "fft", {"fft_type": _FFT_TYPES[int(inst.attributes.fft_type)], "length": list(inst.attributes.fft_length)}
