"""Framework-free HLO library: XLA's HloModuleProto schema, readers for binary proto, protobuf
text and HLO text, one in-memory IR, and a printer of HLO text.

It depends on nothing else in this project (nor on torch or jax), so that the compiler, the
command line and the tests can read and write HLO without importing a framework.

    module = hlo.load("graph.pbtxt")       # or .pb / .txt / bytes / a string of HLO text
    module.entry.root.opcode
    module.to_text(); module.to_pbtxt(); module.to_bytes()
"""
from hlo.errors import HloError, HloParseError
from hlo.canonical import canonical_module, fingerprint, modules_equal
from hlo.ir.convert import module_from_proto, module_to_proto
from hlo.ir.module import HloComputation, HloInstruction, HloModule
from hlo.ir.shape import Layout, Shape
from hlo.readers import Form, detect_form, load, read_module_proto

__all__ = [
    "Form", "HloComputation", "HloError", "HloInstruction", "HloModule", "HloParseError", "Layout",
    "Shape", "canonical_module", "detect_form", "fingerprint", "load", "module_from_proto",
    "module_to_proto", "modules_equal", "read_module_proto",
]
