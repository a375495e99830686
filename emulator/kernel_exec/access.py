"""Affine accesses as NumPy views: the arithmetic that makes the executor vectorised.

An IR ``Access`` is evaluated in an execution context whose *batch axes* are the SPMD program ids and
the variables of vectorised ``affine_range`` loops. The result has shape ``batch_shape + tile_shape``.
Because every index is affine in those axes, each storage axis' index is ``const + sum(coef * axis)``
and the whole access is one ``numpy.lib.stride_tricks.as_strided`` view: no gather, no copy. Only a
masked access that reaches outside its tensor needs index arrays (a gather or scatter restricted to
the mask), and indices with ``//``/``%`` that no axis split makes affine (divmod_access.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.lib.stride_tricks import as_strided

from emulator.kernel_ir import Access, Affine

from . import divmod_access
from .errors import UnboundSymbolError


@dataclass(slots=True)
class Storage:
    """Backing array of a tensor: ``array.shape == extents(batch) + tensor.shape``.

    ``batch`` names the leading batch axes (program ids / vectorised loop variables) the tensor has
    one copy per value of. ``owned`` is False when ``array`` is a view of someone else's memory (a
    zero-copy load), so a partial write must copy first.
    """

    array: np.ndarray
    batch: tuple[str, ...]
    owned: bool = True
    #: Value of each batch symbol at index 0 of its axis (a chunk of a loop or grid starts there);
    #: empty means all zero.
    base: tuple[int, ...] = ()
    #: Allocated as zeros (``nl.zeros``) that nobody has read or written yet: ``array`` holds
    #: garbage until the runner fills it on first need, or a whole ``+=`` replaces it (Runner).
    zero: bool = False


@dataclass(slots=True)
class Context:
    """Where an instruction runs: batch axes (vectorised), bound loop values (Python-looped)."""

    batch_syms: tuple[str, ...]
    batch_shape: tuple[int, ...]
    bound: dict[str, int]
    extents: dict[str, int]
    #: Value of a batch symbol at index 0 of its axis, when a loop or the grid runs in chunks.
    offsets: dict[str, int] = field(default_factory=dict)
    #: Iteration number of each running data-dependent loop (kernel_exec/control.py): not an
    #: index symbol (no access uses it, plans are not keyed by it); random draws mix it in.
    iterations: dict[str, int] = field(default_factory=dict)

    def base_of(self, syms: tuple[str, ...]) -> tuple[int, ...]:
        return tuple(self.offsets.get(s, 0) for s in syms) if self.offsets else ()


@dataclass(slots=True)
class Plan:
    """One access resolved in a context: per storage axis, ``const`` and ``{out_axis: coef}``."""

    out_shape: tuple[int, ...]
    consts: list[int]
    coefs: list[dict[int, int]]
    #: Per storage axis, derived terms (``//``, ``%``; see divmod_access.py) -> coefficient;
    #: None when the access is affine (the usual case).
    divs: list[dict] | None = None

    _in_bounds: dict | None = None
    _identity: bool | None = None
    _without: dict | None = None
    _used: frozenset[int] | None = None
    _split: tuple | None = None
    #: (array strides, itemsize) -> (byte offset, view strides) of the last array viewed.
    _strided: tuple | None = None

    def used_axes(self) -> frozenset[int]:
        """Output axes some storage axis depends on (a write collapses the others)."""
        if self._used is None:
            self._used = frozenset(ax for co in self.coefs for ax in co) | frozenset(
                key[2] for divs in (self.divs or ()) for key in divs)
        return self._used

    def uses_all(self, batch_shape: tuple[int, ...]) -> bool:
        """Whether every batch axis (the first output axes) of extent above 1 is used: a write
        through the plan's view then needs no collapsing (an axis of extent 1 has one index)."""
        used = self.used_axes()
        return all(i in used or n == 1 for i, n in enumerate(batch_shape))

    def without_axes(self, drop: tuple[int, ...]) -> "Plan":
        """The plan with output axes ``drop`` removed (they must have no coefficients): for writes
        that collapse batch axes. Memoised, like the plan itself."""
        if self._without is None:
            self._without = {}
        hit = self._without.get(drop)
        if hit is None:
            def at(ax: int) -> int:
                return ax - sum(1 for d in drop if d < ax)

            def renumber(co: dict[int, int]) -> dict[int, int]:
                return {at(ax): k for ax, k in co.items()}
            divs = None if self.divs is None else [
                {(op, c, at(ax), b, k): v for (op, c, ax, b, k), v in d.items()} for d in self.divs]
            hit = self._without[drop] = Plan(
                tuple(n for i, n in enumerate(self.out_shape) if i not in drop),
                self.consts, [renumber(co) for co in self.coefs], divs)
        return hit

    def split(self) -> "Plan | None":
        """For an access with ``//``/``%``: the affine plan over the split output shape, or None
        when it needs index arrays (memoised; see divmod_access.expand)."""
        if self._split is None:
            self._split = (divmod_access.expand(self),)
        return self._split[0]

    def bounds(self) -> list[tuple[int, int]]:
        if self.divs is not None:
            if 0 in self.out_shape:
                return [(c, c) for c in self.consts]
            return [(int(ix.min()), int(ix.max())) for ix in self.index_arrays()]
        out = []
        for c, co in zip(self.consts, self.coefs):
            lo = hi = c
            for ax, k in co.items():
                span = k * (self.out_shape[ax] - 1)
                lo += min(0, span)
                hi += max(0, span)
            out.append((lo, hi))
        return out

    def in_bounds(self, shape: tuple[int, ...]) -> bool:
        if self._in_bounds is None:
            self._in_bounds = {}
        hit = self._in_bounds.get(shape)
        if hit is None:
            hit = self._in_bounds[shape] = 0 in self.out_shape or all(
                0 <= lo and hi < n for (lo, hi), n in zip(self.bounds(), shape))
        return hit

    def view(self, array: np.ndarray) -> np.ndarray:
        """The access as a strided view of ``array`` (caller checked ``in_bounds``). With ``//``
        or ``%`` in the index: the split plan's view reshaped (a copy where the axes do not
        merge), or a gather; use it for reading only then (writes: ``Runner.write``)."""
        if self.divs is not None:
            split = self.split()
            if split is not None:
                return split.view(array).reshape(self.out_shape)
            return array[tuple(self.index_arrays())]
        if self._identity is None:
            self._identity = (not any(self.consts) and len(self.coefs) == len(self.out_shape)
                              and all(co == {a: 1} for a, co in enumerate(self.coefs)))
        if self._identity and array.shape == self.out_shape:
            return array
        key = array.strides
        memo = self._strided
        if memo is not None and memo[0] == key:
            offset, strides = memo[1], memo[2]
        else:
            strides = [0] * len(self.out_shape)
            offset = 0
            for a, (c, co) in enumerate(zip(self.consts, self.coefs)):
                st = array.strides[a]
                offset += c * st
                for ax, k in co.items():
                    strides[ax] += k * st
            self._strided = (key, offset, strides)
        if array.flags.c_contiguous:
            # The ndarray constructor over the array's buffer: same view, a fraction of the cost
            # of as_strided, and it keeps ml_dtypes dtypes.
            return np.ndarray(self.out_shape, array.dtype, array, offset, strides)
        base = array[tuple(slice(c, None) for c in self.consts)] if any(self.consts) else array
        if base.dtype.isbuiltin != 1:
            # ml_dtypes (bfloat16, fp8) do not survive as_strided's __array_interface__ round
            # trip: stride an unsigned integer view of the same width instead.
            raw = base.view(np.dtype(f"u{base.dtype.itemsize}"))
            return as_strided(raw, shape=self.out_shape, strides=strides).view(base.dtype)
        return as_strided(base, shape=self.out_shape, strides=strides)

    def index_arrays(self) -> list[np.ndarray]:
        """Per storage axis, the broadcastable integer index array (for masked gathers)."""
        if self.divs is not None:
            return divmod_access.index_arrays(self)
        n = len(self.out_shape)
        out = []
        for c, co in zip(self.consts, self.coefs):
            idx: np.ndarray | int = c
            for ax, k in co.items():
                shp = [1] * n
                shp[ax] = self.out_shape[ax]
                idx = idx + k * np.arange(self.out_shape[ax]).reshape(shp)
            out.append(np.broadcast_to(np.asarray(idx), self.out_shape))
        return out


def tile_axis_map(ctx: Context, access_shape: tuple[int, ...],
                  out_tile: tuple[int, ...]) -> dict[str, int]:
    """Symbol -> output axis. The access' tile is aligned against ``out_tile`` at the partition
    axis (axis 0), as NKI aligns tiles: a tile of lower rank has its missing trailing (free) axes
    broadcast, so a partition-only ``[P]`` tile reads as ``[P, 1]``, never as a NumPy trailing
    axis; trailing axes beyond ``out_tile``'s rank must have extent 1 (a ``[P, 1]`` value into a
    ``[P]`` tile). A tile axis of extent 1 broadcasts, so its symbol maps nowhere (always 0)."""
    nb = len(ctx.batch_syms)
    axis_of = {s: i for i, s in enumerate(ctx.batch_syms)}
    for j, n in enumerate(access_shape):
        if j < len(out_tile) and n == out_tile[j]:
            axis_of[f"t{j}"] = nb + j
        elif n != 1:
            raise ValueError(f"tile {list(access_shape)} does not broadcast to {list(out_tile)} "
                             "(tiles align at the partition axis)")
    return axis_of


def resolve_affine(a: Affine, ctx: Context, axis_of: dict[str, int],
                   divs: dict | None = None) -> tuple[int, dict[int, int]]:
    """``a`` over output axes: constant and ``{axis: coef}``. Derived symbols (``//``, ``%``) add
    their terms to ``divs`` (``{(op, coef, axis, offset, k): coef}``), which the caller must pass
    when the expression may hold them."""
    const = a.const
    co: dict[int, int] = {}
    for s, k in a.terms:
        if s[0] == "(":
            if divs is None:
                raise ValueError(f"'//' or '%' index {s} where only affine ones are supported")
            c2, co2, d2 = divmod_access.resolve(s, k, axis_of, ctx.offsets, ctx.bound)
            const += c2
            for ax, v in co2.items():
                co[ax] = co.get(ax, 0) + v
            for key, v in d2.items():
                divs[key] = divs.get(key, 0) + v
            continue
        if s in axis_of:
            ax = axis_of[s]
            co[ax] = co.get(ax, 0) + k
            if ctx.offsets:
                const += k * ctx.offsets.get(s, 0)
        elif s in ctx.bound:
            const += k * ctx.bound[s]
        elif s.startswith("t"):
            continue  # a broadcast (extent-1) tile axis: its position is always 0
        else:
            raise UnboundSymbolError(s)
    return const, co


def plan_access(storage: Storage, access: Access, ctx: Context,
                out_tile: tuple[int, ...] | None = None) -> Plan:
    """Resolve ``access`` against ``storage`` in ``ctx``; the result tile is ``out_tile`` (defaults
    to the access' own tile shape)."""
    out_tile = access.shape if out_tile is None else out_tile
    axis_of = tile_axis_map(ctx, access.shape, out_tile)
    consts: list[int] = []
    coefs: list[dict[int, int]] = []
    for i, s in enumerate(storage.batch):
        base = storage.base[i] if storage.base else 0
        if s in axis_of:
            consts.append(ctx.offsets.get(s, 0) - base)
            coefs.append({axis_of[s]: 1})
        elif s in ctx.bound:
            consts.append(ctx.bound[s] - base)
            coefs.append({})
        else:
            # A copy made by a vectorised loop that has finished: its last iteration is what a
            # sequential execution would have left behind.
            consts.append(storage.array.shape[i] - 1)
            coefs.append({})
    divs: list[dict] = [{} for _ in storage.batch]
    for a in access.index:
        d: dict = {}
        c, co = resolve_affine(a, ctx, axis_of, d)
        consts.append(c)
        coefs.append(co)
        divs.append({key: v for key, v in d.items() if v})
    return Plan(ctx.batch_shape + tuple(out_tile), consts, coefs,
                divs if any(divs) else None)


def eval_affine(expr: Affine, ctx: Context, out_tile: tuple[int, ...]) -> np.ndarray:
    """Integer array (broadcastable to ``batch_shape + out_tile``) of the expression's value at
    every position; its ``t<j>`` symbols are axes of ``out_tile``."""
    axis_of = tile_axis_map(ctx, out_tile, out_tile)
    shape = ctx.batch_shape + tuple(out_tile)
    divs: dict = {}
    c, co = resolve_affine(expr, ctx, axis_of, divs)
    val = np.full((1,) * len(shape), c, dtype=np.int64)
    for ax, k in co.items():
        shp = [1] * len(shape)
        shp[ax] = shape[ax]
        val = val + k * np.arange(shape[ax]).reshape(shp)
    for key, k in divs.items():
        val = val + k * divmod_access.div_values(key, shape)
    return val


def eval_mask(mask: tuple[Affine, ...], ctx: Context, out_tile: tuple[int, ...]) -> np.ndarray:
    """Boolean array (broadcastable to ``batch_shape + out_tile``): every expression is >= 0."""
    result = np.ones((1,) * (len(ctx.batch_shape) + len(out_tile)), dtype=bool)
    for m in mask:
        result = result & (eval_affine(m, ctx, out_tile) >= 0)
    return result


def describe_bounds(plan: Plan, shape: tuple[int, ...], nbatch: int) -> str:
    """Human-readable index ranges of an access against its tensor's shape."""
    b = plan.bounds()[nbatch:]
    ranges = ", ".join(f"{lo}..{hi}" for lo, hi in b)
    return f"indices [{ranges}] against shape {list(shape)}"
