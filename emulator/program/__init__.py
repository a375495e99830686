"""The emulator's instruction set (the op registry and attribute schemas), the program model, and
the context handlers are built with."""
from emulator.program.context import HandlerContext
from emulator.program.dtypes import DTYPES, dtype_of, name_of
from emulator.program.model import Computation, Instruction, Program, ProgramError, ValueType
from emulator.program.ops import OPS, Factory, OpSpec, handles

__all__ = ["DTYPES", "OPS", "Computation", "Factory", "HandlerContext", "Instruction", "OpSpec", "Program",
           "ProgramError", "ValueType", "dtype_of", "handles", "name_of"]
