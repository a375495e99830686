"""Fuzzing the HLO text reader: whatever the input, only HloParseError escapes, quickly.

Inputs: truncations and character mutations of real modules, random text and random bytes,
token-level (grammar-aware) mutations of real modules, and hand-made extremes (deep nesting, absurd
dimensions, huge numbers).  An HloParseError whose message says "internal error" is a reader bug
caught by the safety net, so it fails the test too; and a mutant that reads must print back to
the same module.
"""
from __future__ import annotations

import re
import time
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hlo.errors import HloParseError
from hlo.schema import hlo_pb2
from hlo.canonical import canonical_module
from hlo.text import parse_hlo_text, print_hlo_text
from tests.hlo.text.snippets import SNIPPETS

#: Real modules: the hand-written snippets and their printed forms (XLA style, % names, shapes).
CORPUS = sorted(SNIPPETS.values()) + [print_hlo_text(parse_hlo_text(t)) for _, t in sorted(SNIPPETS.items())[:6]]
#: A hang or a blow-up guard, not a speed target: generous enough for a loaded 2-core CI machine.
TIME_LIMIT_S = 15.0
FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\w.%\-]+|\S')
_REPLACEMENTS = ["99999999999999999999", "-1", "0", "1e308", "-inf", "nan", "{", "}", "(", ")", "[", "]", ",",
                 "=", "ROOT", "ENTRY", "HloModule", "%x", "f32[]", "f32[4294967296,4294967296]", "...", "->", "<=",
                 "?", ":", '"s"', "to_apply", "dimensions={}", "/*", "*/", "true", "token[]", "(f32[],"]


def check(text: str) -> None:
    start = time.perf_counter()
    try:
        result = parse_hlo_text(text, "fuzz.hlo")
    except HloParseError as err:
        assert "internal error" not in str(err), str(err)
        assert err.filename == "fuzz.hlo"
    else:
        assert isinstance(result, hlo_pb2.HloModuleProto)
        # whatever we accept, we print back faithfully
        again = parse_hlo_text(print_hlo_text(result))
        assert canonical_module(again).SerializeToString(deterministic=True) == canonical_module(
            result).SerializeToString(deterministic=True)
    assert time.perf_counter() - start < TIME_LIMIT_S


@FUZZ
@given(st.sampled_from(CORPUS), st.floats(0, 1))
def test_truncations(text, fraction):
    check(text[: int(len(text) * fraction)])


@FUZZ
@given(st.sampled_from(CORPUS), st.lists(st.tuples(st.floats(0, 1), st.characters(), st.integers(0, 2)), min_size=1, max_size=4))
def test_character_mutations(text, edits):
    for where, char, how in edits:
        i = int(len(text) * where)
        text = text[:i] + char + text[i + 1:] if how == 0 else text[:i] + char + text[i:] if how == 1 else text[:i] + text[i + 1:]
    check(text)


@FUZZ
@given(st.text(max_size=400))
def test_random_text(text):
    check(text)
    check("HloModule m\nENTRY e {\n" + text + "\n}")


@FUZZ
@given(st.binary(max_size=400), st.sampled_from(["utf-8", "latin-1"]))
def test_random_bytes_as_text(data, encoding):
    check(data.decode(encoding, "replace"))


@FUZZ
@given(st.sampled_from(CORPUS), st.lists(st.tuples(st.floats(0, 1), st.integers(0, 3), st.sampled_from(_REPLACEMENTS)),
                                         min_size=1, max_size=4))
def test_token_mutations(text, edits):
    """Grammar-aware: drop, duplicate, move or replace whole tokens of a real module."""
    toks = _TOKEN.findall(text)
    for where, how, replacement in edits:
        if not toks:
            break
        k = min(int(len(toks) * where), len(toks) - 1)
        if how == 0:
            del toks[k]
        elif how == 1:
            toks.insert(k, toks[k])
        elif how == 2:
            toks.insert(k, toks.pop(len(toks) - 1 - k))
        else:
            toks[k] = replacement
    check(" ".join(toks))


EXTREMES = {
    "deep tuple shape": "HloModule m\nENTRY e {\n ROOT p = " + "(" * 50000 + "f32[]" + ")" * 50000 + " parameter(0)\n}",
    "deep literal": "HloModule m\nENTRY e {\n ROOT c = f32[1] constant(" + "{" * 50000 + "}\n}",
    "deep sharding": "HloModule m\nENTRY e {\n ROOT p = f32[] parameter(0), sharding=" + "{" * 50000 + "\n}",
    "huge constant": "HloModule m\nENTRY e {\n ROOT c = f32[1000000000000] constant({1})\n}",
    "huge elided constant": "HloModule m\nENTRY e {\n ROOT c = c128[4096,4096] constant({...})\n}",
    "product overflow": "HloModule m\nENTRY e {\n ROOT c = f32[4294967296,4294967296,4294967296] constant({})\n}",
    "huge dimension": "HloModule m\nENTRY e {\n ROOT p = f32[99999999999999999999] parameter(0)\n}",
    "many dimensions": "HloModule m\nENTRY e {\n ROOT p = f32[" + ",".join(["1"] * 100000) + "] parameter(0)\n}",
    "huge number": "HloModule m\nENTRY e {\n ROOT c = f32[] constant(" + "9" * 100000 + ".5)\n}",
    "nul bytes": "HloModule m\x00\x00",
    "unknown opcode": "HloModule m\nENTRY e {\n ROOT p = f32[] frob(0)\n}",
    "unknown computation": "HloModule m\nENTRY e {\n p = f32[] parameter(0)\n ROOT c = f32[] call(p), to_apply=nowhere\n}",
    "duplicate names": "HloModule m\nENTRY e {\n p = f32[] parameter(0)\n p = f32[] parameter(0)\n}",
    "cycle of calls": "HloModule m\na {\n x = f32[] parameter(0)\n ROOT y = f32[] call(x), to_apply=b\n}\n"
                      "ENTRY b {\n x = f32[] parameter(0)\n ROOT y = f32[] call(x), to_apply=a\n}",
    "many instructions": "HloModule m\nENTRY e {\n p = f32[] parameter(0)\n" + "".join(
        f" n{i} = f32[] negate(p)\n" for i in range(5000)) + "}",
}


@pytest.mark.parametrize("name", sorted(EXTREMES))
def test_extremes(name):
    """Each is refused (or read) within seconds and without memory out of proportion to the text."""
    text = EXTREMES[name]
    start = time.perf_counter()
    tracemalloc.start()
    try:
        parse_hlo_text(text, "fuzz.hlo")
    except HloParseError as err:
        assert "internal error" not in str(err)
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert time.perf_counter() - start < 30.0  # a blow-up guard, not a speed target
    assert peak < 64 * 1024 * 1024 + 400 * len(text)
