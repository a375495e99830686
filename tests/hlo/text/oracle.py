"""XLA's own HLO text parser (compiled into jaxlib) as the test oracle, and comparison helpers.

Why here and not in `hlo`: the library must not import jax; only tests consult XLA. XLA's parser
aborts the process on some malformed input, so tests only hand it text that is valid.
"""
from __future__ import annotations

import difflib

from google.protobuf import text_format

from hlo.schema import hlo_pb2
from hlo.canonical import canonical_module


def xla_parse(text: str) -> hlo_pb2.HloModuleProto:
    """XLA's reading of HLO text, as a proto (jaxlib's hlo_module_from_text)."""
    from jaxlib import _hlo

    proto = hlo_pb2.HloModuleProto()
    proto.ParseFromString(_hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto())
    return proto


def xla_text(serialized: bytes, large_constants: bool = True, operand_shapes: bool = False) -> str:
    """XLA's printing (`HloModule::ToString`, with metadata and stack frames) of a proto."""
    from jaxlib import _hlo

    options = _hlo.HloPrintOptions()
    options.print_large_constants = large_constants
    options.print_operand_shape = operand_shapes
    return _hlo.HloModule.from_serialized_hlo_module_proto(serialized).to_string(options)


def xla_roundtrip(serialized: bytes) -> hlo_pb2.HloModuleProto:
    """A framework's binary proto as XLA holds it once loaded (XLA fills its defaults on load)."""
    from jaxlib import _hlo

    proto = hlo_pb2.HloModuleProto()
    proto.ParseFromString(_hlo.HloModule.from_serialized_hlo_module_proto(serialized).as_serialized_hlo_module_proto())
    return proto


def canonical_diff(ours: hlo_pb2.HloModuleProto, theirs: hlo_pb2.HloModuleProto, limit: int = 60,
                   strict: bool = True) -> str:
    """Unified diff of the canonical forms ('' when equal), for readable assertion messages.

    `strict`: do not fill XLA's load-time defaults, so a reader that forgets one is caught.
    """
    a = text_format.MessageToString(canonical_module(ours, fill_defaults=not strict)).splitlines()
    b = text_format.MessageToString(canonical_module(theirs, fill_defaults=not strict)).splitlines()
    return "\n".join(list(difflib.unified_diff(a, b, "ours", "xla", lineterm="", n=3))[:limit])


def instruction_summary(module: hlo_pb2.HloModuleProto) -> list:
    """(computation, name, opcode, shape, operand names, called computation names) per instruction."""
    comp_names = {c.id: c.name for c in module.computations}
    out = []
    for comp in module.computations:
        names = {i.id: i.name for i in comp.instructions}
        for inst in comp.instructions:
            out.append((comp.name, inst.name, inst.opcode, inst.shape.SerializeToString(deterministic=True),
                        tuple(names[o] for o in inst.operand_ids),
                        tuple(comp_names[c] for c in inst.called_computation_ids)))
    return sorted(out)
