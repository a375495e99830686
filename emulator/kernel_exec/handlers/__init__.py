"""The instruction table: op name -> handler. One module per engine, so "where does an NKI
instruction live" is answered by the engine that runs it on the hardware:

* ``dma``: alloc, load, store, tensor_copy, memset, iota (data movement and initialisation)
* ``vector``: tensor_tensor, tensor_scalar, select, affine_select, tensor_reduce, bn_stats,
  bn_aggr, tensor_tensor_scan (VectorE)
* ``scalar``: activation (ScalarE)
* ``tensor``: matmul, transpose (TensorE)
"""

from __future__ import annotations

from typing import Callable

from . import dma, scalar, tensor, vector

Handler = Callable[..., None]

HANDLERS: dict[str, Handler] = {**dma.HANDLERS, **vector.HANDLERS, **scalar.HANDLERS,
                                **tensor.HANDLERS}
