"""The seed's NKI kernels (nki-framework-custom-op.rst, NKI_EXAMPLE_27 and _28) as AWS's example
file writes them, against the SDK's import names: programs in this folder import it unchanged."""
from neuronxcc import nki
import neuronxcc.nki.language as nl


@nki.jit
def nki_tensor_add_kernel_(a_input, b_input):
  """NKI kernel to compute element-wise addition of two input tensors"""
  c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)

  offset_i_x = nl.program_id(0) * 128
  offset_i_y = nl.program_id(1) * 512

  ix = offset_i_x + nl.arange(128)[:, None]
  iy = offset_i_y + nl.arange(512)[None, :]

  a_tile = nl.load(a_input[ix, iy])
  b_tile = nl.load(b_input[ix, iy])

  c_tile = a_tile + b_tile

  nl.store(c_output[ix, iy], value=c_tile)

  return c_output


def nki_tensor_add(a_input, b_input):
  """NKI kernel caller to compute element-wise addition of two input tensors"""
  grid_x = a_input.shape[0] // 128
  grid_y = a_input.shape[1] // 512

  return nki_tensor_add_kernel_[grid_x, grid_y](a_input, b_input)
