"""Where the device runtime's sources live: the headers kernels include and the C API source
compiled into every custom-op library (shipped as package data)."""

from __future__ import annotations

from pathlib import Path

GPSIMD_DIR = Path(__file__).resolve().parent
INCLUDE_DIR = GPSIMD_DIR / "include"
RUNTIME_SOURCE = GPSIMD_DIR / "runtime" / "gpsimd_runtime.cpp"
