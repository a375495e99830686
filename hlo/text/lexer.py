"""Lexer of HLO text: turns characters into tokens on demand.

Why on demand (the parser pulls one token at a time) rather than tokenising the whole file first:
a few attribute values are not HLO tokens at all (a `backend_config={...}` holding raw JSON), so
the parser must be able to take raw text from the current position; and a lazy lexer never builds
a token list bigger than the input. HLO text has context-sensitive pieces (`3x3`, `1_1x0_0`,
`b01f_01io->b01f`, `f32[2]{1,0:T(8,128)}`); the lexer keeps them as plain WORD tokens and the
parser gives each its meaning where it is expected.
"""
from __future__ import annotations

import bisect
import re
from typing import List, NamedTuple, Optional, Tuple

from hlo.errors import HloParseError

__all__ = ["Token", "Lexer", "EOF", "WORD", "STRING", "PUNCT", "MAX_TEXT_CHARS"]

EOF = "eof"
WORD = "word"
STRING = "string"
PUNCT = "punct"

#: Texts beyond this size are refused up front (a bound on work and memory, not a grammar rule).
MAX_TEXT_CHARS = 1 << 30

# A word: identifiers (`%add.1`, `get-tuple-element`, `reduce_sum.3`), numbers (`-1.5e+10`,
# `-inf`, `nan(0x7f)`), and the compound forms `3x3`, `0_0x1_1`, `bf01_oi01`.  A '-' is part of a
# word unless it starts the arrow '->'.  A sign or exponent '+' is only part of a number.
_NUMBER = r"[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|inf|nan(?:\(0x[0-9a-fA-F]+\))?)(?![\w.$%])"
_WORD = r"%?(?:[\w.$]|-(?!>))+"
# One pattern for every token, tried in this order: string start, number, two/three-character
# punctuation, word, one-character punctuation.
_TOKEN_RE = re.compile(
    r'(?P<string>["\'])|(?P<number>' + _NUMBER + r")|(?P<punct2>->|<=|\.\.\.)|(?P<word>" + _WORD
    + r")|(?P<punct1>[{}\[\](),=:*?#+~<>/|@!^&;])"
)
_SPACE_RE = re.compile(r"(?:[ \t\r\n\f\v]+|//[^\n]*|/\*.*?\*/)*", re.S)
_RAW_RUN_RE = re.compile(r"[^\s,{}]+")
_KIND = {"number": WORD, "word": WORD, "punct2": PUNCT, "punct1": PUNCT}
_SIMPLE_ESCAPES = {
    "n": b"\n",
    "t": b"\t",
    "r": b"\r",
    "\\": b"\\",
    '"': b'"',
    "'": b"'",
    "a": b"\a",
    "b": b"\b",
    "f": b"\f",
    "v": b"\v",
    "?": b"?",
}


class Token(NamedTuple):
    """One token: its kind, its text (for STRING: the source spelling), its source offset and,
    for STRING, the decoded bytes.  A NamedTuple because millions are made for a big module."""

    kind: str
    text: str
    offset: int
    value: bytes = b""

    def describe(self) -> str:
        """How the token reads in an error message."""
        if self.kind == EOF:
            return "end of input"
        shown = self.text if len(self.text) <= 40 else self.text[:37] + "..."
        return shown if self.kind == STRING else f"'{shown}'"


class Lexer:
    """Pull lexer over one HLO text, with a one-token lookahead and save/restore for backtracking."""

    def __init__(self, text: str, filename: str = "<string>") -> None:
        if len(text) > MAX_TEXT_CHARS:
            raise HloParseError(
                f"input of {len(text)} characters exceeds the limit of {MAX_TEXT_CHARS}",
                filename=filename,
                line=1,
                column=1,
            )
        self.text = text
        self.filename = filename
        self._pos = 0
        self._peeked: Optional[Token] = None
        self._line_starts: Optional[List[int]] = None

    # -- positions -------------------------------------------------------------------------------
    def line_col(self, offset: int) -> Tuple[int, int]:
        """1-based line and column of a character offset (computed lazily: only errors need it)."""
        if self._line_starts is None:
            starts = [0]
            find = self.text.find
            i = find("\n")
            while i >= 0:
                starts.append(i + 1)
                i = find("\n", i + 1)
            self._line_starts = starts
        line = bisect.bisect_right(self._line_starts, offset)
        return line, offset - self._line_starts[line - 1] + 1

    def error(self, message: str, offset: int, expected: str = "", found: str = "") -> HloParseError:
        """An HloParseError located at `offset`."""
        line, col = self.line_col(min(max(offset, 0), len(self.text)))
        return HloParseError(
            message, filename=self.filename, line=line, column=col, expected=expected, found=found
        )

    @property
    def position(self) -> int:
        """Offset the lexer has read up to (for error reports)."""
        return self._pos

    # -- state -----------------------------------------------------------------------------------
    def save(self) -> Tuple[int, Optional[Token]]:
        """A mark to return to with `restore` (used for the few places the grammar is ambiguous)."""
        return self._pos, self._peeked

    def restore(self, mark: Tuple[int, Optional[Token]]) -> None:
        self._pos, self._peeked = mark

    # -- tokens ----------------------------------------------------------------------------------
    def peek(self) -> Token:
        if self._peeked is None:
            self._peeked = self._lex()
        return self._peeked

    def next(self) -> Token:
        tok = self.peek()
        self._peeked = None
        return tok

    def _skip_space_and_comments(self) -> None:
        pos = _SPACE_RE.match(self.text, self._pos).end()
        if self.text.startswith("/*", pos):
            raise self.error("unterminated /* comment", pos)
        self._pos = pos

    def _lex(self) -> Token:
        text = self.text
        pos = _SPACE_RE.match(text, self._pos).end()
        self._pos = pos
        if pos >= len(text):
            return Token(EOF, "", pos)
        m = _TOKEN_RE.match(text, pos)
        if m is None or (m.lastgroup == "punct1" and text.startswith("/*", pos)):
            if text.startswith("/*", pos):
                raise self.error("unterminated /* comment", pos)
            shown = repr(text[pos])
            raise self.error(f"unexpected character {shown}", pos, found=shown)
        kind = m.lastgroup
        if kind == "string":
            return self._lex_string()
        self._pos = m.end()
        return Token(_KIND[kind], m.group(), pos)

    def seek(self, offset: int) -> None:
        """Continue lexing at `offset` (after a caller consumed raw text itself)."""
        self._pos = offset
        self._peeked = None

    def offset_after_peek(self) -> int:
        """Source offset just past the peeked token (for cheap raw look-ahead)."""
        tok = self.peek()
        return tok.offset + len(tok.text) if tok.kind != EOF else tok.offset

    def _lex_string(self) -> Token:
        """A C-escaped string, decoded to bytes (backend_config is bytes in XLA): double-quoted,
        or single-quoted as XLA prints mesh axis names (`mesh['x'=2]`)."""
        text = self.text
        start = self._pos
        quote = text[start]
        stops = quote + "\\"
        pos = start + 1
        n = len(text)
        out = bytearray()
        while True:
            end = pos
            while end < n and text[end] not in stops:
                end += 1
            if end > pos:
                out += text[pos:end].encode("utf-8", "surrogatepass")
            if end >= n:
                raise self.error("unterminated string", start, expected=f"closing '{quote}'")
            if text[end] == quote:
                pos = end + 1
                break
            # backslash escape
            if end + 1 >= n:
                raise self.error("unterminated string", start, expected=f"closing '{quote}'")
            e = text[end + 1]
            if e in _SIMPLE_ESCAPES:
                out += _SIMPLE_ESCAPES[e]
                pos = end + 2
            elif e == "x":
                m = re.compile(r"[0-9a-fA-F]{1,2}").match(text, end + 2)
                if m is None:
                    raise self.error("bad \\x escape in string", end)
                out.append(int(m.group(), 16))
                pos = m.end()
            elif e in "01234567":
                m = re.compile(r"[0-7]{1,3}").match(text, end + 1)
                assert m is not None
                value = int(m.group(), 8)
                if value > 255:
                    raise self.error("octal escape out of range in string", end)
                out.append(value)
                pos = m.end()
            else:
                raise self.error(f"unknown escape '\\{e}' in string", end)
        self._pos = pos
        return Token(STRING, text[start:pos], start, bytes(out))

    def raw_run(self) -> Tuple[str, int]:
        """Take raw text up to the next space, ',' or '}' (values like `sparsity=L.1@2:4`)."""
        if self._peeked is not None:
            self._pos = self._peeked.offset
            self._peeked = None
        self._skip_space_and_comments()
        m = _RAW_RUN_RE.match(self.text, self._pos)
        if m is None or not m.group():
            raise self.error("expected a value", self._pos, expected="a value")
        self._pos = m.end()
        return m.group(), m.start()

    def raw_balanced(self) -> Tuple[str, int]:
        """Take raw text from the next '{' to its matching '}' (strings respected).

        Used for values that are not HLO tokens, e.g. `backend_config={"a": 1}` (JSON).
        """
        if self._peeked is not None:
            self._pos = self._peeked.offset
            self._peeked = None
        self._skip_space_and_comments()
        text = self.text
        start = self._pos
        if start >= len(text) or text[start] != "{":
            raise self.error("expected '{'", start, expected="'{'")
        depth = 0
        pos = start
        n = len(text)
        while pos < n:
            c = text[pos]
            if c == '"':
                self._pos = pos
                self._lex_string()
                pos = self._pos
                continue
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    self._pos = pos + 1
                    return text[start : pos + 1], start
            pos += 1
        raise self.error("unbalanced '{'", start, expected="'}'")
