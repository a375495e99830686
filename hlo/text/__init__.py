"""HLO text: the reader (`parse_hlo_text`) and the printer (`print_hlo_text`) of XLA's text form.

Text <-> xla.HloModuleProto; the proto is the interchange with the rest of `hlo`.
"""
from hlo.text.parser import parse_hlo_text
from hlo.text.printer import print_hlo_text

__all__ = ["parse_hlo_text", "print_hlo_text"]
