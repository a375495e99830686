"""The instruction specs are the one definition: each instruction's handler lives in its engine's
module, each engine has a cost rule, and IR that does not match its spec is refused."""
from __future__ import annotations

import importlib

import pytest

from emulator.cost import engines as cost_engines
from emulator.cost.kernel_ir import ENGINE_COST, kernel_cost
from emulator.kernel_exec.handlers import HANDLERS, MODULES
from emulator.kernel_exec.handlers.registry import EngineHandlers
from emulator.kernel_ir import (Access, Affine, Const, Instruction, KernelIR, KernelIRValidationError,
                                TensorDecl, validate)
from emulator.kernel_ir.instructions import ENGINES, SPECS, by_engine, spec


def test_every_instruction_has_its_handler_in_its_engines_module():
    assert set(HANDLERS) == set(SPECS)
    for engine, module in MODULES.items():
        table = importlib.import_module(f"emulator.kernel_exec.handlers.{module}").HANDLERS.table
        assert set(table) == by_engine(engine), engine
    assert spec("partition_reduce").engine == "gpsimd"


def test_a_handler_registered_with_the_wrong_engine_is_refused():
    with pytest.raises(ValueError, match="handlers/gpsimd.py"):
        EngineHandlers("vector").register("partition_reduce")
    vector = EngineHandlers("vector")
    vector.register("select")(lambda r, ins: None)
    with pytest.raises(ValueError, match="two handlers"):
        vector.register("select")


def test_every_engine_has_a_cost_rule_named_as_the_cost_model_names_it():
    assert set(ENGINE_COST) == set(ENGINES)
    assert set(ENGINES) == set(cost_engines.ENGINES) | {cost_engines.NONE}


def _access(name, shape):
    return Access(name, shape, tuple(Affine.make(0, {f"t{d}": 1}) for d in range(len(shape))))


def _kernel(ins: Instruction) -> KernelIR:
    tensors = {"a": TensorDecl("a", (4, 8), "float32", "sbuf"),
               "b": TensorDecl("b", (4, 8), "float32", "sbuf"),
               "c": TensorDecl("c", (8, 4), "float32", "psum")}
    return KernelIR("k", (1,), tensors, (), (), [ins])


def test_the_engine_attribute_picks_the_cost():
    tensor = Instruction("transpose", _access("c", (8, 4)), (_access("a", (4, 8)),),
                         {"engine": "tensor"})
    vector = Instruction("transpose", _access("c", (8, 4)), (_access("a", (4, 8)),),
                         {"engine": "vector"})
    gpsimd = Instruction("partition_reduce", _access("a", (1, 8)), (_access("b", (4, 8)),),
                         {"op": "add"})
    assert set(kernel_cost(_kernel(tensor))) == {"tensor"}
    assert set(kernel_cost(_kernel(vector))) == {"vector"}
    assert set(kernel_cost(_kernel(gpsimd))) == {"gpsimd"}
    # a TensorE transpose costs a matmul against the [4, 4] identity
    identity = Instruction("matmul", _access("c", (8, 4)), (_access("a", (4, 8)), _access("b", (4, 4))))
    assert kernel_cost(_kernel(tensor)) == kernel_cost(_kernel(identity))


@pytest.mark.parametrize("ins, message", [
    (Instruction("tensor_tensor", _access("a", (4, 8)), (_access("b", (4, 8)),), {"op": "add"}),
     "takes 2 sources"),
    (Instruction("tensor_tensor", _access("a", (4, 8)), (_access("b", (4, 8)), Const(1.0)),
                 {"op": "add"}), "source 'data1' must be a tile"),
    (Instruction("memset", _access("a", (4, 8)), (_access("b", (4, 8)),)),
     "source 'value' must be a constant"),
    (Instruction("tensor_tensor", _access("a", (4, 8)), (_access("a", (4, 8)), _access("b", (4, 8)))),
     "attribute 'op' is required"),
    (Instruction("tensor_reduce", _access("a", (4, 1)), (_access("b", (4, 8)),),
                 {"op": "add", "axes": [1], "keepdim": True}), "unknown attribute 'keepdim'"),
    (Instruction("tensor_reduce", _access("a", (4, 1)), (_access("b", (4, 8)),),
                 {"op": "add", "axes": 1}), "attribute 'axes' must be a list of axes"),
    (Instruction("activation", _access("a", (4, 8)), (_access("b", (4, 8)),), {"func": "cube"}),
     "must be an activation name"),
    (Instruction("tensor_scalar", _access("a", (4, 8)), (_access("b", (4, 8)), Const(2)),
                 {"op0": "add"}, acc="add"), "does not accumulate"),
    (Instruction("transpose", _access("c", (8, 4)), (_access("a", (4, 8)),), {"engine": "warp"}),
     "must be an engine name"),
    (Instruction("iota", _access("a", (4, 8)), (), {"expr": [0, [["l3", 1]]]}),
     "symbol 'l3' is out of scope"),
])
def test_ir_that_does_not_match_its_spec_is_refused(ins, message):
    with pytest.raises(KernelIRValidationError, match=message):
        validate(_kernel(ins))


def test_matching_ir_passes_with_optional_sources_left_out():
    validate(_kernel(Instruction("activation", _access("a", (4, 8)), (_access("b", (4, 8)),),
                                 {"func": "exp", "scale": 2})))
    validate(_kernel(Instruction("iota", _access("a", (4, 8)), (), {"expr": [1, [["t1", 2]]]})))
