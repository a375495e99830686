"""The C++ parameter names of compute functions, read from the sources a library is built from.

Why: an op's registration table (``m.def("relu_forward", &shape, "relu_forward")``) and its
mangled symbol give each argument's type but not its name, so torch schemas used to read
``relu_backward(Tensor a0, Tensor a1)``; users see these names in ``torch.ops`` errors, in
``opcheck`` reports and in exported graphs, and call ops with keyword arguments. The compute
sources are at hand when ``custom_op.load`` builds the library, so the names come from the
function's definition there. This is a reader of declarations, not a C++ parser: comments and
literals are skipped, the parameter list is split at top-level commas, and the name is the last
identifier of a parameter that has one. Whatever it can not tell (an unnamed parameter, a source
that does not define the function, a name a schema can not use) keeps the positional ``a<k>``.
"""
from __future__ import annotations

import keyword
import logging
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

log = logging.getLogger(__name__)

# Comments, then string and character literals (escapes included): removed before reading.
_NOISE = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
_IDENT = re.compile(r"[A-Za-z_]\w*")
_PAIRS = {"(": ")", "<": ">", "[": "]", "{": "}"}
# Words that end a type, never a parameter name ("const double" names nothing).
_TYPE_WORDS = frozenset({
    "auto", "bool", "char", "const", "double", "float", "int", "long", "short", "signed", "unsigned",
    "void", "volatile", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t",
    "uint64_t", "size_t", "Tensor", "Scalar"})


def _clean(text: str) -> str:
    return _NOISE.sub(" ", text)


def _closing(text: str, start: int) -> int:
    """The index of the ')' closing the '(' at `start` (-1 when unbalanced)."""
    depth = 0
    for k in range(start, len(text)):
        c = text[k]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return k
    return -1


def _split_top_level(params: str) -> list[str]:
    """`params` split at commas outside (), <>, [] and {}."""
    parts, depth, current = [], 0, []
    for c in params:
        if c in _PAIRS:
            depth += 1
        elif c in _PAIRS.values():
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(c)
    parts.append("".join(current))
    return [p.strip() for p in parts] if params.strip() else []


def _name(param: str) -> str | None:
    """The declared name of one parameter, None when it has none."""
    param = re.sub(r"\[[^\]]*\]\s*$", "", param.split("=", 1)[0]).strip()
    m = re.search(r"([A-Za-z_]\w*)$", param)
    if m is None:
        return None
    before = param[:m.start()].rstrip()
    if not before or before.endswith("::") or m.group(1) in _TYPE_WORDS:
        return None  # the type alone: "torch::Tensor", "int64_t", "const double"
    return m.group(1)


def _definitions(text: str, function: str) -> Iterable[list[str]]:
    """Parameter lists (as text) of each definition of `function` in cleaned source `text`."""
    for m in re.finditer(rf"(?<![\w:.>]){re.escape(function)}\s*\(", text):
        end = _closing(text, m.end() - 1)
        if end < 0:
            continue
        tail = text[end + 1:end + 120]
        if re.match(r"\s*(?:const\s*|noexcept\s*|override\s*)*(?:->[^{;]*)?\{", tail):
            yield _split_top_level(text[m.end():end])


def _read(sources: Sequence[Path]) -> str:
    texts = []
    for source in sources:
        try:
            texts.append(_clean(Path(source).read_text(errors="replace")))
        except OSError as e:
            log.debug("can not read %s for parameter names: %s", source, e)
    return "\n".join(texts)


def usable(names: Sequence[str | None]) -> tuple[str, ...]:
    """Schema argument names: each found name, or ``a<k>`` where none is usable (absent, a Python
    keyword, or repeated); all positional when the found names would clash with ``a<k>``."""
    out = [n if n is not None and not keyword.iskeyword(n) else None for n in names]
    seen = [n for n in out if n is not None]
    if len(seen) != len(set(seen)):
        out = [None] * len(out)
    filled = [n if n is not None else f"a{k}" for k, n in enumerate(out)]
    if len(filled) != len(set(filled)):
        return tuple(f"a{k}" for k in range(len(out)))
    return tuple(filled)


def parameter_names(sources: Sequence[Path], function: str, count: int) -> tuple[str, ...]:
    """The schema names of compute function `function`'s `count` parameters, as its definition
    in `sources` declares them (see `usable`)."""
    text = _read(sources)
    for params in _definitions(text, function):
        if len(params) == count:
            return usable([_name(p) for p in params])
    log.debug("no definition of %s with %d parameters in %s: positional names", function, count,
              [str(s) for s in sources])
    return tuple(f"a{k}" for k in range(count))
