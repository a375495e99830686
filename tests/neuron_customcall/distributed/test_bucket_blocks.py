"""A bucket's buffers (distributed/blocks.py): handed out again only once no array refers to
them (a result, a view of it, a tensor made over it), touched when made, and at most KEEP_FREE
kept free."""
from __future__ import annotations

import numpy as np
import torch

from neuron_customcall.distributed.blocks import Block, BlockPool


def test_a_block_is_taken_again_only_once_nothing_refers_to_it() -> None:
    pool = BlockPool(100, np.float32, torch.from_numpy)
    first = pool.take()
    result = first.array[:90].reshape(9, 10)[1:]  # a view of a view: its base is the block's array
    assert pool.take() is not first
    del result
    assert pool.take() is first and len(pool) == 2
    held = torch.from_numpy(first.array[:10])  # a tensor over a result refers to it too
    assert pool.take() is not first
    del held
    assert pool.take() is first


def test_a_block_is_zero_filled_and_its_tensor_and_bytes_are_its_array() -> None:
    block = Block(64, np.dtype(np.int32), torch.from_numpy)
    assert block.array.dtype == np.int32 and not block.array.any()
    block.tensor += 7
    block.raw[:4] = np.int32(-1).tobytes()
    idle = block.idle()  # (before pytest's assertions keep views of the array)
    assert idle and block.array[0] == -1 and (block.array[1:] == 7).all()


def test_free_blocks_beyond_keep_free_are_dropped() -> None:
    pool = BlockPool(10, np.float64, lambda a: a, keep_free=2)
    results = [pool.take().array[:5] for _ in range(5)]
    assert len(pool) == 5
    results.clear()
    pool.take()
    assert len(pool) == 2
