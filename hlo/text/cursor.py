"""The token cursor every HLO-text grammar module reads through.

It wraps the lexer with the small vocabulary the grammar needs (expect this punctuation, read an
integer, read a `{1,2,3}` list) so that each grammar function is a few lines and every failure is an
HloParseError carrying the file position, what was expected and what was found.
"""
from __future__ import annotations

import contextlib
from typing import Callable, Iterator, List, Optional, TypeVar

from hlo.errors import HloParseError
from hlo.text.lexer import EOF, PUNCT, STRING, WORD, Lexer, Token

__all__ = ["Cursor", "MAX_DEPTH", "MAX_LIST"]

#: Deepest nesting of brackets/tuples/literals accepted; deeper input is an error, not a crash.
MAX_DEPTH = 128
#: Longest integer list accepted in one attribute (dimensions, tiles, replica groups...).
MAX_LIST = 1 << 22

T = TypeVar("T")
_INT64_MIN = -(1 << 63)
_UINT64_MAX = (1 << 64) - 1


class Cursor:
    """Reads tokens for the grammar modules; all helpers raise HloParseError on mismatch."""

    def __init__(self, text: str, filename: str = "<string>") -> None:
        self.lexer = Lexer(text, filename)
        self._depth = 0

    # -- basic access ------------------------------------------------------------------------------
    def peek(self) -> Token:
        return self.lexer.peek()

    def next(self) -> Token:
        return self.lexer.next()

    def error(self, message: str, tok: Optional[Token] = None, expected: str = "") -> HloParseError:
        """An error at `tok` (default: the next token), message `expected X ..., found Y`."""
        tok = tok if tok is not None else self.peek()
        found = tok.describe()
        text = f"expected {expected} {message}, found {found}" if expected else f"{message}, found {found}"
        return self.lexer.error(text, tok.offset, expected=expected, found=found)

    def fail(self, message: str, tok: Optional[Token] = None) -> HloParseError:
        """An error at `tok` with a plain message (for semantic errors: duplicate names...)."""
        tok = tok if tok is not None else self.peek()
        return self.lexer.error(message, tok.offset, found=tok.describe())

    @contextlib.contextmanager
    def nested(self) -> Iterator[None]:
        """Bound recursion: every recursive grammar rule enters this."""
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise self.fail(f"nesting deeper than {MAX_DEPTH} levels")
            yield
        finally:
            self._depth -= 1

    # -- punctuation -------------------------------------------------------------------------------
    def at_punct(self, p: str) -> bool:
        tok = self.peek()
        return tok.kind == PUNCT and tok.text == p

    def at_word(self, w: Optional[str] = None) -> bool:
        tok = self.peek()
        return tok.kind == WORD and (w is None or tok.text == w)

    def at_eof(self) -> bool:
        return self.peek().kind == EOF

    def accept(self, p: str) -> bool:
        """Consume punctuation `p` if it is next."""
        if self.at_punct(p):
            self.next()
            return True
        return False

    def accept_word(self, w: str) -> bool:
        if self.at_word(w):
            self.next()
            return True
        return False

    def expect(self, p: str, context: str = "") -> Token:
        tok = self.peek()
        if tok.kind == PUNCT and tok.text == p:
            return self.next()
        raise self.error(context, tok, expected=f"'{p}'")

    def expect_word(self, context: str, what: str = "a name") -> Token:
        tok = self.peek()
        if tok.kind != WORD:
            raise self.error(context, tok, expected=what)
        return self.next()

    def expect_keyword(self, word: str, context: str = "") -> Token:
        tok = self.peek()
        if tok.kind == WORD and tok.text == word:
            return self.next()
        raise self.error(context, tok, expected=f"'{word}'")

    def expect_string(self, context: str) -> Token:
        tok = self.peek()
        if tok.kind != STRING:
            raise self.error(context, tok, expected="a quoted string")
        return self.next()

    def expect_text(self, context: str) -> str:
        """A quoted string decoded as UTF-8 text (proto `string` fields must be valid UTF-8)."""
        tok = self.expect_string(context)
        try:
            return tok.value.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"string {context} is not valid UTF-8", tok) from None

    # -- names -----------------------------------------------------------------------------------
    def expect_name(self, context: str) -> str:
        """An HLO name, with or without its leading '%'."""
        tok = self.peek()
        if tok.kind != WORD:
            raise self.error(context, tok, expected="a name")
        self.next()
        name = tok.text[1:] if tok.text.startswith("%") else tok.text
        if not name:
            raise self.fail("empty name", tok)
        return name

    # -- numbers ----------------------------------------------------------------------------------
    def expect_int(self, context: str, lo: int = _INT64_MIN, hi: int = _UINT64_MAX) -> int:
        tok = self.peek()
        value = parse_int_text(tok.text) if tok.kind == WORD else None
        if value is None:
            raise self.error(context, tok, expected="an integer")
        if not lo <= value <= hi:
            raise self.fail(f"integer {tok.text} out of range [{lo}, {hi}] {context}", tok)
        self.next()
        return value

    def expect_int64(self, context: str) -> int:
        return self.expect_int(context, _INT64_MIN, (1 << 63) - 1)

    def expect_bool(self, context: str) -> bool:
        tok = self.peek()
        if tok.kind == WORD and tok.text in ("true", "false"):
            self.next()
            return tok.text == "true"
        raise self.error(context, tok, expected="true or false")

    def expect_float(self, context: str) -> float:
        tok = self.peek()
        if tok.kind == WORD:
            value = parse_float_text(tok.text)
            if value is not None:
                self.next()
                return value
        raise self.error(context, tok, expected="a number")

    def delimited(self, read_item: Callable[[], T], context: str, open_: str = "{", close: str = "}",
                  limit: int = MAX_LIST, after_item: str = "") -> List[T]:
        """`open item, item, ... close` (empty allowed): the one loop every list in HLO text uses.

        `after_item` words the error when an item is followed by something else (default
        "in <context>").
        """
        self.expect(open_, f"to open {context}")
        out: List[T] = []
        if self.accept(close):
            return out
        while True:
            out.append(read_item())
            if len(out) > limit:
                raise self.fail(f"more than {limit} entries in {context}")
            if self.accept(close):
                return out
            if not self.accept(","):
                raise self.error(after_item or f"in {context}", expected=f"',' or '{close}'")

    def int_list(self, context: str, open_: str = "{", close: str = "}") -> List[int]:
        """`{1, 2, 3}` (or with other brackets); empty allowed."""
        return self.delimited(lambda: self.expect_int64(f"in {context}"), context, open_, close)

    def nested_int_lists(self, context: str) -> List[List[int]]:
        """`{{0,1},{2,3}}` (replica groups, source-target pairs); `{}` allowed."""
        return self.delimited(lambda: self.int_list(context), context)


def parse_int_text(text: str) -> Optional[int]:
    """Decimal (optionally signed) or 0x hex integer; None when `text` is not one."""
    body = text[1:] if text[:1] in "-+" else text
    if body.isdigit() and body.isascii():
        if len(body) > 40:
            return None
        return int(text, 10)
    if body[:2] in ("0x", "0X") and len(body) > 2 and len(body) <= 18:
        try:
            return int(text, 16)
        except ValueError:
            return None
    return None


def parse_float_text(text: str) -> Optional[float]:
    """A decimal or inf/nan spelling as HLO prints it; None when `text` is not a number."""
    low = text.lower()
    body = low.lstrip("-+")
    if body in ("inf", "nan") or body.startswith("nan("):
        if body.startswith("nan"):
            return float("-nan") if low.startswith("-") else float("nan")
        return float("-inf") if low.startswith("-") else float("inf")
    if not body or not (body[0].isdigit() or body[0] == "."):
        return None
    if len(body) > 400 or "_" in body:
        return None
    try:
        return float(text)
    except ValueError:
        return None
