"""Public ``nki.isa`` APIs the emulator does not implement: each is a function that refuses by
name (``UnsupportedAPIError``, a ``NotImplementedError``, through ``nki/unsupported.py``), so
that a kernel using one stops at its line with the API named, never with an ``AttributeError``
or a result of another meaning."""

from __future__ import annotations

from ..unsupported import unsupported as refusal

_SEEDED = ("the emulator's generator is counter-based (nisa.set_rng_seed and nl.random_seed "
           "seed it with one value), without per-lane XORWOW states to set or read")

#: (generation prefix, name) -> why; beta1.py and beta2.py create the functions.
WHY: dict[str, str] = {
    "topk": "its 16-partition snake layout is not emulated yet (max8 and nc_find_index8 are)",
    "quantize_mx": "MX (microscaling) types are not emulated yet",
    "nc_matmul_mx": "MX (microscaling) types are not emulated yet",
    "rand_set_state": _SEEDED,
    "rand_get_state": _SEEDED,
    "builtin_custom_op": "built-in custom ops are compiled libraries of the Neuron compiler",
}
