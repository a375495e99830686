"""Beta 1's ``nki.compiler`` (direct allocation and kernel decorators), ``nki.typing``
annotations, ``nki.trace`` kernels that write outputs passed by the caller, and beta 2's
``nki.simulate``, written from the reference pages and checked against NumPy."""
from __future__ import annotations

import numpy as np
import pytest

import neuronxcc.nki as nki
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt
from neuron_customcall.nki.errors import KernelTraceError


def _mod_alloc_func(base_addr: int, num_bank_tiles: tuple = ()):
    """A psum allocation function as the reference's test_psum_modulo_alloc writes one: bank
    ``i % n`` for logical block ``i``, partition and byte address 0."""
    def func(idx, pdim_size, fdim_size):
        bank = idx[0] % num_bank_tiles[0] if num_bank_tiles and idx else 0
        return (bank, 0, base_addr)
    return func


@nki.trace
def allocated_transpose(a_ptr, tp_ptr):
    """The reference's allocated_loop_transpose: 128x128 blocks through a TensorE transpose,
    every tensor directly allocated."""
    N, M = a_ptr.shape
    ix0 = nl.arange(0, 128)[:, None]
    iy0 = nl.arange(0, 128)[None, :]
    identity = nl.shared_constant(np.identity(n=128, dtype=np.int8), dtype=nl.float32)
    for n0 in nl.affine_range(N // 128):
        for m0 in nl.affine_range(M // 128):
            a_local = nl.ndarray((nl.par_dim(128), 128), dtype=a_ptr.dtype,
                                 buffer=ncc.sbuf.mod_alloc(base_addr=1024))
            a_local[ix0, iy0] = nl.load(a_ptr[n0 * 128 + ix0, m0 * 128 + iy0])
            identity_load = nl.ndarray((nl.par_dim(128), 128), dtype=a_ptr.dtype,
                                       buffer=ncc.sbuf.mod_alloc(base_addr=0))
            identity_load[ix0, iy0] = nl.load(identity, dtype=a_ptr.dtype)
            a_t = nl.ndarray((nl.par_dim(128), 128), dtype=nl.float32,
                             buffer=ncc.psum.alloc(_mod_alloc_func(0)))
            a_t[ix0, iy0] = nisa.nc_matmul(a_local[ix0, iy0], identity_load)
            a_t_sbuf = nl.ndarray((nl.par_dim(128), 128), dtype=a_ptr.dtype,
                                  buffer=ncc.sbuf.mod_alloc(base_addr=2048))
            a_t_sbuf[ix0, iy0] = nl.copy(a_t[ix0, iy0])
            nl.store(tp_ptr[m0 * 128 + ix0, n0 * 128 + iy0], value=a_t_sbuf[ix0, iy0])


def test_direct_allocation_kernel_writes_the_callers_output():
    a = (np.random.default_rng(0).random((256, 384)) * 100).astype(np.float32)
    b = np.zeros((384, 256), np.float32)
    assert nki.simulate_kernel(allocated_transpose, a, b) is None
    np.testing.assert_allclose(b, a.T, rtol=1e-6)


@nki.jit
def declare(a, buffer, shape=(128, 512), dtype=nl.float32, address=None):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(shape, dtype=dtype, buffer=buffer, address=address)
    t[...] = 0.0
    nl.store(out, nl.load(a))
    return out


A = np.zeros((2, 2), np.float32)


@pytest.mark.parametrize("buffer, shape, dtype, address, message", [
    (ncc.psum.mod_alloc(base_bank=0), (128, 1024), nl.float32, None,
     "spans more than one 2048-byte bank"),
    (ncc.sbuf.mod_alloc(base_addr=180000), (128, 512), nl.float32, None,
     "beyond the usable 180224 bytes"),
    (ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)), (128, 512), nl.float32, None,
     r"one entry per block dimension \(0\)"),
    (ncc.sbuf.alloc(lambda idx, p, f: (32, 0)), (4, nl.par_dim(128), 64), nl.float32, None,
     "128 partitions can not start at partition 32"),
    (ncc.sbuf.alloc(lambda idx, p, f: (0,)), (4, nl.par_dim(128), 64), nl.float32, None,
     "must return 2 integers"),
    (ncc.psum.alloc(lambda idx, p, f: (9, 0, 0)), (nl.par_dim(128), 512), nl.float32, None,
     "PSUM bank 9"),
    (nl.sbuf, (64, 64), nl.float32, (100, 0), "partitions 100..163 exceed"),
    (nl.sbuf, (64, 64), nl.float32, (0, 180224), "not inside the usable 180224"),
])
def test_allocation_rules_are_checked_at_declaration(buffer, shape, dtype, address, message):
    with pytest.raises(KernelTraceError, match=message):
        declare(A, buffer, shape, dtype, address)


@pytest.mark.parametrize("buffer, shape, address", [
    (ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)), (4, nl.par_dim(128), 64), None),
    (ncc.sbuf.alloc(lambda idx, p, f: (64 if idx[0] % 2 else 0, 0)), (4, nl.par_dim(64), 16),
     None),
    (ncc.psum.mod_alloc(base_bank=2), (nl.par_dim(128), 512), None),
    (ncc.psum.alloc(lambda idx, p, f: (7, 0, 0)), (nl.par_dim(128), 512), None),
    (ncc.sbuf.auto_alloc(), (128, 512), None),
    (nl.sbuf, (128, 512), (0, 4096)),
])
def test_allocations_the_reference_allows(buffer, shape, address):
    if address is not None:  # address= is direct allocation: no auto-allocated sbuf beside it
        declare(A, ncc.sbuf.mod_alloc(base_addr=0), shape, nl.float32, address)
    else:
        np.testing.assert_array_equal(declare(A, buffer, shape), A)


def test_allocator_arguments_follow_the_current_release_rules():
    with pytest.raises(ValueError, match="base_partition must be 0"):
        ncc.sbuf.mod_alloc(base_addr=0, base_partition=32)
    with pytest.raises(ValueError, match="base_addr must be 0"):
        ncc.psum.mod_alloc(base_bank=0, base_addr=64)
    with pytest.raises(ValueError, match="8 PSUM banks"):
        ncc.psum.mod_alloc(base_bank=8)
    with pytest.raises(TypeError, match="callable"):
        ncc.sbuf.alloc(3)


@nki.jit
def mixed(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.ndarray((128, 64), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    y = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    x[...] = 1.0
    y[...] = 2.0
    nl.store(out, nl.load(a))
    return out


def test_mixing_automatic_and_direct_allocation_is_refused_unless_forced():
    with pytest.raises(KernelTraceError, match="can not mix automatic and direct allocation"):
        mixed(A)

    @ncc.force_auto_alloc
    @nki.jit
    def forced(a):
        return mixed.func(a)

    np.testing.assert_array_equal(forced(A), A)


def test_decorators_keep_the_kernel_and_stack_allocation_needs_skip():
    @ncc.enable_stack_allocator
    @ncc.skip_middle_end_transformations
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a) * 2)
        return out

    np.testing.assert_array_equal(k(np.ones((4, 4), np.float32)), 2)
    with pytest.raises(ValueError, match="skip_middle_end_transformations"):
        ncc.enable_stack_allocator(nki.jit(lambda a: a))
    with ncc.allocation_scope(), ncc.multi_buffer(2), ncc.no_reorder():
        pass


@nki.jit
def annotated(in_tensor: nt.tensor[128, 64], out_tensor: nt.mutable_tensor):
    tile: nt.tensor[128, 64] = nl.load(in_tensor)
    nl.store(out_tensor, nl.exp(tile))


def test_typing_annotations_and_in_place_outputs():
    a = np.random.default_rng(1).random((128, 64)).astype(np.float32)
    out = np.zeros_like(a)
    annotated(a, out)
    np.testing.assert_allclose(out, np.exp(a), rtol=1e-6)
    with pytest.raises(KernelTraceError, match=r"argument 'in_tensor': shape \[128, 32\] does "
                                               r"not match the annotated \[128, 64\]"):
        annotated(np.zeros((128, 32), np.float32), np.zeros((128, 32), np.float32))
    assert repr(nt.tensor[[8192, 4096], nl.bfloat16]) == "nki.typing.tensor[[8192, 4096], bfloat16]"
    assert nt.tensor[[4, 4], nl.float32].mismatch((4, 4), "bfloat16") == \
        "dtype bfloat16 does not match the annotated float32"
    with pytest.raises(TypeError):
        nt.tensor["a"]


def test_simulate_runs_a_kernel_a_launch_or_a_plain_function():
    def double(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a) * 2)
        return out

    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    for k in (double, nki.jit(double), nki.jit(double)[1]):
        np.testing.assert_array_equal(nki.simulate(k)(a), a * 2)


def test_simulate_returns_torch_tensors_for_torch_tensors():
    torch = pytest.importorskip("torch")

    @nki.jit
    def double(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a) * 2)
        return out

    got = nki.simulate(double)(torch.arange(8, dtype=torch.bfloat16).reshape(2, 4))
    assert isinstance(got, torch.Tensor) and got.dtype == torch.bfloat16
    assert torch.equal(got, torch.arange(8, dtype=torch.bfloat16).reshape(2, 4) * 2)
