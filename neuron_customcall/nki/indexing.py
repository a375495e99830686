"""Symbolic index tiles: ``program_id``, loop variables, ``arange``/``mgrid``, and their affine
algebra.

An ``Idx`` is an integer tile (possibly 0-d) whose value at every position is
``const + sum(coef * symbol)``; symbols are program ids (``p0``), loop variables (``l3``) and the
tile's own axes (``a0``, ``a1``: position along that axis). Only affine arithmetic is allowed, which
is what lets the emulator turn every access into a strided view; ``//`` and ``%`` by constants
add derived symbols (emulator/kernel_ir/divmod.py) where one symbol is divided. Comparisons of
``Idx`` values give ``Pred`` masks.
"""

from __future__ import annotations

from typing import Union

import numpy as np

from emulator.kernel_ir import Affine
from emulator.kernel_ir import divmod as dm

from .errors import NonAffineIndexError
from .tracer import current_or_none


def _axis_sym(j: int) -> str:
    return f"a{j}"


def _is_axis(sym: str) -> bool:
    """An axis symbol, or a derived symbol (``//``, ``%``) of one."""
    return dm.base_of(sym).startswith("a")


def _axis_of(sym: str) -> int:
    return int(dm.base_of(sym)[1:])


def _renumber(sym: str, j: int) -> str:
    """``sym`` (an axis symbol or a derived symbol of one) over axis ``j`` instead."""
    return _axis_sym(j) if not dm.is_derived(sym) else dm.rebase(sym, _axis_sym(j))


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

    def _aligned(self, rank: int) -> dict[str, int]:
        """Terms with axis symbols renumbered for right-alignment in a rank-``rank`` shape."""
        off = rank - self.ndim
        return {(_renumber(s, _axis_of(s) + off) if _is_axis(s) else s): c
                for s, c in self.terms.items()}

    def __getitem__(self, key) -> "Idx":
        """Only axis insertion (``None``) and whole axes (``:``), as in ``arange(n)[:, None]``."""
        key = key if isinstance(key, tuple) else (key,)
        shape: list[int] = []
        new_axis: dict[int, int] = {}
        old = 0
        for k in key:
            if k is None:
                shape.append(1)
            elif isinstance(k, slice) and k == slice(None):
                if old >= self.ndim:
                    raise IndexError("too many indices for index tile")
                new_axis[old] = len(shape)
                shape.append(self.shape[old])
                old += 1
            else:
                raise NonAffineIndexError(
                    f"index tiles may only be indexed with None and ':' (got {k!r})")
        for j in range(old, self.ndim):
            new_axis[j] = len(shape)
            shape.append(self.shape[j])
        terms = self.scalar_terms()
        for s, c in self.terms.items():
            if _is_axis(s):
                sym = _renumber(s, new_axis[_axis_of(s)])
                terms[sym] = terms.get(sym, 0) + c
        return Idx(tuple(shape), self.const, terms)

    # --- affine algebra ------------------------------------------------------------------------

    def _combine(self, other: "IdxLike", sign: int) -> "Idx":
        if isinstance(other, Idx):
            shape = broadcast_index_shapes(self.shape, other.shape)
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
        return self._divmod(other, dm.FLOORDIV)

    def __mod__(self, other):
        return self._divmod(other, dm.MOD)

    def _divmod(self, other, op: str) -> "Idx":
        """``self // k`` or ``self % k`` for a positive integer constant ``k``. Terms whose
        coefficient is a multiple of ``k`` divide exactly; what remains must be one symbol (an
        axis, a loop variable or a program id), which becomes a derived symbol (see
        emulator/kernel_ir/divmod.py), or stay inside one multiple of ``k`` over all values."""
        if isinstance(other, Idx) and not other.terms:
            other = other.const
        if not _is_int(other) or int(other) <= 0:
            raise NonAffineIndexError(
                f"'{op}' on an index expression needs a positive integer constant, got {other!r}")
        k = int(other)
        exact = {s: c // k for s, c in self.terms.items() if c % k == 0}
        rest = {s: c for s, c in self.terms.items() if c % k != 0}
        whole = exact if op == dm.FLOORDIV else {}
        if len(rest) == 1 and not dm.is_derived(next(iter(rest))):
            (sym, c), = rest.items()
            const, terms = dm.divmod_terms(op, c, sym, self.const, k, self._extent(sym))
            for t, v in terms.items():
                whole = {**whole, t: whole.get(t, 0) + v}
            return Idx(self.shape, const, whole)
        lo = hi = self.const
        for sym, c in rest.items():
            a, b = dm.term_range(sym, self._extents(sym))
            lo += min(c * a, c * b)
            hi += max(c * a, c * b)
        if lo // k != hi // k and any(dm.is_derived(sym) for sym in rest):
            raise NonAffineIndexError(
                f"'{op} {k}' of an index that already holds '//' or '%' "
                f"({Affine.make(self.const, rest)}): nested division is not supported; "
                "divide the original index by the product instead")
        if lo // k != hi // k:
            raise NonAffineIndexError(
                f"'{op} {k}' of an index expression: after dropping terms that are multiples of "
                f"{k}, {Affine.make(self.const, rest)} still has several varying parts; "
                f"'{op}' applies to one program id, loop variable or index axis at a time")
        m = lo // k
        if op == dm.FLOORDIV:
            return Idx(self.shape, m, whole)
        return Idx(self.shape, self.const - m * k, rest)

    def _extents(self, sym: str) -> dict[str, int]:
        base = dm.base_of(sym)
        return {base: self._extent(base) or 1}

    def _extent(self, sym: str) -> int | None:
        """How many values a plain symbol takes: the axis length, or the program id's / loop
        variable's extent from the kernel being traced (None when unknown)."""
        if _is_axis(sym):
            return self.shape[_axis_of(sym)]
        tr = current_or_none()
        return tr.extents.get(sym) if tr is not None else None

    def __truediv__(self, other):
        raise NonAffineIndexError("'/' on an index expression is not an integer index (use '//')")

    def __rfloordiv__(self, other):
        raise NonAffineIndexError("a constant divided by an index expression is not affine")

    __rmod__ = __rfloordiv__

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
        rank-``tile_rank`` tile it is right-aligned in (NumPy's rule). An index of higher rank
        than the tile fits when its extra axes have extent 1: leading ones as NumPy drops
        them, or trailing ones as NKI reads a ``[P]`` tile as ``[P, 1]`` (an ``i_p`` of shape
        ``[P, 1]`` masking a partition-only tile)."""
        off = tile_rank - self.ndim
        if off < 0 and any(n != 1 for n in self.shape[:-off]):
            if any(n != 1 for n in self.shape[tile_rank:]):
                raise NonAffineIndexError(
                    f"an index of shape {list(self.shape)} does not fit a tile of rank "
                    f"{tile_rank}")
            off = 0
        const = self.const
        terms: dict[str, int] = {}
        for s, c in self.terms.items():
            if _is_axis(s):
                j = _axis_of(s)
                if self.shape[j] == 1:  # the only position is 0
                    d = dm.parse(s)
                    const += c * (dm.value(d, 0) if d is not None else 0)
                    continue
                t = f"t{j + off}"
                terms[t if not dm.is_derived(s) else dm.rebase(s, t)] = c
            else:
                terms[s] = c
        return Affine.make(const, terms)

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
            shape = broadcast_index_shapes(shape, e.shape)
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
            "Python control flow on a comparison of index expressions (use mask= or nl.where); "
            "to combine masks use & and |, not Python's 'and'/'or' (which would keep only one "
            "of them)")

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


def broadcast_index_shapes(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
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
    (partition), ``.x`` (first free) and ``.y`` (second free: AWS's examples index a
    [P, 2, F] tile with ``g.p, g.x, g.y``)."""

    def _axis(self, position: int, name: str) -> Idx:
        if position >= len(self):
            raise IndexError(f"mgrid: .{name} is axis {position} of the grid, which has "
                             f"{len(self)} axes")
        return self[position]

    @property
    def p(self) -> Idx:
        return self._axis(0, "p")

    @property
    def x(self) -> Idx:
        return self._axis(1, "x")

    @property
    def y(self) -> Idx:
        return self._axis(2, "y")


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

