"""Shardings as tile layouts: which part of a global array each partition holds.

Why one representation: a module from JAX carries shardings in two spellings, XLA's HloSharding
(the OpSharding proto on parameters and the root: `{devices=[2,1]<=[2]}`, iota with a transpose,
`last_tile_dim_replicate`, explicit device lists, `{replicated}`, `{maximal device=k}`) and
Shardy's strings (`#sdy.sharding<@mesh, [{"x"}, {}]>` on manual computations, with the module's
`xla.sdy.meshes`). Both become a `TileLayout`: an array of partition ids of shape
[t_0, ..., t_{k-1}, r], where t_i is the number of tiles along data dimension i and r the number
of copies of each tile (replication). Partition `tiles[i_0, ..., i_{k-1}, j]` holds the tile
(i_0, ..., i_{k-1}). A dimension of n elements in t tiles has tiles of ceil(n / t) elements, the
last ones padded, as XLA shards unevenly. Anything else (manual or unreduced subgroups, sub-axes) is
an UnsupportedShardingError naming the form.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from hlo.schema import xla_data_pb2

_OpSharding = xla_data_pb2.OpSharding


class UnsupportedShardingError(ValueError):
    """A sharding form the SPMD pass does not handle; the message names it."""


@dataclass(frozen=True)
class TileLayout:
    """Partition ids by tile: shape [t_0, ..., t_{k-1}, r] (see the module docstring).

    `maximal` is the partition that alone holds a `{maximal device=k}` value (tiles then [[k]])."""

    tiles: np.ndarray
    maximal: int | None = None

    @property
    def tile_counts(self) -> tuple[int, ...]:
        return tuple(int(t) for t in self.tiles.shape[:-1])

    @property
    def is_replicated(self) -> bool:
        return self.maximal is None and all(t == 1 for t in self.tile_counts)

    def shard_dims(self, global_dims: tuple[int, ...], what: str) -> tuple[int, ...]:
        """The dimensions of each partition's tile of an array of `global_dims` (a maximal
        sharding's: the whole array). Uneven dimensions round up: the last tiles are padded."""
        if self.maximal is not None:
            return tuple(global_dims)
        counts = self.tile_counts
        if len(counts) != len(global_dims):
            raise UnsupportedShardingError(f"{what}: a sharding of {len(counts)} dimensions on an array of "
                                           f"rank {len(global_dims)}")
        return tuple(-(-n // t) for n, t in zip(global_dims, counts))

    def tile_index(self, partition: int) -> tuple[int, ...]:
        """The tile partition `partition` holds (a copy when replicated)."""
        where = np.argwhere(self.tiles == partition)
        if not len(where):
            raise UnsupportedShardingError(f"partition {partition} holds no tile of the sharding "
                                           f"{self.tiles.tolist()}")
        return tuple(int(i) for i in where[0][:-1])

    def gather_groups(self) -> list[list[int]]:
        """One group per copy of the whole array, listing its tiles' partitions in row-major tile
        order: an all-gather over these groups concatenates the tiles in that order."""
        return [self.tiles[..., j].ravel().tolist() for j in range(self.tiles.shape[-1])]


def same_tiles(a: TileLayout, b: TileLayout) -> bool:
    """Whether two layouts give every partition the same tile (however their copies are ordered)."""
    if a.maximal != b.maximal or a.tile_counts != b.tile_counts or a.tiles.size != b.tiles.size:
        return False
    return all(a.tile_index(int(p)) == b.tile_index(int(p)) for p in a.tiles.ravel())


def replicated(rank: int, num_partitions: int) -> TileLayout:
    return TileLayout(np.arange(num_partitions).reshape((1,) * rank + (num_partitions,)))


def _check_partitions(layout: TileLayout, num_partitions: int, what: str) -> TileLayout:
    ids = np.sort(layout.tiles.ravel())
    if layout.maximal is None and not np.array_equal(ids, np.arange(num_partitions)):
        raise UnsupportedShardingError(f"{what}: the sharding's devices {ids.tolist()} are not the program's "
                                       f"{num_partitions} partitions, each once")
    if layout.maximal is not None and not 0 <= layout.maximal < num_partitions:
        raise UnsupportedShardingError(f"{what}: maximal sharding on device {layout.maximal} of "
                                       f"{num_partitions} partitions")
    return layout


# -- XLA's HloSharding (OpSharding proto) ------------------------------------------------------

def _describe(s: _OpSharding) -> str:
    from google.protobuf import text_format

    return "{" + text_format.MessageToString(s, as_one_line=True) + "}"


def from_op_sharding(s: _OpSharding, rank: int, num_partitions: int, what: str) -> TileLayout:
    """The layout of an array of `rank` dimensions sharded by `s` (not a tuple sharding)."""
    if s.type == _OpSharding.REPLICATED:
        return replicated(rank, num_partitions)
    if s.type == _OpSharding.MAXIMAL:
        if len(s.tile_assignment_devices) != 1:
            raise UnsupportedShardingError(f"{what}: maximal sharding {_describe(s)}")
        k = int(s.tile_assignment_devices[0])
        return _check_partitions(TileLayout(np.array([k]).reshape((1,) * rank + (1,)), maximal=k),
                                 num_partitions, what)
    if s.type != _OpSharding.OTHER:
        raise UnsupportedShardingError(f"{what}: {_OpSharding.Type.Name(s.type).lower()} sharding "
                                       f"{_describe(s)} is not supported by the SPMD pass")
    dims = [int(d) for d in s.tile_assignment_dimensions]
    if s.iota_reshape_dims:
        reshape = [int(d) for d in s.iota_reshape_dims]
        perm = [int(p) for p in s.iota_transpose_perm] or list(range(len(reshape)))
        tiles = np.arange(math.prod(reshape)).reshape(reshape).transpose(perm).reshape(dims)
    elif s.tile_assignment_devices:
        tiles = np.array([int(d) for d in s.tile_assignment_devices]).reshape(dims)
    else:
        raise UnsupportedShardingError(f"{what}: tiled sharding without devices {_describe(s)}")
    extra = len(dims) - rank
    subgroups = [int(t) for t in s.last_tile_dims]
    if s.replicate_on_last_tile_dim:
        subgroups = [_OpSharding.REPLICATED]
    if extra != len(subgroups) or any(t != _OpSharding.REPLICATED for t in subgroups):
        kinds = ", ".join(_OpSharding.Type.Name(t).lower() for t in subgroups) or "none"
        raise UnsupportedShardingError(f"{what}: sharding {_describe(s)} has {extra} tile dimension(s) beyond "
                                       f"the array's {rank}, subgroups {kinds}: only replicated subgroups are "
                                       "supported")
    tiles = tiles.reshape(dims[:rank] + [-1])
    return _check_partitions(TileLayout(tiles), num_partitions, what)


# -- Shardy's strings --------------------------------------------------------------------------

@dataclass(frozen=True)
class Mesh:
    """A Shardy mesh: named axes with sizes, and the partition id at each mesh position."""

    axes: tuple[tuple[str, int], ...]
    device_ids: np.ndarray  # shape: the axis sizes

    @property
    def names(self) -> list[str]:
        return [a for a, _ in self.axes]


_MESH = re.compile(r'#sdy\.mesh<\[(?P<axes>[^\]]*)\](?:\s*,\s*device_ids=\[(?P<ids>[^\]]*)\])?\s*>')
_AXIS = re.compile(r'\s*"(?P<name>[^"]+)"\s*=\s*(?P<size>\d+)\s*')
_NAMED_MESH = re.compile(r'(?P<name>[A-Za-z_][\w.$-]*)\s*=\s*(?P<mesh>#sdy\.mesh<[^>]*>)')


def parse_mesh(text: str) -> Mesh:
    m = _MESH.fullmatch(text.strip())
    if not m:
        raise UnsupportedShardingError(f"Shardy mesh {text!r} is not understood by the SPMD pass")
    axes = []
    for part in filter(str.strip, m.group("axes").split(",")):
        a = _AXIS.fullmatch(part)
        if not a:
            raise UnsupportedShardingError(f"mesh axis {part.strip()!r} in {text!r} is not supported")
        axes.append((a.group("name"), int(a.group("size"))))
    sizes = [s for _, s in axes]
    count = math.prod(sizes)
    if m.group("ids") is not None:
        ids = np.array([int(v) for v in m.group("ids").split(",") if v.strip()])
        if ids.size != count:
            raise UnsupportedShardingError(f"mesh {text!r} lists {ids.size} devices for {count} positions")
    else:
        ids = np.arange(count)
    return Mesh(tuple(axes), ids.reshape(sizes))


def parse_meshes(text: str) -> dict[str, Mesh]:
    """The module's `xla.sdy.meshes` attribute: `{mesh = #sdy.mesh<...>, ...}`."""
    return {m.group("name"): parse_mesh(m.group("mesh")) for m in _NAMED_MESH.finditer(text)}


_TENSOR = re.compile(r'<\s*@(?P<mesh>[\w.$-]+)\s*,\s*\[(?P<dims>(?:[^\[\]{}]|\{[^{}]*\})*)\]'
                     r'(?P<rest>[^<>]*)>')
_DIM = re.compile(r'\{(?P<axes>[^{}]*)\}(?:p\d+)?')


def parse_sharding_list(text: str) -> list[tuple[str, list[list[str]], str]]:
    """(mesh name, axes per dimension, trailing text) of each sharding in a
    `#sdy.sharding<...>` or `#sdy.sharding_per_value<[...]>` string."""
    out = []
    for m in _TENSOR.finditer(text):
        dims = []
        for d in _DIM.finditer(m.group("dims")):
            axes = []
            for item in filter(None, (a.strip() for a in d.group("axes").split(","))):
                if item == "?":
                    continue
                if not re.fullmatch(r'"[^"]+"', item):
                    raise UnsupportedShardingError(f"Shardy axis {item} in {text!r} (sub-axes are not supported)")
                axes.append(item[1:-1])
            dims.append(axes)
        out.append((m.group("mesh"), dims, m.group("rest")))
    if not out:
        raise UnsupportedShardingError(f"Shardy sharding {text!r} is not understood by the SPMD pass")
    return out


def from_sdy(mesh: Mesh, dim_axes: list[list[str]], num_partitions: int, what: str,
             only_axes: frozenset[str] | None = None) -> TileLayout:
    """The layout of a Shardy sharding on `mesh`; with `only_axes`, only those axes tile (the
    manual axes of a manual computation: the others stay whole in its local values)."""
    names = mesh.names
    used: list[str] = []
    counts: list[int] = []
    for d, axes in enumerate(dim_axes):
        kept = [a for a in axes if only_axes is None or a in only_axes]
        if kept != axes[:len(kept)]:
            raise UnsupportedShardingError(f"{what}: dimension {d} is sharded on {axes}, with free axes before "
                                           "manual ones")
        for a in kept:
            if a not in names:
                raise UnsupportedShardingError(f"{what}: axis {a!r} is not in the mesh {names}")
            if a in used:
                raise UnsupportedShardingError(f"{what}: axis {a!r} shards two dimensions")
        used += kept
        counts.append(math.prod(dict(mesh.axes)[a] for a in kept))
    rest = [a for a in names if a not in used]
    order = [names.index(a) for a in used + rest]
    tiles = mesh.device_ids.transpose(order).reshape(counts + [-1])
    return _check_partitions(TileLayout(tiles), num_partitions, what)
