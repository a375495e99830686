"""The trailer that checks a bucketed all-reduce after the fact (distributed/trailer.py): for every
reducer gloo's all_reduce does, members that wrote the same digest all read agreement from the
reduced slots, and when any member's digest differs every member reads disagreement (so no member
returns the reduction of another collective while the others fail). The reduction is NumPy's,
over the dtypes the native path reduces; the ladder pads by less than an eighth."""
from __future__ import annotations

import numpy as np
import pytest

from neuron_customcall.distributed import trailer

_UFUNCS = {"add": np.add, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum,
           "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}
_DTYPES = {"add": ["float32", "float64", "int8", "uint8", "int32", "int64"],
           "multiply": ["float32", "float64", "int8", "int64"],
           "maximum": ["int8", "uint8", "int32", "int64"], "minimum": ["int8", "int32"],
           "and": ["uint8", "int32"], "or": ["int8", "int64"], "xor": ["int32", "uint8"]}
CASES = [(reducer, dtype) for reducer, dtypes in _DTYPES.items() for dtype in dtypes]


def _reduced(reducer: str, dtype: str, digests: list[int]) -> np.ndarray:
    tails = []
    for digest in digests:
        tail = np.full(trailer.SLOTS, 99, dtype)  # written over entirely
        trailer.write(tail, digest, reducer)
        tails.append(tail)
    return _UFUNCS[reducer].reduce(np.stack(tails), axis=0).astype(dtype)


@pytest.mark.parametrize("reducer, dtype", CASES)
def test_every_member_reads_agreement_or_every_member_reads_a_mismatch(reducer: str, dtype: str) -> None:
    rng = np.random.default_rng(len(reducer) * 31 + len(dtype))
    sizes = [2] if reducer == "xor" else [2, 3, 5]
    for n in sizes:
        assert trailer.supported(reducer, n)
        digest = int(rng.integers(0, 1 << 62))
        same = _reduced(reducer, dtype, [digest] * n)
        assert trailer.agrees(same, digest, reducer, n)
        for _ in range(20):  # one member differs in one random bit, or in many
            other = digest ^ (1 << int(rng.integers(0, 62))) if rng.random() < 0.5 else int(rng.integers(0, 1 << 62))
            digests = [digest] * n
            digests[int(rng.integers(0, n))] = other
            mixed = _reduced(reducer, dtype, digests)
            assert not any(trailer.agrees(mixed, d, reducer, n) for d in set(digests)), (n, digests)


def test_xor_is_checked_for_two_members_only() -> None:
    # three members' xor of the same bits reads like a mix of two: parity says nothing for three
    assert trailer.supported("xor", 2) and not trailer.supported("xor", 3)
    assert not trailer.supported("add", 1) and not trailer.supported("add", 128) and trailer.supported("add", 127)
    assert not trailer.supported("atan2", 2)


def test_the_ladder_holds_the_value_and_pads_by_less_than_an_eighth() -> None:
    assert trailer.bucket(1) == trailer.bucket(trailer.MIN_BUCKET) == trailer.MIN_BUCKET
    assert trailer.bucket(1 << 18) == 1 << 18  # 1 MB of f32: no padding
    previous = 0
    for count in list(range(trailer.MIN_BUCKET, 5000)) + [int(c) for c in np.geomspace(5000, 1 << 22, 400)]:
        b = trailer.bucket(count)
        assert count <= b < count * (1 + 1 / trailer.STEPS) + 1 and b >= previous
        previous = b
    assert len({trailer.bucket(c) for c in range(trailer.MIN_BUCKET, 1 << 20)}) == 8 * 10 + 1  # 8 per octave


def test_bit_b_is_written_in_slots_2b_and_2b_plus_1_and_read_back_by_bytes() -> None:
    digest = (1 << 63) | (1 << 5) | 1
    tail = np.zeros(trailer.SLOTS, np.float32)
    trailer.write(tail, digest, "add")
    bits = [(digest >> b) & 1 for b in range(trailer.DIGEST_BITS)]
    np.testing.assert_array_equal(tail[0::2], bits)
    np.testing.assert_array_equal(tail[1::2], [1 - b for b in bits])
    codec = trailer.codec("add", np.dtype(np.float32), 3)
    assert codec.encode(digest) == tail.tobytes()
    assert codec.agrees((tail * 3).tobytes(), digest) and not codec.agrees((tail * 2).tobytes(), digest)
    assert trailer.agrees(tail * 3, digest, "add", 3) and not trailer.agrees(tail * 2, digest, "add", 3)
    assert codec.encode(digest | (1 << 64)) == tail.tobytes()  # only the low 64 bits
