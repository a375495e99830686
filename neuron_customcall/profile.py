"""Estimated trn1 time of compiled graphs: the emulator's cost model from Python.

    from neuron_customcall.profile import estimated_seconds
    seconds = estimated_seconds(compiled, inputs)      # one execution on one NeuronCore-v2
    print(f"{batch / seconds:,.0f} samples/s on a trn1 NeuronCore (cost-model estimate)")

`profile` returns the whole `emulator.profile.Profile` (per-engine totals, top instructions,
Chrome trace). GpSimd (C++) payloads are costed from the counters of the run, so the graph is
executed, on `inputs` or on seeded random inputs of the manifest's shapes and dtypes.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)


def random_inputs(manifest: Mapping[str, Any], seed: int = 0) -> list[np.ndarray]:
    """Seeded inputs of the manifest's shapes and dtypes: standard normal floats, integers in
    [0, 8) (valid as small indices), random booleans."""
    from emulator.program.dtypes import DTYPES

    rng = np.random.default_rng(seed)
    arrays = []
    for spec in manifest["inputs"]:
        dt, shape = DTYPES[spec["dtype"]], tuple(spec["shape"])
        if dt == np.bool_:
            a = rng.integers(0, 2, shape).astype(bool)
        elif dt.kind in "iu":
            a = rng.integers(0, 8, shape).astype(dt)
        elif dt.kind == "c":
            a = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
        else:
            a = rng.standard_normal(shape).astype(np.float32).astype(dt)
        arrays.append(np.asarray(a))
    return arrays


def executable_of(graph: Any) -> Any:
    """An emulator Executable from an Executable, a backend `Compiled`, a .neff path, artifact
    bytes, or HLO in any form the backend compiles (through its compile cache)."""
    if hasattr(graph, "profile") and hasattr(graph, "manifest"):
        return graph
    if hasattr(graph, "executable"):
        return graph.executable
    import emulator

    if isinstance(graph, (str, os.PathLike)) and Path(graph).suffix == ".neff":
        return emulator.load_artifact(graph)
    if isinstance(graph, (bytes, bytearray, memoryview)) and bytes(graph[:len(_artifact_magic())]) == _artifact_magic():
        return emulator.load_artifact(graph)
    from neuron_customcall.backend import compile_cached

    return compile_cached(graph).executable


def _artifact_magic() -> bytes:
    from emulator.artifact.format import MAGIC

    return MAGIC


def profile(graph: Any, inputs: Sequence[Any] | None = None, *, seed: int = 0, warmup: int = 1) -> Any:
    """Profiles one execution of `graph` (see `executable_of`) on `inputs` (default: seeded
    random inputs). `warmup` profiled runs first, so host times exclude one-off start-up (GpSimd
    workers). Returns the emulator.profile.Profile."""
    exe = executable_of(graph)
    args = list(inputs) if inputs is not None else random_inputs(exe.manifest, seed)
    for _ in range(max(warmup, 0)):
        exe.profile(args)
    return exe.profile(args)[1]


def estimated_seconds(graph: Any, inputs: Sequence[Any] | None = None, *, seed: int = 0) -> float:
    """Estimated time of one execution of `graph` on a trn1 NeuronCore-v2 (the cost model's
    makespan over the Tensor, Vector, Scalar, GpSimd and DMA engines)."""
    return float(profile(graph, inputs, seed=seed, warmup=0).total_seconds)
