"""Floor division and modulo by constants in index expressions: *derived symbols*.

An index such as ``a[i // 4, i % 4]`` (``i`` an ``arange``, a loop variable or a program id) is
not affine in ``i``, but it is affine in two derived symbols, ``(1*t0+0)//4`` and ``(1*t0+0)%4``.
A derived symbol is ``(C*S+B)//K`` or ``(C*S+B)%K`` with ``S`` a plain symbol (``p<i>``,
``l<n>``, ``t<j>``; the NKI front end also uses its axis symbols ``a<j>``) and integer
constants, written in exactly that form, so an ``Affine``'s terms stay ``(symbol, coefficient)``
pairs of strings and the serialised IR stays plain JSON. ``parse`` reads the form back with a
regular expression (nothing is evaluated).

``divmod_terms`` builds them in canonical form, ``0 < C < K`` and ``0 <= B < K``, pulling out
what is affine: ``(8*x + 5) // 4 == 2*x + 1 + (1*x+1)//4`` and, when ``x``'s extent keeps
``C*x + B`` below ``K``, no derived symbol at all. Everything that evaluates, bounds or renames
symbols goes through ``value``, ``value_range`` and ``rebase`` here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FLOORDIV = "//"
MOD = "%"

_FORM = re.compile(r"^\((\d+)\*([A-Za-z]\w*)\+(\d+)\)(//|%)(\d+)$")


@dataclass(frozen=True)
class DivMod:
    """``(coef * base + offset) op k``; canonical: ``0 < coef < k``, ``0 <= offset < k``."""

    op: str
    coef: int
    base: str
    offset: int
    k: int

    @property
    def name(self) -> str:
        return f"({self.coef}*{self.base}+{self.offset}){self.op}{self.k}"

    def __str__(self) -> str:
        inner = (f"{self.coef}*" if self.coef != 1 else "") + self.base
        inner += f" + {self.offset}" if self.offset else ""
        return f"({inner} {self.op} {self.k})"


def is_derived(sym: str) -> bool:
    return sym.startswith("(")


def parse(sym: str) -> DivMod | None:
    """The derived symbol ``sym`` names, or None for a plain symbol."""
    if not sym.startswith("("):
        return None
    m = _FORM.match(sym)
    if m is None:
        raise ValueError(f"malformed derived index symbol {sym!r}")
    return DivMod(m.group(4), int(m.group(1)), m.group(2), int(m.group(3)), int(m.group(5)))


def value(d: DivMod, x):
    """The symbol's value for base value(s) ``x`` (an int or an integer array)."""
    v = d.coef * x + d.offset
    return v // d.k if d.op == FLOORDIV else v % d.k


def value_range(d: DivMod, extent: int) -> tuple[int, int]:
    """Smallest and largest value over ``base`` in ``0 .. extent-1`` (the quotient is monotonic;
    a remainder repeats every ``k`` values, so its first ``k`` give its range)."""
    n = max(int(extent), 1)
    hi = d.coef * (n - 1) + d.offset
    if d.op == FLOORDIV:
        return d.offset // d.k, hi // d.k
    if n <= d.k or d.k <= 4096:  # a remainder repeats with period k: k values are all of them
        vals = [value(d, x) for x in range(min(n, d.k))]
        return min(vals), max(vals)
    return 0, d.k - 1


def divmod_terms(op: str, coef: int, base: str, offset: int, k: int,
                 extent: int | None = None) -> tuple[int, dict[str, int]]:
    """``(coef * base + offset) op k`` as ``const + sum(c * sym)``: affine terms of ``base`` and at
    most one derived symbol. ``extent`` (values of ``base`` are ``0 .. extent-1``), when known,
    removes the derived symbol where the division never wraps."""
    if k <= 0:
        raise ValueError("'//' and '%' need a positive divisor")
    qc, c = divmod(int(coef), k)
    qb, b = divmod(int(offset), k)
    if op == FLOORDIV:
        const, terms = qb, ({base: qc} if qc else {})
    else:
        const, terms = 0, {}
    if c == 0:
        return (const, terms) if op == FLOORDIV else (b, {})
    if extent is not None and c * (max(extent, 1) - 1) + b < k:
        # never wraps: the quotient part is 0 and the remainder is affine
        return (const, terms) if op == FLOORDIV else (b, {base: c})
    name = DivMod(op, c, base, b, k).name
    terms[name] = terms.get(name, 0) + 1
    return const, terms


def rebase(sym: str, new_base: str) -> str:
    """The derived symbol ``sym`` over another base symbol (renumbered axes)."""
    d = parse(sym)
    assert d is not None
    return DivMod(d.op, d.coef, new_base, d.offset, d.k).name


def term_range(sym: str, extents: dict[str, int]) -> tuple[int, int]:
    """Range of a symbol's value: ``0 .. extent-1`` for a plain one (0 if its extent is unknown),
    the derived range for a derived one."""
    d = parse(sym)
    if d is None:
        return 0, max(extents.get(sym, 1) - 1, 0)
    return value_range(d, extents.get(d.base, 1))


def base_of(sym: str) -> str:
    """The plain symbol a (possibly derived) symbol depends on."""
    d = parse(sym)
    return sym if d is None else d.base


def pretty(sym: str) -> str:
    """A symbol as people write it: ``(l1 // 2)`` for a derived one."""
    d = parse(sym)
    return sym if d is None else str(d)
