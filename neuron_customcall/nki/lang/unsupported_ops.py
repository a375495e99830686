"""``nki.language`` names of the reference that the emulator refuses, each with its reason
(``unsupported.py``): calling one is an ``UnsupportedAPIError`` naming it."""

from __future__ import annotations

from ..unsupported import unsupported

all_reduce = unsupported(
    "nki.language.all_reduce", "a reduction across the SPMD programs of the grid needs the "
    "programs to exchange tiles while they run, and the emulator runs a grid's programs "
    "independently (vectorised, one at a time or on several host threads) with no exchange "
    "between them; reduce over a loop inside one program, or use nki.collectives across cores")
gemm_grid = unsupported(
    "nki.language.gemm_grid", "its result (an index grid of the TensorE result tile) is not "
    "described by NKI's reference; use nl.mgrid[0:128, 0:512]")
gemm_stationary_grid = unsupported(
    "nki.language.gemm_stationary_grid", "its result is not described by NKI's reference; use "
    "nl.mgrid[0:128, 0:128]")
