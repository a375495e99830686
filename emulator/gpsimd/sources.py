"""Where the device runtime's sources live: the headers kernels include and the C API source
compiled into every custom-op library (shipped as package data)."""

from __future__ import annotations

from pathlib import Path

GPSIMD_DIR = Path(__file__).resolve().parent
INCLUDE_DIR = GPSIMD_DIR / "include"
RUNTIME_SOURCE = GPSIMD_DIR / "runtime" / "gpsimd_runtime.cpp"
PRELUDE_HEADER = GPSIMD_DIR / "runtime" / "ncc_prelude.h"


def header_files() -> list[Path]:
    """Every file of the device runtime that a compiled object depends on."""
    return sorted(p for p in INCLUDE_DIR.rglob("*") if p.is_file()) + [PRELUDE_HEADER]
