"""XLA's cost-analysis properties of a program, for `PJRT_Executable_GetCostAnalysis`.

JAX's `compiled.cost_analysis()` and the tools built on it (roofline estimates, Pallas cost
hints) read "flops", "transcendentals" and "bytes accessed"; XLA:CPU reports them from its
HloCostAnalysis. We count them the same way on the module we compile: an element-wise op is one
flop per result element, or one transcendental for XLA's transcendental opcodes; a dot is two
flops per multiply-add; a reduction applies its reducer (input - output elements) times; control
flow counts each called computation once, as XLA does; a convolution counts the multiply-adds
that read the input (not its padding). So flops and transcendentals equal XLA:CPU's for the same
program, up to what XLA's simplifier removes before it counts (a multiplication by one, ...).
"bytes accessed" is the bytes every instruction reads and writes in the module as we compile it,
unfused: it differs from XLA:CPU's figure, which is counted on XLA's fused program.
"optimal_seconds" (the estimated time) is our cost model's, added by the service.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from hlo import opcodes
from hlo.ir.module import HloComputation, HloInstruction

#: XLA's HloCostAnalysis counts these element-wise opcodes as transcendentals, not flops.
TRANSCENDENTAL = frozenset({
    "exponential", "exponential-minus-one", "log", "log-plus-one", "logistic", "power", "sqrt", "cbrt",
    "rsqrt", "tanh", "sine", "cosine", "tan", "atan2", "erf",
})

#: Instructions that move no bytes of their own (views, names, calls whose bodies are counted).
_NO_TRAFFIC = frozenset({
    "parameter", "constant", "tuple", "get-tuple-element", "bitcast", "call", "while", "conditional",
    "after-all", "add-dependency", "domain", "opt-barrier", "partition-id", "replica-id",
})


@dataclass
class Cost:
    """The counts of one computation (or module)."""

    flops: float = 0.0
    transcendentals: float = 0.0
    bytes_accessed: float = 0.0

    def add(self, other: Cost, times: float = 1.0) -> None:
        self.flops += other.flops * times
        self.transcendentals += other.transcendentals * times
        self.bytes_accessed += other.bytes_accessed * times


def _elements(inst: HloInstruction) -> int:
    return sum(leaf.num_elements for leaf in inst.shape.leaves() if leaf.is_array)


def _bytes(inst: HloInstruction) -> int:
    return sum(leaf.nbytes for leaf in inst.shape.leaves() if leaf.is_array)


def _elementwise(inst: HloInstruction, _: _Counter) -> Cost:
    n = _elements(inst)
    return Cost(transcendentals=n) if inst.opcode in TRANSCENDENTAL else Cost(flops=n)


def _dot(inst: HloInstruction, _: _Counter) -> Cost:
    lhs = inst.operands[0].shape.dimensions
    contracted = math.prod(lhs[d] for d in inst.dot_dimension_numbers.lhs_contracting_dimensions)
    return Cost(flops=2.0 * _elements(inst) * contracted)


def _valid_taps(size_in: int, size_out: int, kernel: int, window: object) -> int:
    """(output position, kernel tap) pairs of one spatial dimension that read an input element,
    not padding or a hole of the input's dilation: XLA counts only those multiply-adds."""
    stride = window.stride or 1  # type: ignore[attr-defined]
    lhs_dilation = window.base_dilation or 1  # type: ignore[attr-defined]
    rhs_dilation = window.window_dilation or 1  # type: ignore[attr-defined]
    pad_low = window.padding_low  # type: ignore[attr-defined]
    last = (size_in - 1) * lhs_dilation
    count = 0
    for k in range(kernel):
        c = k * rhs_dilation - pad_low  # the input index read by output 0
        if lhs_dilation == 1:  # outputs o with 0 <= o * stride + c <= last, in closed form
            lo, hi = max(0, -(c // stride)), min(size_out - 1, (last - c) // stride)
            count += max(0, hi - lo + 1)
        else:
            count += sum(1 for o in range(size_out)
                         if 0 <= o * stride + c <= last and (o * stride + c) % lhs_dilation == 0)
    return count


def _convolution(inst: HloInstruction, _: _Counter) -> Cost:
    """Two flops per multiply-add: each result element sums the kernel's window, where it reads
    the input, over the input features of its group (the kernel's input-feature dimension)."""
    dn = inst.convolution_dimension_numbers
    lhs, kernel, out = (inst.operands[0].shape.dimensions, inst.operands[1].shape.dimensions,
                        inst.shape.dimensions)
    pairs = 1
    for k, (ld, kd, od) in enumerate(zip(dn.input_spatial_dimensions, dn.kernel_spatial_dimensions,
                                         dn.output_spatial_dimensions)):
        pairs *= _valid_taps(lhs[ld], out[od], kernel[kd], inst.window.dimensions[k])
    others = out[dn.output_batch_dimension] * out[dn.output_feature_dimension]
    return Cost(flops=2.0 * others * pairs * kernel[dn.kernel_input_feature_dimension])


def _reducer_applications(inst: HloInstruction, counter: _Counter, times: float) -> Cost:
    out = Cost()
    for comp in inst.called_computations:
        out.add(counter.computation(comp), times)
    out.bytes_accessed = 0.0  # a reducer's scalars live in registers
    return out


def _reduce(inst: HloInstruction, counter: _Counter) -> Cost:
    """XLA: the reducer runs (input elements - output elements) times per reduced operand pair."""
    n_inputs = len(inst.operands) // 2
    inputs = inst.operands[0].shape.num_elements
    outputs = _elements(inst) // max(n_inputs, 1)
    return _reducer_applications(inst, counter, max(inputs - outputs, 0))


def _reduce_window(inst: HloInstruction, counter: _Counter) -> Cost:
    window = math.prod(d.size for d in inst.window.dimensions) if inst.window.dimensions else 1
    n_inputs = len(inst.operands) // 2
    return _reducer_applications(inst, counter, _elements(inst) // max(n_inputs, 1) * window)


def _map(inst: HloInstruction, counter: _Counter) -> Cost:
    return _reducer_applications(inst, counter, _elements(inst))


def _called_once(inst: HloInstruction, counter: _Counter) -> Cost:
    """call, while (body and condition once, as XLA counts a loop of unknown trip count),
    fusion, scan."""
    out = Cost()
    for comp in inst.called_computations:
        out.add(counter.computation(comp))
    return out


def _conditional(inst: HloInstruction, counter: _Counter) -> Cost:
    """The costliest branch (one of them runs)."""
    branches = [counter.computation(c) for c in inst.called_computations]
    return max(branches, key=lambda c: (c.flops + c.transcendentals, c.bytes_accessed), default=Cost())


def _nothing(inst: HloInstruction, _: _Counter) -> Cost:
    return Cost()


_BY_OPCODE: dict[str, Callable[[HloInstruction, _Counter], Cost]] = {
    "dot": _dot, "convolution": _convolution, "reduce": _reduce, "reduce-window": _reduce_window,
    "map": _map, "call": _called_once, "while": _called_once, "fusion": _called_once, "scan": _called_once,
    "conditional": _conditional,
}


def _handler(opcode: str) -> Callable[[HloInstruction, _Counter], Cost]:
    found = _BY_OPCODE.get(opcode)
    if found is not None:
        return found
    record = opcodes.opcode(opcode)
    return _elementwise if record is not None and record.cls == opcodes.ELEMENTWISE else _nothing


class _Counter:
    """Counts computations once each (a computation called from several places is costed once
    and added at each call)."""

    def __init__(self) -> None:
        self._done: dict[int, Cost] = {}

    def computation(self, comp: HloComputation) -> Cost:
        key = id(comp)
        if key not in self._done:
            total = Cost()
            for inst in comp.instructions:
                total.add(_handler(inst.opcode)(inst, self))
                if inst.opcode not in _NO_TRAFFIC:
                    total.bytes_accessed += _bytes(inst) + sum(_bytes(o) for o in inst.operands)
            self._done[key] = total
        return self._done[key]


def analyse(module: object) -> Cost:
    """The cost of one execution of `module` (an hlo.HloModule)."""
    return _Counter().computation(module.entry)  # type: ignore[attr-defined]
