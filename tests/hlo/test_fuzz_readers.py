"""Fuzzing the binary and protobuf-text readers: whatever the bytes, only HloParseError escapes."""
from __future__ import annotations

import functools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hlo
from tests.hlo import framework_modules as fm

SETTINGS = settings(max_examples=150, deadline=15000,  # a hang guard, not a speed target
                     suppress_health_check=[HealthCheck.too_slow])


@functools.cache
def _seed_forms() -> tuple[bytes, bytes]:
    module = hlo.load(fm.serialized("jax/while_loop"))
    return module.to_bytes(), module.to_pbtxt().encode()


def _load_or_parse_error(data: bytes, form=None) -> None:
    try:
        hlo.load(bytes(data), form=form)
    except hlo.HloParseError:
        pass


@SETTINGS
@given(st.data())
def test_truncated_forms(data):
    for seed in _seed_forms():
        cut = data.draw(st.integers(0, len(seed)))
        _load_or_parse_error(seed[:cut])


@SETTINGS
@given(st.data())
def test_mutated_forms(data):
    for seed in _seed_forms():
        raw = bytearray(seed)
        for _ in range(data.draw(st.integers(1, 8))):
            pos = data.draw(st.integers(0, len(raw) - 1))
            raw[pos] = data.draw(st.integers(0, 255))
        _load_or_parse_error(raw)


@SETTINGS
@given(st.binary(max_size=512), st.sampled_from([None, "proto", "pbtxt"]))
def test_random_bytes(raw, form):
    _load_or_parse_error(raw, form)
