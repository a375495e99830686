"""The SPMD pass: a sharding-annotated global module (JAX's jit with NamedSharding, shard_map,
pmap) -> the one module each partition runs (partition.py; the strategy and its cost are in
docs/pjrt.md). sharding.py reads XLA's and Shardy's sharding spellings into one tile layout."""
from neuron_customcall.compiler.spmd.partition import CUSTOM_CALLS, Partitioned, partition
from neuron_customcall.compiler.spmd.sharding import TileLayout, UnsupportedShardingError

__all__ = ["CUSTOM_CALLS", "Partitioned", "TileLayout", "UnsupportedShardingError", "partition"]
