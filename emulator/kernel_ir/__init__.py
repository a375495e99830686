"""The kernel IR of traced NKI kernels: its dataclasses (``ir``), vocabulary (``ops``), dtype names
(``dtypes``) and the pickle-free byte format (``serialise``). See docs/kernel-ir.md."""

from .ir import (AFFINE_LOOP, CONSTANT, DATA_DEPENDENT_LOOPS, DEFINED, DYNAMIC_LOOP, WHILE_LOOP, INPUT, INTERNAL, IR_VERSION, OUTPUT,
                 SEQUENTIAL_LOOP, UNINIT, Access, Affine, Const, Instruction, KernelIR, Loop, Operand, SourceLoc,
                 Statement, TensorDecl, affine_from_json, affine_to_json,
                 walk_instructions, walk_loops)
from .printer import format_kernel
from .serialise import KernelIRFormatError, from_bytes, to_bytes
from .validate import KernelIRValidationError, validate

__all__ = [
    "AFFINE_LOOP", "CONSTANT", "DATA_DEPENDENT_LOOPS", "DEFINED", "DYNAMIC_LOOP", "WHILE_LOOP", "INPUT", "INTERNAL", "IR_VERSION", "OUTPUT",
    "SEQUENTIAL_LOOP",
    "UNINIT", "Access", "Affine", "Const", "Instruction", "KernelIR", "Loop", "Operand",
    "SourceLoc", "Statement", "TensorDecl", "affine_from_json", "affine_to_json",
    "walk_instructions", "walk_loops",
    "KernelIRFormatError", "from_bytes", "to_bytes", "format_kernel", "KernelIRValidationError",
    "validate",
]
