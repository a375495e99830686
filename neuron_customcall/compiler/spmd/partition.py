"""The SPMD pass: a global (sharding-annotated) module -> the one module every partition runs.

Why this strategy: it is correct for every program without a sharding propagation of our own.
Outside manual regions every partition computes the GLOBAL values, exactly as the unpartitioned
program would:

- a sharded parameter arrives as the partition's tile and is all-gathered into the global array
  first (one all-gather over all partitions per sharded parameter);
- each result is sliced to the partition's tile with a dynamic-slice at offsets looked up by
  partition-id (a replicated result is returned whole);
- `xla.sdy.GlobalToLocalShape` (a shard_map's entry) slices the partition's tile of the global
  value per the manual computation's in_shardings; the manual body runs per partition with its own
  collectives; `xla.sdy.LocalToGlobalShape` all-gathers the bodies' tiles into global values
  (GSPMD's `SPMDFullToShardShape` / `SPMDShardToFullShape` likewise);
- sharding annotations (`Sharding`, `xla.sdy.FuncResultSharding` custom-calls) are the identity.

The cost: the work outside manual regions is done N times over instead of once split N ways, plus
one all-gather per sharded parameter and per manual result. Programs whose heavy work is inside
shard_map (or pmap, which JAX lowers to a manual computation) pay only the gathers at the edges.

The module keeps the parameters' and results' shardings (OpSharding on the parameters and the root,
and the module's spmd_parameters_shardings / spmd_output_sharding), which the frameworks read back
from the optimized program to learn each partition's shapes.
"""
from __future__ import annotations

import itertools
import logging
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import hlo
from hlo.schema import hlo_pb2, xla_data_pb2
from neuron_customcall.compiler.spmd import sharding as sh
from neuron_customcall.compiler.spmd.sharding import TileLayout, UnsupportedShardingError

log = logging.getLogger(__name__)

_OpSharding = xla_data_pb2.OpSharding

#: Custom-calls that only annotate a sharding: the identity on values.
ANNOTATIONS = frozenset({"Sharding", "xla.sdy.FuncResultSharding", "xla.sdy.ShardingConstraint"})
GLOBAL_TO_LOCAL = "xla.sdy.GlobalToLocalShape"
LOCAL_TO_GLOBAL = "xla.sdy.LocalToGlobalShape"
#: GSPMD's spelling of the same pair (JAX without Shardy, torch_xla's manual sharding): the tiling
#: is the operand's `Sharding` annotation, resp. the instruction's own sharding.
FULL_TO_SHARD = "SPMDFullToShardShape"
SHARD_TO_FULL = "SPMDShardToFullShape"
TO_LOCAL = frozenset({GLOBAL_TO_LOCAL, FULL_TO_SHARD})
TO_GLOBAL = frozenset({LOCAL_TO_GLOBAL, SHARD_TO_FULL})
#: Every custom-call target the pass rewrites.
CUSTOM_CALLS = ANNOTATIONS | TO_LOCAL | TO_GLOBAL


@dataclass
class Partitioned:
    """The per-partition module and the layouts of its parameters and (flat) results."""

    module: Any
    parameters: list[TileLayout] = field(default_factory=list)
    results: list[TileLayout] = field(default_factory=list)


class _Builder:
    """Adds instructions to one computation (fresh names, metadata of the instruction they stand
    for) and allocates channel ids for the collectives it makes."""

    def __init__(self, comp: Any, names: set[str], channels: itertools.count, num_partitions: int,
                 made: set[int], local_of: dict[int, tuple[TileLayout, Any]]) -> None:
        self.comp, self.names, self.channels, self.n = comp, names, channels, num_partitions
        self.made, self.local_of = made, local_of
        self.origin: Any = None

    def add(self, opcode: str, shape: Any, operands: list[Any], **attrs: Any) -> Any:
        proto = hlo_pb2.HloInstructionProto()
        if self.origin is not None:
            proto.metadata.CopyFrom(self.origin.attributes.metadata)
        for key, value in attrs.items():
            target = getattr(proto, key)
            if isinstance(value, list):
                target.extend(value)
            elif hasattr(target, "CopyFrom"):
                target.CopyFrom(value)
            else:
                setattr(proto, key, value)
        name = next(f"spmd.{opcode}.{k}" for k in itertools.count() if f"spmd.{opcode}.{k}" not in self.names)
        self.names.add(name)
        inst = self.comp.add(hlo.HloInstruction(name, opcode, shape, operands, attributes=proto))
        self.made.add(id(inst))
        return inst

    def constant(self, values: np.ndarray) -> Any:
        from hlo.ir.literal import numpy_to_literal

        shape = hlo.Shape.array("S32", values.shape)
        return self.add("constant", shape, [], literal=numpy_to_literal(values.astype(np.int32), shape))

    def reshape(self, x: Any, dims: tuple[int, ...]) -> Any:
        if tuple(x.shape.dimensions) == tuple(dims):
            return x
        return self.add("reshape", hlo.Shape.array(x.shape.element_type, dims), [x])

    def partition_id(self) -> Any:
        pid = self.add("partition-id", hlo.Shape.array("U32", ()), [])
        return self.add("convert", hlo.Shape.array("S32", ()), [pid])

    def all_gather(self, x: Any, dim: int, groups: list[list[int]]) -> Any:
        dims = list(x.shape.dimensions)
        dims[dim] *= len(groups[0])
        rg = [xla_data_pb2.ReplicaGroup(replica_ids=g) for g in groups]
        return self.add("all-gather", hlo.Shape.array(x.shape.element_type, dims), [x], dimensions=[dim],
                        replica_groups=rg, channel_id=next(self.channels), use_global_device_ids=True)

    # -- the two conversions ---------------------------------------------------------------------
    def local_tile(self, x: Any, layout: TileLayout, what: str) -> Any:
        """The partition's tile of the global value `x` (the value itself when replicated)."""
        if layout.is_replicated or layout.maximal is not None:
            return x
        known = self.local_of.get(id(x))
        if known is not None and sh.same_tiles(known[0], layout):
            return known[1]  # gathered from this very tiling: the tile itself
        global_dims = tuple(x.shape.dimensions)
        shard = layout.shard_dims(global_dims, what)
        x = self._padded(x, tuple(t * s for t, s in zip(layout.tile_counts, shard)))
        pid = self.partition_id()
        starts = []
        for d, (t, s) in enumerate(zip(layout.tile_counts, shard)):
            if t == 1:
                starts.append(self.constant(np.array(0)))
                continue
            table = np.array([layout.tile_index(p)[d] * s for p in range(self.n)])
            start = self.add("dynamic-slice", hlo.Shape.array("S32", (1,)), [self.constant(table), pid],
                             dynamic_slice_sizes=[1])
            starts.append(self.reshape(start, ()))
        return self.add("dynamic-slice", hlo.Shape.array(x.shape.element_type, shard), [x, *starts],
                        dynamic_slice_sizes=list(shard))

    def global_value(self, x: Any, layout: TileLayout, global_dims: tuple[int, ...], what: str) -> Any:
        """The global array of which `x` is the partition's tile (every partition gets it whole)."""
        value = self._gathered(x, layout, global_dims, what)
        if value is not x and layout.maximal is None:
            self.local_of[id(value)] = (layout, x)
        return value

    def _gathered(self, x: Any, layout: TileLayout, global_dims: tuple[int, ...], what: str) -> Any:
        if layout.is_replicated:
            return x
        et = x.shape.element_type
        if layout.maximal is not None:  # the value of partition k, everywhere
            one = self.reshape(x, (1, *global_dims))
            every = self.all_gather(one, 0, [list(range(self.n))])
            return self.reshape(self._slice_first(every, layout.maximal), global_dims)
        shard = layout.shard_dims(global_dims, what)
        counts = layout.tile_counts
        tiled = [d for d, t in enumerate(counts) if t > 1]
        groups = layout.gather_groups()
        padded = tuple(t * s for t, s in zip(counts, shard))
        if len(tiled) == 1:  # the tiles concatenate along that dimension, in group order
            return self._sliced(self.all_gather(x, tiled[0], groups), global_dims)
        rank = len(shard)
        gathered = self.all_gather(self.reshape(x, (1, *shard)), 0, groups)
        split = self.reshape(gathered, (*counts, *shard))
        perm = [k for d in range(rank) for k in (d, rank + d)]
        moved = self.add("transpose", hlo.Shape.array(et, [split.shape.dimensions[p] for p in perm]), [split],
                         dimensions=perm)
        return self._sliced(self.reshape(moved, padded), global_dims)

    def _padded(self, x: Any, dims: tuple[int, ...]) -> Any:
        """`x` padded at the high end to `dims` (uneven tiles: XLA's padding, here zeros)."""
        if tuple(x.shape.dimensions) == dims:
            return x
        from hlo.ir.dtypes import numpy_dtype
        from hlo.ir.literal import numpy_to_literal

        et = x.shape.element_type
        zero_shape = hlo.Shape.array(et, ())
        zero = self.add("constant", zero_shape, [], literal=numpy_to_literal(np.zeros((), numpy_dtype(et)), zero_shape))
        config = xla_data_pb2.PaddingConfig(dimensions=[
            xla_data_pb2.PaddingConfig.PaddingConfigDimension(edge_padding_low=0, edge_padding_high=d - n,
                                                              interior_padding=0)
            for n, d in zip(x.shape.dimensions, dims)])
        return self.add("pad", hlo.Shape.array(et, dims), [x, zero], padding_config=config)

    def _sliced(self, x: Any, dims: tuple[int, ...]) -> Any:
        """The leading `dims` of `x` (the padding of uneven tiles dropped)."""
        if tuple(x.shape.dimensions) == tuple(dims):
            return x
        sl = [hlo_pb2.HloInstructionProto.SliceDimensions(start=0, limit=n, stride=1) for n in dims]
        return self.add("slice", hlo.Shape.array(x.shape.element_type, dims), [x], slice_dimensions=sl)

    def _slice_first(self, x: Any, k: int) -> Any:
        dims = list(x.shape.dimensions)
        sl = [hlo_pb2.HloInstructionProto.SliceDimensions(start=k, limit=k + 1, stride=1)]
        sl += [hlo_pb2.HloInstructionProto.SliceDimensions(start=0, limit=n, stride=1) for n in dims[1:]]
        return self.add("slice", hlo.Shape.array(x.shape.element_type, [1, *dims[1:]]), [x], slice_dimensions=sl)


def _through_annotations(inst: Any, users: dict[Any, list[Any]]) -> list[tuple[Any, int]]:
    """(user, operand index) of each use of `inst`, looking through sharding annotations."""
    found = []
    for user in users.get(inst, []):
        if user.opcode == "custom-call" and user.attributes.custom_call_target in ANNOTATIONS:
            found += _through_annotations(user, users)
        else:
            found += [(user, k) for k, o in enumerate(user.operands) if o is inst]
    return found


def _source(inst: Any) -> tuple[Any, int] | None:
    """(LocalToGlobalShape custom-call, result index) whose value `inst` is, looking through
    annotations and tuple plumbing; None if it is something else."""
    for _ in range(64):  # bounded: plumbing chains are short
        if inst.opcode == "custom-call" and inst.attributes.custom_call_target in ANNOTATIONS:
            inst = inst.operands[0]
        elif inst.opcode == "custom-call" and inst.attributes.custom_call_target in TO_GLOBAL:
            return (inst, 0) if not inst.shape.is_tuple else None
        elif inst.opcode == "get-tuple-element":
            src = inst.operands[0]
            k = inst.attributes.tuple_index
            if src.opcode == "tuple":
                inst = src.operands[k]
            elif src.opcode == "custom-call" and src.attributes.custom_call_target in TO_GLOBAL:
                return src, k
            else:
                return None
        else:
            return None
    return None


def _annotated(full_to_shard: Any) -> _OpSharding:
    """The tiling a GSPMD SPMDFullToShardShape cuts: its operand's `Sharding` annotation."""
    op = full_to_shard.operands[0] if full_to_shard.operands else None
    if op is None or op.opcode != "custom-call" or op.attributes.custom_call_target != "Sharding" or \
            not op.attributes.HasField("sharding"):
        raise UnsupportedShardingError(f"{FULL_TO_SHARD} {full_to_shard.name}: its operand is not a Sharding "
                                       "annotation")
    return op.attributes.sharding


def _drop_unused(comp: Any, made: set[int]) -> None:
    """Removes instructions the pass made that nothing uses any more (a gather whose tile a
    GlobalToLocalShape took directly)."""
    while True:
        used = {id(o) for i in comp.instructions for o in i.operands + i.control_predecessors}
        keep = [i for i in comp.instructions if id(i) not in made or id(i) in used or i is comp.root]
        if len(keep) == len(comp.instructions):
            return
        comp.instructions = keep


def _replace_uses(comp: Any, old: Any, new: Any, users: list[Any]) -> None:
    for user in users:
        user.operands = [new if o is old else o for o in user.operands]
    if comp.root is old:
        comp.root = new


def _topological(comp: Any) -> None:
    """Reorders the computation's instructions so that operands come first (XLA's proto order),
    keeping the original order otherwise."""
    order, done = [], set()
    for inst in comp.instructions:
        stack = [(inst, iter(inst.operands + inst.control_predecessors))]
        if id(inst) in done:
            continue
        done.add(id(inst))
        while stack:
            node, it = stack[-1]
            nxt = next((o for o in it if id(o) not in done), None)
            if nxt is None:
                stack.pop()
                order.append(node)
            else:
                done.add(id(nxt))
                stack.append((nxt, iter(nxt.operands + nxt.control_predecessors)))
    comp.instructions = order


def _array_shape(inst: Any, what: str) -> tuple[int, ...]:
    if not inst.shape.is_array:
        raise UnsupportedShardingError(f"{what}: a {inst.shape.element_type.lower()} value of a partitioned "
                                       "program (only arrays are supported)")
    return tuple(inst.shape.dimensions)


def _layout_of(inst: Any, rank: int, n: int, what: str) -> TileLayout:
    if not inst.attributes.HasField("sharding"):
        return sh.replicated(rank, n)
    s = inst.attributes.sharding
    if s.type == _OpSharding.TUPLE:
        raise UnsupportedShardingError(f"{what}: a tuple sharding on an array")
    return sh.from_op_sharding(s, rank, n, what)


class _Pass:
    def __init__(self, module: Any, num_partitions: int) -> None:
        self.module, self.n = module, num_partitions
        self.names = {i.name for i in module.instructions()}
        top = max((int(i.attributes.channel_id) for i in module.instructions()), default=0)
        self.channels = itertools.count(top + 1)
        attrs = dict(module.attributes.frontend_attributes.map)
        self.meshes = sh.parse_meshes(attrs.get("xla.sdy.meshes", ""))
        self.dead: set[int] = set()  # ids of the instructions the pass replaced
        self.made: set[int] = set()  # ids of the instructions the pass made
        self.inferred: dict[int, TileLayout] = {}  # parameter layouts chosen for unspecified shardings
        self.inferred_results: dict[int, TileLayout] = {}  # the same for results, by result index
        self.root_sharding: _OpSharding | None = None  # the program's result sharding, if it gives one
        self.full_to_shard: dict[int, _OpSharding] = {}  # SPMDFullToShardShape -> its operand's sharding
        self.local_of: dict[int, tuple[TileLayout, Any]] = {}  # global value -> (layout, its local tile)

    def builder(self, comp: Any, origin: Any = None) -> _Builder:
        b = _Builder(comp, self.names, self.channels, self.n, self.made, self.local_of)
        b.origin = origin
        return b

    def run(self) -> Partitioned:
        out = Partitioned(self.module)
        entry = self.module.entry
        for comp in self.module.computations:
            for inst in comp.instructions:
                if inst.opcode == "custom-call" and inst.attributes.custom_call_target == FULL_TO_SHARD:
                    self.full_to_shard[id(inst)] = _annotated(inst)
        if entry.root.attributes.HasField("sharding"):
            self.root_sharding = _OpSharding()
            self.root_sharding.CopyFrom(entry.root.attributes.sharding)
        self._infer_unspecified(entry)
        users = entry.users()
        for p in entry.parameters:
            what = f"parameter {p.attributes.parameter_number} ({p.name})"
            dims = _array_shape(p, what)
            layout = self.inferred.get(id(p)) or _layout_of(p, len(dims), self.n, what)
            out.parameters.append(layout)
            if not layout.is_replicated and layout.maximal is None:
                p.shape = hlo.Shape.array(p.shape.element_type, layout.shard_dims(dims, what))
            p.attributes.sharding.CopyFrom(_op_sharding(layout))
            if layout.is_replicated:
                continue
            value = self.builder(entry, p).global_value(p, layout, dims, what)
            _replace_uses(entry, p, value, users[p])
        touched = {id(entry)}
        for comp in list(self.module.computations):
            users = comp.users()
            for inst in list(comp.instructions):
                if inst.opcode == "custom-call" and self._custom_call(comp, inst, users):
                    touched.add(id(comp))
        out.results = self._results(entry)
        for comp in self.module.computations:
            if id(comp) in touched:
                comp.instructions = [i for i in comp.instructions if id(i) not in self.dead]
                _drop_unused(comp, self.made)
                _topological(comp)
        self._signature(entry, out)
        return out

    def _manual_layouts(self, inst: Any) -> list[TileLayout]:
        """The layouts of the values of a GlobalToLocalShape (in_shardings) or LocalToGlobalShape
        (out_shardings) custom-call, over its manual axes."""
        target = inst.attributes.custom_call_target
        if target in (FULL_TO_SHARD, SHARD_TO_FULL):
            s = self.full_to_shard[id(inst)] if target == FULL_TO_SHARD else inst.attributes.sharding
            rank = len(inst.shape.dimensions)
            return [sh.from_op_sharding(s, rank, self.n, f"{target} {inst.name}")]
        attrs = inst.frontend_attributes_dict
        key = "xla.sdy.in_shardings" if target == GLOBAL_TO_LOCAL else "xla.sdy.out_shardings"
        manual = frozenset(_manual_axes(attrs.get("xla.sdy.manual_axes", ""), inst.name))
        layouts = []
        for k, (mesh_name, dims, rest) in enumerate(sh.parse_sharding_list(attrs.get(key, ""))):
            what = f"{target} {inst.name} value {k}"
            if rest.strip(", "):
                raise UnsupportedShardingError(f"{what}: sharding option {rest.strip(', ')!r} is not supported")
            if mesh_name not in self.meshes:
                raise UnsupportedShardingError(f"{what}: mesh {mesh_name!r} is not in the module's xla.sdy.meshes")
            layouts.append(sh.from_sdy(self.meshes[mesh_name], dims, self.n, what, manual))
        return layouts

    def _infer_unspecified(self, entry: Any) -> None:
        """Shardings the program leaves to the compiler (parameters and results without one), chosen
        as XLA's propagation would in the common case: a parameter used only by shard_map entries
        takes their in_sharding, a result that is a shard_map's output its out_sharding (so that a
        shard_map, or pmap, under jit needs no gather at its edges). Everything else is replicated."""
        users = entry.users()
        for p in entry.parameters:
            if p.attributes.HasField("sharding"):
                continue
            found = []
            for user, k in _through_annotations(p, users):
                if user.opcode != "custom-call" or user.attributes.custom_call_target not in TO_LOCAL:
                    found = []
                    break
                found.append(self._manual_layouts(user)[k])
            if found and all(sh.same_tiles(found[0], lay) for lay in found[1:]):
                self.inferred[id(p)] = found[0]
        root = entry.root
        leaves = root.operands if root.opcode == "tuple" and root.shape.is_tuple else [root]
        for k, leaf in enumerate([] if root.attributes.HasField("sharding") else leaves):
            source = _source(leaf)
            if source is not None:
                self.inferred_results[k] = self._manual_layouts(source[0])[source[1]]

    def _custom_call(self, comp: Any, inst: Any, users: dict[Any, list[Any]]) -> bool:
        target = inst.attributes.custom_call_target
        if target in ANNOTATIONS:
            _replace_uses(comp, inst, inst.operands[0], users[inst])
            self.dead.add(id(inst))
            return True
        if target not in TO_LOCAL | TO_GLOBAL:
            if target.startswith("xla.sdy.") or target.startswith("SPMD"):
                raise UnsupportedShardingError(f"custom-call {target!r} ({inst.name}) is not supported by the "
                                               "SPMD pass")
            return False
        layouts = self._manual_layouts(inst)
        tuple_out = inst.shape.is_tuple
        outs = list(inst.shape.tuple_shapes) if tuple_out else [inst.shape]
        if len(layouts) != len(inst.operands) or len(outs) != len(inst.operands):
            raise UnsupportedShardingError(f"{target} {inst.name}: {len(inst.operands)} operands, "
                                           f"{len(outs)} results and {len(layouts)} shardings")
        b = self.builder(comp, inst)
        values = []
        for k, (operand, out_shape, layout) in enumerate(zip(inst.operands, outs, layouts)):
            what = f"{target} {inst.name} value {k}"
            if target in TO_LOCAL:
                value = b.local_tile(operand, layout, what)
            else:
                value = b.global_value(operand, layout, tuple(out_shape.dimensions), what)
            if tuple(value.shape.dimensions) != tuple(out_shape.dimensions):
                raise UnsupportedShardingError(f"{what}: its sharding gives {list(value.shape.dimensions)}, the "
                                               f"program says {list(out_shape.dimensions)}")
            values.append(value)
        self.dead.add(id(inst))
        if not tuple_out:
            _replace_uses(comp, inst, values[0], users[inst])
            return True
        for user in users[inst]:
            if user.opcode != "get-tuple-element":
                raise UnsupportedShardingError(f"{target} {inst.name} is used by {user.opcode} {user.name}")
            _replace_uses(comp, user, values[user.attributes.tuple_index], users[user])
            self.dead.add(id(user))
        if comp.root is inst:
            comp.root = b.add("tuple", inst.shape, values)
        return True

    def _results(self, entry: Any) -> list[TileLayout]:
        root = entry.root
        b = self.builder(entry, root)
        if not root.shape.is_tuple:
            dims = _array_shape(root, "the result")
            layout = self.inferred_results.get(0) or self._given_layout(len(dims), "the result")
            entry.root = b.local_tile(root, layout, "the result")
            entry.root.attributes.sharding.CopyFrom(_op_sharding(layout))
            return [layout]
        given = self.root_sharding
        if given is not None and given.type != _OpSharding.TUPLE and given.type != _OpSharding.REPLICATED:
            raise UnsupportedShardingError("the result tuple has a non-tuple sharding")
        layouts, leaves = [], []
        for k, s in enumerate(root.shape.tuple_shapes):
            what = f"result {k}"
            if not s.is_array:
                raise UnsupportedShardingError(f"{what}: a nested {s.element_type.lower()} result")
            elem = root.operands[k] if root.opcode == "tuple" else \
                b.add("get-tuple-element", s, [root], tuple_index=k)
            if given is not None and given.type == _OpSharding.TUPLE:
                layout = sh.from_op_sharding(given.tuple_shardings[k], len(s.dimensions), self.n, what)
            else:
                layout = self.inferred_results.get(k) or sh.replicated(len(s.dimensions), self.n)
            layouts.append(layout)
            leaves.append(b.local_tile(elem, layout, what))
        new_root = b.add("tuple", hlo.Shape.tuple_of([leaf.shape for leaf in leaves]), leaves)
        new_root.attributes.sharding.CopyFrom(_tuple_sharding(layouts))
        if root.opcode == "tuple":
            self.dead.add(id(root))
        entry.root = new_root
        return layouts

    def _given_layout(self, rank: int, what: str) -> TileLayout:
        s = self.root_sharding
        if s is None:
            return sh.replicated(rank, self.n)
        if s.type == _OpSharding.TUPLE:
            raise UnsupportedShardingError(f"{what}: a tuple sharding on an array")
        return sh.from_op_sharding(s, rank, self.n, what)

    def _signature(self, entry: Any, out: Partitioned) -> None:
        """The entry's program shape, the host program shape and the spmd_* fields: per partition."""
        ps = entry.attributes.program_shape
        ps.Clear()
        for p in entry.parameters:
            p.shape.to_proto(ps.parameters.add())
            ps.parameter_names.append(p.name)
        entry.root.shape.to_proto(ps.result)
        m = self.module.attributes
        m.host_program_shape.CopyFrom(ps)
        del m.spmd_parameters_shardings[:]
        m.spmd_parameters_shardings.extend(_op_sharding(layout) for layout in out.parameters)
        m.spmd_output_sharding.CopyFrom(entry.root.attributes.sharding)


def _manual_axes(text: str, where: str) -> list[str]:
    m = re.fullmatch(r'\s*#sdy<manual_axes\{(?P<axes>[^}]*)\}>\s*', text)
    if not m:
        raise UnsupportedShardingError(f"{where}: manual axes {text!r} are not understood by the SPMD pass")
    return [a.strip().strip('"') for a in m.group("axes").split(",") if a.strip()]


def _op_sharding(layout: TileLayout) -> _OpSharding:
    """XLA's OpSharding of a layout (explicit device list; what the frameworks read back)."""
    if layout.maximal is not None:
        return _OpSharding(type=_OpSharding.MAXIMAL, tile_assignment_dimensions=[1],
                           tile_assignment_devices=[layout.maximal])
    if layout.is_replicated:
        return _OpSharding(type=_OpSharding.REPLICATED)
    tiles = layout.tiles
    replicate = tiles.shape[-1] > 1
    dims = list(tiles.shape) if replicate else list(tiles.shape[:-1])
    return _OpSharding(type=_OpSharding.OTHER, tile_assignment_dimensions=dims,
                       tile_assignment_devices=tiles.ravel().tolist(), replicate_on_last_tile_dim=replicate)


def _tuple_sharding(layouts: list[TileLayout]) -> _OpSharding:
    return _OpSharding(type=_OpSharding.TUPLE, tuple_shardings=[_op_sharding(lay) for lay in layouts])


def partition(module: Any, num_partitions: int) -> Partitioned:
    """Rewrites `module` (an hlo.HloModule, in place) into the per-partition program of an SPMD
    program of `num_partitions` partitions. UnsupportedShardingError names what it can not do."""
    if num_partitions < 1:
        raise UnsupportedShardingError(f"{num_partitions} partitions")
    result = _Pass(module, num_partitions).run()
    log.debug("SPMD pass: %d partitions, parameters %s, results %s", num_partitions,
              [lay.tile_counts for lay in result.parameters], [lay.tile_counts for lay in result.results])
    return result


