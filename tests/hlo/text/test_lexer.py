"""The lexer: token kinds, strings and escapes, comments, compound words, positions of errors."""
from __future__ import annotations

import pytest

from hlo.errors import HloParseError
from hlo.text.lexer import EOF, PUNCT, STRING, WORD, Lexer


def tokens(text: str) -> list:
    lex = Lexer(text)
    out = []
    while True:
        tok = lex.next()
        if tok.kind == EOF:
            return out
        out.append((tok.kind, tok.value if tok.kind == STRING else tok.text))


def test_words_numbers_and_punctuation():
    assert tokens("%add.1 = f32[2,3]{1,0} add(%a, %b)") == [
        (WORD, "%add.1"), (PUNCT, "="), (WORD, "f32"), (PUNCT, "["), (WORD, "2"), (PUNCT, ","), (WORD, "3"),
        (PUNCT, "]"), (PUNCT, "{"), (WORD, "1"), (PUNCT, ","), (WORD, "0"), (PUNCT, "}"), (WORD, "add"),
        (PUNCT, "("), (WORD, "%a"), (PUNCT, ","), (WORD, "%b"), (PUNCT, ")"),
    ]


@pytest.mark.parametrize("text", ["-1.5e+10", "1e-05", "-inf", "inf", "nan", "-nan(0x7f)", "3.", ".5", "0x1F"])
def test_numbers_are_single_words(text):
    assert tokens(text) == [(WORD, text)]


@pytest.mark.parametrize("text", ["3x3", "0_0x1_-1", "get-tuple-element.12", "bf01_oi01", "rng_three_fry", "infeed", "nanny"])
def test_compound_words(text):
    assert tokens(text) == [(WORD, text)]


def test_arrow_and_dim_labels():
    assert tokens("b01f_01io->b01f") == [(WORD, "b01f_01io"), (PUNCT, "->"), (WORD, "b01f")]
    assert tokens("f32[<=4,?]") == [(WORD, "f32"), (PUNCT, "["), (PUNCT, "<="), (WORD, "4"), (PUNCT, ","),
                                    (PUNCT, "?"), (PUNCT, "]")]


def test_string_escapes_decode_to_bytes():
    assert tokens(r'"a\"b\\c\n\t\001\x41\303\251"') == [(STRING, b'a"b\\c\n\t\x01A\xc3\xa9')]
    assert tokens('"é"') == [(STRING, "é".encode())]


def test_comments_are_skipped():
    assert tokens("a /* x, y */ b // rest\n c /*index=5*/d") == [(WORD, "a"), (WORD, "b"), (WORD, "c"), (WORD, "d")]


def test_raw_balanced_takes_json_with_braces_in_strings():
    lex = Lexer('{"a": {"b": "}"}, "c": 1} tail')
    raw, _ = lex.raw_balanced()
    assert raw == '{"a": {"b": "}"}, "c": 1}'
    assert lex.next().text == "tail"


@pytest.mark.parametrize("text, line, col", [
    ('a\n  "unterminated', 2, 3),
    ("a /* open", 1, 3),
    ('"bad \\q escape"', 1, 6),
    ("a\n\n   `", 3, 4),
])
def test_errors_carry_positions(text, line, col):
    lex = Lexer(text, "f.hlo")
    with pytest.raises(HloParseError) as info:
        while lex.next().kind != EOF:
            pass
    err = info.value
    assert (err.filename, err.line, err.column) == ("f.hlo", line, col)
    assert str(err).startswith(f"f.hlo:{line}:{col}: ")
