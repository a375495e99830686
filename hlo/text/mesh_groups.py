"""The mesh-axes form of `replica_groups` in HLO text (XLA's MeshAxesReplicaGroupList).

XLA prints a collective whose groups are given as axes of a device mesh as

    replica_groups=mesh['x'=2,'y'=4] {'y'}
    replica_groups=mesh['x'=8] {'x':(2)2}                                  (a sub-axis: (pre-size)size)
    replica_groups=mesh['x'=2,'y'=4], device_ids=(7,6,5,4,3,2,1,0) {'x'}   (explicit device order)
    replica_groups=mesh['x'=2,'y'=4], device_ids=([4,2]T(1,0)) {'y','x'}  (device order as an iota)

and jaxlib 0.10.2's parser reads these (names in single or double quotes, spaces anywhere
between tokens). Why a module of its own: the grammar is a small language of its own (named
axes, sub-axes, two device-order forms) that the plain `{{0,1}}` / iota readers in values.py
need not know; this module only fills and prints MeshAxesReplicaGroupListProto, whose meaning
(which devices form a group) the compiler computes from the proto as for the binary form.
"""
from __future__ import annotations

from typing import List

from hlo.schema import xla_data_pb2
from hlo.text.cursor import Cursor
from hlo.text.lexer import WORD

__all__ = ["at_mesh_groups", "read_mesh_groups", "write_mesh_groups"]


def at_mesh_groups(cur: Cursor) -> bool:
    """Whether the value at the cursor is the mesh form (it starts with the word `mesh`)."""
    tok = cur.peek()
    return tok.kind == WORD and tok.text == "mesh"


def _axis_name(cur: Cursor, context: str) -> str:
    name = cur.expect_text(context)
    if not name:
        raise cur.fail(f"an empty axis name {context}")
    return name


def _read_device_order(cur: Cursor, mesh: xla_data_pb2.MeshProto) -> None:
    """`(7,6,...)` (explicit ids) or `([4,2]T(1,0))` (iota reshaped, then transposed)."""
    cur.expect("(", "to open the mesh's device_ids")
    if cur.at_punct("["):
        dims = cur.int_list("as the mesh's iota dimensions", "[", "]")
        perm = list(range(len(dims)))
        if cur.accept_word("T"):
            perm = cur.int_list("as the mesh's iota transpose", "(", ")")
        elif len(dims) > 1:  # as XLA's parser: only a one-dimensional iota may omit it
            raise cur.error("after the mesh's iota dimensions", expected="'T(' and a transpose")
        if sorted(perm) != list(range(len(dims))):
            raise cur.fail(f"mesh device_ids iota transpose {perm} is not a permutation of {len(dims)} dimensions")
        if perm != list(range(len(dims))):  # an untransposed iota is the mesh's own order: kept out, as XLA does
            mesh.iota_transform.reshape_dims.extend(dims)
            mesh.iota_transform.transpose_perm.extend(perm)
        cur.expect(")", "to close the mesh's device_ids")
        return
    ids: List[int] = []
    if not cur.accept(")"):
        while True:
            ids.append(cur.expect_int64("in the mesh's device_ids"))
            if cur.accept(")"):
                break
            cur.expect(",", "between the mesh's device_ids")
    mesh.device_ids.extend(ids)


def _read_axis_ref(cur: Cursor, rg: xla_data_pb2.MeshAxesReplicaGroupListProto, names: List[str]) -> None:
    """`'y'` or `'y':(2)2` (the sub-axis of size 2 after a pre-size of 2)."""
    tok = cur.peek()
    name = _axis_name(cur, "as a replica group axis")
    if name not in names:
        raise cur.fail(f"replica group axis '{name}' is not an axis of the mesh {names}", tok)
    ref = rg.axes.add(mesh_axis_index=names.index(name))
    if cur.accept(":"):
        cur.expect("(", "to open the sub-axis pre-size")
        pre = cur.expect_int64("as the sub-axis pre-size")
        cur.expect(")", "to close the sub-axis pre-size")
        size = cur.expect_int64("as the sub-axis size")
        if pre < 1 or size < 1:
            raise cur.fail(f"sub-axis ({pre}){size} of axis '{name}': sizes are positive", tok)
        ref.sub_axis_info.pre_size, ref.sub_axis_info.size = pre, size


def read_mesh_groups(cur: Cursor, rg: xla_data_pb2.MeshAxesReplicaGroupListProto) -> None:
    """The value after `replica_groups=`, from `mesh` to the closing `}` of the axes."""
    cur.expect_keyword("mesh", "to start mesh replica groups")
    names: List[str] = []

    def axis() -> None:
        tok = cur.peek()
        name = _axis_name(cur, "as a mesh axis name")
        if name in names:
            raise cur.fail(f"mesh axis '{name}' named twice", tok)
        cur.expect("=", "after a mesh axis name")
        size = cur.expect_int64("as a mesh axis size")
        if size < 1:
            raise cur.fail(f"mesh axis '{name}' of size {size}", tok)
        names.append(name)
        rg.mesh.axes.add(name=name, size=size)

    cur.delimited(axis, "the mesh's axes", "[", "]")
    mark = cur.lexer.save()
    if cur.accept(","):
        tok = cur.peek()
        if tok.kind == WORD and tok.text == "device_ids":
            cur.next()
            cur.expect("=", "after device_ids")
            _read_device_order(cur, rg.mesh)
        else:  # the comma that ends the attribute: not ours
            cur.lexer.restore(mark)
    cur.delimited(lambda: _read_axis_ref(cur, rg, names), "the replica groups' mesh axes")


def _quoted(name: str) -> str:
    return "'" + name.replace("\\", "\\\\").replace("'", "\\'") + "'"


def write_mesh_groups(rg: xla_data_pb2.MeshAxesReplicaGroupListProto) -> str:
    """The text XLA prints for `rg` (device order only when the proto gives one)."""
    mesh = rg.mesh
    text = "mesh[" + ",".join(f"{_quoted(a.name)}={a.size}" for a in mesh.axes) + "]"
    if mesh.device_ids:
        text += ", device_ids=(" + ",".join(str(d) for d in mesh.device_ids) + ")"
    elif mesh.HasField("iota_transform"):
        iota = mesh.iota_transform
        text += ", device_ids=([" + ",".join(str(d) for d in iota.reshape_dims) + "]"
        if list(iota.transpose_perm) != list(range(len(iota.reshape_dims))):
            text += "T(" + ",".join(str(p) for p in iota.transpose_perm) + ")"
        text += ")"
    refs = []
    for ref in rg.axes:
        index = int(ref.mesh_axis_index)
        name = mesh.axes[index].name if 0 <= index < len(mesh.axes) else str(index)
        sub = f":({ref.sub_axis_info.pre_size}){ref.sub_axis_info.size}" if ref.HasField("sub_axis_info") else ""
        refs.append(_quoted(name) + sub)
    return text + " {" + ",".join(refs) + "}"
