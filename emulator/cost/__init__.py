"""The cost model of one NeuronCore-v2 (trn1): estimated cycles per engine of each instruction.

* `constants`: every number, with its source (docs/cost-model.md lists them all).
* `engines`: engine names; a `Cost` is {engine: cycles}.
* `tensor` (TensorE: nc_matmul, dot, convolution), `vector` (VectorE / ScalarE element-wise
  work), `dma` (data movement), `gpsimd` (GpSimd payloads, via emulator/gpsimd/cost.py).
* `graph`: TABLE from program op to cost function; `coster` for the profiler.
* `kernel_ir`: TABLE from NKI kernel-IR instruction to cost function; `kernel_cost`.
"""
from emulator.cost.constants import CLOCK_HZ
from emulator.cost.engines import DMA, ENGINES, GPSIMD, NONE, SCALAR, TENSOR, VECTOR, Cost

__all__ = ["CLOCK_HZ", "Cost", "DMA", "ENGINES", "GPSIMD", "NONE", "SCALAR", "TENSOR", "VECTOR"]
