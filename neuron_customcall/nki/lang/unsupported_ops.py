"""``nki.language`` names of the reference that the emulator refuses, each with its reason
(``unsupported.py``): calling one is an ``UnsupportedAPIError`` naming it."""

from __future__ import annotations

from ..unsupported import unsupported

all_reduce = unsupported(
    "nki.language.all_reduce", "a reduction across the programs of the grid is a collective "
    "between NeuronCores (the multi-NeuronCore issue)")
loop_reduce = unsupported(
    "nki.language.loop_reduce", "not implemented yet; accumulate with `acc[...] += x` (or "
    "nl.maximum into a tile declared before the loop) instead")
gather_flattened = unsupported(
    "nki.language.gather_flattened", "not implemented yet (a per-partition gather)")
gemm_grid = unsupported(
    "nki.language.gemm_grid", "its result (an index grid of the TensorE result tile) is not "
    "described by NKI's reference; use nl.mgrid[0:128, 0:512]")
gemm_stationary_grid = unsupported(
    "nki.language.gemm_stationary_grid", "its result is not described by NKI's reference; use "
    "nl.mgrid[0:128, 0:128]")
