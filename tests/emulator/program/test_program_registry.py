"""The op registry (emulator.program.ops): one spec per op with its properties and handler; HLO
names for ops that are HLO opcodes; the facts other layers used to keep in lists of their own."""
from __future__ import annotations

import pytest

import emulator.ops  # noqa: F401 - registers the handlers
from emulator.cost.graph import PER_EXECUTION, RULES
from emulator.program.ops import OPS, OpSpec, handles
from hlo.opcodes import ELEMENTWISE, OPCODES

#: ops of our own (behind custom-calls, or a form of an opcode no HLO opcode names): no HLO opcode has their names
_OWN = {"kernel", "tridiagonal_solve_perturbed", "collective_permute_in_place", "bitcast-bits", "rng-seed"}


def test_every_op_has_one_handler_and_a_known_cost_rule():
    for spec in OPS.values():
        assert callable(spec.handler), spec.name
        assert spec.cost in RULES or spec.cost in PER_EXECUTION, spec.name


def test_ops_that_are_hlo_opcodes_have_their_hlo_names():
    for name in OPS:
        if name in OPCODES:
            # XLA's table lists convolution as variadic; its operands are always (input, kernel)
            assert OPS[name].arity == OPCODES[name].arity or name == "convolution", name
        else:
            assert name in _OWN or name.startswith("lapack_"), f"{name} is neither an HLO opcode nor ours"
            assert name.replace("_", "-") not in OPCODES, name


def test_elementwise_ops_are_hlo_elementwise_opcodes_and_liftable():
    for spec in OPS.values():
        if spec.elementwise:
            assert OPCODES[spec.name].cls == ELEMENTWISE and spec.liftable and spec.pure, spec.name


def test_in_place_positions_are_operands_of_fresh_handlers():
    for spec in OPS.values():
        assert all(0 <= k < (spec.arity or 0) for k in spec.in_place), spec.name
        if spec.in_place:
            assert spec.fresh, spec.name
    assert OPS["select"].in_place == (1, 2)  # never the predicate


def test_only_linear_algebra_and_lapack_may_call_blas():
    """Kernels apply the policy themselves (an NKI kernel's runner around its matmuls; a GpSimd
    kernel runs in another process): test_nki_launch_plan checks it inside a graph."""
    blas = {name for name, spec in OPS.items() if spec.blas}
    assert {"dot", "convolution", "fft", "lapack_getrf"} <= blas
    assert not blas & {"add", "reduce", "sort", "gather", "while", "scatter", "rng-bit-generator", "kernel"}


def test_lifted_computations_are_computation_attributes():
    for spec in OPS.values():
        assert all(spec.attrs.get(k) in ("comp", "int") for k in spec.lifts), spec.name


def test_a_handler_registers_once_and_only_for_a_known_op():
    with pytest.raises(ValueError, match="op add has two handlers"):
        handles("add")(lambda ctx: None)
    with pytest.raises(KeyError, match="frobnicate"):
        handles("frobnicate")(lambda ctx: None)
    assert OPSpec_defaults_are_conservative()


def OPSpec_defaults_are_conservative() -> bool:  # noqa: N802
    """A new op declared without properties is kept (not pure), not folded, not lifted, not in
    place, and keeps the BLAS thread policy."""
    spec = OpSpec("new-op", 1)
    return (not spec.pure and not spec.foldable and not spec.liftable and not spec.in_place and spec.blas
            and spec.cost == "free" and spec.handler is None)
