"""The seed's NKI kernels (nki-framework-custom-op.rst): the SPMD tensor addition and its caller,
shared by the kernel, torch_xla and JAX tests."""
from __future__ import annotations

from neuron_customcall import nki
from neuron_customcall.nki import language as nl


@nki.jit
def nki_tensor_add_kernel_(a_input, b_input):
    """c = a + b on 128 x 512 tiles, one per program of a 2-D grid (NKI_EXAMPLE_27)."""
    c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    offset_i_x = nl.program_id(0) * 128
    offset_i_y = nl.program_id(1) * 512
    ix = offset_i_x + nl.arange(128)[:, None]
    iy = offset_i_y + nl.arange(512)[None, :]
    a_tile = nl.load(a_input[ix, iy])
    b_tile = nl.load(b_input[ix, iy])
    nl.store(c_output[ix, iy], value=a_tile + b_tile)
    return c_output


def nki_tensor_add(a_input, b_input):
    """Launches the kernel on a grid covering the inputs (NKI_EXAMPLE_28)."""
    grid_x = a_input.shape[0] // 128
    grid_y = a_input.shape[1] // 512
    return nki_tensor_add_kernel_[grid_x, grid_y](a_input, b_input)


@nki.jit
def scale_and_shift(x, factor, shift):
    """Two outputs and a static argument: (x * factor, x + shift) on one 128-row tile."""
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    z = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:x.shape[0], 0:x.shape[1]]
    t = nl.load(x[i_p, i_f])
    nl.store(y[i_p, i_f], value=nl.multiply(t, factor))
    nl.store(z[i_p, i_f], value=nl.add(t, shift))
    return y, z
