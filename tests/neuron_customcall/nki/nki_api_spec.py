"""Every public name of NKI's API reference, both generations, written from the documented stubs
of aws-neuron/aws-neuron-sdk: ``nki/api/nki/{language,isa,collectives,compiler}/__init__.py`` and
``nki/api/nki/__init__.py`` as of the NKI beta 1 docs (``neuronxcc.nki``, the 2025-10 tree) and
the beta 2 docs (``nki``, the current tree), plus ``nki.typing`` as the beta 1 guides use it.

This is the one list of what we must provide. ``EXPECTED_MISSING`` holds the names another
change still has to add, each with who owns it; test_nki_api_names.py fails when one of them
appears (so the entry must go) and when any other name is missing. When you land a name, delete
its entry here.
"""

from __future__ import annotations

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
    """,    ("nki.typing", "beta1"): """
        tensor mutable_tensor
    """,
}

#: (module, name) -> why it is missing and who adds it (empty: every name exists).
EXPECTED_MISSING: dict[tuple[str, str], str] = {}


def names(module: str) -> list[str]:
    """Every name the spec lists for ``module``, over both generations."""
    return sorted({n for (m, _), text in SPEC.items() if m == module for n in text.split()})


MODULES: tuple[str, ...] = tuple(sorted({m for m, _ in SPEC}))


#: generation -> the nki.language function signatures of its stub (parameter names in order; after
#: "*" keyword-only; "*args" variadic). test_nki_api_signatures.py binds each against ours.
SIGNATURES: dict[str, str] = {
    "beta1": """
        abs(x, *, dtype, mask)
        add(x, y, *, dtype, mask)
        affine_range(*args)
        all(x, axis, *, dtype, mask)
        all_reduce(x, op, program_axes, *, dtype, mask, parallel_reduce, asynchronous)
        arange(*args)
        arctan(x, *, dtype, mask)
        atomic_rmw(dst, value, op, *, mask)
        bitwise_and(x, y, *, dtype, mask)
        bitwise_or(x, y, *, dtype, mask)
        bitwise_xor(x, y, *, dtype, mask)
        broadcast_to(src, *, shape)
        ceil(x, *, dtype, mask)
        copy(src, *, mask, dtype)
        cos(x, *, dtype, mask)
        device_print(prefix, x, *, mask)
        divide(x, y, *, dtype, mask)
        dropout(x, rate, *, dtype, mask)
        ds(start, size)
        empty_like(a, dtype, *, buffer, name)
        equal(x, y, *, dtype, mask)
        erf(x, *, dtype, mask)
        erf_dx(x, *, dtype, mask)
        exp(x, *, dtype, mask)
        expand_dims(data, axis)
        finfo(dtype)
        floor(x, *, dtype, mask)
        fmod(x, y, dtype, mask)
        full(shape, fill_value, dtype, *, buffer, name)
        gather_flattened(data, indices, *, mask, dtype)
        gelu(x, *, dtype, mask)
        gelu_apprx_sigmoid(x, *, dtype, mask)
        gelu_apprx_tanh(x, *, dtype, mask)
        gelu_dx(x, *, dtype, mask)
        gemm_grid()
        gemm_stationary_grid()
        greater(x, y, *, dtype, mask)
        greater_equal(x, y, *, dtype, mask)
        invert(x, *, dtype, mask)
        left_shift(x, y, *, dtype, mask)
        less(x, y, *, dtype, mask)
        less_equal(x, y, *, dtype, mask)
        load(src, *, mask, dtype)
        load_transpose2d(src, *, mask, dtype)
        log(x, *, dtype, mask)
        logical_and(x, y, *, dtype, mask)
        logical_not(x, *, dtype, mask)
        logical_or(x, y, *, dtype, mask)
        logical_xor(x, y, *, dtype, mask)
        loop_reduce(x, op, loop_indices, *, dtype, mask)
        matmul(x, y, *, transpose_x, mask)
        max(x, axis, *, dtype, mask, keepdims)
        maximum(x, y, *, dtype, mask)
        mean(x, axis, *, dtype, mask, keepdims)
        min(x, axis, *, dtype, mask, keepdims)
        minimum(x, y, *, dtype, mask)
        mish(x, *, dtype, mask)
        mod(x, y, dtype, mask)
        multiply(x, y, *, dtype, mask)
        ndarray(shape, dtype, *, buffer, name)
        negative(x, *, dtype, mask)
        not_equal(x, y, *, dtype, mask)
        num_programs(axes)
        ones(shape, dtype, *, buffer, name)
        power(x, y, *, dtype, mask)
        prod(x, axis, *, dtype, mask, keepdims)
        program_id(axis)
        program_ndim()
        rand(shape, dtype)
        random_seed(seed, *, mask)
        reciprocal(x, *, dtype, mask)
        relu(x, *, dtype, mask)
        right_shift(x, y, *, dtype, mask)
        rms_norm(x, w, axis, n, epsilon, *, dtype, compute_dtype, mask)
        rsqrt(x, *, dtype, mask)
        sequential_range(*args)
        shared_constant(constant, dtype)
        shared_identity_matrix(n, dtype)
        sigmoid(x, *, dtype, mask)
        sign(x, *, dtype, mask)
        silu(x, *, dtype, mask)
        silu_dx(x, *, dtype, mask)
        sin(x, *, dtype, mask)
        softmax(x, axis, *, dtype, compute_dtype, mask)
        softplus(x, *, dtype, mask)
        sqrt(x, *, dtype, mask)
        square(x, *, dtype, mask)
        static_cast(input_data, dtype)
        static_range(*args)
        store(dst, value, *, mask)
        subtract(x, y, *, dtype, mask)
        sum(x, axis, *, dtype, mask, keepdims)
        tan(x, *, dtype, mask)
        tanh(x, *, dtype, mask)
        transpose(x, *, dtype, mask)
        trunc(x, *, dtype, mask)
        var(x, axis, *, dtype, mask)
        where(condition, x, y, *, dtype, mask)
        zeros(shape, dtype, *, buffer, name)
        zeros_like(a, dtype, *, buffer, name)
    """,
    "beta2": """
        is_hbm(buffer)
        is_on_chip(buffer)
        is_psum(buffer)
        is_sbuf(buffer)
        add(x, y, dtype)
        subtract(x, y, dtype)
        multiply(x, y, dtype)
        divide(x, y, dtype)
        maximum(x, y, dtype)
        minimum(x, y, dtype)
        abs_max(x, y, dtype)
        abs_min(x, y, dtype)
        abs(x, dtype)
        square(x, dtype)
        power(x, y, dtype)
        equal(x, y, dtype)
        not_equal(x, y, dtype)
        less(x, y, dtype)
        less_equal(x, y, dtype)
        greater(x, y, dtype)
        greater_equal(x, y, dtype)
        bitwise_and(x, y, dtype)
        bitwise_or(x, y, dtype)
        bitwise_xor(x, y, dtype)
        invert(x, dtype)
        left_shift(x, y, dtype)
        right_shift(x, y, dtype)
        logical_and(x, y, dtype)
        logical_or(x, y, dtype)
        logical_xor(x, y, dtype)
        logical_not(x, dtype)
        exp(x, dtype)
        log(x, dtype)
        sqrt(x, dtype)
        rsqrt(x, dtype)
        tanh(x, dtype)
        sigmoid(x, dtype)
        relu(x, dtype)
        gelu(x, dtype)
        gelu_apprx_sigmoid(x, dtype)
        gelu_apprx_tanh(x, dtype)
        gelu_dx(x, dtype)
        gelu_apprx_sigmoid_dx(x, dtype)
        silu(x, dtype)
        silu_dx(x, dtype)
        softplus(x, dtype)
        mish(x, dtype)
        erf(x, dtype)
        erf_dx(x, dtype)
        reciprocal(x, dtype)
        copy(x, dtype)
        sin(x, dtype)
        cos(x, dtype)
        tan(x, dtype)
        arctan(x, dtype)
        ceil(x, dtype)
        floor(x, dtype)
        trunc(x, dtype)
        negative(x, dtype)
        sign(x, dtype)
        fmod(x, y, dtype)
        mod(x, y, dtype)
        sum(x, axis, dtype, keepdims)
        max(x, axis, dtype, keepdims)
        min(x, axis, dtype, keepdims)
        mean(x, axis, dtype, keepdims)
        prod(x, axis, dtype, keepdims)
        var(x, axis, dtype, keepdims)
        all(x, axis, dtype)
        softmax(x, axis, dtype)
        rms_norm(x, w, axis, n, epsilon, dtype, compute_dtype)
        where(condition, x, y, dtype)
        dropout(x, rate, dtype)
        ones(shape, dtype, buffer, name)
        full(shape, fill_value, dtype, buffer, name)
        zeros_like(x, dtype, buffer, name)
        empty_like(x, dtype, buffer, name)
        random_seed(seed)
        expand_dims(x, axis)
        broadcast_to(x, shape, dtype)
        transpose(x, dtype)
        matmul(x, y, transpose_x)
        no_reorder()
        load_transpose2d(src, dtype)
        gather_flattened(data, indices, axis, dtype)
        ds(start, size)
        affine_range(start, stop, step)
        sequential_range(start, stop, step)
        static_range(start, stop, step)
        dynamic_range(start, stop, step)
        fori_loop(lower, upper, body_fun, step)
        while_loop(init, body_fun)
        ndarray(shape, dtype, buffer, name, address)
        zeros(shape, dtype, buffer, name)
        load(src, dtype)
        store(dst, value)
        program_id(axis)
        num_programs(axes)
        program_ndim()
        shared_constant(constant)
        shared_identity_matrix(n, dtype, dst)
        device_print(print_prefix, tensor)
        rand(shape, dtype, buffer, name)
    """,
}


#: The members of the tensor classes: beta 1's ``nki.tensor``, beta 2's ``nl.NkiTensor``.
TENSOR_MEMBERS: dict[str, str] = {
    "beta1": "assert_shape astype broadcast_to dtype expand_dims itemsize ndim reshape shape view",
    "beta2": """shape strides offset name dtype buffer ndim size is_contiguous get_pattern
                is_indirect permute broadcast expand_dim squeeze_dim reshape_dim flatten_dims
                reshape rearrange slice select vector_select ap view indirect""",
}
