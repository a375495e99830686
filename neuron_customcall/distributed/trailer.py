"""A small all-reduce checked after the fact: the call's identity rides in the reduced buffer itself.

Why: before gloo's own all_reduce, every member used to exchange a header (instruction, group,
type, shape), because gloo aborts the whole process when two members reduce buffers of different
sizes. That round trip (two more gloo calls, and a wake-up, per all-reduce) was most of what
separated a 1 MB all-reduce from gloo's own (benchmarks/collectives_gloo.md). Here sizes agree
by construction instead: a value is padded to a bucket of a fixed ladder (`bucket`), and each
(dtype, reducer, bucket) has a gloo group of its own (rendezvous.GlooGroups.bucket_group), so two
members can only meet in one all_reduce if their buffers have the same size. Whether they reduce
the same collective is checked afterwards, from a trailer of SLOTS elements after the padding:
each digest bit b of the call's identity is written as a pair of slots (one, zero) or (zero, one),
and the reduction of those pairs says whether every member wrote the same bits (`agrees`). A
mismatch is then a clear error on every member (the rule gives every member the same verdict),
never a wrong result. Members whose buckets differ wait in different groups; the stores' probes
(GlooCommunicator._wait) name that case.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

#: bits of the call's identity carried (a 64-bit digest), two slots each
DIGEST_BITS = 64
SLOTS = 2 * DIGEST_BITS
#: buffers are at least this many elements (tiny values: padding costs nothing measurable)
MIN_BUCKET = 1024
#: steps per octave of the ladder (a value is padded by less than 1/STEPS of itself)
STEPS = 8


@dataclass(frozen=True)
class Rule:
    """How a reducer's trailer is written and read: each bit's own slot holds `one`, the other
    `zero`; when every member wrote the same bits, the reduction leaves `mine(n)` in this
    member's own slots and `other` in the rest, and when any bit differs it leaves something
    else in every member's slots (hence the same verdict everywhere). `max_members`: the group
    size up to which that holds (xor: only two, as its parity says nothing for three)."""

    one: int
    zero: int
    mine: int | None  # None: n, the member count (a sum of ones)
    other: int
    max_members: int = 127  # int8 sums of ones stay exact up to here


#: reducer name (emulator.ops.common.REDUCERS) -> its trailer rule. Why each holds for a mixed bit:
#: add: a member's own slot sums fewer than n ones; multiply/minimum/and: some member wrote a zero
#: in every member's own slot; maximum/or: some member wrote a one in every member's other slot;
#: xor of two: both slots are one.
RULES = {
    "add": Rule(1, 0, None, 0),
    "multiply": Rule(1, 0, 1, 0),
    "minimum": Rule(1, 0, 1, 0),
    "and": Rule(1, 0, 1, 0),
    "maximum": Rule(1, 0, 1, 0),
    "or": Rule(1, 0, 1, 0),
    "xor": Rule(1, 0, 0, 0, max_members=2),
}


def bucket(count: int) -> int:
    """The element count (before the trailer) a value of `count` elements is padded to: the
    smallest of MIN_BUCKET or m * 2**e with STEPS <= m < 2 * STEPS, that holds it."""
    if count <= MIN_BUCKET:
        return MIN_BUCKET
    shift = max(count.bit_length() - STEPS.bit_length(), 0)
    m = -(-count // (1 << shift))  # ceil
    return m << shift


def supported(reducer: str, members: int) -> bool:
    rule = RULES.get(reducer)
    return rule is not None and 2 <= members <= rule.max_members


def _slots(first: int, second: int, dtype: np.dtype) -> tuple[bytes, ...]:
    """For every octet value v (entry v), the bytes of its 8 bits' slot pairs, least significant
    bit first: a set bit's pair is (first, second), a clear bit's (second, first)."""
    bits = (np.arange(256)[:, None] >> np.arange(8)) & 1
    pairs = np.stack([np.where(bits, first, second), np.where(bits, second, first)], axis=-1)
    return tuple(row.tobytes() for row in pairs.reshape(256, 16).astype(dtype))


@dataclass(frozen=True)
class Codec:
    """A trailer's bytes for `members` members reducing values of one dtype by one reducer:
    `written` and `reduced` map an octet value to the bytes of the 16 slots its bits are written
    as, and of those they read as after the reduction when every member wrote them (`mine` in a
    bit's own slot, `other` in the rest). Made once per bucket call (`codec`), so that a call's
    trailer is eight lookups (`encode`) and its check one comparison of bytes (`agrees`):
    unpacking the bits with NumPy cost ~100 us a call between two gloo calls, whose other threads
    and process leave the caches cold (benchmarks/collectives_gloo.md, session 12)."""

    written: tuple[bytes, ...]
    reduced: tuple[bytes, ...]

    def encode(self, digest: int) -> bytes:
        """The SLOTS slots' bytes of the DIGEST_BITS low bits of `digest`, as written: bit b's
        pair is slots 2b (its own when set) and 2b + 1 (its own when clear)."""
        return _encode(digest, self.written)

    def agrees(self, raw: bytes | bytearray | memoryview, digest: int) -> bool:
        """Whether the reduced trailer's bytes `raw` say every member wrote `digest` (see Rule).
        Bytes compare as the values do: members write only zeros and ones, whose reductions have
        one encoding each."""
        return bytes(raw) == _encode(digest, self.reduced)


@functools.lru_cache(maxsize=None)
def codec(reducer: str, dtype: np.dtype, members: int) -> Codec:
    """The Codec of `members` members reducing `dtype` values by `reducer` (a supported one)."""
    rule = RULES[reducer]
    dtype = np.dtype(dtype)
    return Codec(_slots(rule.one, rule.zero, dtype),
                 _slots(members if rule.mine is None else rule.mine, rule.other, dtype))


def _encode(digest: int, table: tuple[bytes, ...]) -> bytes:
    return b"".join([table[v] for v in (digest & _MASK).to_bytes(DIGEST_BITS // 8, "little")])


_MASK = (1 << DIGEST_BITS) - 1


def write(tail: np.ndarray, digest: int, reducer: str) -> None:
    """Fill the SLOTS-element trailer `tail` with the bits of `digest` by `reducer`'s rule."""
    tail[...] = np.frombuffer(codec(reducer, tail.dtype, 2).encode(digest), tail.dtype)


def agrees(tail: np.ndarray, digest: int, reducer: str, members: int) -> bool:
    """Whether the reduced trailer `tail` says every member of `members` wrote `digest`."""
    return codec(reducer, tail.dtype, members).agrees(np.ascontiguousarray(tail).tobytes(), digest)
