"""Constants of every element type, random shapes, layouts and bit patterns: printed text reads back
to the same bytes with our parser and with XLA's.

Bit patterns cover what hand-picked values miss: denormals, -0, infinities, NaNs with payloads (f16
and bf16 keep theirs; f32/f64 NaNs are made quiet, since protobuf's Python floats quiet signalling
NaNs; fp8/fp6/fp4 NaNs are the type's one NaN spelling).
"""
from __future__ import annotations


import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hlo.ir.literal import STORAGE, literal_to_numpy, store_array
from hlo.schema import xla_data_pb2
from hlo.text import literals as L
from hlo.text import parse_hlo_text, print_hlo_text
from hlo.canonical import canonical_module
from hlo.text.types import NAME_BY_TYPE
from tests.hlo.text.oracle import xla_parse

PT = xla_data_pb2.PrimitiveType
# XLA's parser (jaxlib 0.10.2) reads every one of these; F6 types are in the schema but not in it.
TYPES = sorted(t for t in STORAGE if NAME_BY_TYPE.get(t, "").startswith(("pred", "s", "u", "f", "bf", "c"))
               and not NAME_BY_TYPE[t].startswith("f6"))


_BITS = {PT.Value(n): b for n, b in (("F4E2M1FN", 4), ("F6E3M2FN", 6), ("F6E2M3FN", 6)) if n in PT.keys()}


def _random_array(element_type: int, count: int, seed: int) -> np.ndarray:
    storage = STORAGE[element_type]
    rng = np.random.default_rng(seed)
    dtype = np.dtype(storage.dtype)
    if storage.kind == "pred":
        return rng.integers(0, 2, count).astype(np.bool_)
    if storage.kind == "complex":
        part = np.float32 if dtype == np.complex64 else np.float64
        bits = rng.integers(0, 256, count * 2 * np.dtype(part).itemsize, dtype=np.uint8).view(part)
        bits = np.where(np.isnan(bits), part(0), bits)  # XLA reads (nan, x) as (nan, nan)
        out = np.empty(count, dtype)
        out.real, out.imag = bits[0::2], bits[1::2]
        return out
    raw = rng.integers(0, 256, count * dtype.itemsize, dtype=np.uint8)
    bits = _BITS.get(element_type)
    if bits is not None:  # sub-byte float types: only the low bits of each byte are the value
        raw &= np.uint8((1 << bits) - 1)
    arr = raw.view(dtype).copy()
    if storage.kind == "int" and L._is_subbyte(storage):
        rng_ = L._subbyte_range(storage)
        return rng.integers(rng_.min, rng_.max + 1, count).astype(dtype)
    if storage.kind == "float":
        nan = np.isnan(arr.astype(np.float64))
        if element_type in (PT.F32, PT.F64):
            utype = np.uint32 if element_type == PT.F32 else np.uint64
            quiet = utype(1 << (22 if element_type == PT.F32 else 51))
            bits = arr.view(utype)
            bits[nan] |= quiet
        elif element_type not in (PT.F16, PT.BF16):
            arr[nan] = np.array(np.nan, dtype)
    return arr


@settings(max_examples=60, deadline=3000, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(st.sampled_from(TYPES), st.lists(st.integers(0, 4), max_size=3), st.randoms(use_true_random=False), st.integers(0, 2**31))
def test_constant_round_trip(element_type, dims, rnd, seed):
    perm = list(range(len(dims)))
    rnd.shuffle(perm)
    layout = "{" + ",".join(str(d) for d in perm) + "}" if dims else ""
    shape = f"{NAME_BY_TYPE[element_type]}[{','.join(map(str, dims))}]{layout}"
    module = parse_hlo_text(f"HloModule m\nENTRY e {{\n  ROOT c = {shape} constant({{...}})\n}}")
    lit = module.computations[0].instructions[0].literal  # elided: the shape, no values yet
    count = int(np.prod(dims)) if dims else 1
    store_array(lit, _random_array(element_type, count, seed).reshape(dims))

    text = print_hlo_text(module)
    again = parse_hlo_text(text)
    assert again.SerializeToString(deterministic=True) == module.SerializeToString(deterministic=True), text
    theirs = canonical_module(xla_parse(text), fill_defaults=False)
    ours = canonical_module(again, fill_defaults=False)
    assert theirs.SerializeToString(deterministic=True) == ours.SerializeToString(deterministic=True), text


@pytest.mark.parametrize("text, expected", [
    ("f32[] constant(-0)", b"\x00\x00\x00\x00"),  # as XLA: an integer spelling, so +0
    ("f32[] constant(-0.0)", b"\x00\x00\x00\x80"),
    ("bf16[] constant(nan(0x1))", b"\x81\x7f"),
    ("f16[] constant(-nan)", b"\x00\xfe"),
])
def test_float_spellings(text, expected):
    m = parse_hlo_text(f"HloModule m\nENTRY e {{\n  ROOT c = {text}\n}}")
    lit = m.computations[0].instructions[0].literal
    arr = literal_to_numpy(lit)
    assert arr.tobytes() == expected
