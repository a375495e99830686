"""The IR built from live framework modules: lossless round trips, structure and typed attributes."""
from __future__ import annotations

import numpy as np
import pytest

import hlo
from hlo.schema import hlo_pb2
from tests.hlo import framework_corpus  # noqa: F401  (registers the corpus)
from tests.hlo import framework_modules as fm

ALL = fm.names()


def _decoded(name: str) -> hlo_pb2.HloModuleProto:
    p = hlo_pb2.HloModuleProto()
    p.ParseFromString(fm.serialized(name))
    return p


def test_corpus_is_broad_enough():
    assert len(fm.names(fm.JAX)) >= 30
    assert len(fm.names(fm.TORCH_XLA)) >= 10


@pytest.mark.parametrize("name", ALL)
def test_binary_round_trip_is_lossless(name):
    module = hlo.load(fm.serialized(name))
    assert module.to_proto() == _decoded(name)
    assert hlo.load(module.to_bytes()).to_proto() == _decoded(name)


@pytest.mark.parametrize("name", ALL)
def test_pbtxt_round_trip_is_lossless(name):
    module = hlo.load(fm.serialized(name))
    text = module.to_pbtxt()
    assert hlo.detect_form(text.encode()) is hlo.Form.PBTXT
    assert hlo.load(text).to_proto() == _decoded(name)


@pytest.mark.parametrize("name", fm.names(fm.TORCH_XLA))
def test_torch_xla_protobuf_text_reads_like_its_binary(name):
    lowered = fm.lowered(name)
    assert hlo.load(lowered.text).to_proto() == _decoded(name)


def test_structure_of_a_gradient_graph():
    module = hlo.load(fm.serialized("jax/mlp_grad"))
    entry = module.entry
    assert [p.parameter_number for p in entry.parameters] == [0, 1, 2]
    assert entry.root.opcode == "tuple"
    dots = [i for i in entry.instructions if i.opcode == "dot"]
    assert dots, "an MLP gradient has dots"
    for dot in dots:
        assert len(dot.operands) == 2 and all(o.parent is entry for o in dot.operands)
        dn = dot.dot_dimension_numbers  # a typed proto field, read through the instruction
        assert len(dn.lhs_contracting_dimensions) == 1
    users = entry.users()
    assert all(dot in users[op] for dot in dots for op in dot.operands)
    reduces = [i for i in module.instructions() if i.opcode == "reduce"]
    assert reduces and all(r.called_computations[0].module is module for r in reduces)
    located = [i.source_location for i in entry.instructions if i.source_location]
    assert located and all("framework_modules.py:" in loc for loc in located)


def test_shapes_are_typed_and_hashable():
    module = hlo.load(fm.serialized("jax/convert_types"))
    shapes = {i.shape for i in module.entry.instructions}
    root = module.entry.root.shape
    assert root.is_tuple and not root.is_array
    kinds = {s.element_type for s in root.leaves()}
    assert {"F16", "BF16", "S8", "S16", "S32", "U8", "U32", "PRED", "F32"} <= kinds
    f16 = next(s for s in root.leaves() if s.element_type == "F16")
    assert f16.dtype == np.float16 and f16.dimensions == (6,) and f16.nbytes == 12 and str(f16) == "f16[6]{0}"
    assert all(hash(s) is not None for s in shapes)


def test_constant_values_decode_to_numpy():
    module = hlo.load(fm.serialized("jax/large_constants"))
    values = {i.name: i.constant_value() for i in module.instructions() if i.opcode == "constant"}
    table = np.linspace(-3, 3, 300, dtype=np.float32).reshape(20, 15)
    assert any(v.shape == (20, 15) and np.array_equal(v, table) for v in values.values())
    assert any(v.dtype == np.int8 and np.array_equal(v, [[1, -2], [3, 4]]) for v in values.values())


def test_fingerprint_ignores_ids_but_not_content():
    p = _decoded("jax/mlp_grad")
    shifted = hlo_pb2.HloModuleProto()
    shifted.CopyFrom(p)
    for comp in shifted.computations:
        comp.id += 100
        for inst in comp.instructions:
            inst.id += 1000
            inst.operand_ids[:] = [i + 1000 for i in inst.operand_ids]
            inst.called_computation_ids[:] = [i + 100 for i in inst.called_computation_ids]
        comp.root_id += 1000
    shifted.entry_computation_id += 100
    a, b = hlo.load(p), hlo.load(shifted)
    assert a.fingerprint() == b.fingerprint() and hlo.modules_equal(a, b)
    shifted.computations[-1].instructions[0].name += "_renamed"
    assert hlo.load(shifted).fingerprint() != a.fingerprint()


def test_a_module_built_in_python_converts_and_reads_back():
    f32 = hlo.Shape.array("F32", (2, 3))
    x = hlo.HloInstruction("x", "parameter", f32)
    x.attributes.parameter_number = 0
    y = hlo.HloInstruction("y", "exponential", f32, [x])
    entry = hlo.HloComputation("main", [x, y], root=y)
    module = hlo.HloModule("built", [entry], entry)
    again = hlo.load(module.to_bytes())
    assert [i.opcode for i in again.entry.instructions] == ["parameter", "exponential"]
    assert again.entry.root.operands[0].name == "x"
    assert again.entry.root.shape == f32


# --- broken structure: each is HloParseError naming the place --------------------------------
def _broken(mutate) -> hlo.HloParseError:
    p = _decoded("jax/mlp_grad")
    mutate(p)
    with pytest.raises(hlo.HloParseError) as info:
        hlo.load(p.SerializeToString())
    return info.value


def _entry(p):
    return next(c for c in p.computations if c.name == p.entry_computation_name)


def test_dangling_operand_id():
    e = _broken(lambda p: _entry(p).instructions[-1].operand_ids.append(987654))
    assert "operand id 987654 does not exist" in str(e) and "instruction" in str(e)


def test_dangling_root_and_callee():
    assert "root id" in str(_broken(lambda p: setattr(_entry(p), "root_id", 424242)))
    def bad_callee(p):
        inst = next(i for c in p.computations for i in c.instructions if i.called_computation_ids)
        inst.called_computation_ids[0] = 777
    assert "called computation id 777" in str(_broken(bad_callee))


def test_duplicate_names_and_ids():
    def dup_name(p):
        e = _entry(p)
        e.instructions[1].name = e.instructions[0].name
    assert "used twice" in str(_broken(dup_name))
    def dup_id(p):
        e = _entry(p)
        e.instructions[1].id = e.instructions[0].id
    assert "also the id" in str(_broken(dup_id))


def test_cycles_are_rejected():
    def cycle(p):
        e = _entry(p)
        a, b = e.instructions[-2], e.instructions[-1]
        a.operand_ids.append(b.id)
        b.operand_ids.append(a.id)
    assert "cycle" in str(_broken(cycle))
    def recursion(p):
        inst = next(i for c in p.computations for i in c.instructions if i.called_computation_ids)
        callee = next(c for c in p.computations if c.id == inst.called_computation_ids[0])
        callee.instructions[-1].called_computation_ids.append(callee.id)
    assert "calls itself" in str(_broken(recursion))


def test_missing_pieces():
    assert "no computations" in str(_broken(lambda p: p.ClearField("computations")))
    assert "entry computation 'nope'" in str(_broken(lambda p: setattr(p, "entry_computation_name", "nope")))
    assert "no shape" in str(_broken(lambda p: _entry(p).instructions[0].ClearField("shape")))
    e = _broken(lambda p: setattr(_entry(p).instructions[0].shape, "element_type", 99))
    assert "invalid shape" in str(e) or "element type" in str(e)
