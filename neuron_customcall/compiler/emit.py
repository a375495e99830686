"""Emission: lowered computations, constants, kernel payloads and the manifest -> artifact bytes."""
from __future__ import annotations

from typing import Any

from emulator.artifact import ArtifactContents, write_artifact
from emulator.program.model import Program
from neuron_customcall.compiler.errors import CompileError
from neuron_customcall.compiler.types import leaf_paths, value_type


def io_entries(entry: Any) -> tuple[list[dict], list[dict]]:
    """Manifest inputs (leaves of the parameters in order) and outputs (leaves of the root)."""
    inputs = []
    for p in entry.parameters:
        for path, s in leaf_paths(p.shape):
            name = p.name + "".join(f".{k}" for k in path)
            t = value_type(s, p)
            _no_token(t, p, "parameter")
            inputs.append({"name": name, "dtype": t[0], "shape": t[1]})
    outputs = []
    root = entry.root
    for path, s in leaf_paths(root.shape):
        name = root.name + "".join(f".{k}" for k in path)
        t = value_type(s, root)
        _no_token(t, root, "result")
        outputs.append({"name": name, "dtype": t[0], "shape": t[1]})
    return inputs, outputs


def _no_token(t: list, inst: Any, what: str) -> None:
    """Tokens order effects inside a program; one crossing the program's boundary would be a host
    callback's or an infeed's, which the device does not have."""
    if t[0] == "token":
        raise CompileError(f"a token-typed entry {what} is not supported: tokens order side effects "
                           "(host callbacks, infeed/outfeed) that the emulated device does not have", inst)


def emit(program: Program, manifest: dict[str, Any], ctx: Any) -> bytes:
    return write_artifact(ArtifactContents(manifest=manifest, program=program, constants=ctx.constants,
                                           kernels=ctx.kernels))
