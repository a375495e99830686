"""HLO text: the reader and the printer of XLA's text form, text <-> xla.HloModuleProto.

    parse_hlo_text(text, filename="<string>") -> HloModuleProto   # HloParseError on bad input
    print_hlo_text(module, print_operand_shapes=True) -> str      # XLA's own spelling

The proto is the interchange with the rest of `hlo`; this package imports no framework. What
"the same module" means (ids renumbered, what text cannot carry) is hlo/canonical.py.
"""
from hlo.text.parser import parse_hlo_text
from hlo.text.printer import print_hlo_text

__all__ = ["parse_hlo_text", "print_hlo_text"]
