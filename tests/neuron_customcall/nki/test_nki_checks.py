"""Each hardware rule broken once; the message names the kernel, the file:line and the rule."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from emulator.kernel_exec import KernelRuntimeError, OutOfBoundsAccessError
from neuron_customcall import nki
from neuron_customcall.nki import HardwareRuleError, KernelTraceError
from neuron_customcall.nki import isa as nisa
from neuron_customcall.nki import language as nl

HERE = __file__


def line_of(fn, text: str) -> int:
    """Line number of the first source line of ``fn`` containing ``text``."""
    lines, start = inspect.getsourcelines(fn.func if hasattr(fn, "func") else fn)
    for i, ln in enumerate(lines):
        if text in ln:
            return start + i
    raise AssertionError(text)


def x(*shape):
    return np.zeros(shape, np.float32)


def raises_at(kernel, args, text, rule, *fragments, cls=HardwareRuleError, grid=(1,)):
    with pytest.raises(cls) as e:
        kernel[grid](*args)
    msg = str(e.value)
    assert f"kernel {kernel.func.__name__!r}" in msg
    assert f"{HERE}:{line_of(kernel, text)}" in msg, msg
    assert rule in msg, msg
    for f in fragments:
        assert f in msg, msg
    return e.value


def test_partition_dimension_limit():
    @nki.jit
    def too_tall(a):
        t = nl.load(a)  # HERE
        return a

    raises_at(too_tall, [x(256, 64)], "# HERE", "partition dimension limit",
              "partition dimension 256", "exceeds the architecture limit of 128")


def test_psum_tile_at_most_one_partition_of_psum():
    @nki.jit
    def big_psum(a):
        acc = nl.zeros((128, 4100), nl.float32, buffer=nl.psum)  # HERE
        return a

    raises_at(big_psum, [x(1, 1)], "# HERE", "PSUM tile size limit", "16400 bytes per partition",
              "holds 16384 bytes", "8 banks of 2048 bytes")


def test_matmul_result_must_fit_one_psum_bank():
    """A [128, 1024] fp32 PSUM tile is legal (two banks); a matmul result straddling them is
    not: the hardware writes a TensorE result into one bank (emitted directly, as
    ``nisa.nc_matmul(dst=...)`` does)."""
    from neuron_customcall.nki.tracer import current

    @nki.jit
    def straddle(a, b):
        acc = nl.zeros((128, 1024), nl.float32, buffer=nl.psum)
        current().emit("matmul", acc[:, 256:768], nl.load(a), nl.load(b))  # HERE
        return a

    raises_at(straddle, [x(128, 128), x(128, 512)], "# HERE", "PSUM bank", "bytes 1024..3071",
              "2048-byte bank boundary")


def test_attention_sized_psum_tile_written_one_bank_at_a_time():
    """The flash-attention tutorials' [128, 2048] fp32 PSUM tile (four banks), each matmul
    writing 512 columns: legal, and the product is right."""
    from neuron_customcall.nki.tracer import current

    @nki.jit
    def qk(q, k):
        out = nl.ndarray((128, 2048), dtype=nl.float32, buffer=nl.shared_hbm)
        ps = nl.zeros((128, 2048), nl.float32, buffer=nl.psum)
        qt = nl.load(q)
        for n in nl.affine_range(4):
            current().emit("matmul", ps[:, n * 512:(n + 1) * 512], qt,
                           nl.load(k[:, n * 512:(n + 1) * 512]))
        nl.store(out, value=nl.copy(ps))
        return out

    q, k = x(64, 128), x(64, 2048)
    np.testing.assert_allclose(qk(q, k), q.T @ k, rtol=1e-4, atol=1e-4)


def test_matmul_operand_in_psum():
    @nki.jit
    def mm_psum(a, b):
        p = nl.matmul(nl.load(a), nl.load(b), transpose_x=True)
        q = nisa.nc_matmul(p, nl.load(b))  # HERE
        return a

    raises_at(mm_psum, [x(128, 128), x(128, 128)], "# HERE", "matmul operand location",
              "stationary operand", "is in psum", "from SBUF")


def test_matmul_moving_free_size():
    @nki.jit
    def mm_wide(a, b):
        r = nl.matmul(nl.load(a), nl.load(b), transpose_x=True)  # HERE
        return a

    raises_at(mm_wide, [x(128, 128), x(128, 1024)], "# HERE", "matmul moving size",
              "moving free size 1024 exceeds gemm_moving_fmax = 512")


def test_matmul_stationary_free_size_and_contraction():
    @nki.jit
    def mm_tall(a, b):
        r = nisa.nc_matmul(nl.load(a), nl.load(b))  # HERE
        return a

    raises_at(mm_tall, [x(128, 129), x(128, 64)], "# HERE", "matmul stationary size",
              "stationary free size 129 exceeds gemm_stationary_fmax = 128")
    raises_at(mm_tall, [x(64, 32), x(128, 64)], "# HERE", "matmul contraction",
              "contraction (partition) sizes differ")


def test_matmul_result_must_be_in_psum():
    @nki.jit
    def mm_dst(a, b):
        tr = nl.load(a)
        from neuron_customcall.nki.tracer import current
        out = nl.ndarray((64, 64), nl.float32)
        current().emit("matmul", out, tr, nl.load(b))  # HERE
        return a

    raises_at(mm_dst, [x(128, 64), x(128, 64)], "# HERE", "matmul result location", "to PSUM")


def test_reduction_over_partition_axis():
    @nki.jit
    def red0(a):
        s = nl.sum(nl.load(a), axis=0)  # HERE
        return a

    raises_at(red0, [x(128, 64)], "# HERE", "reduction over the partition axis",
              "axis 0 is the partition dimension")


def test_engine_operands_must_be_on_chip():
    @nki.jit
    def hbm_add(a):
        s = nl.add(a, 1.0)  # HERE
        return a

    raises_at(hbm_add, [x(128, 64)], "# HERE", "engine operand location", "hbm tensor 'a'",
              "nl.load it first")


def test_sbuf_capacity():
    @nki.jit
    def hog(a):
        tiles = [nl.ndarray((128, 16384), nl.float32) for _ in range(4)]  # HERE
        for t in tiles:
            t[...] = 0.0
        return a

    e = raises_at(hog, [x(1, 1)], "# HERE", "SBUF capacity",
                  "256 KiB per partition live at once exceeds the 192 KiB", "largest live")
    assert isinstance(e, HardwareRuleError)


def test_sbuf_capacity_counts_only_live_tensors():
    @nki.jit
    def reuse(a):
        out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        for i in nl.static_range(8):  # 8 x 64 KiB in sequence, never more than 2 live
            t = nl.load(a)
            nl.store(out, value=nl.add(t, 1.0))
        return out

    np.testing.assert_array_equal(reuse(x(128, 16384)), 1.0)


def test_psum_capacity():
    @nki.jit
    def banks(a):
        accs = [nl.zeros((128, 512), nl.float32, buffer=nl.psum) for _ in range(9)]  # HERE
        for p in accs:
            p[...] = 1.0
        return a

    raises_at(banks, [x(1, 1)], "# HERE", "PSUM capacity", "exceeds the 16 KiB per partition")


def test_non_affine_index_is_a_trace_error():
    @nki.jit
    def div_index(a):
        t = nl.load(a[nl.program_id(0) * nl.arange(4)[:, None], :])  # HERE
        return a

    raises_at(div_index, [x(4, 8)], "# HERE", "non-affine index", "not affine",
              cls=KernelTraceError, grid=(2,))

    @nki.jit
    def two_part_div(a):
        i = nl.arange(4)[:, None]
        t = nl.load(a[(nl.program_id(0) + i) // 3, :])  # HERE
        return a

    raises_at(two_part_div, [x(4, 8)], "# HERE", "non-affine index", "'// 3'",
              "several varying parts", cls=KernelTraceError, grid=(2,))


def test_python_control_flow_on_program_id_is_a_trace_error():
    @nki.jit
    def branchy(a):
        if nl.program_id(0) == 0:  # HERE
            pass
        return a

    raises_at(branchy, [x(4, 8)], "# HERE", "non-affine index", "Python control flow",
              cls=KernelTraceError, grid=(2,))


def test_out_of_bounds_hbm_access_at_run_time():
    @nki.jit
    def overrun(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        rows = nl.program_id(0) * 128 + nl.arange(128)[:, None]
        t = nl.load(a[rows, nl.arange(8)[None, :]])  # HERE
        nl.store(out[rows, nl.arange(8)[None, :]], value=t)
        return out

    e = raises_at(overrun, [x(300, 8)], "# HERE", "out-of-bounds access",
                  "load reads hbm tensor 'a' out of bounds", "indices [0..383, 0..7]",
                  "shape [300, 8]", cls=OutOfBoundsAccessError, grid=(3,))
    assert isinstance(e, KernelRuntimeError)


def test_uninitialised_sbuf_reads_give_nan():
    @nki.jit
    def half_written(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        buf = nl.ndarray((128, 8), nl.float32)
        buf[:, 0:4] = nl.load(a[:, 0:4])
        nl.store(out, value=buf)
        return out

    got = half_written(np.ones((128, 8), np.float32))
    assert (got[:, :4] == 1).all() and np.isnan(got[:, 4:]).all()


def test_static_slice_beyond_the_tile_is_a_trace_error():
    @nki.jit
    def overslice(a):
        t = nl.load(a[0:256, :])  # HERE
        return a

    raises_at(overslice, [x(128, 8)], "# HERE", "invalid index",
              "slice bound 256 is outside an axis of extent 128", cls=KernelTraceError)


def test_unsupported_argument_dtype_and_language_outside_a_kernel():
    @nki.jit
    def k(a):
        return a

    with pytest.raises(nki.NKIError, match="kernel 'k': an argument has an unsupported dtype"):
        k(np.zeros((2, 2)))  # float64
    with pytest.raises(KernelTraceError, match="no kernel is being traced"):
        nl.program_id(0)


def test_vector_engine_transpose_limit():
    @nki.jit
    def vt(a):
        t = nisa.nc_transpose(nl.load(a), engine="vector")  # HERE
        return a

    raises_at(vt, [x(64, 16)], "# HERE", "transpose size", "VectorE transpose of [64, 16]",
              "32x32")


def test_hardware_only_apis_explain_themselves():
    @nki.benchmark(warmup=1, iters=2)
    def k(a):
        return a

    with pytest.raises(nki.NKIError, match="nki.benchmark needs Trainium hardware.*'k'"):
        k(x(1, 1))
    with pytest.raises(nki.NKIError, match="nki.baremetal needs Trainium hardware"):
        nki.baremetal(lambda a: a)(x(1, 1))


def test_on_chip_out_of_bounds_is_caught_while_tracing():
    @nki.jit
    def overrun_sbuf(a):
        buf = nl.ndarray((128, 512), nl.float32)
        for i in nl.affine_range(3):
            buf[:, nl.ds(i * 256, 256)] = nl.load(a)  # HERE
        return a

    raises_at(overrun_sbuf, [x(128, 256)], "# HERE", "out-of-bounds tile access",
              "axis 1 at indices 0..767, outside its extent 512", cls=KernelTraceError)


def test_load_store_and_psum_pair_locations():
    @nki.jit
    def load_sbuf(a):
        t = nl.load(a)
        u = nl.load(t)  # HERE
        return a

    raises_at(load_sbuf, [x(8, 8)], "# HERE", "load location", "nl.load moves HBM to SBUF",
              "sbuf -> sbuf")

    @nki.jit
    def store_to_sbuf(a):
        t = nl.load(a)
        nl.store(nl.ndarray((8, 8), nl.float32), value=t)  # HERE
        return a

    raises_at(store_to_sbuf, [x(8, 8)], "# HERE", "store location", "nl.store writes to HBM")

    @nki.jit
    def two_psum(a):
        p = nl.ndarray((8, 8), nl.float32, buffer=nl.psum)
        q = nl.ndarray((8, 8), nl.float32, buffer=nl.psum)
        p[...] = 1.0
        q[...] = 2.0
        s = nl.add(p, q)  # HERE
        return a

    raises_at(two_psum, [x(8, 8)], "# HERE", "tensor_tensor operand location", "both operands")


# --- a warning: stores from several programs to the same elements -----------------------------------

def _race_warnings(caplog, kernel, grid, *args):
    import logging
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="neuron_customcall.nki.checks"):
        kernel[grid](*args)
    return [r.getMessage() for r in caplog.records if "several programs" in r.getMessage()]


def test_programs_storing_to_the_same_elements_are_warned_about(caplog):
    @nki.jit
    def every_program_writes_row_block_0(a):
        out = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a[nl.program_id(0) * 128 + nl.arange(128)[:, None], nl.arange(64)[None, :]])
        nl.store(out[nl.arange(128)[:, None], nl.arange(64)[None, :]], value=t)  # same rows
        return out

    (msg,) = _race_warnings(caplog, every_program_writes_row_block_0, (3,), x(384, 64))
    assert f"{HERE}:{line_of(every_program_writes_row_block_0, 'same rows')}" in msg
    assert "kernel 'every_program_writes_row_block_0' on grid [3]" in msg
    assert "to the kernel's output 0 (" in msg and "atomic_rmw" in msg


def test_overlapping_windows_are_warned_about_and_disjoint_tiles_are_not(caplog):
    @nki.jit
    def half_overlap(a):
        out = nl.ndarray((256, 64), dtype=a.dtype, buffer=nl.shared_hbm)
        rows = nl.program_id(0) * 64 + nl.arange(128)[:, None]
        nl.store(out[rows, nl.arange(64)[None, :]], value=nl.load(a[rows, nl.arange(64)[None, :]]))
        return out

    @nki.jit
    def own_tiles(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        rows = nl.program_id(0) * 128 + nl.arange(128)[:, None]
        cols = nl.program_id(1) * 32 + nl.arange(32)[None, :]
        nl.store(out[rows, cols], value=nl.load(a[rows, cols]))
        return out

    @nki.jit
    def accumulate(a):
        out = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out[nl.arange(128)[:, None], nl.arange(64)[None, :]], value=nl.zeros((128, 64), a.dtype))
        t = nl.load(a[nl.program_id(0) * 128 + nl.arange(128)[:, None], nl.arange(64)[None, :]])
        nl.atomic_rmw(out[nl.arange(128)[:, None], nl.arange(64)[None, :]], value=t, op=np.add)
        return out

    assert len(_race_warnings(caplog, half_overlap, (3,), x(256, 64))) == 1
    assert _race_warnings(caplog, own_tiles, (2, 2), x(256, 64)) == []
    # atomic_rmw is the sanctioned way to combine programs; only its zero-fill store is a race
    assert len(_race_warnings(caplog, accumulate, (2,), x(256, 64))) == 1


def test_masks_that_always_hold_are_dropped_and_others_kept():
    """``i * 128 + ix < n`` on a grid that covers n exactly holds everywhere: the IR carries no
    mask for it (it would cost a masked path at run time); a mask that can fail stays."""
    from emulator.kernel_ir import walk_instructions

    def softmax_rows(x):
        n, m = x.shape
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        i = nl.program_id(0)
        ix, iy = nl.arange(128)[:, None], nl.arange(m)[None, :]
        full = (i * 128 + ix < n)
        t = nl.load(x[i * 128 + ix, iy], mask=full)
        s = nl.sum(t, axis=1, keepdims=True, mask=full)
        part = nl.multiply(t, s, mask=(iy < 100))
        nl.store(out[i * 128 + ix, iy], value=part, mask=full)
        return out

    traced = nki.trace_kernel(softmax_rows, [nki.TensorSpec((512, 128), "float32")], {}, (4,))
    masks = {i.op: i.mask for i in walk_instructions(traced.ir.body) if i.op != "alloc"}
    assert masks["load"] == () and masks["tensor_reduce"] == () and masks["store"] == ()
    assert len(masks["tensor_tensor"]) == 1
    x = np.random.default_rng(0).standard_normal((512, 128)).astype(np.float32)
    got = nki.jit(softmax_rows)[4](x)
    want = x * x.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(got[:, :100], want[:, :100], rtol=1e-5, atol=1e-4)
    assert np.isnan(got[:, 100:]).all()
