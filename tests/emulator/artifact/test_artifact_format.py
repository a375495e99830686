"""The .neff format: round trip, and every kind of damage is an ArtifactError (never a crash or a
wrong answer): truncation and corruption in each region, wrong magic and version, fuzzing."""
from __future__ import annotations

import hashlib
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emulator import ArtifactError, load_artifact
from emulator.artifact import ArtifactContents, KernelPayload, format as fmt, read_artifact, write_artifact
from emulator.program import Computation, Instruction, Program


def _artifact() -> bytes:
    """out = (x + c) * x, c a constant; one kernel payload riding along."""
    f32 = ["f32", [2, 3]]
    comp = Computation(
        name="main", num_slots=4, params=[0], param_types=[f32],
        instructions=[
            Instruction("constant", 1, [], f32, {"index": 0}, name="c"),
            Instruction("add", 2, [0, 1], f32, free=[1], name="a"),
            Instruction("multiply", 3, [2, 0], f32, free=[0, 2], name="m"),
        ],
        result=3, result_type=f32)
    manifest = {"format": "neuron-customcall-neff", "module_name": "t", "hlo_fingerprint": "0" * 64,
                "compiler_version": "test", "flags": {}, "aliases": [], "kernels": ["k"],
                "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}],
                "outputs": [{"name": "m", "dtype": "f32", "shape": [2, 3]}]}
    const = np.arange(6, dtype=np.float32).reshape(2, 3)
    return write_artifact(ArtifactContents(manifest, Program([comp], 0), [const],
                                           [KernelPayload("k", "test", b"\x01\x02\x03")]))


GOOD = _artifact()
X = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
EXPECTED = (X + np.arange(6, dtype=np.float32).reshape(2, 3)) * X


def _regions() -> dict[str, tuple[int, int]]:
    """Byte ranges of the fixed header, the section table and each section."""
    _, _, _, header_size, count, _, _, _ = fmt.HEADER.unpack_from(GOOD)
    out = {"header": (0, fmt.HEADER.size), "table": (fmt.HEADER.size, header_size)}
    for k in range(count):
        name, off, size = fmt.SECTION.unpack_from(GOOD, fmt.HEADER.size + k * fmt.SECTION.size)
        if size:
            out[name.rstrip(b"\0").decode()] = (header_size + off, header_size + off + size)
    return out


def test_round_trip_runs():
    exe = load_artifact(GOOD)
    np.testing.assert_allclose(exe.run([X])[0], EXPECTED)
    assert exe.artifact.kernels[0].data == b"\x01\x02\x03"
    assert exe.artifact.version == (fmt.VERSION_MAJOR, fmt.VERSION_MINOR)


def test_writer_is_deterministic():
    assert _artifact() == GOOD


def test_every_region_is_present():
    assert {"header", "table", "MANIFEST", "PROGRAM", "CONST_INDEX", "CONST_DATA", "KERNEL_INDEX",
            "KERNEL_DATA"} <= set(_regions())


@pytest.mark.parametrize("region", ["header", "table", "MANIFEST", "PROGRAM", "CONST_INDEX", "CONST_DATA",
                                    "KERNEL_INDEX", "KERNEL_DATA"])
def test_truncation_in_each_region(region):
    lo, hi = _regions()[region]
    for cut in sorted({lo, (lo + hi) // 2, hi - 1}):
        with pytest.raises(ArtifactError, match="truncated|corrupted|malformed"):
            load_artifact(GOOD[:cut])


@pytest.mark.parametrize("region", ["header", "table", "MANIFEST", "PROGRAM", "CONST_INDEX", "CONST_DATA",
                                    "KERNEL_INDEX", "KERNEL_DATA"])
def test_corruption_in_each_region(region):
    lo, hi = _regions()[region]
    for pos in sorted({lo, (lo + hi) // 2, hi - 1}):
        bad = bytearray(GOOD)
        bad[pos] ^= 0x5A
        with pytest.raises(ArtifactError):
            load_artifact(bytes(bad))


def test_wrong_magic():
    with pytest.raises(ArtifactError, match="not a neuron-customcall artifact"):
        load_artifact(b"ELF\x7f" + GOOD[4:])


def test_version_mismatch_is_named():
    bad = bytearray(GOOD)
    struct.pack_into("<H", bad, 8, fmt.VERSION_MAJOR + 1)
    with pytest.raises(ArtifactError, match=rf"unsupported artifact format version 2\.{fmt.VERSION_MINOR}"):
        load_artifact(bytes(bad))


def test_trailing_garbage():
    with pytest.raises(ArtifactError, match="after the payload"):
        load_artifact(GOOD + b"\0")


def _reseal(data: bytearray) -> bytes:
    """Recompute the checksum, as a forger would: the structural checks must still hold."""
    _, _, _, header_size, _, _, _, _ = fmt.HEADER.unpack_from(data)
    digest = hashlib.sha256(bytes(data[fmt.HEADER.size:])).digest()
    data[32:64] = digest
    return bytes(data)


def test_forged_program_with_valid_checksum_is_an_artifact_error():
    lo, hi = _regions()["PROGRAM"]
    bad = bytearray(GOOD)
    text = bytes(bad[lo:hi]).replace(b'"multiply"', b'"multiplx"')
    bad[lo:hi] = text
    with pytest.raises(ArtifactError, match="unknown op"):
        load_artifact(_reseal(bad))


def test_forged_constant_index_with_valid_checksum_is_an_artifact_error():
    lo, hi = _regions()["CONST_INDEX"]
    bad = bytearray(GOOD)
    bad[lo:hi] = bytes(bad[lo:hi]).replace(b'"nbytes":24', b'"nbytes":99')
    with pytest.raises(ArtifactError, match="does not fit"):
        load_artifact(_reseal(bad))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fuzzed_bytes_only_raise_artifact_error(data):
    raw = bytearray(GOOD)
    n = data.draw(st.integers(1, 8))
    for _ in range(n):
        pos = data.draw(st.integers(0, len(raw) - 1))
        raw[pos] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        raw = raw[: data.draw(st.integers(0, len(raw)))]
    try:
        exe = load_artifact(bytes(raw))
    except ArtifactError:
        return
    # the only bytes that load are the good ones (or bytes whose flips were no-ops)
    np.testing.assert_allclose(exe.run([X])[0], EXPECTED)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400))
def test_random_bytes_only_raise_artifact_error(blob):
    with pytest.raises(ArtifactError):
        read_artifact(blob)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_forged_sections_with_valid_checksum_only_raise_artifact_error_on_load(data):
    """Past the checksum, a mutated JSON section or table must still be caught by validation."""
    from emulator.executor import EmulatorError

    raw = bytearray(GOOD)
    lo, hi = data.draw(st.sampled_from(sorted(_regions().items())))[1]
    lo = max(lo, fmt.HEADER.size)  # keep the fixed header (its own checks are tested above)
    if lo >= hi:
        return
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(lo, hi - 1))
        raw[pos] = data.draw(st.sampled_from(b'0123456789{}[]",:-.aetnrufl \x00\xff'))
    try:
        exe = load_artifact(_reseal(raw))
    except ArtifactError:
        return
    try:
        exe.run([X])
    except EmulatorError:
        pass
