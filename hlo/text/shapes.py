"""Shapes and layouts in HLO text: `f32[2,<=3,?]{1,0:T(8,128)S(1)}`, `(s32[], token[])`.

Reading fills the proto the way XLA's own parser + `ToProto` do, so that a module read from text
equals the one XLA serialises: an array shape without a layout gets the default (major-to-minor)
layout, every layout carries `tail_padding_alignment_in_elements` (1 when not given), and every
array shape lists `is_dynamic_dimension` for each dimension.
"""
from __future__ import annotations

import re
from typing import List

from hlo.schema import xla_data_pb2
from hlo.text.cursor import MAX_LIST, Cursor
from hlo.text.lexer import PUNCT, WORD
from hlo.text.types import ARRAY_TYPES, NAME_BY_TYPE, TYPE_BY_NAME

__all__ = [
    "parse_shape",
    "print_shape",
    "print_layout",
    "default_layout",
    "normalize_shape",
    "UNBOUNDED",
    "MAX_RANK",
]

ShapeProto = xla_data_pb2.ShapeProto
LayoutProto = xla_data_pb2.LayoutProto
PT = xla_data_pb2.PrimitiveType

#: XLA's size for an unbounded dynamic dimension (`?`), and a tile's combined dimension (`*`).
UNBOUNDED = -(1 << 63)
#: More dimensions than this is not a real HLO shape.
MAX_RANK = 1024

_DIM_LEVEL = {"D": xla_data_pb2.DIM_DENSE, "C": xla_data_pb2.DIM_COMPRESSED,
              "S": xla_data_pb2.DIM_SINGLETON, "H": xla_data_pb2.DIM_LOOSE_COMPRESSED}
_DIM_LEVEL_NAME = {v: k for k, v in _DIM_LEVEL.items()}


def default_layout(rank: int) -> LayoutProto:
    """XLA's default layout: minor_to_major = rank-1 ... 0."""
    layout = LayoutProto()
    layout.minor_to_major.extend(range(rank - 1, -1, -1))
    layout.tail_padding_alignment_in_elements = 1
    return layout


# The common case `f32[2,3]{1,0}` (static dims, plain layout) read in one match; anything else
# (dynamic dims, layout attributes, tuples) takes the general path below.
_SIMPLE_ARRAY = re.compile(r"([a-z][a-z0-9]*)\[([0-9]{1,18}(?:,[0-9]{1,18})*)?\](?:\{([0-9]{1,4}(?:,[0-9]{1,4})*)?\})?")
_BRACE_NEXT = re.compile(r"[ \t\r\n]*\{")


def _parse_simple_array(cur: Cursor, fill_layout: bool) -> "ShapeProto | None":
    tok = cur.peek()
    lexer = cur.lexer
    m = _SIMPLE_ARRAY.match(lexer.text, tok.offset)
    if m is None or m.group(1) != tok.text:
        return None
    element_type = TYPE_BY_NAME[tok.text]
    if element_type not in ARRAY_TYPES:
        return None
    if m.group(3) is None and _BRACE_NEXT.match(lexer.text, m.end()):
        return None  # a layout with attributes, or a computation body: the general path decides
    dims = [int(d) for d in m.group(2).split(",")] if m.group(2) else []
    if len(dims) > MAX_RANK:
        return None
    shape = ShapeProto()
    shape.element_type = element_type
    shape.dimensions.extend(dims)
    shape.is_dynamic_dimension.extend([False] * len(dims))
    if m.group(3) is not None or m.group(0).endswith("{}"):
        m2m = [int(d) for d in m.group(3).split(",")] if m.group(3) else []
        if sorted(m2m) != list(range(len(dims))):
            return None  # the general path reports the bad layout with its position
        shape.layout.minor_to_major.extend(m2m)
        shape.layout.tail_padding_alignment_in_elements = 1
    elif fill_layout:
        shape.layout.CopyFrom(default_layout(len(dims)))
    lexer.seek(m.end())
    return shape


def parse_shape(cur: Cursor, fill_layout: bool = True) -> ShapeProto:
    """One shape.  `fill_layout`: give layout-less array shapes XLA's default layout."""
    tok = cur.peek()
    if tok.kind == WORD and tok.text in TYPE_BY_NAME:
        simple = _parse_simple_array(cur, fill_layout)
        if simple is not None:
            return simple
    with cur.nested():
        shape = ShapeProto()
        if tok.kind == WORD and tok.text == "b" and cur.lexer.text.startswith("(", cur.lexer.offset_after_peek()):
            # `b(f32[2])`: a buffer holding an array (XLA's BUFFER type)
            cur.next()
            cur.expect("(", "after b")
            shape.element_type = PT.BUFFER
            shape.tuple_shapes.append(parse_shape(cur, fill_layout))
            cur.expect(")", "to close buffer shape")
            return shape
        if cur.accept("("):
            shape.element_type = PT.TUPLE
            if cur.accept(")"):
                return shape
            while True:
                shape.tuple_shapes.append(parse_shape(cur, fill_layout))
                if cur.accept(")"):
                    return shape
                cur.expect(",", "or ')' in tuple shape")
        tok = cur.peek()
        if tok.kind != WORD or tok.text not in TYPE_BY_NAME:
            raise cur.error("", tok, expected="a shape")
        cur.next()
        shape.element_type = TYPE_BY_NAME[tok.text]
        cur.expect("[", "after element type")
        dims: List[int] = []
        dynamic: List[bool] = []
        if not cur.accept("]"):
            while True:
                if cur.accept("?"):
                    dims.append(UNBOUNDED)
                    dynamic.append(True)
                elif cur.accept("<="):
                    dims.append(cur.expect_int("as dimension bound", 0, (1 << 63) - 1))
                    dynamic.append(True)
                else:
                    dims.append(cur.expect_int("as dimension size", 0, (1 << 63) - 1))
                    dynamic.append(False)
                if len(dims) > MAX_RANK:
                    raise cur.fail(f"shape has more than {MAX_RANK} dimensions")
                if cur.accept("]"):
                    break
                cur.expect(",", "or ']' in dimensions")
        if shape.element_type not in ARRAY_TYPES:
            if dims:
                raise cur.fail(f"{tok.text} shape cannot have dimensions", tok)
            return shape
        shape.dimensions.extend(dims)
        shape.is_dynamic_dimension.extend(dynamic)
        if cur.at_punct("{") and _layout_follows(cur):
            shape.layout.CopyFrom(_parse_layout(cur, len(dims)))
        elif fill_layout:
            shape.layout.CopyFrom(default_layout(len(dims)))
        return shape


_LAYOUT_START = re.compile(r"(?:[ \t\r\n]|/\*.*?\*/)*[0-9:}]", re.S)


def _layout_follows(cur: Cursor) -> bool:
    """Is the '{' after a shape its layout (`{1,0}`, `{:S(1)}`, `{}`), not a computation body?

    Decided on the raw text after the '{' (a digit, ':' or '}'), which is cheaper than lexing ahead.
    """
    lexer = cur.lexer
    return _LAYOUT_START.match(lexer.text, lexer.offset_after_peek()) is not None


def _parse_layout(cur: Cursor, rank: int) -> LayoutProto:
    layout = LayoutProto()
    start = cur.expect("{", "to open layout")
    if not cur.at_punct(":") and not cur.at_punct("}"):
        while True:
            layout.minor_to_major.append(cur.expect_int("in layout", 0, MAX_RANK))
            if not cur.accept(","):
                break
    if len(layout.minor_to_major) != rank or sorted(layout.minor_to_major) != list(range(rank)):
        raise cur.fail(f"layout {list(layout.minor_to_major)} is not a permutation of {rank} dimensions", start)
    if cur.accept(":"):
        _parse_layout_attributes(cur, layout)
    cur.expect("}", "to close layout")
    if not layout.tail_padding_alignment_in_elements:
        layout.tail_padding_alignment_in_elements = 1
    return layout


def _parse_type_in_parens(cur: Cursor) -> int:
    cur.expect("(", "after layout attribute")
    tok = cur.expect_word("in layout attribute", "an element type")
    if tok.text not in TYPE_BY_NAME:
        raise cur.fail(f"unknown element type '{tok.text}'", tok)
    cur.expect(")", "after element type")
    return TYPE_BY_NAME[tok.text]


def _parse_int_in_parens(cur: Cursor, what: str) -> int:
    cur.expect("(", f"after {what}")
    value = cur.expect_int64(f"in {what}")
    cur.expect(")", f"after {what}")
    return value


def _parse_layout_attributes(cur: Cursor, layout: LayoutProto) -> None:
    """The letters after ':' in a layout, in any order (XLA prints them in a fixed order)."""
    while not cur.at_punct("}"):
        tok = cur.next()
        key = tok.text
        if tok.kind == PUNCT and key == "#":
            layout.index_primitive_type = _parse_type_in_parens(cur)
        elif tok.kind == PUNCT and key == "*":
            layout.pointer_primitive_type = _parse_type_in_parens(cur)
        elif tok.kind != WORD:
            raise cur.error("in layout", tok, expected="a layout attribute (T, S, E, L, D, M, SC, P, #, *)")
        elif key == "T":
            if not cur.at_punct("("):
                raise cur.error("after T", expected="'('")
            while cur.at_punct("("):
                dims = cur.delimited(
                    lambda: UNBOUNDED if cur.accept("*") else cur.expect_int64("in tile"), "tile", "(", ")", MAX_RANK)
                layout.tiles.add().dimensions.extend(dims)
                if len(layout.tiles) > MAX_RANK:
                    raise cur.fail("layout has too many tiles")
        elif key == "S":
            layout.memory_space = _parse_int_in_parens(cur, "memory space S")
        elif key == "E":
            layout.element_size_in_bits = _parse_int_in_parens(cur, "element size E")
        elif key == "L":
            layout.tail_padding_alignment_in_elements = _parse_int_in_parens(cur, "tail padding L")
        elif key == "M":
            layout.dynamic_shape_metadata_prefix_bytes = _parse_int_in_parens(cur, "metadata prefix M")
        elif key == "D":
            cur.expect("(", "after D")
            while True:
                lt = cur.expect_word("in dim level types", "D, C, S or H")
                if lt.text not in _DIM_LEVEL:
                    raise cur.fail(f"unknown dim level type '{lt.text}'", lt)
                layout.dim_level_types.append(_DIM_LEVEL[lt.text])
                unique = not cur.accept("+")
                ordered = not cur.accept("~")
                layout.dim_unique.append(unique)
                layout.dim_ordered.append(ordered)
                if len(layout.dim_level_types) > MAX_RANK:
                    raise cur.fail("too many dim level types")
                if cur.accept(")"):
                    break
                cur.expect(",", "or ')' in dim level types")
            if all(layout.dim_unique):
                del layout.dim_unique[:]
            if all(layout.dim_ordered):
                del layout.dim_ordered[:]
        elif key == "SC":
            cur.expect("(", "after SC")
            split = layout.split_configs.add()
            split.dimension = cur.expect_int64("as split dimension")
            cur.expect(":", "after split dimension")
            while True:
                split.split_indices.append(cur.expect_int64("as split index"))
                if len(split.split_indices) > MAX_LIST:
                    raise cur.fail("too many split indices")
                if cur.accept(")"):
                    break
                cur.expect(",", "or ')' in split config")
        elif key == "P":
            cur.expect("(", "after P")
            layout.physical_shape.CopyFrom(parse_shape(cur))
            cur.expect(")", "after physical shape")
        else:
            raise cur.fail(f"unknown layout attribute '{key}'", tok)


# -- printing ------------------------------------------------------------------------------------
def _print_dim(size: int, dynamic: bool) -> str:
    if dynamic:
        return "?" if size == UNBOUNDED else f"<={size}"
    return str(size)


def print_layout(layout: LayoutProto) -> str:
    """`{1,0:T(8,128)S(1)}` (XLA's order of the attribute letters)."""
    text = ",".join(str(d) for d in layout.minor_to_major)
    attrs = []
    if layout.dim_level_types:
        parts = []
        for i, lt in enumerate(layout.dim_level_types):
            s = _DIM_LEVEL_NAME.get(lt, "D")
            if i < len(layout.dim_unique) and not layout.dim_unique[i]:
                s += "+"
            if i < len(layout.dim_ordered) and not layout.dim_ordered[i]:
                s += "~"
            parts.append(s)
        attrs.append("D(" + ",".join(parts) + ")")
    if layout.tiles:
        attrs.append("T" + "".join(
            "(" + ",".join("*" if d == UNBOUNDED else str(d) for d in t.dimensions) + ")"
            for t in layout.tiles))
    if layout.tail_padding_alignment_in_elements not in (0, 1):
        attrs.append(f"L({layout.tail_padding_alignment_in_elements})")
    if layout.index_primitive_type:
        attrs.append(f"#({NAME_BY_TYPE.get(layout.index_primitive_type, 'invalid')})")
    if layout.pointer_primitive_type:
        attrs.append(f"*({NAME_BY_TYPE.get(layout.pointer_primitive_type, 'invalid')})")
    if layout.element_size_in_bits:
        attrs.append(f"E({layout.element_size_in_bits})")
    if layout.memory_space:
        attrs.append(f"S({layout.memory_space})")
    for split in layout.split_configs:
        attrs.append(f"SC({split.dimension}:" + ",".join(str(i) for i in split.split_indices) + ")")
    if layout.HasField("physical_shape"):
        attrs.append(f"P({print_shape(layout.physical_shape)})")
    if layout.dynamic_shape_metadata_prefix_bytes:
        attrs.append(f"M({layout.dynamic_shape_metadata_prefix_bytes})")
    if attrs:
        text += ":" + "".join(attrs)
    return "{" + text + "}"


def print_shape(shape: ShapeProto, with_layout: bool = True) -> str:
    """XLA's spelling of a shape; the layout is left out for scalars as XLA does."""
    if shape.element_type == PT.TUPLE:
        parts = []
        for i, sub in enumerate(shape.tuple_shapes):
            prefix = f"/*index={i}*/" if i and i % 5 == 0 else ""
            parts.append(prefix + print_shape(sub, with_layout))
        return "(" + ", ".join(parts) + ")"
    if shape.element_type == PT.BUFFER and len(shape.tuple_shapes) == 1:
        return f"b({print_shape(shape.tuple_shapes[0], with_layout)})"
    name = NAME_BY_TYPE.get(shape.element_type)
    if name is None:
        raise ValueError(f"shape has no text form for element type {shape.element_type}")
    dyn = list(shape.is_dynamic_dimension)
    dims = ",".join(
        _print_dim(d, i < len(dyn) and dyn[i]) for i, d in enumerate(shape.dimensions)
    )
    text = f"{name}[{dims}]"
    if (
        with_layout
        and shape.HasField("layout")
        and shape.element_type in ARRAY_TYPES
        and (shape.dimensions or _layout_has_attributes(shape.layout))
    ):
        text += print_layout(shape.layout)
    return text


def _layout_has_attributes(layout: LayoutProto) -> bool:
    probe = LayoutProto()
    probe.CopyFrom(layout)
    probe.ClearField("minor_to_major")
    if probe.tail_padding_alignment_in_elements == 1:
        probe.ClearField("tail_padding_alignment_in_elements")
    return probe.ByteSize() > 0


def normalize_shape(shape: ShapeProto) -> None:
    """Give an array shape (recursively) what XLA's ToProto always writes, in place.

    Used on shapes the printer did not write itself (e.g. a proto built by hand) is not needed;
    the parser calls it on shapes that it builds from other shapes.
    """
    if shape.element_type == PT.TUPLE:
        for sub in shape.tuple_shapes:
            normalize_shape(sub)
        return
    if shape.element_type not in ARRAY_TYPES:
        return
    if len(shape.is_dynamic_dimension) != len(shape.dimensions):
        del shape.is_dynamic_dimension[:]
        shape.is_dynamic_dimension.extend([False] * len(shape.dimensions))
    if not shape.HasField("layout"):
        shape.layout.CopyFrom(default_layout(len(shape.dimensions)))
    elif not shape.layout.tail_padding_alignment_in_elements:
        shape.layout.tail_padding_alignment_in_elements = 1
