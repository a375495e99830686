"""The emulator's instruction set (ops and attribute schemas) and the program model."""
from emulator.program.dtypes import DTYPES, dtype_of, name_of
from emulator.program.model import Computation, Instruction, Program, ProgramError, ValueType
from emulator.program.ops import OPS, OpSpec

__all__ = ["DTYPES", "OPS", "Computation", "Instruction", "OpSpec", "Program", "ProgramError", "ValueType",
           "dtype_of", "name_of"]
