"""Emission: lowered computations, constants, kernel payloads and the manifest -> artifact bytes."""
from __future__ import annotations

from typing import Any

from emulator.artifact import ArtifactContents, write_artifact
from emulator.program.model import Program
from neuron_customcall.compiler.types import leaf_paths, value_type


def io_entries(entry: Any) -> tuple[list[dict], list[dict]]:
    """Manifest inputs (leaves of the parameters in order) and outputs (leaves of the root)."""
    inputs = []
    for p in entry.parameters:
        for path, s in leaf_paths(p.shape):
            name = p.name + "".join(f".{k}" for k in path)
            t = value_type(s, p)
            inputs.append({"name": name, "dtype": t[0], "shape": t[1]})
    outputs = []
    root = entry.root
    for path, s in leaf_paths(root.shape):
        name = root.name + "".join(f".{k}" for k in path)
        t = value_type(s, root)
        outputs.append({"name": name, "dtype": t[0], "shape": t[1]})
    return inputs, outputs


def emit(program: Program, manifest: dict[str, Any], ctx: Any) -> bytes:
    return write_artifact(ArtifactContents(manifest=manifest, program=program, constants=ctx.constants,
                                           kernels=ctx.kernels))
