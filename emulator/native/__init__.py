"""Fused native code for a program's element-wise regions (docs/emulator.md, "Fused native
regions"): runs of element-wise instructions over one shape become one call of generated C++,
built by g++ in the background once a program is hot, verified before it is loaded, and swapped
in for the NumPy handlers with bit-identical results.

Modules: `cexpr` (which ops fuse, and their C expressions), `regions` (finding regions while the
runner's code is generated), `csource` (the module's C++), `build` (g++, the private cache, the
digest check, loading), `policy` (when: NEURON_EMULATOR_NATIVE)."""
from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from emulator.native.regions import Region


def compile_regions(regions: Sequence[Region]) -> list[Callable[..., Any]]:
    """One native function per region (signature `f(fallback, *leaves)`), from a module built or
    found in the cache. Raises build.NativeBuildError (or OSError) when that fails."""
    from emulator.native import build, csource

    template = csource.module_source("NCC_MODULE_NAME", list(regions))
    name = "ncc_fused_" + hashlib.sha256(template.encode()).hexdigest()[:24]
    module = build.load_module(name, template.replace("NCC_MODULE_NAME", name))
    return [getattr(module, f"r{j}") for j in range(len(regions))]
