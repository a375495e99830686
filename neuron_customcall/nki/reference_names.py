"""Every public name of NKI's API reference, both generations: the list of what we must provide.

Written from the documented stubs of aws-neuron/aws-neuron-sdk
(``nki/api/nki/{language,isa,collectives,compiler}/__init__.py`` and ``nki/api/nki/__init__.py``)
as of the NKI beta 1 docs (``neuronxcc.nki``, the 2025-10 tree) and the beta 2 docs (``nki``, the
current tree), plus ``nki.typing`` as the beta 1 guides use it. Why in the package: the API page
(docs/nki-api.md, tools/gen_nki_api_docs.py) and the tests that every name exists both read it.
"""

from __future__ import annotations

import importlib
from types import ModuleType

#: (module, generation) -> the names its stub defines (module-level, public).
SPEC: dict[tuple[str, str], str] = {
    ("nki.language", "beta1"): """
        abs add affine_range all all_reduce arange arctan atomic_rmw bfloat16 bfp16
        bitwise_and bitwise_or bitwise_xor bool_ broadcast_to ceil copy cos device_print
        divide dropout ds empty_like equal erf erf_dx exp expand_dims finfo float16 float32
        float8_e4m3 float8_e5m2 floor fmod fp32 full gather_flattened gelu
        gelu_apprx_sigmoid gelu_apprx_tanh gelu_dx gemm_grid gemm_stationary_grid greater
        greater_equal hbm int16 int32 int8 invert left_shift less less_equal load
        load_transpose2d log logical_and logical_not logical_or logical_xor loop_reduce
        matmul max maximum mean mgrid min minimum mish mod multiply nc ndarray negative
        not_equal num_programs ones par_dim power private_hbm prod program_id program_ndim
        psum rand random_seed reciprocal relu right_shift rms_norm rsqrt sbuf
        sequential_range shared_constant shared_hbm shared_identity_matrix sigmoid sign silu
        silu_dx sin softmax softplus spmd_dim sqrt square static_cast static_range store
        subtract sum tan tanh tfloat32 tile_size transpose trunc uint16 uint32 uint8 var
        where zeros zeros_like
    """,
    ("nki.language", "beta2"): """
        MemoryRegion NKIObject NkiTensor abs abs_max abs_min add affine_range all arctan
        average bfloat16 bitwise_and bitwise_or bitwise_xor bool_ broadcast_to bypass ceil
        copy cos device_print divide dropout ds dynamic_range empty_like equal erf erf_dx
        exp expand_dims float16 float32 float4_e2m1fn_x4 float8_e4m3 float8_e4m3fn
        float8_e4m3fn_x4 float8_e5m2 float8_e5m2_x4 float8_e8m0fnu floor fmod fori_loop full
        gather_flattened gelu gelu_apprx_sigmoid gelu_apprx_sigmoid_dx gelu_apprx_tanh
        gelu_dx greater greater_equal hbm int16 int32 int8 invert is_hbm is_on_chip is_psum
        is_sbuf left_shift less less_equal load load_transpose2d log logical_and logical_not
        logical_or logical_xor matmul max maximum mean min minimum mish mod multiply ndarray
        negative no_reorder not_equal num_programs ones power prelu private_hbm prod
        program_id program_ndim psum rand random_seed reciprocal relu right_shift rms_norm
        rsqrt sbuf sequential_range shared_constant shared_hbm shared_identity_matrix
        sigmoid sign silu silu_dx sin softmax softplus sqrt square static_range store
        subtract sum tan tanh tfloat32 tile_size transpose trunc uint16 uint32 uint8 var
        where while_loop zeros zeros_like
    """,
    ("nki.isa", "beta1"): """
        activation activation_reduce affine_select bn_aggr bn_stats builtin_custom_op
        dge_mode dma_copy dma_engine dma_transpose dropout engine fp32 get_nc_version
        gpsimd_engine iota local_gather max8 memset nc_find_index8 nc_match_replace8
        nc_matmul nc_stream_shuffle nc_transpose nc_version oob_mode range_select reciprocal
        reduce_cmd scalar_engine scalar_tensor_tensor select_reduce sequence_bounds
        tensor_copy tensor_copy_dynamic_dst tensor_copy_dynamic_src tensor_copy_predicated
        tensor_engine tensor_partition_reduce tensor_reduce tensor_scalar
        tensor_scalar_reduce tensor_tensor tensor_tensor_scan unknown_engine vector_engine
    """,
    ("nki.isa", "beta2"): """
        NkiInstruction NkiValidationError VirtualRegister activate2 activation
        activation_reduce affine_select bn_aggr bn_stats core_barrier dge_mode dma_compute
        dma_copy dma_engine dma_transpose dropout engine exponential get_nc_sub_version
        get_nc_version gpsimd_engine iota local_gather matmul_perf_mode max8 memset
        nc_find_index8 nc_match_replace8 nc_matmul nc_matmul_mx nc_n_gather
        nc_stream_shuffle nc_transpose nc_version nonzero_with_count oob_mode quantize_mx
        rand2 rand_get_state rand_set_state range_select reciprocal reduce_cmd
        register_alloc register_load register_move register_store rng scalar_engine
        scalar_tensor_tensor select_reduce sendrecv sequence_bounds set_rng_seed tensor_copy
        tensor_copy_predicated tensor_engine tensor_partition_reduce tensor_reduce
        tensor_scalar tensor_scalar_cumulative tensor_scalar_reduce tensor_tensor
        tensor_tensor_scan topk unknown_engine vector_engine
    """,
    ("nki", "beta1"): """
        FrameworkKernel baremetal benchmark jit profile simulate_kernel tensor
    """,
    ("nki", "beta2"): """
        jit simulate
    """,
    ("nki.compiler", "beta1"): """
        allocation_scope enable_stack_allocator force_auto_alloc multi_buffer no_reorder
        psum sbuf skip_middle_end_transformations
    """,
    ("nki.compiler.sbuf", "beta1"): """
        alloc auto_alloc mod_alloc
    """,
    ("nki.compiler.psum", "beta1"): """
        alloc auto_alloc mod_alloc
    """,
    ("nki.collectives", "beta2"): """
        ReplicaGroup all_gather all_gather_v all_reduce all_to_all all_to_all_v
        collective_permute collective_permute_implicit
        collective_permute_implicit_current_processing_rank_id
        collective_permute_implicit_reduce rank_id reduce_scatter
    """,
    ("nki.typing", "beta1"): """
        tensor mutable_tensor
    """,
}


#: Reference modules whose generations are separate namespaces here (nki.isa: beta 1 returns
#: tiles, beta 2 writes into ``dst``): (module, generation) -> our module.
BY_GENERATION = {("nki.isa", "beta1"): "neuron_customcall.nki.isa",
                 ("nki.isa", "beta2"): "neuron_customcall.nki.isa.beta2"}


def our_module_name(module: str, generation: str | None = None) -> str:
    """Our module for a reference module (``nki.compiler.sbuf`` -> neuron_customcall.nki.compiler.sbuf)."""
    return BY_GENERATION.get((module, generation)) or (
        "neuron_customcall.nki" if module == "nki" else "neuron_customcall." + module)


def our_module(module: str, generation: str | None = None) -> ModuleType | None:
    """The imported module of `our_module_name`, or None when we have no such module."""
    try:
        return importlib.import_module(our_module_name(module, generation))
    except ModuleNotFoundError:
        return None
