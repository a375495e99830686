"""Accesses whose index uses ``//`` or ``%`` by constants (derived symbols, see
emulator/kernel_ir/divmod.py), resolved against output axes.

A resolved derived term is a key ``(op, coef, axis, offset, k)``: ``(coef * pos + offset) op k``
with ``pos`` the position along output axis ``axis``. Two ways to execute such an access:

* **split view** (the common tiling case, ``x // k`` and ``x % k`` of an axis whose extent ``k``
  divides): the axis is split into ``(n // k, k)``; in the split shape ``x // k`` is the outer
  sub-axis, ``x % k`` the inner one, ``x`` itself ``k * outer + inner``, so the access is affine
  again, a strided view that reads and writes in place (``expand``);
* **index arrays** otherwise (offsets, coefficients, extents that ``k`` does not divide): a
  gather for reads, a scatter for writes (``index_arrays``).

Bounds are exact either way: the split plan's own bounds, or the index arrays' extremes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from emulator.kernel_ir import divmod as dm

from .errors import UnboundSymbolError

if TYPE_CHECKING:
    from .access import Plan

DivKey = tuple[str, int, int, int, int]  # (op, coef, axis, offset, k)


def resolve(sym: str, coef: int, axis_of: dict[str, int], offsets: dict[str, int],
            bound: dict[str, int]) -> tuple[int, dict[int, int], dict[DivKey, int]] | None:
    """A derived symbol (times ``coef``) in a context: constant, plain axis terms and derived
    terms over output axes. None when ``sym`` is not derived."""
    d = dm.parse(sym)
    if d is None:
        return None
    if d.base in axis_of:
        # a chunked batch axis starts at its offset: fold it into the derived offset
        base_off = offsets.get(d.base, 0) if offsets else 0
        const, terms = dm.divmod_terms(d.op, d.coef, "x", d.coef * base_off + d.offset, d.k)
        ax = axis_of[d.base]
        co = {ax: coef * terms.pop("x")} if "x" in terms else {}
        divs: dict[DivKey, int] = {}
        for name, c in terms.items():
            e = dm.parse(name)
            key = (e.op, e.coef, ax, e.offset, e.k)
            divs[key] = divs.get(key, 0) + coef * c
        return coef * const, co, divs
    if d.base in bound:
        return coef * int(dm.value(d, bound[d.base])), {}, {}
    if d.base.startswith("t"):  # a broadcast (extent-1) tile axis: position 0
        return coef * int(dm.value(d, 0)), {}, {}
    raise UnboundSymbolError(d.base)


def _positions(shape: tuple[int, ...], ax: int) -> np.ndarray:
    shp = [1] * len(shape)
    shp[ax] = shape[ax]
    return np.arange(shape[ax], dtype=np.int64).reshape(shp)


def div_values(key: DivKey, shape: tuple[int, ...]) -> np.ndarray:
    """The derived term's value at every position (broadcastable to ``shape``)."""
    op, c, ax, b, k = key
    return dm.value(dm.DivMod(op, c, "x", b, k), _positions(shape, ax))


def index_arrays(plan: "Plan") -> list[np.ndarray]:
    """Per storage axis, the integer index array of every output position."""
    shape = plan.out_shape
    out = []
    for i, (c, co) in enumerate(zip(plan.consts, plan.coefs)):
        idx: np.ndarray | int = np.int64(c)
        for ax, k in co.items():
            idx = idx + k * _positions(shape, ax)
        for key, k in (plan.divs[i] if plan.divs else {}).items():
            idx = idx + k * div_values(key, shape)
        out.append(np.broadcast_to(np.asarray(idx), shape))
    return out


def expand(plan: "Plan") -> "Plan | None":
    """The affine plan over the split shape (see module docstring), or None when some derived
    term is not a plain ``axis // k`` / ``axis % k`` with ``k`` dividing the axis."""
    split: dict[int, int] = {}
    for divs in plan.divs:
        for (op, c, ax, b, k), _ in divs.items():
            if c != 1 or b != 0 or plan.out_shape[ax] % k or split.get(ax, k) != k:
                return None
            split[ax] = k
    # output axis -> (outer, inner) axes of the split shape (equal for unsplit axes)
    where: dict[int, tuple[int, int]] = {}
    shape: list[int] = []
    for ax, n in enumerate(plan.out_shape):
        if ax in split:
            where[ax] = (len(shape), len(shape) + 1)
            shape += [n // split[ax], split[ax]]
        else:
            where[ax] = (len(shape), len(shape))
            shape.append(n)
    coefs: list[dict[int, int]] = []
    for co, divs in zip(plan.coefs, plan.divs):
        new: dict[int, int] = {}

        def add(a: int, v: int) -> None:
            new[a] = new.get(a, 0) + v

        for ax, c in co.items():
            outer, inner = where[ax]
            if ax in split:
                add(outer, c * split[ax])
                add(inner, c)
            else:
                add(outer, c)
        for (op, _, ax, _, _), c in divs.items():
            outer, inner = where[ax]
            add(outer if op == dm.FLOORDIV else inner, c)
        coefs.append({a: v for a, v in new.items() if v})
    return type(plan)(tuple(shape), list(plan.consts), coefs)  # a Plan (access.py imports us)
