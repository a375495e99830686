"""``neuronxcc.nki.isa.constants`` (NKI beta 1): the ISA's enums and FP32 constants."""

from .beta1 import dge_mode, engine, fp32, nc_version, oob_mode, reduce_cmd

__all__ = ["dge_mode", "engine", "fp32", "nc_version", "oob_mode", "reduce_cmd"]
