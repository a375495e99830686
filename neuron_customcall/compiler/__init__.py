"""The backend compiler: HLO IR in, `.neff` artifact bytes out.

    from neuron_customcall.compiler import compile_module, CompileFlags
    artifact = compile_module(hlo.load(path))          # bytes; emulator.load_artifact(artifact)

Stages (one module each): verify.py (shapes), schedule.py (order), lowering/ (HLO opcode ->
emulator op, one module per op family), buffers.py (slots, frees, aliasing), emit.py (artifact).
"""
from neuron_customcall.compiler.errors import CompileError
from neuron_customcall.compiler.flags import CompileFlags
from neuron_customcall.compiler.pipeline import COMPILER_VERSION, compile_module

__all__ = ["COMPILER_VERSION", "CompileError", "CompileFlags", "compile_module"]
