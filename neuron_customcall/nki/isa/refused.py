"""Public ``nki.isa`` APIs the emulator does not implement: each is a function that refuses by
name (``UnsupportedAPIError``, a ``NotImplementedError``, through ``nki/unsupported.py``), so
that a kernel using one stops at its line with the API named, never with an ``AttributeError``
or a result of another meaning."""

from __future__ import annotations

from ..unsupported import unsupported as refusal

_DATA_DEPENDENT = "it needs data-dependent addressing, which the kernel IR does not have yet"
_MULTI_CORE = "it needs several NeuronCores (issue 18)"

#: (generation prefix, name) -> why; beta1.py and beta2.py create the functions.
WHY: dict[str, str] = {
    "local_gather": _DATA_DEPENDENT,
    "nc_n_gather": _DATA_DEPENDENT,
    "nc_stream_shuffle": "cross-partition shuffles are not in the kernel IR yet",
    "nonzero_with_count": _DATA_DEPENDENT,
    "topk": "not in the kernel IR yet (max8 and nc_find_index8 are)",
    "sequence_bounds": "not in the kernel IR yet",
    "tensor_copy_dynamic_src": _DATA_DEPENDENT,
    "tensor_copy_dynamic_dst": _DATA_DEPENDENT,
    "tensor_scalar_cumulative": "not in the kernel IR yet",
    "activate2": "not in the kernel IR yet",
    "dma_compute": "not in the kernel IR yet",
    "quantize_mx": "MX (microscaling) types are not emulated yet",
    "nc_matmul_mx": "MX (microscaling) types are not emulated yet",
    "register_alloc": "engine registers and dynamic control flow are not in the kernel IR yet",
    "register_move": "engine registers and dynamic control flow are not in the kernel IR yet",
    "register_load": "engine registers and dynamic control flow are not in the kernel IR yet",
    "register_store": "engine registers and dynamic control flow are not in the kernel IR yet",
    "set_rng_seed": "the emulator's generator is counter-based and seeded per instruction",
    "rand_set_state": "the emulator's generator is counter-based and seeded per instruction",
    "rand_get_state": "the emulator's generator is counter-based and seeded per instruction",
    "core_barrier": _MULTI_CORE,
    "sendrecv": _MULTI_CORE,
    "builtin_custom_op": "built-in custom ops are compiled libraries of the Neuron compiler",
}
