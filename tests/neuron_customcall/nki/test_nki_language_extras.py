"""The nki.language functions and constants of both generations beyond the seed subset, each
against NumPy or the numbers NKI's reference states: abs_max/abs_min, the sigmoid GELU and its
derivative, static_cast, tile_size, MemoryRegion and the is_* tests, the operator constants,
nc/spmd_dim grids, dynamic_range/fori_loop/while_loop, no_reorder, random_seed, device_print."""
from __future__ import annotations

import ast
import io
import re

import numpy as np
import pytest

from emulator.kernel_exec import device_print as printing
from emulator.kernel_ir import from_bytes, to_bytes
from neuron_customcall import nki
from neuron_customcall.nki import language as nl
from neuron_customcall.nki.errors import KernelTraceError, UnsupportedAPIError
from tests.neuron_customcall.nki.nki_api_spec import TENSOR_MEMBERS


@nki.jit
def binary(a, b, op):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, op(nl.load(a), nl.load(b)))
    return out


def test_abs_max_and_abs_min_keep_the_sign_and_pick_y_on_ties():
    a = np.array([[-5.0, 1.0, 2.0, -3.0, 0.5]] * 4, np.float32)
    b = np.array([[3.0, -1.0, -4.0, 3.0, -0.25]] * 4, np.float32)
    np.testing.assert_array_equal(binary(a, b, nl.abs_max),
                                  np.where(np.abs(a) > np.abs(b), a, b))
    np.testing.assert_array_equal(binary(a, b, nl.abs_min),
                                  np.where(np.abs(a) < np.abs(b), a, b))
    assert binary(a, b, nl.abs_max)[0, 1] == -1.0 and binary(a, b, nl.abs_min)[0, 3] == 3.0


@nki.jit
def unary(a, op):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, op(nl.load(a)))
    return out


def test_gelu_with_the_sigmoid_approximation_and_its_derivative():
    x = np.linspace(-6, 6, 128 * 64, dtype=np.float32).reshape(128, 64)
    s = 1 / (1 + np.exp(-1.702 * x.astype(np.float64)))
    np.testing.assert_allclose(unary(x, nl.gelu_apprx_sigmoid), x * s, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(unary(x, nl.gelu_apprx_sigmoid_dx), s + 1.702 * x * s * (1 - s),
                               rtol=1e-5, atol=1e-6)


@nki.jit
def cast_kernel(a):
    out = nl.ndarray(a.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
    t = nl.static_cast(nl.load(a), nl.bfloat16)
    assert t.dtype == nl.bfloat16
    assert nl.static_cast(3.7, nl.int32) == 3 and isinstance(nl.static_cast(1, np.float16),
                                                               np.float16)
    nl.store(out, t)
    return out


def test_static_cast_of_tiles_and_scalars():
    a = np.random.default_rng(0).standard_normal((128, 32)).astype(np.float32)
    np.testing.assert_array_equal(cast_kernel(a), a.astype(nl.bfloat16))
    assert nl.static_cast(np.float32(2.5), nl.float16) == np.float16(2.5)


def test_tile_size_has_every_field_of_both_generations():
    ts = nl.tile_size
    assert (ts.pmax, ts.psum_fmax, ts.psum_bank_fmax, ts.gemm_stationary_fmax,
            ts.gemm_moving_fmax, ts.bn_stats_fmax) == (128, 512, 512, 128, 512, 512)
    assert ts.psum_bank_fmax_bytes == 2048 and ts.psum_num_banks == 8
    assert ts.sbuf_size_bytes == 24 * 1024 * 1024
    assert ts.total_available_sbuf_size == ts.sbuf_fmax_bytes == (192 - 16) * 1024
    assert ts.sbuf_fmax == ts.sbuf_fmax_bytes // 4
    assert (ts.psum_min_align, ts.sbuf_min_align) == (4, 1)
    assert nki.tile_size is nl.tile_size


def test_memory_regions_and_buffer_tests():
    assert [m.value for m in nl.MemoryRegion] == ["sbuf", "psum", "private_hbm", "shared_hbm"]
    for buf, hbm, chip, psum, sbuf in [(nl.sbuf, 0, 1, 0, 1), (nl.psum, 0, 1, 1, 0),
                                       (nl.hbm, 1, 0, 0, 0), (nl.private_hbm, 1, 0, 0, 0),
                                       (nl.shared_hbm, 1, 0, 0, 0),
                                       (nl.MemoryRegion.psum, 0, 1, 1, 0),
                                       (nl.MemoryRegion.shared_hbm, 1, 0, 0, 0)]:
        assert (nl.is_hbm(buf), nl.is_on_chip(buf), nl.is_psum(buf), nl.is_sbuf(buf)) == \
            (bool(hbm), bool(chip), bool(psum), bool(sbuf)), buf
    with pytest.raises(TypeError, match="not a buffer"):
        nl.is_sbuf("dram")


@nki.jit
def region_kernel(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.MemoryRegion.shared_hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.MemoryRegion.sbuf)
    assert nl.is_sbuf(t) and nl.is_hbm(out) and isinstance(t, nl.NkiTensor)
    t[...] = nl.load(a)
    nl.store(out, t)
    return out


def test_memory_region_members_are_buffers_in_a_kernel():
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    np.testing.assert_array_equal(region_kernel(a), a)


def test_operator_constants_and_base_types():
    assert repr(nl.bypass) == "nl.bypass" and nl.bypass._nki_alu == "bypass"
    assert nl.prelu._nki_act == "prelu" and nl.average._nki_alu == "average"
    obj = nl.NKIObject(tile=128, name="cfg")
    assert (obj.tile, obj.name) == (128, "cfg")


@nki.jit
def spmd_copy(a):
    """Beta 1's test_nki_spmd_grid kernel: a [4, 2, 1, 1] copy, one element per program."""
    b = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i, j = nl.program_id(0), nl.program_id(1)
    nl.store(b[i, j], nl.load(a[i, j]))
    return b


@pytest.mark.parametrize("dim", [4, nl.spmd_dim(nl.nc(2), 2), nl.nc(2) * 2,
                                 nl.spmd_dim(2, nl.nc(2)), 2 * nl.nc(2)])
def test_grids_over_neuron_cores_give_the_one_core_result(dim):
    a = (np.random.default_rng(5).random((4, 2, 1, 1)) * 100).astype(np.float32)
    assert dim == 4
    np.testing.assert_array_equal(spmd_copy[dim, 2](a), a)


def test_spmd_dim_keeps_its_factors():
    d = nl.nc(2) * 3
    assert isinstance(d, nl.spmd_dim) and d.factors == (nl.nc(2), 3) and int(d) == 6
    with pytest.raises(ValueError):
        nl.nc(0)


@nki.jit
def prefix_sums(a, how):
    """Running sum of the columns of a [128, n] tensor, column by column, with each loop API."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 1), dtype=nl.float32)
    n = a.shape[1]

    def body(j):
        acc[...] = nl.add(acc, nl.load(a[:, nl.ds(j, 1)]))
        nl.store(out[:, nl.ds(j, 1)], acc)

    if how == "dynamic_range":
        for j in nl.dynamic_range(n):
            body(j)
    elif how == "dynamic_range_bounds":
        for j in nl.dynamic_range(0, n, 1):
            body(j)
    else:
        nl.fori_loop(0, n, body)
    return out


@pytest.mark.parametrize("how", ["dynamic_range", "dynamic_range_bounds", "fori_loop"])
def test_dynamic_loops_with_static_bounds_run_in_order(how):
    a = np.random.default_rng(6).random((128, 9)).astype(np.float32)
    np.testing.assert_allclose(prefix_sums(a, how), np.cumsum(a, axis=1), rtol=1e-6)


def test_dynamic_loop_operands_are_checked_by_name():
    """Register bounds run (test_nki_dynamic_loops.py); other operands are named errors."""
    with pytest.raises(TypeError, match=r"nki\.language\.dynamic_range: stop must be an int or "
                       "a VirtualRegister"):
        nl.dynamic_range(object())
    with pytest.raises(TypeError, match=r"step must be a positive int"):
        nl.dynamic_range(4, step=0)


@nki.jit
def ordered(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    with nl.no_reorder():
        x = nl.full(a.shape, 3.0, dtype=nl.float32)
        y = nl.add(x, nl.load(a))
    nl.store(out, y)
    return out


def test_no_reorder_keeps_program_order():
    a = np.ones((8, 8), np.float32)
    np.testing.assert_array_equal(ordered(a), a + 3)


@nki.jit
def seeded(a, seed_value):
    out = nl.ndarray((4, 128, 16), dtype=nl.float32, buffer=nl.shared_hbm)
    seed = nl.full((1, 1), seed_value, dtype=nl.int32, buffer=nl.sbuf)
    nl.random_seed(seed)
    nl.store(out[0], nl.rand((128, 16), dtype=nl.float32))
    nl.store(out[1], nl.rand((128, 16), dtype=nl.float32))
    nl.random_seed(seed)
    nl.store(out[2], nl.rand((128, 16), dtype=nl.float32))
    nl.random_seed(seed_value + 1)  # beta 1: a 32-bit integer
    nl.store(out[3], nl.rand((128, 16), dtype=nl.float32))
    return out


def test_random_seed_restarts_the_stream():
    r = seeded(np.zeros(1, np.float32), 42)
    np.testing.assert_array_equal(r[0], r[2])            # same seed, same values
    assert not np.array_equal(r[0], r[1])               # the next draw differs
    assert not np.array_equal(r[0], r[3])               # another seed differs
    assert ((r >= 0) & (r < 1)).all() and abs(r.mean() - 0.5) < 0.02
    other = seeded(np.zeros(1, np.float32), 7)
    assert not np.array_equal(r[0], other[0])           # the seed's value matters at run time
    np.testing.assert_array_equal(seeded(np.zeros(1, np.float32), 42), r)


@pytest.fixture
def printed():
    buf = io.StringIO()
    previous = printing.set_stream(buf)
    yield buf
    printing.set_stream(previous)


@nki.jit
def print_rows(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    t = nl.load(a[i * 2 + nl.arange(2)[:, None], nl.arange(3)[None, :]])
    nl.device_print("tile=", t)
    nl.store(out[i * 2 + nl.arange(2)[:, None], nl.arange(3)[None, :]], t)
    return out


def test_device_print_writes_one_line_per_program(printed):
    a = np.arange(12, dtype=np.float32).reshape(6, 2)[:, :1].repeat(3, axis=1).copy()
    a[:, 1] += 100
    print_rows[3](a)
    lines = printed.getvalue().splitlines()
    assert len(lines) == 3
    for pid, line in enumerate(lines):
        assert line.startswith(f"tile= [p0={pid}] ")
        values = np.array(ast.literal_eval(line.split("] ", 1)[1]), np.float32)
        np.testing.assert_array_equal(values, a[pid * 2:pid * 2 + 2])


@nki.jit
def print_in_loop(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for k in nl.affine_range(2):
        t = nl.load(a[k])
        nl.device_print("hbm", a[k])
        nl.device_print("sbuf", t)
        nl.store(out[k], t)
    return out


def test_device_print_in_a_loop_and_of_hbm(printed):
    a = np.arange(16, dtype=np.float32).reshape(2, 2, 4)
    np.testing.assert_array_equal(print_in_loop(a), a)
    lines = printed.getvalue().splitlines()
    loop = re.search(r" (l\d+)=", lines[0]).group(1)  # the loop variable's IR symbol
    assert sorted(lines) == sorted(
        f"{what} [p0=0 {loop}={k}] {np.array2string(a[k], separator=', ').replace(chr(10), '')}"
        for what in ("hbm", "sbuf") for k in range(2))


@nki.jit
def print_kernel(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    nl.device_print("x", t)
    nl.store(out, t)
    return out


def test_device_print_survives_serialisation_and_refuses_bad_prefixes(printed):
    traced = print_kernel.trace([np.zeros((2, 2), np.float32)])
    again = from_bytes(to_bytes(traced.ir))
    assert [i.attrs for i in again.body if i.op == "device_print"] == [{"prefix": "x"}]

    @nki.jit
    def bad(a):
        nl.device_print(3, nl.load(a))
        return a

    with pytest.raises(KernelTraceError, match="device_print prefix"):
        bad(np.zeros((2, 2), np.float32))


def test_mgrid_has_partition_and_free_attributes():
    @nki.jit
    def grid_copy(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        g = nl.mgrid[0:128, 0:64]
        nl.store(out[g.p, g.x], nl.load(a[g.p, g.x]))
        return out

    a = np.random.default_rng(7).random((128, 64)).astype(np.float32)
    np.testing.assert_array_equal(grid_copy(a), a)


@nki.jit
def gather_kernel(data, indices):
    out = nl.ndarray(indices.shape, dtype=data.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.gather_flattened(nl.load(data), nl.load(indices)))
    return out


def test_gather_flattened_is_the_references_example():
    data = np.array([[[1., 2.], [3., 4.]], [[5., 6.], [7., 8.]]], np.float32)
    indices = np.array([[[0, 1], [1, 3]], [[3, 3], [1, 0]]], np.uint32)
    np.testing.assert_array_equal(gather_kernel(data, indices),
                                  [[[1., 2.], [2., 4.]], [[8., 8.], [6., 5.]]])


def test_gather_flattened_against_numpy_and_out_of_bounds():
    rng = np.random.default_rng(8)
    data = rng.standard_normal((128, 4, 16)).astype(np.float32)
    indices = rng.integers(0, 64, (128, 32), dtype=np.uint32)
    want = np.take_along_axis(data.reshape(128, -1), indices.astype(np.int64), axis=-1)
    np.testing.assert_array_equal(gather_kernel(data, indices), want)
    indices[3, 5] = 64  # past the end: garbage on hardware, NaN here
    got = gather_kernel(data, indices)
    assert np.isnan(got[3, 5]) and np.isfinite(np.delete(got.ravel(), 3 * 32 + 5)).all()
    with pytest.raises(KernelTraceError, match="indices must be uint32"):
        gather_kernel(data, indices.astype(np.int32))


@nki.jit
def loop_reduce_kernel(a, op):
    """Reduce [k, 128, 64] blocks over k with nl.loop_reduce inside two nested loops."""
    out = nl.ndarray(a.shape[1:], dtype=nl.float32, buffer=nl.shared_hbm)
    k2 = a.shape[0] // 2
    for i in nl.affine_range(2):
        for j in nl.affine_range(k2):
            t = nl.load(a[i * k2 + j])
            b = nl.loop_reduce(t, op=op, loop_indices=[i, j], dtype=nl.float32)
    nl.store(out, b)
    return out


@pytest.mark.parametrize("op, ref", [(np.add, np.sum), (nl.maximum, np.max),
                                     (np.minimum, np.min), (nl.multiply, np.prod)])
def test_loop_reduce_over_nested_loops(op, ref):
    a = np.random.default_rng(9).uniform(0.5, 1.5, (6, 128, 64)).astype(np.float32)
    np.testing.assert_allclose(loop_reduce_kernel(a, op), ref(a, axis=0), rtol=1e-5)


def test_loop_reduce_refuses_non_associative_operators():
    with pytest.raises(KernelTraceError, match="subtract is not associative"):
        loop_reduce_kernel(np.zeros((2, 128, 64), np.float32), nl.subtract)


@nki.jit
def identities(a):
    """Beta 1: the default identity is uint8 in HBM; beta 2: ``dst=`` receives it."""
    out = nl.ndarray((3, 64, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    ident = nl.shared_identity_matrix(64)
    assert ident.dtype == np.uint8
    nl.store(out[0], nl.load(ident, nl.float32))
    tile = nl.ndarray((64, 64), nl.bfloat16, nl.sbuf)
    assert nl.shared_identity_matrix(64, nl.bfloat16, dst=tile) is tile
    nl.store(out[1], tile)
    nl.shared_identity_matrix(n=64, dtype=nl.float32, dst=out[2])
    return out


def test_shared_identity_matrix_default_dtype_and_dst():
    got = identities(np.zeros(1, np.float32))
    np.testing.assert_array_equal(got, np.broadcast_to(np.eye(64, dtype=np.float32), (3, 64, 64)))


@nki.jit
def positional_beta2(a):
    """Beta 2 passes dtype, buffer and keepdims positionally."""
    out = nl.ndarray((128, 1), nl.float32, nl.shared_hbm)
    t = nl.load(a, nl.float32)
    z = nl.zeros((128, 64), nl.float32, nl.sbuf)
    s = nl.sum(nl.add(t, z, nl.float32), 1, nl.float32, True)
    nl.store(out, nl.exp(s, nl.float32))
    return out


def test_beta2_positional_arguments():
    a = np.random.default_rng(10).random((128, 64)).astype(np.float16) / 64
    np.testing.assert_allclose(positional_beta2(a),
                               np.exp(a.astype(np.float32).sum(axis=1, keepdims=True)), rtol=1e-5)


@pytest.mark.parametrize("gen", sorted(TENSOR_MEMBERS))
def test_tensor_members_of_both_generations_exist(gen):
    missing = [m for m in TENSOR_MEMBERS[gen].split() if m not in dir(nl.NkiTensor)]
    assert not missing


@nki.jit
def views(a, how):
    """[2, 128, 1, 8] HBM tensor through one NkiTensor view method, loaded and stored."""
    if how == "permute":
        src = a.permute((0, 1, 3, 2))              # [2, 128, 8, 1]
    elif how == "squeeze":
        src = a.squeeze_dim(2)                      # [2, 128, 8]
    elif how == "expand":
        src = a.squeeze_dim(2).expand_dim(2)        # back to [2, 128, 1, 8]
    elif how == "broadcast":
        src = a.broadcast(2, 3)                     # [2, 128, 3, 8]
    elif how == "slice":
        src = a.slice(3, 2, 8, 2)                   # [2, 128, 1, 3]
    else:
        src = a.select(0, 1).assert_shape((128, 1, 8))
    assert src.size == int(np.prod(src.shape))
    out = nl.ndarray(src.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    if len(src.shape) == 4:
        for i in nl.affine_range(src.shape[0]):
            nl.store(out[i], nl.load(src[i]))
    else:
        nl.store(out, nl.load(src))
    return out


@pytest.mark.parametrize("how, ref", [
    ("permute", lambda a: a.transpose(0, 1, 3, 2)), ("squeeze", lambda a: a[:, :, 0]),
    ("expand", lambda a: a), ("broadcast", lambda a: np.broadcast_to(a, (2, 128, 3, 8))),
    ("slice", lambda a: a[..., 2:8:2]), ("select", lambda a: a[1]),
])
def test_nki_tensor_views_against_numpy(how, ref):
    a = np.random.default_rng(11).random((2, 128, 1, 8)).astype(np.float32)
    np.testing.assert_array_equal(views(a, how), ref(a))


@nki.jit
def uses_get_pattern(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    a.get_pattern()
    nl.store(out, nl.load(a))
    return out


def test_access_patterns_and_bad_views_are_refused_by_name():
    with pytest.raises(UnsupportedAPIError, match=r"NkiTensor\.get_pattern is not supported"):
        uses_get_pattern(np.zeros((128, 8), np.float32))

    @nki.jit
    def bad(a, how):
        t = nl.load(a)
        if how == "permute":
            t.permute((1, 0))
        elif how == "squeeze":
            t.squeeze_dim(1)
        else:
            t.assert_shape((4, 4))
        return a

    for how, rule in (("permute", "permute of the partition dimension"),
                      ("squeeze", "squeeze_dim"), ("assert", "assert_shape")):
        with pytest.raises(KernelTraceError, match=rule):
            bad(np.zeros((128, 8), np.float32), how)
