"""The one torch table: each torch dtype is its record's type (torch agrees on the NumPy storage
and width), and the adapters' conversions are read off it."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch

from emulator import dtypes as records
from neuron_customcall import torch_dtypes
from neuron_customcall.cpp import torch_ops
from neuron_customcall.torch_xla import custom_call, tensors


@pytest.mark.parametrize("t", list(torch_dtypes.TORCH))
def test_torch_stores_each_type_as_its_record_says(t):
    r = torch_dtypes.TORCH[t]
    assert torch.empty((), dtype=t).element_size() == r.itemsize
    x = torch.arange(6).reshape(2, 3).to(t)
    a = tensors.to_numpy(x)
    assert a.dtype == r.numpy
    back = tensors.from_numpy(a)
    assert back.dtype == t and torch.equal(back, x)


def test_the_adapters_tables_come_from_the_torch_table():
    assert torch_ops.TORCH_DTYPES == {t: r.gpsimd for t, r in torch_dtypes.TORCH.items() if r.gpsimd}
    assert set(torch_ops.TORCH_DTYPES.values()) == set(records.BY_GPSIMD)
    assert custom_call._HLO_TO_TORCH["f8e5m2"] is torch.float8_e5m2
    assert tensors._VIA_BITS[torch.bfloat16] == (np.dtype(ml_dtypes.bfloat16), torch.int16)
    assert set(tensors._VIA_BITS) == {torch.bfloat16, torch.float8_e5m2, torch.float8_e4m3fn}
