# The seed nki-framework-custom-op.rst's PyTorch program as the document prints it (NKI_EXAMPLE_28
# from spmd_tensor_addition_nki_kernels.py), plus, after it, the same computation on the CPU: the
# program prints both results and exits non-zero when they differ.
import torch
from torch_xla.core import xla_model as xm

from spmd_tensor_addition_nki_kernels import nki_tensor_add

torch.manual_seed(0)

device = xm.xla_device()
a = torch.randn(256, 1024, dtype=torch.float32).to(device)
b = torch.randn(256, 1024, dtype=torch.float32).to(device)
c = nki_tensor_add(a, b) # calling a NKI kernel, instead of the built-in torch op
out = a * b * c
print(out)

# --- the check (not in the document): the same program on the CPU ---
torch.manual_seed(0)
a_cpu = torch.randn(256, 1024, dtype=torch.float32)
b_cpu = torch.randn(256, 1024, dtype=torch.float32)
ref = a_cpu * b_cpu * (a_cpu + b_cpu)
print("matches the CPU:", torch.allclose(ref, out.cpu()))
assert torch.allclose(ref, out.cpu())
