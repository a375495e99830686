"""``nki.language`` names of the reference that the emulator refuses, each with its reason
(``unsupported.py``): calling one is an ``UnsupportedAPIError`` naming it."""

from __future__ import annotations

from ..unsupported import unsupported

all_reduce = unsupported(
    "nki.language.all_reduce", "a reduction across the programs of the grid is a collective "
    "between NeuronCores (the multi-NeuronCore issue)")
gemm_grid = unsupported(
    "nki.language.gemm_grid", "its result (an index grid of the TensorE result tile) is not "
    "described by NKI's reference; use nl.mgrid[0:128, 0:512]")
gemm_stationary_grid = unsupported(
    "nki.language.gemm_stationary_grid", "its result is not described by NKI's reference; use "
    "nl.mgrid[0:128, 0:128]")
