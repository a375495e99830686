"""HLO text on every live module of the corpus: the frameworks' own text reads like their binary
proto, our printed text reads back equal, and XLA's own parser accepts our text with the same
instructions and fields (jaxlib's `hlo_module_from_text` is the oracle)."""
from __future__ import annotations

import pytest

import hlo
from hlo.schema import hlo_pb2
from hlo.canonical import canonical_module
from tests.hlo import framework_corpus  # noqa: F401  (registers the corpus)
from tests.hlo import framework_modules as fm

ALL = fm.names()


def _canonical(module) -> hlo_pb2.HloModuleProto:
    return canonical_module(module if isinstance(module, hlo_pb2.HloModuleProto) else module.to_proto())


def _without_metadata(module: hlo.HloModule) -> hlo_pb2.HloModuleProto:
    """JAX's `as_hlo_text()` prints no metadata (op names, stack frames): compare the rest."""
    p = module.to_proto()
    p.ClearField("stack_frame_index")
    for comp in p.computations:
        for inst in comp.instructions:
            inst.ClearField("metadata")
    return _canonical(p)


@pytest.mark.parametrize("name", fm.names(fm.JAX))
def test_jax_text_reads_like_its_binary(name):
    lowered = fm.lowered(name)
    assert hlo.detect_form(lowered.hlo_text.encode()) is hlo.Form.TEXT
    assert _without_metadata(hlo.load(lowered.hlo_text)) == _without_metadata(hlo.load(lowered.proto))


@pytest.mark.parametrize("name", fm.names(fm.TORCH_XLA))
def test_torch_xla_text_reads_and_prints_back(name):
    text = fm.lowered(name).hlo_text
    module = hlo.load(text)
    assert module.entry.root is not None
    assert _canonical(hlo.load(module.to_text())) == _canonical(module)


@pytest.mark.parametrize("name", ALL)
def test_printed_text_reads_back_equal(name):
    module = hlo.load(fm.serialized(name))
    assert _canonical(hlo.load(module.to_text())) == _canonical(module)


@pytest.mark.parametrize("name", ALL)
def test_xla_parser_accepts_our_text(name):
    from jaxlib import _hlo  # XLA's own HLO text parser, compiled into jaxlib

    module = hlo.load(fm.serialized(name))
    parsed = hlo_pb2.HloModuleProto()
    parsed.ParseFromString(_hlo.hlo_module_from_text(module.to_text()).as_serialized_hlo_module_proto())
    ours = sorted((i.name, i.opcode, str(i.shape)) for i in module.instructions())
    theirs = sorted((i.name, i.opcode, str(hlo.Shape.from_proto(i.shape))) for c in parsed.computations for i in c.instructions)
    assert theirs == ours
    assert _canonical(parsed) == _canonical(module)
