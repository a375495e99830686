"""Differential sweep over the torch API surface on torch_xla: each graph's LoweringContext HLO
through our backend against torch_xla's PJRT CPU device (pooling with indices, transposed and 3-D
convolutions, norms, scatter-reduce, index_add, interpolation, losses, f16/bf16, integer ops)."""
from __future__ import annotations

import numpy as np
import pytest

from tests.neuron_customcall.compiler.ours import assert_close, rand, run_torch_xla

torch = pytest.importorskip("torch")
F = torch.nn.functional


def T(dev, *shape, seed=0, **kw):
    return torch.from_numpy(rand(*shape, seed=seed, **kw)).to(dev)

ops = {
 "cumprod": lambda d: [T(d, 4, 5).cumprod(1)],
 "logcumsumexp": lambda d: [torch.logcumsumexp(T(d, 4, 5), 1)],
 "cummax": lambda d: list(torch.cummax(T(d, 4, 5), 1)),
 "kthvalue": lambda d: list(torch.kthvalue(T(d, 4, 7), 3, dim=1)),
 "median": lambda d: [T(d, 4, 7).median(1).values],
 "mode_like_sort_stable": lambda d: list(torch.sort(T(d, 3, 9, dtype=np.int32, low=0, high=3), dim=1, stable=True)),
 "argsort_desc": lambda d: [torch.argsort(T(d, 4, 6), 1, descending=True)],
 "unfold": lambda d: [F.unfold(T(d, 1, 2, 6, 6), 3, stride=2)],
 "fold": lambda d: [F.fold(T(d, 1, 8, 9), (4, 4), 2)],
 "conv_transpose2d": lambda d: [F.conv_transpose2d(T(d, 2, 4, 5, 5), T(d, 4, 3, 3, 3, seed=1), stride=2, padding=1, output_padding=1)],
 "conv1d_dilated_groups": lambda d: [F.conv1d(T(d, 2, 4, 12), T(d, 6, 2, 3, seed=1), dilation=2, groups=2)],
 "conv3d": lambda d: [F.conv3d(T(d, 1, 2, 5, 5, 5), T(d, 3, 2, 2, 2, 2, seed=1), padding=1)],
 "max_pool1d_indices": lambda d: list(F.max_pool1d(T(d, 2, 3, 10), 3, stride=2, return_indices=True)),
 "avg_pool2d_ceil": lambda d: [F.avg_pool2d(T(d, 1, 2, 7, 7), 3, stride=2, ceil_mode=True, count_include_pad=False)],
 "interpolate_bilinear": lambda d: [F.interpolate(T(d, 1, 2, 4, 4), scale_factor=2, mode="bilinear", align_corners=False)],
 "group_norm": lambda d: [F.group_norm(T(d, 2, 6, 4, 4), 3)],
 "instance_norm": lambda d: [F.instance_norm(T(d, 2, 3, 5, 5))],
 "embedding_bag_like": lambda d: [F.embedding(torch.tensor([[1, 2], [3, 1]], device=d), T(d, 5, 4)).sum(1)],
 "gather_scatter_reduce": lambda d: [torch.zeros(3, 4, device=d).scatter_reduce(0, torch.tensor([[0, 1, 2, 0]], device=d), T(d, 1, 4), "amax", include_self=False)],
 "index_add": lambda d: [torch.zeros(5, 3, device=d).index_add(0, torch.tensor([0, 2, 2], device=d), T(d, 3, 3))],
 "masked_fill": lambda d: [T(d, 4, 4).masked_fill(T(d, 4, 4, seed=1) > 0, -1e9)],
 "triu_tril": lambda d: [torch.triu(T(d, 5, 5), 1), torch.tril(T(d, 5, 5), -1)],
 "roll": lambda d: [torch.roll(T(d, 4, 5), shifts=(1, -2), dims=(0, 1))],
 "repeat_interleave": lambda d: [torch.repeat_interleave(T(d, 3, 2), 2, dim=0)],
 "einsum": lambda d: [torch.einsum("bij,bjk->bik", T(d, 2, 3, 4), T(d, 2, 4, 5, seed=1))],
 "baddbmm": lambda d: [torch.baddbmm(T(d, 2, 3, 5), T(d, 2, 3, 4, seed=1), T(d, 2, 4, 5, seed=2), beta=0.5, alpha=2.0)],
 "linalg_norm": lambda d: [torch.linalg.vector_norm(T(d, 4, 5), ord=3, dim=1)],
 "logsumexp": lambda d: [torch.logsumexp(T(d, 4, 5), 1)],
 "std_var": lambda d: [T(d, 4, 5).std(1), T(d, 4, 5).var(0, unbiased=False)],
 "int_ops": lambda d: [T(d, 4, 5, dtype=np.int64) // 3, T(d, 4, 5, dtype=np.int64).remainder(-3), torch.bitwise_left_shift(T(d, 3, dtype=np.int32, low=0, high=5), 3)],
 "uint8_ops": lambda d: [(T(d, 6, dtype=np.uint8, low=0, high=255) + 200), T(d, 6, dtype=np.uint8, low=0, high=255) // 7],
 "float16": lambda d: [(T(d, 4, 5).half() * 3).exp().float(), T(d, 4, 5).half().sum(1)],
 "bf16_matmul": lambda d: [T(d, 4, 5).bfloat16() @ T(d, 5, 3, seed=1).bfloat16()],
 "where_nan": lambda d: [torch.nan_to_num(torch.log(T(d, 4, 5)), nan=0.0, neginf=-5.0)],
 "clamp_tensor": lambda d: [torch.clamp(T(d, 4, 5), min=T(d, 4, 5, seed=1), max=T(d, 4, 5, seed=1) + 1)],
 "lerp_addcmul": lambda d: [torch.lerp(T(d, 4), T(d, 4, seed=1), 0.3), torch.addcmul(T(d, 4), T(d, 4, seed=1), T(d, 4, seed=2), value=0.5)],
 "hardswish_mish": lambda d: [F.hardswish(T(d, 8)), F.mish(T(d, 8)), F.leaky_relu(T(d, 8), 0.1), F.elu(T(d, 8))],
 "softplus_logsigmoid": lambda d: [F.softplus(T(d, 8)), F.logsigmoid(T(d, 8))],
 "ctc_like_logsoftmax_nll_2d": lambda d: [F.cross_entropy(T(d, 2, 5, 3), torch.tensor([[0, 4, 1], [2, 2, 3]], device=d))],
 "mse_smoothl1_bce": lambda d: [F.mse_loss(T(d, 5), T(d, 5, seed=1)), F.smooth_l1_loss(T(d, 5), T(d, 5, seed=1)),
                                F.binary_cross_entropy_with_logits(T(d, 5), (T(d, 5, seed=1) > 0).float())],
 "pixel_shuffle": lambda d: [F.pixel_shuffle(T(d, 1, 8, 3, 3), 2)],
 "grid_like_affine": lambda d: [F.affine_grid(T(d, 2, 2, 3), (2, 1, 4, 4), align_corners=False)],
 "topk_smallest": lambda d: list(torch.topk(T(d, 3, 8), 3, dim=1, largest=False)),
 "any_all": lambda d: [(T(d, 4, 5) > 0).any(1), (T(d, 4, 5) > -2).all(0)],
 "argmin_keepdim": lambda d: [T(d, 4, 5).argmin(1, keepdim=True)],
 "flip_stack_chunk": lambda d: [torch.stack(torch.chunk(T(d, 6, 4).flip(0), 3), 0)],
}


@pytest.mark.parametrize("name", sorted(ops))
def test_torch_op_matches_torch_xla_cpu(name):
    assert_close(*run_torch_xla(ops[name]), rtol=1e-3, atol=1e-3)
