"""Symbolic index tiles: ``program_id``, loop variables, ``arange``/``mgrid``, and their affine
algebra.

An ``Idx`` is an integer tile (possibly 0-d) whose value at every position is
``const + sum(coef * symbol)``; symbols are program ids (``p0``), loop variables (``l3``) and the
tile's own axes (``a0``, ``a1``: position along that axis). Only affine arithmetic is allowed, which
is what lets the emulator turn every access into a strided view. Comparisons of ``Idx`` values give
``Pred`` masks.
"""

from __future__ import annotations

from typing import Union

import numpy as np

from emulator.kernel_ir import Affine

from .errors import NonAffineIndexError


def _axis_sym(j: int) -> str:
    return f"a{j}"


def _is_axis(sym: str) -> bool:
    return sym.startswith("a")


class Idx:
    """An affine integer index tile (see module docstring)."""

    __slots__ = ("shape", "const", "terms")
    __array_priority__ = 1000  # so numpy scalars defer to our operators

    def __init__(self, shape: tuple[int, ...], const: int, terms: dict[str, int]):
        self.shape = tuple(int(s) for s in shape)
        self.const = int(const)
        self.terms = {s: int(c) for s, c in terms.items() if c != 0}

    # --- shape ---------------------------------------------------------------------------------

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def scalar_terms(self) -> dict[str, int]:
        return {s: c for s, c in self.terms.items() if not _is_axis(s)}

    def axis_terms(self) -> dict[int, int]:
        return {int(s[1:]): c for s, c in self.terms.items() if _is_axis(s)}

    def _aligned(self, rank: int) -> dict[str, int]:
        """Terms with axis symbols renumbered for right-alignment in a rank-``rank`` shape."""
        off = rank - self.ndim
        return {(_axis_sym(int(s[1:]) + off) if _is_axis(s) else s): c
                for s, c in self.terms.items()}

    def __getitem__(self, key) -> "Idx":
        """Only axis insertion (``None``) and whole axes (``:``), as in ``arange(n)[:, None]``."""
        key = key if isinstance(key, tuple) else (key,)
        shape: list[int] = []
        terms = self.scalar_terms()
        old = 0
        for k in key:
            if k is None:
                shape.append(1)
            elif isinstance(k, slice) and k == slice(None):
                if old >= self.ndim:
                    raise IndexError("too many indices for index tile")
                c = self.terms.get(_axis_sym(old), 0)
                if c:
                    terms[_axis_sym(len(shape))] = c
                shape.append(self.shape[old])
                old += 1
            else:
                raise NonAffineIndexError(
                    f"index tiles may only be indexed with None and ':' (got {k!r})")
        for j in range(old, self.ndim):
            c = self.terms.get(_axis_sym(j), 0)
            if c:
                terms[_axis_sym(len(shape))] = c
            shape.append(self.shape[j])
        return Idx(tuple(shape), self.const, terms)

    # --- affine algebra ------------------------------------------------------------------------

    def _combine(self, other: "IdxLike", sign: int) -> "Idx":
        if isinstance(other, Idx):
            shape = _broadcast(self.shape, other.shape)
            a, b = self._aligned(len(shape)), other._aligned(len(shape))
            terms = dict(a)
            for s, c in b.items():
                terms[s] = terms.get(s, 0) + sign * c
            return Idx(shape, self.const + sign * other.const, terms)
        if _is_int(other):
            return Idx(self.shape, self.const + sign * int(other), self.terms)
        return NotImplemented

    def __add__(self, other):
        return self._combine(other, 1)

    __radd__ = __add__

    def __sub__(self, other):
        return self._combine(other, -1)

    def __rsub__(self, other):
        return (-self)._combine(other, 1)

    def __neg__(self) -> "Idx":
        return Idx(self.shape, -self.const, {s: -c for s, c in self.terms.items()})

    def __pos__(self) -> "Idx":
        return self

    def __mul__(self, other):
        if isinstance(other, Idx):
            if not other.terms:
                other = other.const
            elif not self.terms:
                return other * self.const
            else:
                raise NonAffineIndexError("product of two index expressions is not affine")
        if _is_int(other):
            k = int(other)
            return Idx(self.shape, self.const * k, {s: c * k for s, c in self.terms.items()})
        return NotImplemented

    __rmul__ = __mul__

    def __floordiv__(self, other):
        raise NonAffineIndexError("'//' on an index expression is not affine")

    __mod__ = __truediv__ = __rfloordiv__ = __rmod__ = __floordiv__

    # --- comparisons give masks ----------------------------------------------------------------

    def __lt__(self, other):
        return Pred([_as_idx(other) - self - 1])

    def __le__(self, other):
        return Pred([_as_idx(other) - self])

    def __gt__(self, other):
        return Pred([self - _as_idx(other) - 1])

    def __ge__(self, other):
        return Pred([self - _as_idx(other)])

    def __eq__(self, other):  # type: ignore[override]
        d = self - _as_idx(other)
        return Pred([d, -d])

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        if not self.terms:
            return bool(self.const)
        raise NonAffineIndexError(
            "Python control flow on a program id, loop variable or index tile: its value is only "
            "known when the kernel runs (use a mask or nl.where)")

    def __index__(self) -> int:
        if not self.terms and self.ndim == 0:
            return self.const
        raise NonAffineIndexError(
            "an index expression was used where Python needs a concrete integer")

    __int__ = __index__

    def to_affine(self, tile_rank: int) -> Affine:
        """The IR expression, with axis ``j`` of this tile as tile axis ``t<j + offset>`` of a
        rank-``tile_rank`` tile it is right-aligned in."""
        off = tile_rank - self.ndim
        terms = {}
        for s, c in self.terms.items():
            if _is_axis(s):
                j = int(s[1:])
                if self.shape[j] == 1:
                    continue
                terms[f"t{j + off}"] = c
            else:
                terms[s] = c
        return Affine.make(self.const, terms)

    def __repr__(self) -> str:
        return f"Idx(shape={list(self.shape)}, {Affine.make(self.const, self.terms)})"


IdxLike = Union[Idx, int]


class Pred:
    """A mask: the conjunction of ``expr >= 0`` for affine index expressions; combine with ``&``."""

    __slots__ = ("exprs",)

    def __init__(self, exprs: list[Idx]):
        self.exprs = list(exprs)

    @property
    def shape(self) -> tuple[int, ...]:
        shape: tuple[int, ...] = ()
        for e in self.exprs:
            shape = _broadcast(shape, e.shape)
        return shape

    def __and__(self, other: "Pred") -> "Pred":
        if not isinstance(other, Pred):
            return NotImplemented
        return Pred(self.exprs + other.exprs)

    __rand__ = __and__

    def __or__(self, other):
        raise NonAffineIndexError("masks combine with '&' only ('|' is not an affine predicate)")

    def __bool__(self) -> bool:
        if all(not e.terms for e in self.exprs):
            return all(e.const >= 0 for e in self.exprs)
        raise NonAffineIndexError(
            "Python control flow on a comparison of index expressions (use mask= or nl.where)")

    def to_affines(self, tile_rank: int) -> tuple[Affine, ...]:
        return tuple(e.to_affine(tile_rank) for e in self.exprs)


def _is_int(x) -> bool:
    """Python and NumPy integers (the static values an index may mix with expressions)."""
    return isinstance(x, (int, np.integer))


def _as_idx(x) -> Idx:
    if isinstance(x, Idx):
        return x
    if _is_int(x):
        return Idx((), int(x), {})
    raise NonAffineIndexError(f"{x!r} is not an integer index expression")


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + tuple(a)
    b = (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise NonAffineIndexError(f"index shapes {list(a)} and {list(b)} do not broadcast")
        out.append(max(x, y))
    return tuple(out)


def symbol(name: str) -> Idx:
    """A scalar symbol (program id ``p0`` or loop variable ``l3``)."""
    return Idx((), 0, {name: 1})


def arange(*args: int) -> Idx:
    """``arange(stop)`` or ``arange(start, stop)``: a 1-D index tile."""
    if len(args) == 1:
        start, stop = 0, int(args[0])
    elif len(args) == 2:
        start, stop = int(args[0]), int(args[1])
    else:
        raise TypeError("arange(stop) or arange(start, stop)")
    return Idx((stop - start,), start, {"a0": 1})


class IndexGrid(tuple):
    """What ``mgrid`` returns: one index tile per dimension; unpacks, indexes, and offers ``.p``
    (partition) and ``.x`` (first free) for the 2-D case."""

    @property
    def p(self) -> Idx:
        return self[0]

    @property
    def x(self) -> Idx:
        return self[1]


class _MGrid:
    """``mgrid[0:128, 0:512]``: like ``numpy.mgrid``, dense index tiles."""

    def __getitem__(self, key) -> IndexGrid:
        key = key if isinstance(key, tuple) else (key,)
        shape = []
        starts = []
        steps = []
        for k in key:
            if not isinstance(k, slice) or k.stop is None:
                raise TypeError("mgrid takes slices with a stop, e.g. mgrid[0:128, 0:512]")
            start = int(k.start or 0)
            step = int(k.step or 1)
            shape.append(len(range(start, int(k.stop), step)))
            starts.append(start)
            steps.append(step)
        return IndexGrid(Idx(tuple(shape), starts[d], {f"a{d}": steps[d]})
                         for d in range(len(key)))


mgrid = _MGrid()


def ds(start: IdxLike, size: int) -> slice:
    """A dynamic slice of a static ``size`` starting at a (possibly symbolic) ``start``."""
    return slice(start, start + size)

