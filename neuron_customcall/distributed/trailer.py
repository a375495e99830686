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


def _bits(digest: int) -> np.ndarray:
    """The DIGEST_BITS low bits of `digest`, least significant first."""
    octets = np.frombuffer((digest & ((1 << DIGEST_BITS) - 1)).to_bytes(DIGEST_BITS // 8, "little"), np.uint8)
    return np.unpackbits(octets, bitorder="little").astype(bool)


def write(tail: np.ndarray, digest: int, reducer: str) -> None:
    """Fill the SLOTS-element trailer `tail` with the bits of `digest` by `reducer`'s rule."""
    rule = RULES[reducer]
    bits = _bits(digest)
    pairs = tail.reshape(DIGEST_BITS, 2)
    pairs[:, 0] = np.where(bits, rule.one, rule.zero)
    pairs[:, 1] = np.where(bits, rule.zero, rule.one)


def agrees(tail: np.ndarray, digest: int, reducer: str, members: int) -> bool:
    """Whether the reduced trailer says every member wrote `digest` (see Rule)."""
    rule = RULES[reducer]
    bits = _bits(digest)
    pairs = tail.reshape(DIGEST_BITS, 2)
    own = np.where(bits, pairs[:, 0], pairs[:, 1])
    other = np.where(bits, pairs[:, 1], pairs[:, 0])
    mine = members if rule.mine is None else rule.mine
    return bool(np.all(own == mine) and np.all(other == rule.other))
