"""LiteralProto <-> NumPy for every element type, layout and tuple nesting."""
from __future__ import annotations

import numpy as np
import pytest

import hlo
from hlo.ir.dtypes import NUMPY_DTYPES
from hlo.ir.literal import literal_to_numpy, numpy_to_literal


@pytest.mark.parametrize("element_type", sorted(NUMPY_DTYPES))
def test_every_element_type_round_trips(element_type):
    dtype = NUMPY_DTYPES[element_type]
    low, high = {"S1": (-1, 0), "F8E8M0FNU": (1, 2)}.get(element_type, (0, 1))  # both exact in the type
    values = np.where(np.arange(12).reshape(3, 4) % 2 == 1, high, low).astype(dtype)
    back = literal_to_numpy(numpy_to_literal(values))
    assert back.dtype == dtype and back.shape == (3, 4)
    assert np.array_equal(back.astype(np.complex128), values.astype(np.complex128))


def test_a_column_major_literal_stores_data_in_layout_order():
    shape = hlo.Shape("F32", (2, 3), hlo.Layout((0, 1)))
    values = np.arange(6, dtype=np.float32).reshape(2, 3)
    lit = numpy_to_literal(values, shape)
    assert list(lit.f32s) == [0, 3, 1, 4, 2, 5]
    assert np.array_equal(literal_to_numpy(lit), values)


def test_tuples_and_scalars():
    lit = numpy_to_literal((np.float32(2.5), (np.array([1, 2], np.int64), np.array(True))))
    a, (b, c) = literal_to_numpy(lit)
    assert a == np.float32(2.5) and a.shape == () and list(b) == [1, 2] and c.dtype == np.bool_


def test_wrong_element_count_is_an_error():
    lit = numpy_to_literal(np.zeros((2, 2), np.float32))
    del lit.f32s[-1]
    with pytest.raises(hlo.HloError, match="needs 4 elements but the literal holds 3"):
        literal_to_numpy(lit, where="constant c")


def test_an_elided_constant_reads_but_its_value_is_an_error_naming_the_cure():
    module = hlo.load("HloModule m\nENTRY e {\n  ROOT c = f32[20,15]{1,0} constant({...})\n}\n")
    constant = module.entry.root
    assert constant.shape.dimensions == (20, 15)
    with pytest.raises(hlo.HloError, match=r"elided \(\{\.\.\.\}\).*print_large_constants"):
        constant.constant_value()
    assert "constant({...})" in module.to_text()  # printed as it was read: no made-up values
