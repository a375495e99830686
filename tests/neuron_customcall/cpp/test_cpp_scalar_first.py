"""The tensor library's Scalar-first forms from AWS's API reference: pow(Scalar, Tensor) and
bitwise_and/bitwise_or(Scalar, Tensor), each with its _out form, against PyTorch eager."""

from __future__ import annotations

import pytest
import torch

from cpp_kernels import load


@pytest.mark.parametrize("out_form", [0, 1])
def test_pow_with_a_scalar_base(out_form: int) -> None:
    load("scalar_first")
    x = torch.linspace(-2, 3, 11)
    y = torch.ops.scalar_first_ops.scalar_first(x, 1.5, out_form)
    torch.testing.assert_close(y, torch.pow(1.5, x), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.int32, torch.uint8, torch.int16])
@pytest.mark.parametrize("which, reference", [(2, torch.bitwise_and), (3, torch.bitwise_and),
                                              (4, torch.bitwise_or), (5, torch.bitwise_or)])
def test_bitwise_with_a_scalar_first(dtype: torch.dtype, which: int, reference) -> None:
    load("scalar_first")
    x = torch.arange(0, 200, 7).to(dtype)
    y = torch.ops.scalar_first_ops.scalar_first(x, 0x5A, which)
    assert y.dtype == dtype
    assert torch.equal(y, reference(torch.tensor(0x5A, dtype=dtype), x))


def test_bitwise_with_a_scalar_first_refuses_floats() -> None:
    load("scalar_first")
    with pytest.raises(Exception, match="needs an integer dtype"):
        torch.ops.scalar_first_ops.scalar_first(torch.ones(3), 1, 2)
