"""Indexing a tensor view: from a Python subscript to a composed affine access.

A view maps its tile coordinates ``t0, t1, ...`` to the coordinates of the tensor it looks at (one
``Affine`` per tensor dimension). Subscripting a view builds the new tile's shape and, for each
axis of the old view, an expression in the new tile's coordinates; substituting those expressions
composes the two maps. Integers and scalar expressions drop an axis, slices keep it, index tiles
broadcast together (NKI's ``a[i_p, i_f]``).
"""

from __future__ import annotations

from emulator.kernel_ir import Affine
from emulator.kernel_ir import divmod as dm

from .errors import NonAffineIndexError
from .indexing import Idx, _is_int, broadcast_index_shapes


def identity_index(shape: tuple[int, ...]) -> tuple[Affine, ...]:
    return tuple(Affine(0, ((f"t{d}", 1),)) for d in range(len(shape)))


def _scalar_affine(x) -> Affine:
    if isinstance(x, Idx):
        if x.ndim:
            raise NonAffineIndexError("a slice bound must be a scalar index expression")
        return Affine.make(x.const, x.terms)
    return Affine(int(x), ())


def _slice_entry(sl: slice, n: int) -> tuple[Affine, int, int]:
    """(start, size, step) of a slice over an axis of extent ``n``; size must be static."""
    step = 1 if sl.step is None else int(sl.step)
    if step <= 0:
        raise NonAffineIndexError("slices need a positive step")
    start, stop = sl.start, sl.stop
    if (start is None or _is_int(start)) and (stop is None or _is_int(stop)):
        for bound in (start, stop):
            if bound is not None and not -n <= int(bound) <= n:
                raise IndexError(f"slice bound {int(bound)} is outside an axis of extent {n}")
        lo, hi, _ = slice(None if start is None else int(start),
                          None if stop is None else int(stop), step).indices(n)
        return Affine(lo, ()), len(range(lo, hi, step)), step
    a = _scalar_affine(0 if start is None else start)
    b = _scalar_affine(n if stop is None else stop)
    diff = Affine.make(b.const - a.const, {**{s: c for s, c in b.terms},
                                           **{s: b.coef(s) - c for s, c in a.terms}})
    if diff.terms:
        raise NonAffineIndexError(f"slice size {diff} is not a compile-time constant")
    return a, len(range(0, diff.const, step)), step


def subscript(view_shape: tuple[int, ...], key) -> tuple[tuple[int, ...], list[Affine]]:
    """New tile shape, and per old view axis its expression over the new tile (``t<k>``)."""
    entries = list(key) if isinstance(key, tuple) else [key]
    if any(e is Ellipsis for e in entries):
        i = entries.index(Ellipsis)
        fill = len(view_shape) - (len(entries) - 1)
        entries[i:i + 1] = [slice(None)] * fill
    if len(entries) > len(view_shape):
        raise IndexError(f"{len(entries)} indices for a tile of rank {len(view_shape)}")
    entries += [slice(None)] * (len(view_shape) - len(entries))

    tiles = [e for e in entries if isinstance(e, Idx) and e.ndim > 0]
    nonscalar = [i for i, e in enumerate(entries)
                 if isinstance(e, slice) or (isinstance(e, Idx) and e.ndim > 0)]
    exprs: list[Affine] = []
    if not tiles:
        shape: list[int] = []
        for e, n in zip(entries, view_shape):
            if isinstance(e, slice):
                start, size, step = _slice_entry(e, n)
                exprs.append(Affine.make(start.const,
                                         {**dict(start.terms), f"t{len(shape)}": step}))
                shape.append(size)
            else:
                exprs.append(_int_entry(e, n))
        return tuple(shape), exprs

    bshape: tuple[int, ...] = ()
    for t in tiles:
        bshape = broadcast_index_shapes(bshape, t.shape)
    rank = len(bshape)
    slices = [i for i in nonscalar if isinstance(entries[i], slice)]
    if slices and rank != len(nonscalar):
        raise NonAffineIndexError(
            f"mixing index tiles and slices needs index tiles of rank {len(nonscalar)} "
            f"(one axis per non-scalar index), got rank {rank}")
    shape = list(bshape)
    for q, i in enumerate(nonscalar):
        if isinstance(entries[i], slice):
            _, size, _ = _slice_entry(entries[i], view_shape[i])
            if shape[q] not in (1, size):
                raise NonAffineIndexError("slice extent does not broadcast with the index tiles")
            shape[q] = size
    for q_i, (e, n) in enumerate(zip(entries, view_shape)):
        if isinstance(e, slice):
            q = nonscalar.index(q_i)
            start, _, step = _slice_entry(e, n)
            exprs.append(Affine.make(start.const, {**dict(start.terms), f"t{q}": step}))
        elif isinstance(e, Idx) and e.ndim > 0:
            exprs.append(e.to_affine(rank))
        else:
            exprs.append(_int_entry(e, n))
    return tuple(shape), exprs


def _int_entry(e, n: int) -> Affine:
    if isinstance(e, Idx):
        return _scalar_affine(e)
    if not _is_int(e):
        raise NonAffineIndexError(f"unsupported index {e!r}")
    i = int(e)
    if not -n <= i < n:
        raise IndexError(f"index {i} out of range for an axis of extent {n}")
    return Affine(i % n, ())


def compose(index: tuple[Affine, ...], exprs: list[Affine],
            extents: dict[str, int] | None = None) -> tuple[Affine, ...]:
    """Substitute view axis ``t<j>`` by ``exprs[j]`` in each tensor-dimension expression. A
    derived symbol (``//``, ``%``) of a view axis takes the axis' new expression as its base;
    an expression of several symbols is divided term by term (``_divmod_of_sum``), which needs
    the new axes' ``extents`` when the remainder part has more than one symbol."""
    out = []
    for a in index:
        const = a.const
        terms: dict[str, int] = {}
        for s, c in a.terms:
            d = dm.parse(s)
            if d is not None and d.base.startswith("t"):
                e = exprs[int(d.base[1:])]
                if not e.terms:
                    const += c * int(dm.value(d, e.const))
                    continue
                k0, t0 = _divmod_of_sum(d, e, extents or {})
                const += c * k0
                for s3, c3 in t0.items():
                    terms[s3] = terms.get(s3, 0) + c * c3
            elif s.startswith("t"):
                e = exprs[int(s[1:])]
                const += c * e.const
                for s2, c2 in e.terms:
                    terms[s2] = terms.get(s2, 0) + c * c2
            else:
                terms[s] = terms.get(s, 0) + c
        out.append(Affine.make(const, terms))
    return tuple(out)


def _divmod_of_sum(d, e: Affine, extents: dict[str, int]) -> tuple[int, dict[str, int]]:
    """``(d.coef * e + d.offset) op d.k`` as ``const + terms``. Terms of ``e`` whose coefficient
    is a multiple of ``k`` divide exactly (they vanish under ``%``); what remains is one plain
    symbol (a new derived symbol of it), or stays within one multiple of ``k`` over the
    symbols' extents (then the result is affine): ``(6 u + v) // 6`` with ``v < 6`` is ``u``,
    which is how a merged view reshaped back to its axes stays a view."""
    k = d.k
    coefs = {s: d.coef * c for s, c in e.terms}
    offset = d.coef * e.const + d.offset
    exact = {s: c // k for s, c in coefs.items() if c % k == 0}
    rest = {s: c for s, c in coefs.items() if c % k}
    if not rest:
        q, r = divmod(offset, k)
        return (q, exact) if d.op == dm.FLOORDIV else (r, {})
    lo = hi = offset
    known = all(s in extents for s in rest)
    for s, c in rest.items():
        if not known:
            break
        smin, smax = dm.term_range(s, extents)
        lo, hi = lo + min(c * smin, c * smax), hi + max(c * smin, c * smax)
    if known and lo // k == hi // k:
        m = lo // k
        if d.op == dm.FLOORDIV:
            return m, exact
        return offset - m * k, dict(rest)
    if len(rest) == 1:
        (sym, c), = rest.items()
        if not dm.is_derived(sym):
            c0, t0 = dm.divmod_terms(d.op, c, sym, offset, k)
            if d.op == dm.FLOORDIV:
                for s, v in exact.items():
                    t0[s] = t0.get(s, 0) + v
            return c0, t0
    raise NonAffineIndexError(
        f"indexing a view whose index uses '{d.op}' with {e}: the view's axis must map to one "
        "index axis, loop variable or program id")


def reshape_exprs(old: tuple[int, ...], new: tuple[int, ...]) -> list[Affine]:
    """Per axis of a tile of shape ``old``, its expression over the axes ``t<m>`` of the same
    elements viewed (row-major) with shape ``new``; ``compose`` turns them into the new view.

    The axes are matched in groups of equal element count. A group of one old axis split into
    several new ones is affine (``t_a * stride + t_b``); several old axes merged into one new
    axis ``t_m`` are ``t_m // S`` (the first), ``t_m % n`` (the last) and ``t_m // S - n *
    (t_m // (S n))`` in between, each a derived symbol of one axis. A group that both splits
    and merges (``[6, 4] -> [4, 6]``) regroups elements across axes, which no such view
    expresses: ``NonAffineIndexError``."""
    exprs: list[Affine] = []
    i = j = 0
    while i < len(old) or j < len(new):
        if i < len(old) and old[i] == 1:
            exprs.append(Affine(0, ()))
            i += 1
            continue
        if j < len(new) and new[j] == 1:
            j += 1
            continue
        if i >= len(old) or j >= len(new):
            raise ValueError(f"{list(old)} and {list(new)} hold different numbers of elements")
        i0, j0, po, pn = i, j, old[i], new[j]
        i, j = i + 1, j + 1
        while po != pn:
            if po < pn:
                if i >= len(old):
                    raise ValueError(f"{list(old)} and {list(new)} hold different numbers of "
                                     "elements")
                po, i = po * old[i], i + 1
            else:
                if j >= len(new):
                    raise ValueError(f"{list(old)} and {list(new)} hold different numbers of "
                                     "elements")
                pn, j = pn * new[j], j + 1
        olds, news = list(range(i0, i)), [m for m in range(j0, j) if new[m] != 1]
        if len(olds) == 1:
            terms, stride = {}, 1
            for m in reversed(news):
                terms[f"t{m}"] = stride
                stride *= new[m]
            exprs.append(Affine.make(0, terms))
        elif len(news) == 1:
            t, ext = f"t{news[0]}", new[news[0]]
            inner = 1
            parts: list[Affine] = []
            for o in reversed(olds):
                n = old[o]
                if n == 1:
                    parts.append(Affine(0, ()))
                    continue
                c1, t1 = dm.divmod_terms(dm.FLOORDIV, 1, t, 0, inner, ext)
                if inner == 1:  # the innermost: a remainder
                    c1, t1 = dm.divmod_terms(dm.MOD, 1, t, 0, n, ext)
                c2, t2 = (0, {}) if o == olds[0] or inner == 1 else \
                    dm.divmod_terms(dm.FLOORDIV, 1, t, 0, inner * n, ext)
                terms = dict(t1)
                for sym, c in t2.items():
                    terms[sym] = terms.get(sym, 0) - n * c
                parts.append(Affine.make(c1 - n * c2, terms))
                inner *= n
            exprs.extend(reversed(parts))
        else:
            raise NonAffineIndexError(
                f"axes {[old[o] for o in olds]} -> {[new[m] for m in news]} are regrouped, not "
                "only merged or split")
    return exprs
