"""Fused regions: runs of element-wise instructions over one shape that become one native call.

A region is found while the generated runner's lines are written (emulator.codegen): it collects
the instructions that `cexpr` can express (and the broadcasts, reshapes and copies that only
change how an input outside the region is indexed), in program order, with non-members between
them emitted as usual. The region runs where it is closed: before the first non-member that
reads one of its values, overwrites (in place, or by writing or freeing its register) a value it
reads, or at the end. Its values that something outside it reads are its outputs; the rest
never exist as arrays.

Each node remembers the instruction's NumPy handler, so the region also has a NumPy form (the
`fallback`): the same handlers replayed in the same order. The native function calls it
whenever an input is not what it was compiled for (another dtype, a non-contiguous view), so an
unexpected value costs time, never a wrong answer.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from emulator.native.cexpr import CTYPES, expression
from emulator.program.dtypes import DTYPES

#: ops that only re-index an input from outside the region (no arithmetic)
READS = ("broadcast", "reshape", "copy", "transpose")

#: (kind, index): ("leaf", j) is the region's input j, ("node", i) its node i
Ref = tuple[str, int]


@dataclass
class Leaf:
    """An input of a region: a value computed outside it, passed to the call by `name`."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    #: the value's one element when it is a constant whose elements are all the same (bits): it is
    #: then written into the C code instead of read
    literal: Any = None


@dataclass
class Node:
    """One instruction of a region."""

    op: str
    attrs: dict[str, Any]
    dtype: np.dtype
    in_dtypes: list[np.dtype]
    refs: list[Ref]
    fn: Callable[..., Any]
    label: str
    #: for a read of a leaf (broadcast/reshape/copy of it, or an element-wise operand taken
    #: straight from it): element strides of the leaf per region dimension
    strides: tuple[int, ...] | None = None

    @property
    def is_view(self) -> bool:
        """Whether the node only re-indexes a region input (its handler returns a view)."""
        return self.op in READS and self.refs[0][0] == "leaf"


@dataclass
class Region:
    shape: tuple[int, ...]
    leaves: list[Leaf] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)  # node indices, in the order the call returns them

    @property
    def computes(self) -> bool:
        """Whether a node does arithmetic (a region of reads alone is not worth a call)."""
        return any(n.op not in READS and not (n.op == "convert" and n.dtype == n.in_dtypes[0]) for n in self.nodes)

    def fallback(self) -> Callable[..., Any]:
        """The region in NumPy: its instructions' handlers in program order."""
        steps = [(n.fn, n.refs) for n in self.nodes]
        outputs = tuple(self.outputs)
        single = len(outputs) == 1

        def run(*leaves: Any) -> Any:
            values: list[Any] = []
            for fn, refs in steps:
                values.append(fn(*[leaves[j] if kind == "leaf" else values[j] for kind, j in refs]))
            if single:
                return values[outputs[0]]
            return tuple(values[i] for i in outputs)
        return run


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def _broadcast_strides(dims: Sequence[int], in_shape: Sequence[int], out_rank: int) -> tuple[int, ...]:
    """Strides over the region of a contiguous input broadcast along `dims` (XLA's broadcast)."""
    own = contiguous_strides(in_shape)
    strides = [0] * out_rank
    for i, d in enumerate(dims):
        strides[d] = own[i] if in_shape[i] != 1 else 0
    return tuple(strides)


def _uniform(value: Any) -> Any:
    """The one element of a constant whose elements all have the same bits, else None."""
    a = np.asarray(value)
    if a.dtype not in CTYPES or a.size == 0:
        return None
    flat = a.reshape(-1)
    bits = flat.view(np.dtype(f"u{a.dtype.itemsize}"))
    return flat[0] if bool(np.all(bits == bits[0])) else None


class RegionPlanner:
    """Builds regions while emulator.codegen writes a runner's lines (see the module docstring).

    Names of values in the generated code: a node's value is named by a placeholder (`marker`)
    until its region is closed; the code generator replaces the placeholders still live then
    (the region's outputs) with registers."""

    #: regions smaller than this many elements stay in NumPy: scalars are NumPy scalars there,
    #: whose operators (~50 ns) are cheaper than any call
    MIN_ELEMENTS = 2
    #: nor larger ones: there NumPy's wider vector loops and its in-place results (no fresh
    #: pages to fault in) beat a fused loop, and a call's dispatch is a small part of the time
    MAX_ELEMENTS = 1 << 16

    def __init__(self, env: dict[str, Any]) -> None:
        self.env = env
        self.regions: list[Region] = []
        self.open: Region | None = None
        self._node_of: dict[str, int] = {}   # placeholder -> node index of the open region
        self._leaf_of: dict[str, int] = {}   # name -> leaf index of the open region
        self.deferred_frees: list[str] = []  # registers freed by members, freed after the call

    # -- names ---------------------------------------------------------------------------------
    def marker(self, node: int) -> str:
        return f"@{len(self.regions)}:{node}"

    def is_placeholder(self, name: str) -> bool:
        return name in self._node_of

    def reads_captured(self, names: Sequence[str]) -> bool:
        """Whether any of `names` is an input of the open region."""
        return any(n in self._leaf_of for n in names)

    # -- membership ----------------------------------------------------------------------------
    def node_for(self, op: str, attrs: dict[str, Any], in_types: Sequence[Any], out_type: Any,
                 args: Sequence[str], fn: Callable[..., Any], label: str) -> tuple[Node, list[tuple[str, Any]]] | None:
        """The node this instruction would be, with the leaves it would add (name, declared
        type); None when it can not be a member of a region of its shape."""
        if out_type[0] not in DTYPES or any(t[0] not in DTYPES for t in in_types):
            return None
        shape = tuple(out_type[1])
        if not self.MIN_ELEMENTS <= math.prod(shape) <= self.MAX_ELEMENTS:
            return None
        dtype = DTYPES[out_type[0]]
        in_dtypes = [DTYPES[t[0]] for t in in_types]
        internal = [a in self._node_of for a in args]
        if op in READS:
            if dtype != in_dtypes[0] or dtype not in CTYPES:
                return None
            (arg,), (is_node,) = args, internal
            in_shape = tuple(in_types[0][1])
            if is_node:  # a copy or same-shape reshape of a value of the region: the value itself
                if in_shape != shape or op == "transpose":
                    return None
                return Node(op, attrs, dtype, in_dtypes, [("node", self._node_of[arg])], fn, label), []
            if op == "broadcast":
                strides = _broadcast_strides(attrs["dims"], in_shape, len(shape))
            elif op == "transpose":  # result dim i is the input's dim perm[i]
                own = contiguous_strides(in_shape)
                strides = tuple(own[d] for d in attrs["perm"])
            else:  # a reshape or copy of a contiguous input reads it in its own (row-major) order
                strides = contiguous_strides(shape)
            return Node(op, attrs, dtype, in_dtypes, [("leaf", -1)], fn, label, strides), [(arg, in_types[0])]
        placeholders = [f"x{k}" for k in range(len(args))]
        if expression(op, attrs, in_dtypes, dtype, placeholders) is None:
            return None
        refs: list[Ref] = []
        leaves: list[tuple[str, Any]] = []
        for a, t, is_node in zip(args, in_types, internal):
            if is_node:
                refs.append(("node", self._node_of[a]))
            elif tuple(t[1]) != shape:
                return None
            else:
                refs.append(("leaf", -1))
                leaves.append((a, t))
        return Node(op, attrs, dtype, in_dtypes, refs, fn, label, contiguous_strides(shape)), leaves

    def fits(self, out_type: Any) -> bool:
        """Whether a node of this type joins the open region (else it starts a new one)."""
        return self.open is not None and tuple(out_type[1]) == self.open.shape

    def add(self, node: Node, leaves: Sequence[tuple[str, Any]], shape: tuple[int, ...]) -> str:
        """Adds the node to the open region (opening one of `shape` if none is open); returns the
        placeholder naming its value."""
        if self.open is None:
            self.open = Region(shape)
        region = self.open
        pending = iter(leaves)
        for k, (kind, _) in enumerate(node.refs):
            if kind == "leaf":
                name, t = next(pending)
                if name not in self._leaf_of:
                    self._leaf_of[name] = len(region.leaves)
                    region.leaves.append(self._leaf(name, t))
                node.refs[k] = ("leaf", self._leaf_of[name])
        region.nodes.append(node)
        marker = self.marker(len(region.nodes) - 1)
        self._node_of[marker] = len(region.nodes) - 1
        return marker

    def _leaf(self, name: str, t: Any) -> Leaf:
        """The input `name` of type `t`. A constant (folded at build time, in the env) whose
        elements all agree becomes a literal; another constant that is a view (a folded
        broadcast of an iota) is passed as a contiguous copy, which the native code reads
        directly."""
        leaf = Leaf(name, DTYPES[t[0]], tuple(t[1]))
        if not (name.startswith("c") and name in self.env):
            return leaf
        value = self.env[name]
        leaf.literal = _uniform(value)
        if leaf.literal is None and isinstance(value, np.ndarray) and not value.flags.c_contiguous:
            copy = np.ascontiguousarray(value)
            copy.flags.writeable = False
            leaf.name = f"{name}_contiguous"
            self.env[leaf.name] = copy
        return leaf

    def close(self, live: dict[int, str]) -> Region | None:
        """Ends the open region; `live` (slot -> name) holds the placeholders still live, its
        outputs. Returns the region (its outputs set), or None when none was open."""
        region = self.open
        if region is None:
            return None
        region.outputs = [self._node_of[name] for name in live.values()]
        self.regions.append(region)
        self.open = None
        self._node_of = {}
        self._leaf_of = {}
        return region
