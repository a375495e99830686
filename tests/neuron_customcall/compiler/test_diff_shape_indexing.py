"""Differential tests against XLA:CPU: data movement and indexing (broadcast, reshape, transpose,
slice, concatenate, pad with negative and interior padding, reverse, iota, dynamic slices with
XLA's clamping, gather and scatter with several update computations, embeddings)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from tests.neuron_customcall.compiler.ours import CASE_ARGS, case, check_case, rand

A = rand(3, 4, 5, seed=1)
M = rand(6, 5, seed=2)
V = rand(7, seed=3)
IDX = np.array([3, 0, 5, 5, 1], np.int32)
OOB = np.array([7, -1, 2, 100], np.int32)

SHAPE = [
    case("broadcast", lambda x: jnp.broadcast_to(x, (2, 6, 5)), M),
    case("broadcast_in_dim", lambda x: lax.broadcast_in_dim(x, (5, 2, 7), (2,)), V[:7]),
    case("broadcast_scalar", lambda x: jnp.full((3, 2), x), np.float32(2.5)),
    case("reshape", lambda x: x.reshape(5, 12), A), case("transpose", lambda x: x.transpose(2, 0, 1), A),
    case("transpose_then_reshape", lambda x: x.transpose(1, 0, 2).reshape(4, 15), A),
    case("slice", lambda x: x[1:3, ::2, 4:0:-1], A), case("slice_strided", lambda x: lax.slice(x, (0, 1), (6, 5), (4, 3)), M),
    case("concatenate", lambda a, b: jnp.concatenate([a, b, a], axis=1), M, M * 2),
    case("pad", lambda x: jnp.pad(x, ((1, 2), (0, 3))), M),
    case("pad_negative_interior", lambda x: lax.pad(x, np.float32(-1), ((-1, 2, 1), (2, -3, 2))), M),
    case("pad_interior_only", lambda x: lax.pad(x, np.float32(9), ((0, 0, 3),)), V),
    case("pad_edge_reflect", lambda x: jnp.pad(x, ((2, 2), (1, 1)), mode="reflect"), M),
    case("reverse", lambda x: jnp.flip(x, (0, 2)), A), case("roll", lambda x: jnp.roll(x, 2, axis=1), M),
    case("iota", lambda: lax.broadcasted_iota(jnp.int32, (3, 4), 1)),
    case("iota_f32", lambda: jnp.arange(10, dtype=jnp.float32) * 0.5),
    case("tril", jnp.tril, M), case("eye", lambda: jnp.eye(4, 6, k=1)),
    case("squeeze_expand", lambda x: jnp.expand_dims(x[:, :1, :].squeeze(1), 0), A),
    case("tile", lambda x: jnp.tile(x, (2, 3)), M), case("repeat", lambda x: jnp.repeat(x, 3, axis=0), M),
    case("tuple_outputs", lambda a, b: (a + 1, (b * 2, a.sum())), M, V),
    case("identity_param", lambda a, b: (b, a), M, V),
]

INDEXING = [
    case("dynamic_slice", lambda x, i: lax.dynamic_slice(x, (i, 1), (3, 2)), M, np.int32(2)),
    case("dynamic_slice_clamped_high", lambda x, i: lax.dynamic_slice(x, (i, i), (3, 2)), M, np.int32(100)),
    case("dynamic_slice_clamped_negative", lambda x, i: lax.dynamic_slice(x, (i, 0), (3, 5)), M, np.int32(-4)),
    case("dynamic_update_slice", lambda x, u, i: lax.dynamic_update_slice(x, u, (i, 2)), M, rand(2, 2), np.int32(3)),
    case("dynamic_update_slice_clamped", lambda x, u, i: lax.dynamic_update_slice(x, u, (i, i)), M, rand(2, 3), np.int32(9)),
    case("dynamic_index", lambda x, i: x[i], M, np.int32(-2)),
    case("gather_take", lambda x, i: x[i], M, IDX), case("gather_take_2d", lambda x, i: x[:, i[:3]], M, IDX),
    case("gather_clamped", lambda x, i: jnp.take(x, i, axis=0, mode="clip"), M, OOB),
    case("gather_fill", lambda x, i: jnp.take(x, i, axis=0, mode="fill", fill_value=-7.0), M, OOB),
    case("gather_pairs", lambda x, i, j: x[i, j], M, IDX, np.array([0, 4, 1, 2, 3], np.int32)),
    case("take_along_axis", lambda x, i: jnp.take_along_axis(x, i, axis=1), M, rand(6, 3, dtype=np.int32, low=0, high=4)),
    case("embedding", lambda t, i: t[i].sum(1), rand(10, 4), rand(3, 5, dtype=np.int32, low=0, high=9)),
    case("gather_batched_vmap", jax.vmap(lambda x, i: x[i]), rand(4, 6, 3), rand(4, 2, dtype=np.int32, low=0, high=5)),
    case("scatter_add_duplicates", lambda x, i: x.at[i].add(1.5), M, IDX),
    case("scatter_set", lambda x, i: x.at[i].set(-2.0), M, np.array([1, 4], np.int32)),
    case("scatter_mul", lambda x, i, u: x.at[i].multiply(u), M, IDX, rand(5, 5, seed=9)),
    case("scatter_max", lambda x, i, u: x.at[i].max(u), M, IDX, rand(5, 5, seed=9)),
    case("scatter_min", lambda x, i, u: x.at[i].min(u), M, IDX, rand(5, 5, seed=9)),
    case("scatter_oob_dropped", lambda x, i: x.at[i].add(10.0, mode="drop"), M, OOB),
    case("scatter_2d_points", lambda x, i, j: x.at[i, j].add(1.0), M, IDX, np.array([0, 4, 1, 4, 3], np.int32)),
    case("scatter_int", lambda x, i: x.at[i].add(3), rand(6, 2, dtype=np.int32), IDX),
    case("scatter_apply", lambda x, i: x.at[i].apply(jnp.sin), M, IDX),
    case("segment_sum", lambda d, s: jax.ops.segment_sum(d, s, num_segments=4), M, np.array([0, 0, 1, 3, 3, 2], np.int32)),
    case("segment_max", lambda d, s: jax.ops.segment_max(d, s, num_segments=4), M, np.array([0, 0, 1, 3, 3, 2], np.int32)),
    case("embedding_grad", jax.grad(lambda t, i: (t[i] ** 2).sum()), rand(10, 4), rand(3, 5, dtype=np.int32, low=0, high=9)),
    case("one_hot", lambda i: jax.nn.one_hot(i, 6), IDX),
    case("scatter_batching_dims_vmap", jax.vmap(lambda x, i, u: x.at[i].add(u)), rand(4, 6, 3),
         rand(4, 2, dtype=np.int32, low=0, high=5), rand(4, 2, 3, seed=2)),
    case("scatter_set_vmap_out_of_bounds", jax.vmap(lambda x, i: x.at[i].set(7.0)), rand(4, 6),
         rand(4, 3, dtype=np.int32, low=-2, high=8)),
]


@pytest.mark.parametrize(CASE_ARGS, SHAPE + INDEXING)
def test_matches_xla_cpu(f, args, x64, rtol, atol):
    check_case(f, args, x64, rtol, atol)
