"""Forged artifacts (issue 16): a forger who re-seals the checksum can put any JSON value anywhere
in the manifest, program, constant index or kernel index. Hypothesis (seeded, bounded, in CI)
replaces one value at a random place with a random JSON value: loading must raise ArtifactError
or give an executable whose run gives the right answer or an EmulatorError, never another
exception (a dtype given as a list was a TypeError). Also: native payloads under
allow_native=False are always refused."""
from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emulator import ArtifactError, load_artifact
from emulator.artifact import KernelPayload, format as fmt, read_artifact, write_artifact
from emulator.artifact.writer import ArtifactContents
from emulator.executor import EmulatorError
from emulator.kernel_payload import NATIVE_KINDS
from tests.emulator.artifact.test_artifact_format import EXPECTED, GOOD, X

JSON_SECTIONS = (fmt.MANIFEST, fmt.PROGRAM, fmt.CONST_INDEX, fmt.KERNEL_INDEX)


def _sections(data: bytes) -> list[tuple[str, bytes]]:
    _, _, _, header_size, count, _, _, _ = fmt.HEADER.unpack_from(data)
    out = []
    for k in range(count):
        raw, off, size = fmt.SECTION.unpack_from(data, fmt.HEADER.size + k * fmt.SECTION.size)
        out.append((raw.rstrip(b"\0").decode(), data[header_size + off:header_size + off + size]))
    return out


def seal(sections: list[tuple[str, bytes]]) -> bytes:
    """Artifact bytes for the sections, checksummed as the writer does (a forger's tool)."""
    payload, table = bytearray(), []
    for name, blob in sections:
        payload += b"\0" * (fmt.align(len(payload)) - len(payload))
        table.append(fmt.SECTION.pack(name.encode(), len(payload), len(blob)))
        payload += blob
    table_bytes = b"".join(table)
    header = fmt.HEADER.pack(fmt.MAGIC, fmt.VERSION_MAJOR, fmt.VERSION_MINOR,
                             fmt.HEADER.size + fmt.SECTION.size * len(sections), len(sections), 0, len(payload),
                             hashlib.sha256(table_bytes + payload).digest())
    return header + table_bytes + bytes(payload)


def test_seal_reproduces_the_writer() -> None:
    assert seal(_sections(GOOD)) == GOOD


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70) | st.sampled_from([0, 1, -1, 2 ** 31, 2 ** 63])
    | st.floats(allow_nan=False) | st.text(max_size=8) | st.sampled_from(["f32", "s32", "pred", "tuple", "add"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12)


def _replace(doc: Any, data: st.DataObject) -> Any:
    """`doc` with one value (chosen by a random walk from the root) replaced by a random value."""
    if isinstance(doc, (dict, list)) and doc and data.draw(st.integers(0, 3)) > 0:
        keys = sorted(doc) if isinstance(doc, dict) else list(range(len(doc)))
        k = data.draw(st.sampled_from(keys))
        copy = dict(doc) if isinstance(doc, dict) else list(doc)
        copy[k] = _replace(doc[k], data)
        return copy
    return data.draw(JSON_VALUES)


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_forged_json_values_only_raise_artifact_or_emulator_errors(data: st.DataObject) -> None:
    sections = _sections(GOOD)
    k = data.draw(st.sampled_from([i for i, (n, _) in enumerate(sections) if n in JSON_SECTIONS]))
    name, blob = sections[k]
    forged = json.dumps(_replace(json.loads(blob), data)).encode()
    sections[k] = (name, forged)
    try:
        exe = load_artifact(seal(sections))
    except ArtifactError:
        return
    try:
        out = exe.run([X])
    except EmulatorError:
        return
    # a forger may change what the program computes, never what it declares to return
    assert [(o.dtype, o.shape) for o in out] == [(np.dtype(np.float32), (2, 3))] * len(exe.manifest["outputs"])


def test_a_manifest_dtype_given_as_a_list_is_an_artifact_error() -> None:
    sections = _sections(GOOD)
    manifest = json.loads(sections[0][1])
    manifest["inputs"][0]["dtype"] = ["f32"]
    sections[0] = (fmt.MANIFEST, json.dumps(manifest).encode())
    try:
        load_artifact(seal(sections))  # today: TypeError (unhashable list) in the reader
    except ArtifactError as e:
        assert "bad inputs entry" in str(e)
    else:
        raise AssertionError("loaded")


@settings(max_examples=50, deadline=None, derandomize=True)
@given(kind=st.sampled_from(sorted(NATIVE_KINDS)), blob=st.binary(max_size=64), name=st.text(max_size=10))
def test_native_payloads_are_always_refused_when_native_code_is_off(kind: str, blob: bytes, name: str) -> None:
    art = read_artifact(GOOD)
    forged = write_artifact(ArtifactContents(art.manifest, art.program, art.constants,
                                             [*art.kernels, KernelPayload(name, kind, blob)]))
    try:
        load_artifact(forged, allow_native=False)
    except ArtifactError as e:
        assert "carries native code" in str(e)
    else:
        raise AssertionError("an artifact with a native payload was loaded with allow_native=False")
    np.testing.assert_allclose(load_artifact(GOOD, allow_native=False).run([X])[0], EXPECTED)
