"""Collectives and their async forms: replica groups read into explicit lists (the iota form
expanded here), the group mode decided as XLA's GetCollectiveOpGroupMode does, reducers
recognised as for reduce. The emulator ops (emulator/ops/collective.py) do the exchange at run
time, on whatever devices the program runs.

constrain_layout (torch_xla's xm.all_reduce and friends pin it by default) is accepted with any
layout: in XLA it makes every participant hold the same physical layout because the transport
moves raw bytes; the emulator exchanges logical arrays (every op but bitcast is layout-free), so
any layout the participants agree on gives the same values.

The in-place collective-permute (input, output buffer, input and output start indices,
slice_sizes) is lowered with its slice lists; the emulator copies the output and writes each
received slice into it.

Async pairs run the collective at `-start`; `-done` only passes its value on (all-reduce-done is
an identity, the tuple-valued starts are read at element 1)."""
from __future__ import annotations

from typing import Any

from emulator.collectives.groups import GroupError, group_mode, iota_groups, mesh_axes_groups, mesh_device_array
from neuron_customcall.compiler.lowering.context import LowerCtx, binary_reducer, called
from neuron_customcall.compiler.lowering.registry import (fail, leaf_types, lowers, same_as_operand, shape_rule,
                                                          shapes)

#: Opcodes without a use_global_device_ids field in XLA (their mode only depends on channel_id).
_NO_GLOBAL_IDS = frozenset({"all-to-all", "collective-permute", "collective-permute-start", "collective-broadcast"})


def replica_groups(inst: Any) -> list[list[int]]:
    """The explicit replica groups of `inst` (empty: every id)."""
    a = inst.attributes
    if a.HasField("iota_collective_device_list"):
        iota = a.iota_collective_device_list
        try:
            return iota_groups(iota.num_replica_groups, iota.num_devices_per_group, iota.iota_reshape_dims,
                               iota.iota_transpose_perm)
        except GroupError as e:
            fail(inst, str(e))
    if a.HasField("mesh_axes_replica_group_list"):
        return _mesh_axes_groups(inst, a.mesh_axes_replica_group_list)
    groups = a.collective_device_list.replica_groups or a.replica_groups
    out = [list(g.replica_ids) for g in groups]
    sizes = {len(g) for g in out}
    if len(sizes) > 1:
        fail(inst, f"replica groups of different sizes {out}")
    if any(not g for g in out):
        fail(inst, "an empty replica group")
    return out


def _mesh_axes_groups(inst: Any, rg: Any) -> list[list[int]]:
    """XLA's MeshAxesReplicaGroupList: the mesh's devices that differ only along the named axes
    (whole, or sub-axes `(pre_size)size`) form a group (emulator.collectives.groups)."""
    mesh = rg.mesh
    iota = mesh.iota_transform if mesh.HasField("iota_transform") else None
    axes = [(int(x.mesh_axis_index), int(x.sub_axis_info.pre_size) if x.HasField("sub_axis_info") else None,
             int(x.sub_axis_info.size) if x.HasField("sub_axis_info") else None) for x in rg.axes]
    try:
        devices = mesh_device_array([a.size for a in mesh.axes], list(mesh.device_ids),
                                    list(iota.reshape_dims) if iota else (), list(iota.transpose_perm) if iota else ())
        return mesh_axes_groups(devices, axes)
    except GroupError as e:
        fail(inst, f"mesh-axes replica groups: {e}")


def mode_of(inst: Any) -> str:
    a = inst.attributes
    use_global = None if inst.opcode in _NO_GLOBAL_IDS else bool(a.use_global_device_ids)
    try:
        return group_mode(a.channel_id > 0, use_global)
    except GroupError as e:
        fail(inst, str(e))


def _group_attrs(inst: Any) -> dict:
    mode, groups = mode_of(inst), replica_groups(inst)
    if mode == "flattened_id" and not groups:
        fail(inst, "use_global_device_ids=true needs explicit replica_groups")
    return {"mode": mode, "groups": groups}


def _reducer_attrs(inst: Any, ctx: LowerCtx) -> dict:
    comp = called(inst, 0, "to_apply")
    reducer = binary_reducer(comp)
    return {"computation": ctx.computation(comp, lifted=True), "reducer": "" if reducer == "replace" else reducer}


@lowers("all-reduce", "all-reduce-start")
def _all_reduce(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    return "all-reduce", {**_group_attrs(inst), **_reducer_attrs(inst, ctx)}


@lowers("reduce-scatter")
def _reduce_scatter(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    return "reduce-scatter", {**_group_attrs(inst), **_reducer_attrs(inst, ctx),
                              "dim": int(inst.attributes.dimensions[0])}


@lowers("all-gather", "all-gather-start")
def _all_gather(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    return "all-gather", {**_group_attrs(inst), "dim": int(inst.attributes.dimensions[0]),
                          "start": inst.opcode == "all-gather-start"}


@lowers("all-to-all")
def _all_to_all(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    dims = list(inst.attributes.dimensions)
    return "all-to-all", {**_group_attrs(inst), "split_dim": int(dims[0]) if dims else -1}


@lowers("collective-permute", "collective-permute-start")
def _collective_permute(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    attrs = {"mode": mode_of(inst), "pairs": [[int(p.source), int(p.target)] for p in inst.attributes.source_target_pairs],
             "start": inst.opcode == "collective-permute-start"}
    if len(inst.operands) == 1:
        return "collective-permute", attrs
    return "collective_permute_in_place", {**attrs, "slice_sizes": _in_place_slices(inst)}


def _in_place_slices(inst: Any) -> list[list[int]]:
    """The in-place form's slice sizes, one list per (input leaf, pair group), leaf-major: the
    pairs split into len(lists) / leaves consecutive groups of equal size (each group a
    permutation: XLA's CollectivePermuteInPlaceUpdate*MultipleReadWrite forms), group k
    reading its slices at start index k of each leaf's offsets."""
    ranks = [len(dims) for _, dims in leaf_types(inst.operands[0].shape)]
    flat = [int(v) for v in inst.attributes.dynamic_slice_sizes]
    per_group = sum(ranks)
    if not flat or not per_group or len(flat) % per_group:
        fail(inst, f"in-place {inst.opcode}: slice_sizes {flat} are not one list per input of ranks {ranks} "
                   "(per group of source-target pairs)")
    groups = len(flat) // per_group
    pairs = len(inst.attributes.source_target_pairs)
    if pairs % groups:
        fail(inst, f"in-place {inst.opcode}: {pairs} source-target pairs do not split into {groups} groups "
                   "(one per slice of each input)")
    lists, at = [], 0
    for rank in ranks:
        for _ in range(groups):
            lists.append(flat[at:at + rank])
            at += rank
    return lists


@lowers("ragged-all-to-all")
def _ragged_all_to_all(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    return "ragged-all-to-all", _group_attrs(inst)


@lowers("collective-broadcast")
def _collective_broadcast(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    return "collective-broadcast", _group_attrs(inst)


@lowers("all-reduce-done")
def _all_reduce_done(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    return "opt-barrier", {}


@lowers("all-gather-done", "collective-permute-done")
def _tuple_done(inst: Any, ctx: LowerCtx) -> tuple[str, dict]:
    if not inst.operands[0].shape.is_tuple:
        return "opt-barrier", {}
    return "get-tuple-element", {"index": 1}


# -- shape rules (XLA's; run by the verifier before lowering) ------------------------------
def _group_size(inst: Any) -> int | None:
    """The number of devices in each group when the instruction says it (explicit groups, not
    cross-replica-and-partition), else None (known only at run time)."""
    groups = replica_groups(inst)
    if not groups or mode_of(inst) == "cross_replica_and_partition":
        return None
    return len(groups[0])


def _outputs(inst: Any, start_tuple: bool) -> list[tuple[str, tuple[int, ...]]]:
    """Result leaves; of element 1 for a tuple-valued async start."""
    out = inst.shape
    if start_tuple and out.is_tuple:
        if len(out.tuple_shapes) < 2:
            fail(inst, f"{inst.opcode} gives (operands, results, ...), not {out}")
        out = out.tuple_shapes[1]
    return leaf_types(out)


@shape_rule("all-reduce", "all-reduce-start", "collective-broadcast")
def _same_shapes(inst: Any) -> None:
    ops, out = shapes(inst)
    if [t for s in ops for t in leaf_types(s)] != leaf_types(out) or any(s.is_tuple for s in ops):
        fail(inst, f"{inst.opcode} of {[str(s) for s in ops]} gives the same shapes, not {out}")


def _scaled_dimension(inst: Any, gathered: bool) -> None:
    """all-gather (`gathered`: the result's dimension is the group size times the operand's) or
    reduce-scatter (the operand's is the group size times the result's); other dimensions equal."""
    ops, _ = shapes(inst)
    dim = list(inst.attributes.dimensions)
    outs = _outputs(inst, inst.opcode == "all-gather-start")
    n = _group_size(inst)
    if len(dim) != 1 or len(outs) != len(ops):
        fail(inst, f"{inst.opcode} needs one dimension and a result per operand")
    d = dim[0]
    for s, (et, dims) in zip(ops, outs):
        ok = 0 <= d < s.rank and et == s.element_type and len(dims) == s.rank and all(
            a == b for k, (a, b) in enumerate(zip(dims, s.dimensions)) if k != d)
        small, big = (s.dimensions[d], dims[d]) if gathered and ok else (dims[d], s.dimensions[d]) if ok else (0, 0)
        if ok and small:
            ok = big % small == 0 and (n is None or big == n * small)
        if not ok:
            fail(inst, f"{inst.opcode} of {s} along {d} (groups of {n or '?'}) does not give {list(dims)}")


@shape_rule("all-gather", "all-gather-start")
def _all_gather_shapes(inst: Any) -> None:
    _scaled_dimension(inst, gathered=True)


@shape_rule("reduce-scatter")
def _reduce_scatter_shapes(inst: Any) -> None:
    _scaled_dimension(inst, gathered=False)


@shape_rule("all-to-all")
def _all_to_all_shapes(inst: Any) -> None:
    ops, out = shapes(inst)
    dims = list(inst.attributes.dimensions)
    if dims:
        if len(ops) != 1 or out.is_tuple or leaf_types(ops[0]) != leaf_types(out) or not 0 <= dims[0] < ops[0].rank:
            fail(inst, f"all-to-all along {dims} of {[str(s) for s in ops]} does not give {out}")
        if not replica_groups(inst):
            fail(inst, "array all-to-all needs explicit replica_groups (XLA's verifier refuses empty ones)")
        n = _group_size(inst)
        if n is not None and ops[0].dimensions[dims[0]] % n:
            fail(inst, f"all-to-all: dimension {dims[0]} of {ops[0]} does not split in {n}")
        return
    if [t for s in ops for t in leaf_types(s)] != leaf_types(out) or len(set(leaf_types(out))) > 1:
        fail(inst, f"tuple all-to-all of {[str(s) for s in ops]} gives operands of one shape, not {out}")


@shape_rule("ragged-all-to-all")
def _ragged_all_to_all_shapes(inst: Any) -> None:
    """(input, output, input_offsets, send_sizes, output_offsets, recv_sizes) -> output's shape;
    the four index operands of one shape, [group size] or [group size, updates], s32 or s64."""
    ops, out = shapes(inst)
    if len(ops) != 6:
        fail(inst, f"ragged-all-to-all takes 6 operands (input, output, input_offsets, send_sizes, "
                   f"output_offsets, recv_sizes), not {len(ops)}")
    data, output, *index = ops
    if leaf_types(output) != leaf_types(out) or data.element_type != output.element_type or \
            data.rank != output.rank or data.rank < 1 or list(data.dimensions[1:]) != list(output.dimensions[1:]):
        fail(inst, f"ragged-all-to-all of {data} into {output} gives {out}: the output's shape, the same element "
                   "type and the same dimensions but the first")
    kinds = {(s.element_type, tuple(s.dimensions)) for s in index}
    if len(kinds) != 1 or any(s.element_type not in ("S32", "S64") or s.rank not in (1, 2) for s in index):
        fail(inst, f"ragged-all-to-all offsets and sizes {[str(s) for s in index]}: one shape, [n] or [n,updates], "
                   "of s32 or s64")
    n = _group_size(inst)
    if n is not None and index[0].dimensions[0] != n:
        fail(inst, f"ragged-all-to-all offsets {index[0]} for groups of {n} devices")


@shape_rule("collective-permute", "collective-permute-start")
def _collective_permute_shapes(inst: Any) -> None:
    """One operand: the result has its shape. In place (input, output, input start indices,
    output start indices): the output's shape, inputs of the output's element types, and slices
    that fit in both."""
    ops, _ = shapes(inst)
    outs = _outputs(inst, inst.opcode == "collective-permute-start")
    if len(ops) == 1:
        if leaf_types(ops[0]) != outs:
            fail(inst, f"{inst.opcode} of {ops[0]} gives {outs}")
        return
    if len(ops) != 4:
        fail(inst, f"{inst.opcode} takes 1 operand, or 4 in place (input, output, input and output start "
                   f"indices), not {len(ops)}")
    ins, buffers = leaf_types(ops[0]), leaf_types(ops[1])
    if buffers != outs or len(ins) != len(buffers) or any(a[0] != b[0] or len(a[1]) != len(b[1])
                                                         for a, b in zip(ins, buffers)):
        fail(inst, f"in-place {inst.opcode} of {ops[0]} into {ops[1]} gives the output's shape, not {outs}")
    lists = _in_place_slices(inst)
    groups = len(lists) // len(ins)
    for e, ((_, src), (_, dst)) in enumerate(zip(ins, buffers)):
        for sizes in lists[e * groups:(e + 1) * groups]:
            if any(not 0 <= z <= min(a, b) for z, a, b in zip(sizes, src, dst)):
                fail(inst, f"in-place {inst.opcode}: slice {sizes} does not fit input {list(src)} and output "
                           f"{list(dst)}")


@shape_rule("all-gather-done", "collective-permute-done")
def _done_shapes(inst: Any) -> None:
    (operand,), out = shapes(inst)
    inner = operand.tuple_shapes[1] if operand.is_tuple and len(operand.tuple_shapes) > 1 else operand
    if leaf_types(inner) != leaf_types(out):
        fail(inst, f"{inst.opcode} of {operand} gives {inner}, not {out}")


shape_rule("all-reduce-done")(same_as_operand)  # the all-reduce ran at -start
