"""Loads the test kernels under kernels/ once per process, through a shared build cache."""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from pathlib import Path

from neuron_customcall import custom_op

KERNELS = Path(__file__).parent / "kernels"
# One build directory per checkout: worktrees of the same user built into one directory, each
# rebuilding its libraries with its own runtime, so one tree's tests could load another's.
_CHECKOUT = hashlib.sha256(str(Path(__file__).resolve().parents[3]).encode()).hexdigest()[:10]
BUILD_ROOT = Path(tempfile.gettempdir()) / f"neuron_customcall_tests_{os.getuid()}_{_CHECKOUT}"

LIBRARIES = {
    "negate": (["negate.cpp"], ["negate_shape.cpp"], False),
    "relu": (["relu.cpp", "relu_stream.cpp", "relu_tcm.cpp"], ["relu_shape.cpp"], False),
    "relu_multicore": (["relu_multicore.cpp"], ["relu_multicore_shape.cpp"], True),
    "dtype_ops": (["dtype_ops.cpp"], ["dtype_ops_shape.cpp"], False),
    "scalar_first": (["scalar_first.cpp"], ["scalar_first_shape.cpp"], False),
}


@functools.lru_cache(maxsize=None)
def load(name: str) -> Path:
    compute, shape, multicore = LIBRARIES[name]
    return custom_op.load(
        name=name,
        compute_srcs=[KERNELS / s for s in compute],
        shape_srcs=[KERNELS / s for s in shape],
        build_directory=BUILD_ROOT / name,
        multicore=multicore,
    )
