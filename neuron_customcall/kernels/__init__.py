"""Kernels as framework custom-calls carry them: the backend_config descriptor (``descriptor``)
and the dtype vocabulary shared by NKI, GpSimd and HLO (``dtypes``)."""
from neuron_customcall.kernels.descriptor import (DescriptorError, KernelDescriptor, TensorSig,
                                                  decode, encode)

__all__ = ["DescriptorError", "KernelDescriptor", "TensorSig", "decode", "encode"]
