"""Readers and writers of the structured attribute values of HLO text.

Each `read_*` takes a Cursor positioned at the value and returns (or fills) proto data; each
`write_*` returns the value's text as XLA prints it.  The attribute table (attributes.py) pairs
them with proto fields; keeping the value grammars here keeps that table a table.
"""
from __future__ import annotations

import re
from typing import Dict, List, Sequence, Tuple

from hlo.errors import HloParseError
from hlo.schema import hlo_pb2, xla_data_pb2
from hlo.text.cursor import MAX_LIST, Cursor, parse_int_text
from hlo.text.lexer import STRING, WORD, Lexer
from hlo.text.literals import parse_literal, print_literal
from hlo.text.mesh_groups import at_mesh_groups, read_mesh_groups, write_mesh_groups
from hlo.text.shapes import parse_shape, print_shape

__all__ = [
    "escape",
    "read_window",
    "write_window",
    "read_dim_labels",
    "write_dim_labels",
    "read_slice",
    "write_slice",
    "read_padding",
    "write_padding",
    "read_sharding",
    "write_sharding",
    "read_metadata",
    "write_metadata",
    "read_frontend_attributes",
    "write_frontend_attributes",
    "read_replica_groups",
    "write_replica_groups",
    "read_shape_index",
    "write_shape_index",
    "read_output_operand_aliasing",
    "write_output_operand_aliasing",
    "read_shape_list",
    "write_shape_list",
    "read_statistics",
    "write_statistics",
    "read_original_value",
    "write_original_value",
    "quote",
    "reads_back_raw",
]

OpSharding = xla_data_pb2.OpSharding


def escape(data: bytes) -> str:
    """C-style escaping of bytes inside double quotes (what XLA's CEscape produces)."""
    out = []
    for b in data:
        c = chr(b)
        if c == '"':
            out.append('\\"')
        elif c == "\\":
            out.append("\\\\")
        elif c == "\n":
            out.append("\\n")
        elif c == "\t":
            out.append("\\t")
        elif c == "\r":
            out.append("\\r")
        elif c == "'":
            out.append("\\'")
        elif 0x20 <= b < 0x7F:
            out.append(c)
        else:
            out.append("\\%03o" % b)
    return '"' + "".join(out) + '"'


def quote(text: str) -> str:
    return escape(text.encode("utf-8"))


def reads_back_raw(value: bytes) -> bool:
    """Would `value`, printed unquoted, read back as exactly itself?  XLA prints `{...}` values
    (JSON or MLIR backend configs, Shardy frontend attributes) unquoted; we do when it is safe:
    balanced braces, well-formed strings, one line."""
    if not (value.startswith(b"{") and value.endswith(b"}")):
        return False
    try:
        text = value.decode("utf-8")
        raw, _ = Lexer(text).raw_balanced()
    except (UnicodeDecodeError, HloParseError):
        return False
    return raw == text and "\n" not in text and "\r" not in text


def _split_ints(cur: Cursor, tok_text: str, sep: str, context: str) -> List[int]:
    parts = tok_text.split(sep)
    out = []
    for part in parts:
        value = parse_int_text(part)
        if value is None or not -(1 << 63) <= value < (1 << 63):
            raise cur.fail(f"bad number '{part}' in {context}")
        out.append(value)
    return out


# -- window ------------------------------------------------------------------------------------------
_WINDOW_KEYS = ("size", "stride", "pad", "lhs_dilate", "rhs_dilate", "rhs_reversal")


def read_window(cur: Cursor, window: xla_data_pb2.Window) -> None:
    """`{size=3x3 stride=2x2 pad=0_1x0_1 lhs_dilate=1x1 rhs_dilate=1x1 rhs_reversal=0x1}`."""
    cur.expect("{", "to open window")
    fields: Dict[str, List] = {}
    while not cur.accept("}"):
        key_tok = cur.expect_word("in window", "size, stride, pad, lhs_dilate, rhs_dilate or rhs_reversal")
        if key_tok.text not in _WINDOW_KEYS:
            raise cur.fail(f"unknown window field '{key_tok.text}'", key_tok)
        if key_tok.text in fields:
            raise cur.fail(f"window field '{key_tok.text}' given twice", key_tok)
        cur.expect("=", f"after window field {key_tok.text}")
        val = cur.expect_word(f"as value of window {key_tok.text}", "a value like 3x3")
        if key_tok.text == "pad":
            dims = val.text.split("x")
            pads = []
            for d in dims:
                lh = _split_ints(cur, d, "_", "window padding")
                if len(lh) != 2:
                    raise cur.fail(f"window padding '{d}' is not low_high", val)
                pads.append(lh)
            fields["pad"] = pads
        else:
            fields[key_tok.text] = _split_ints(cur, val.text, "x", f"window {key_tok.text}")
        cur.accept(",")
    rank = max((len(v) for v in fields.values()), default=0)
    if rank > MAX_LIST:
        raise cur.fail("window has too many dimensions")
    for key, values in fields.items():
        if len(values) != rank:
            raise cur.fail(f"window field '{key}' has {len(values)} dimensions, expected {rank}")
    for i in range(rank):
        d = window.dimensions.add()
        d.size = fields["size"][i] if "size" in fields else 0
        d.stride = fields["stride"][i] if "stride" in fields else 1
        if "pad" in fields:
            d.padding_low, d.padding_high = fields["pad"][i]
        d.window_dilation = fields["rhs_dilate"][i] if "rhs_dilate" in fields else 1
        d.base_dilation = fields["lhs_dilate"][i] if "lhs_dilate" in fields else 1
        d.window_reversal = bool(fields["rhs_reversal"][i]) if "rhs_reversal" in fields else False


def write_window(window: xla_data_pb2.Window) -> str:
    dims = window.dimensions
    parts = []
    if dims:
        parts.append("size=" + "x".join(str(d.size) for d in dims))
    if any(d.stride != 1 for d in dims):
        parts.append("stride=" + "x".join(str(d.stride) for d in dims))
    if any(d.padding_low or d.padding_high for d in dims):
        parts.append("pad=" + "x".join(f"{d.padding_low}_{d.padding_high}" for d in dims))
    if any(d.base_dilation != 1 for d in dims):
        parts.append("lhs_dilate=" + "x".join(str(d.base_dilation) for d in dims))
    if any(d.window_dilation != 1 for d in dims):
        parts.append("rhs_dilate=" + "x".join(str(d.window_dilation) for d in dims))
    if any(d.window_reversal for d in dims):
        parts.append("rhs_reversal=" + "x".join("1" if d.window_reversal else "0" for d in dims))
    return "{" + " ".join(parts) + "}"


# -- convolution dim labels ---------------------------------------------------------------------------
_LABEL_RE = re.compile(r"^[0-9a-z?]+$")


def _read_labels(cur: Cursor, text: str, batch: str, feature: str, what: str) -> Tuple[int, int, List[int]]:
    if not _LABEL_RE.match(text) or len(text) > 64:
        raise cur.fail(f"bad {what} dim labels '{text}'")
    b = text.find(batch)
    f = text.find(feature)
    spatial: Dict[int, int] = {}
    for pos, ch in enumerate(text):
        if ch.isdigit():
            if int(ch) in spatial:
                raise cur.fail(f"spatial dimension {ch} repeated in {what} dim labels '{text}'")
            spatial[int(ch)] = pos
        elif ch not in (batch, feature, "?"):
            raise cur.fail(f"unexpected '{ch}' in {what} dim labels '{text}'")
    if b < 0 or f < 0 or text.count(batch) != 1 or text.count(feature) != 1:
        raise cur.fail(f"{what} dim labels '{text}' need exactly one '{batch}' and one '{feature}'")
    if sorted(spatial) != list(range(len(spatial))):
        raise cur.fail(f"spatial dimensions of {what} dim labels '{text}' are not 0..n-1")
    return b, f, [spatial[i] for i in range(len(spatial))]


def read_dim_labels(cur: Cursor, dnums: xla_data_pb2.ConvolutionDimensionNumbers) -> None:
    """`b01f_01io->b01f`: input, kernel and output dimension roles by position."""
    tok = cur.expect_word("as dim_labels", "dim labels like b01f_01io->b01f")
    lhs_rhs = tok.text.split("_")
    if len(lhs_rhs) != 2:
        raise cur.fail(f"bad dim labels '{tok.text}'", tok)
    cur.expect("->", "in dim_labels")
    out_tok = cur.expect_word("after '->' in dim_labels", "output dim labels")
    ib, if_, isp = _read_labels(cur, lhs_rhs[0], "b", "f", "input")
    ki, ko, ksp = _read_labels(cur, lhs_rhs[1], "i", "o", "kernel")
    ob, of, osp = _read_labels(cur, out_tok.text, "b", "f", "output")
    if not len(isp) == len(ksp) == len(osp):
        raise cur.fail(f"dim labels '{tok.text}->{out_tok.text}' disagree on the number of spatial dimensions", tok)
    dnums.input_batch_dimension = ib
    dnums.input_feature_dimension = if_
    dnums.input_spatial_dimensions.extend(isp)
    dnums.kernel_input_feature_dimension = ki
    dnums.kernel_output_feature_dimension = ko
    dnums.kernel_spatial_dimensions.extend(ksp)
    dnums.output_batch_dimension = ob
    dnums.output_feature_dimension = of
    dnums.output_spatial_dimensions.extend(osp)


def _write_labels(first: int, second: int, spatial: Sequence[int], a: str, b: str) -> str:
    rank = 2 + len(spatial)
    chars = ["?"] * rank
    for pos, ch in ((first, a), (second, b)):
        if 0 <= pos < rank:
            chars[pos] = ch
    for i, pos in enumerate(spatial):
        if 0 <= pos < rank:
            chars[pos] = str(i) if i < 10 else "?"
    return "".join(chars)


def write_dim_labels(d: xla_data_pb2.ConvolutionDimensionNumbers) -> str:
    lhs = _write_labels(d.input_batch_dimension, d.input_feature_dimension, d.input_spatial_dimensions, "b", "f")
    rhs = _write_labels(
        d.kernel_output_feature_dimension, d.kernel_input_feature_dimension, d.kernel_spatial_dimensions, "o", "i"
    )
    out = _write_labels(d.output_batch_dimension, d.output_feature_dimension, d.output_spatial_dimensions, "b", "f")
    return f"{lhs}_{rhs}->{out}"


# -- slice and padding --------------------------------------------------------------------------------
def read_slice(cur: Cursor, inst: hlo_pb2.HloInstructionProto) -> None:
    """`{[0:2], [1:5:2]}` into slice_dimensions (stride 1 when not given)."""

    def dimension() -> None:
        cur.expect("[", "to open slice dimension")
        nums = [cur.expect_int64("in slice dimension")]
        while cur.accept(":") and len(nums) < 3:
            nums.append(cur.expect_int64("in slice dimension"))
        cur.expect("]", "to close slice dimension")
        if len(nums) < 2:
            raise cur.fail("slice dimension must be [start:limit] or [start:limit:stride]")
        d = inst.slice_dimensions.add()
        d.start, d.limit = nums[0], nums[1]
        d.stride = nums[2] if len(nums) == 3 else 1

    cur.delimited(dimension, "slice")


def write_slice(inst: hlo_pb2.HloInstructionProto) -> str:
    strided = any(d.stride != 1 for d in inst.slice_dimensions)  # XLA then shows every stride
    parts = []
    for d in inst.slice_dimensions:
        parts.append(f"[{d.start}:{d.limit}:{d.stride}]" if strided else f"[{d.start}:{d.limit}]")
    return "{" + ", ".join(parts) + "}"


def read_padding(cur: Cursor, config: xla_data_pb2.PaddingConfig) -> None:
    """`0_1x2_3_1`: per dimension low_high[_interior]."""
    tok = cur.expect_word("as padding", "padding like 0_0x1_1")
    for dim in tok.text.split("x"):
        nums = _split_ints(cur, dim, "_", "padding")
        if len(nums) not in (2, 3):
            raise cur.fail(f"padding dimension '{dim}' is not low_high or low_high_interior", tok)
        d = config.dimensions.add()
        d.edge_padding_low, d.edge_padding_high = nums[0], nums[1]
        d.interior_padding = nums[2] if len(nums) == 3 else 0


def write_padding(config: xla_data_pb2.PaddingConfig) -> str:
    interior = any(d.interior_padding for d in config.dimensions)
    parts = []
    for d in config.dimensions:
        s = f"{d.edge_padding_low}_{d.edge_padding_high}"
        if interior:
            s += f"_{d.interior_padding}"
        parts.append(s)
    return "x".join(parts)


# -- sharding ------------------------------------------------------------------------------------------
_SHARDING_TYPES = {"replicated": OpSharding.REPLICATED, "manual": OpSharding.MANUAL,
                   "unknown": OpSharding.UNKNOWN, "maximal": OpSharding.MAXIMAL}
if "UNREDUCED" in OpSharding.Type.keys():
    _SHARDING_TYPES["unreduced"] = OpSharding.Type.Value("UNREDUCED")
_SHARDING_NAMES = {v: k for k, v in _SHARDING_TYPES.items()}


def read_sharding(cur: Cursor, sharding: OpSharding) -> None:
    """`{replicated}`, `{maximal device=1}`, `{devices=[2,1]0,1}`, `{devices=[4]<=[2,2]T(1,0)}`, tuples."""
    with cur.nested():
        opened = cur.lexer.save()
        cur.expect("{", "to open sharding")
        if cur.at_punct("{") or cur.at_punct("}"):
            sharding.type = OpSharding.TUPLE
            # the '{' just read opens the tuple: step back so delimited() reads it
            cur.lexer.restore(opened)
            cur.delimited(lambda: read_sharding(cur, sharding.tuple_shardings.add()), "tuple sharding")
            return
        _read_sharding_body(cur, sharding)


def _read_sharding_body(cur: Cursor, s: OpSharding) -> None:
    seen_type = False
    while not cur.accept("}"):
        tok = cur.expect_word("in sharding", "a sharding word (replicated, maximal, devices=...)")
        word = tok.text
        if word in _SHARDING_TYPES and word != "maximal":
            s.type = _SHARDING_TYPES[word]
            seen_type = True
        elif word == "maximal":
            s.type = OpSharding.MAXIMAL
            seen_type = True
            cur.expect_keyword("device", "after maximal")
            cur.expect("=", "after device")
            s.tile_assignment_devices.append(cur.expect_int64("as device"))
        elif word == "devices":
            s.type = OpSharding.OTHER
            seen_type = True
            cur.expect("=", "after devices")
            s.tile_assignment_dimensions.extend(cur.int_list("as tile assignment dimensions", "[", "]"))
            if cur.accept("<="):
                s.iota_reshape_dims.extend(cur.int_list("as iota reshape dimensions", "[", "]"))
                if cur.accept_word("T"):
                    s.iota_transpose_perm.extend(cur.int_list("as iota transpose", "(", ")"))
                else:
                    s.iota_transpose_perm.extend(range(len(s.iota_reshape_dims)))
            else:
                while True:
                    s.tile_assignment_devices.append(cur.expect_int64("as device id"))
                    if len(s.tile_assignment_devices) > MAX_LIST:
                        raise cur.fail("too many devices in sharding")
                    if not cur.accept(","):
                        break
        elif word == "last_tile_dim_replicate":
            s.replicate_on_last_tile_dim = True
        elif word == "last_tile_dims":
            cur.expect("=", "after last_tile_dims")
            cur.expect("{", "to open last_tile_dims")
            while not cur.accept("}"):
                t = cur.expect_word("in last_tile_dims", "replicated, manual or unreduced")
                if t.text not in _SHARDING_TYPES:
                    raise cur.fail(f"unknown sharding type '{t.text}'", t)
                s.last_tile_dims.append(_SHARDING_TYPES[t.text])
                cur.accept(",")
        elif word == "metadata":
            # one: `metadata={op_name="a"}`; several: `metadata={{op_name="a"}, {op_type="b"}}`
            cur.expect("=", "after metadata")
            mark = cur.lexer.save()
            cur.expect("{", "to open sharding metadata")
            several = cur.at_punct("{")
            cur.lexer.restore(mark)
            if several:
                cur.delimited(lambda: read_metadata(cur, s.metadata.add()), "sharding metadata")
            else:
                read_metadata(cur, s.metadata.add())
        elif word in ("shard_as", "shard_like"):
            s.is_shard_group = True
            s.shard_group_type = OpSharding.AS if word == "shard_as" else OpSharding.LIKE
            s.shard_group_id = cur.expect_int64(f"after {word}")
        else:
            raise cur.fail(f"unknown sharding attribute '{word}'", tok)
    if not seen_type:
        raise cur.fail("sharding names no type (replicated, maximal, manual, devices=...)")


def write_sharding(s: OpSharding) -> str:
    if s.type == OpSharding.TUPLE:
        return "{" + ", ".join(write_sharding(t) for t in s.tuple_shardings) + "}"
    parts: List[str] = []
    if s.type == OpSharding.MAXIMAL:
        dev = s.tile_assignment_devices[0] if s.tile_assignment_devices else 0
        parts.append(f"maximal device={dev}")
    elif s.type == OpSharding.OTHER:
        dims = ",".join(str(d) for d in s.tile_assignment_dimensions)
        if s.iota_reshape_dims:
            text = f"devices=[{dims}]<=[" + ",".join(str(d) for d in s.iota_reshape_dims) + "]"
            if list(s.iota_transpose_perm) != list(range(len(s.iota_reshape_dims))):
                text += "T(" + ",".join(str(p) for p in s.iota_transpose_perm) + ")"
        else:
            text = f"devices=[{dims}]" + ",".join(str(d) for d in s.tile_assignment_devices)
        parts.append(text)
        if s.replicate_on_last_tile_dim:
            parts.append("last_tile_dim_replicate")
        if s.last_tile_dims:
            parts.append("last_tile_dims={" + ", ".join(_SHARDING_NAMES.get(t, "replicated") for t in s.last_tile_dims) + "}")
    else:
        parts.append(_SHARDING_NAMES.get(s.type, "replicated"))
    if s.is_shard_group:
        parts.append(("shard_as " if s.shard_group_type == OpSharding.AS else "shard_like ") + str(s.shard_group_id))
    if len(s.metadata) == 1:
        parts.append("metadata=" + write_metadata(s.metadata[0]))
    elif s.metadata:
        parts.append("metadata={" + ", ".join(write_metadata(m) for m in s.metadata) + "}")
    return "{" + " ".join(parts) + "}"


# -- metadata -----------------------------------------------------------------------------------------
_META_STRINGS = ("op_type", "op_name", "source_file", "deduplicated_name", "scheduling_name")
_META_INTS = ("source_line", "source_end_line", "source_column", "source_end_column", "stack_frame_id",
              "size_of_generated_code_in_bytes", "size_of_memory_working_set_in_bytes")
_META_FIELDS = {f.name for f in xla_data_pb2.OpMetadata.DESCRIPTOR.fields}


def read_metadata(cur: Cursor, meta: xla_data_pb2.OpMetadata) -> None:
    """`{op_type="dot" op_name="jit(f)/dot" source_file="a.py" source_line=3 stack_frame_id=2}`."""
    cur.expect("{", "to open metadata")
    while not cur.accept("}"):
        key = cur.expect_word("in metadata", "a metadata field")
        cur.expect("=", f"after metadata field {key.text}")
        if key.text in _META_STRINGS and key.text in _META_FIELDS:
            setattr(meta, key.text, cur.expect_text(f"as metadata {key.text}"))
        elif key.text in _META_INTS and key.text in _META_FIELDS:
            lo, hi = (-(1 << 31), (1 << 31) - 1) if key.text != "size_of_generated_code_in_bytes" else (-(1 << 63), (1 << 63) - 1)
            if key.text == "size_of_memory_working_set_in_bytes":
                lo, hi = -(1 << 63), (1 << 63) - 1
            setattr(meta, key.text, cur.expect_int(f"as metadata {key.text}", lo, hi))
        elif key.text == "profile_type":
            cur.expect("{", "to open profile_type")
            while not cur.accept("}"):
                t = cur.expect_word("in profile_type", "a profile type")
                values = xla_data_pb2.ProfileType
                if t.text.upper() not in values.keys():
                    raise cur.fail(f"unknown profile type '{t.text}'", t)
                meta.profile_type.append(values.Value(t.text.upper()))
                cur.accept(",")
        elif key.text in ("preserve_layout",):
            cur.expect_bool("as metadata preserve_layout")
        else:
            raise cur.fail(f"unknown metadata field '{key.text}'", key)
        cur.accept(",")


def write_metadata(meta: xla_data_pb2.OpMetadata) -> str:
    parts = []
    order = ("op_type", "op_name", "source_file", "source_line", "source_end_line", "source_column",
             "source_end_column", "profile_type", "deduplicated_name", "scheduling_name", "stack_frame_id",
             "size_of_generated_code_in_bytes", "size_of_memory_working_set_in_bytes")
    for name in order:
        if name not in _META_FIELDS:
            continue
        value = getattr(meta, name)
        if name == "profile_type":
            if value:
                names = [xla_data_pb2.ProfileType.Name(v) for v in value]
                parts.append("profile_type={" + ",".join(names) + "}")
        elif name in _META_STRINGS:
            if value:
                parts.append(f"{name}={quote(value)}")
        elif value:
            parts.append(f"{name}={value}")
    return "{" + " ".join(parts) + "}"


# -- frontend attributes -----------------------------------------------------------------------------
def read_frontend_attributes(cur: Cursor, attrs: xla_data_pb2.FrontendAttributes) -> None:
    """`{_xla_stream="1", key="value"}` (keys may also be quoted)."""

    def entry() -> None:
        tok = cur.peek()
        if tok.kind == STRING:
            key = cur.expect_text("as frontend attribute name")
        else:
            key = cur.expect_word("in frontend_attributes", "an attribute name").text
        cur.expect("=", "after frontend attribute name")
        tok = cur.peek()
        if tok.kind == STRING:
            value = cur.expect_text("as frontend attribute value")
        elif tok.kind == WORD:
            value = cur.next().text
        elif cur.at_punct("{"):
            value, _ = cur.lexer.raw_balanced()  # e.g. xla.sdy.meshes={mesh = #sdy.mesh<...>}
        else:
            raise cur.error("in frontend_attributes", tok, expected="a quoted value")
        attrs.map[key] = value

    cur.delimited(entry, "frontend_attributes")


def write_frontend_attributes(attrs: xla_data_pb2.FrontendAttributes) -> str:
    items = sorted(attrs.map.items())
    return "{" + ",".join(f"{_key(k)}={_value(v)}" for k, v in items) + "}"


def _value(value: str) -> str:
    return value if reads_back_raw(value.encode("utf-8")) else quote(value)


def _key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z_][\w.\-]*", key) and not key.endswith("-") else quote(key)


# -- replica groups ------------------------------------------------------------------------------------
def read_replica_groups(cur: Cursor, inst: hlo_pb2.HloInstructionProto) -> None:
    """`{{0,1},{2,3}}`, the iota form `[2,2]<=[4]` / `[2,2]<=[2,2]T(1,0)`, or the mesh-axes form
    `mesh['x'=2,'y'=4] {'y'}` (mesh_groups.py)."""
    if at_mesh_groups(cur):
        read_mesh_groups(cur, inst.mesh_axes_replica_group_list)
        return
    if cur.at_punct("["):
        dims = cur.int_list("as replica group dimensions", "[", "]")
        if len(dims) != 2:
            raise cur.fail("iota replica groups need [groups,group_size]")
        cur.expect("<=", "in iota replica groups")
        reshape = cur.int_list("as iota reshape dimensions", "[", "]")
        perm = list(range(len(reshape)))
        if cur.accept_word("T"):
            perm = cur.int_list("as iota transpose", "(", ")")
        iota = inst.iota_collective_device_list
        iota.num_replica_groups, iota.num_devices_per_group = dims
        iota.iota_reshape_dims.extend(reshape)
        iota.iota_transpose_perm.extend(perm)
        return
    groups = cur.nested_int_lists("as replica groups")
    inst.collective_device_list.SetInParent()
    for g in groups:
        inst.collective_device_list.replica_groups.add().replica_ids.extend(g)


def write_replica_groups(inst: hlo_pb2.HloInstructionProto) -> str:
    cdl = inst.collective_device_list
    if inst.HasField("mesh_axes_replica_group_list"):
        return write_mesh_groups(inst.mesh_axes_replica_group_list)
    if inst.HasField("iota_collective_device_list"):
        iota = inst.iota_collective_device_list
        text = f"[{iota.num_replica_groups},{iota.num_devices_per_group}]<=[" + ",".join(
            str(d) for d in iota.iota_reshape_dims) + "]"
        if list(iota.iota_transpose_perm) != list(range(len(iota.iota_reshape_dims))):
            text += "T(" + ",".join(str(p) for p in iota.iota_transpose_perm) + ")"
        return text
    groups = cdl.replica_groups or inst.replica_groups
    return "{" + ",".join("{" + ",".join(str(i) for i in g.replica_ids) + "}" for g in groups) + "}"


# -- shape indices and aliasing -------------------------------------------------------------------------
def read_shape_index(cur: Cursor) -> List[int]:
    return cur.int_list("as shape index")


def write_shape_index(index: Sequence[int]) -> str:
    return "{" + ",".join(str(i) for i in index) + "}"


def read_output_operand_aliasing(cur: Cursor, inst: hlo_pb2.HloInstructionProto) -> None:
    """`{{0}: (1, {}), {1}: (0, {2})}`."""

    def entry() -> None:
        alias = inst.output_operand_aliasing.add()
        alias.output_shape_index.extend(read_shape_index(cur))
        cur.expect(":", "after output shape index")
        cur.expect("(", "to open operand alias")
        alias.operand_index = cur.expect_int64("as operand index")
        cur.expect(",", "after operand index")
        alias.operand_shape_index.extend(read_shape_index(cur))
        cur.expect(")", "to close operand alias")

    cur.delimited(entry, "output_to_operand_aliasing")


def write_output_operand_aliasing(inst: hlo_pb2.HloInstructionProto) -> str:
    parts = [
        f"{write_shape_index(a.output_shape_index)}: ({a.operand_index}, {write_shape_index(a.operand_shape_index)})"
        for a in inst.output_operand_aliasing
    ]
    return "{" + ", ".join(parts) + "}"


def read_shape_list(cur: Cursor) -> List[xla_data_pb2.ShapeProto]:
    """`{f32[2]{0}, s32[]}` (custom-call operand_layout_constraints)."""
    return cur.delimited(lambda: parse_shape(cur), "shape list")


def write_shape_list(shapes: Sequence[xla_data_pb2.ShapeProto]) -> str:
    return "{" + ", ".join(print_shape(s) for s in shapes) + "}"


# -- statistics and original values ---------------------------------------------------------------------
def read_statistics(cur: Cursor, viz: xla_data_pb2.StatisticsViz) -> None:
    """`{visualizing_index=1,stat-1=33,stat-2=44}`."""

    def entry() -> None:
        key = cur.expect_word("in statistics", "a statistic name")
        cur.expect("=", "after statistic name")
        if key.text == "visualizing_index":
            viz.stat_index_to_visualize = cur.expect_int64("as visualizing_index")
        else:
            viz.statistics.add(stat_name=key.text, stat_val=cur.expect_float(f"as statistic {key.text}"))

    cur.delimited(entry, "statistics")


def write_statistics(viz: xla_data_pb2.StatisticsViz) -> str:
    from hlo.text.literals import format_float  # literals imports this module's neighbours

    parts = [f"visualizing_index={viz.stat_index_to_visualize}"]
    parts += [f"{st.stat_name}={format_float(st.stat_val, 'float64')}" for st in viz.statistics]
    return "{" + ",".join(parts) + "}"


def read_original_value(cur: Cursor, value: xla_data_pb2.OriginalValueProto) -> None:
    """`{{"x" {1}}}`, `{({"a"}, {"b" {0}})}` (a tuple tree of original arrays) or `{[synthetic_call]}`."""
    cur.expect("{", "to open origin")
    if cur.accept("["):
        cur.expect_keyword("synthetic_call", "in origin")
        cur.expect("]", "after synthetic_call")
        value.is_synthetic_call = True
    else:
        _read_original_node(cur, value, [])
    cur.expect("}", "to close origin")


def _read_original_node(cur: Cursor, value: xla_data_pb2.OriginalValueProto, index: List[int]) -> None:
    with cur.nested():
        if cur.at_punct("("):
            position = [0]

            def child() -> None:
                _read_original_node(cur, value, index + [position[0]])
                position[0] += 1

            cur.delimited(child, "origin tuple", "(", ")")
            return
        cur.expect("{", "to open original array")
        element = value.elements.add()
        element.shape_index.extend(index)
        element.original_array.instruction_name = cur.expect_text("as original instruction name")
        if cur.at_punct("{"):
            element.original_array.shape_index.extend(cur.int_list("as original shape index"))
        cur.expect("}", "to close original array")


def write_original_value(value: xla_data_pb2.OriginalValueProto) -> str:
    if value.is_synthetic_call:
        return "{[synthetic_call]}"
    leaves = {tuple(e.shape_index): e.original_array for e in value.elements}

    def node(prefix: Tuple[int, ...]) -> str:
        if prefix in leaves:
            array = leaves[prefix]
            index = " " + write_shape_index(array.shape_index) if array.shape_index else ""
            return "{" + quote(array.instruction_name) + index + "}"
        children = sorted({k[len(prefix)] for k in leaves if len(k) > len(prefix) and k[: len(prefix)] == prefix})
        return "(" + ", ".join(node(prefix + (i,)) for i in range(max(children, default=-1) + 1)) + ")"

    return "{" + node(()) + "}"


def read_shaped_literal(cur: Cursor, lit: xla_data_pb2.LiteralProto) -> None:
    """custom-call `literal=s32[] 1`: a shape, then a literal of that shape."""
    lit.CopyFrom(parse_literal(cur, parse_shape(cur)))


def write_shaped_literal(lit: xla_data_pb2.LiteralProto) -> str:
    return f"{print_shape(lit.shape)} {print_literal(lit)}"
