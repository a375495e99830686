"""Differential tests against torch_xla's PJRT CPU device: the LoweringContext HLO of each graph
runs through our backend on the same parameter values (`parameter_id_tensor_mapping`)."""
from __future__ import annotations

import numpy as np
import pytest

from tests.neuron_customcall.compiler.ours import assert_close, rand, run_torch_xla

torch = pytest.importorskip("torch")
F = torch.nn.functional


def _t(dev, *shape, seed=0, dtype=None, **kw):
    x = torch.from_numpy(rand(*shape, seed=seed, **kw))
    return (x.to(dtype) if dtype is not None else x).to(dev)


def _mlp_train_step(dev):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = _t(dev, 5, 8), torch.tensor([0, 3, 1, 2, 1], device=dev)
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return [loss] + [p for p in model.parameters()]


def _adam_step(dev):
    torch.manual_seed(0)
    model = torch.nn.Linear(6, 3).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    loss = (model(_t(dev, 4, 6)) ** 2).mean()
    loss.backward()
    opt.step()
    return [p for p in model.parameters()]


def _layer_norm_backward(dev):
    x = _t(dev, 3, 5, 8).requires_grad_(True)
    ln = torch.nn.LayerNorm(8).to(dev)
    y = ln(x)
    (y * y).sum().backward()
    return [y, x.grad, ln.weight.grad, ln.bias.grad]


def _attention(dev):
    q, k, v = _t(dev, 2, 4, 6, 8), _t(dev, 2, 4, 6, 8, seed=1), _t(dev, 2, 4, 6, 8, seed=2)
    return [F.scaled_dot_product_attention(q, k, v, is_causal=True)]


def _conv_backward(dev):
    x = _t(dev, 2, 3, 9, 9).requires_grad_(True)
    conv = torch.nn.Conv2d(3, 6, 3, stride=2, padding=1, groups=3).to(dev)
    y = F.max_pool2d(F.relu(conv(x)), 2)
    y.sum().backward()
    return [y, x.grad, conv.weight.grad, conv.bias.grad]


def _embedding_backward(dev):
    emb = torch.nn.Embedding(10, 4).to(dev)
    idx = torch.tensor([[1, 2, 2], [9, 0, 1]], device=dev)
    out = emb(idx)
    out.pow(2).sum().backward()
    return [out, emb.weight.grad]


def _cumsum_argmax_sort(dev):
    x = _t(dev, 4, 7)
    vals, order = torch.sort(x, dim=-1, descending=True)
    return [x.cumsum(1), x.argmax(1), vals, order, torch.topk(x, 3).values, x.max(0).values]


def _dtypes(dev):
    x = _t(dev, 4, 5) * 100
    return [x.to(torch.int32), x.to(torch.bfloat16).to(torch.float32), x.to(torch.float16) * 2,
            x.to(torch.uint8), (x > 0).to(torch.int64), x.to(torch.int8)]


def _where_clamp_cat_flip(dev):
    x, y = _t(dev, 3, 4), _t(dev, 3, 4, seed=1)
    return [torch.where(x > y, x, y).clamp(-0.5, 0.5), torch.cat([x, y], 0).flip(1),
            F.pad(x, (1, 2, 0, 1), value=3.0), x[:, 1::2], x.t().contiguous()]


def _unary_math(dev):
    x = _t(dev, 4, 6)
    return [x.exp(), x.abs().log1p(), x.sigmoid(), x.erf(), torch.rsqrt(x.abs() + 1), x.round(), x.sign(),
            x.tanh(), F.gelu(x), F.silu(x), x.pow(3), x.remainder(0.7), x.atan2(x + 1)]


def _integer_ops(dev):
    a = torch.tensor([7, -7, 13, -13, 0, 100], device=dev, dtype=torch.int32)
    b = torch.tensor([2, 2, -4, -4, 3, 7], device=dev, dtype=torch.int32)
    return [a // b, torch.remainder(a, b), torch.fmod(a, b), a << 2, a >> 1, a & b, a | b, a ^ b, ~a]


def _softmax_nll(dev):
    x = _t(dev, 6, 10)
    y = torch.tensor([1, 0, 9, 4, 4, 2], device=dev)
    return [F.log_softmax(x, -1), F.nll_loss(F.log_softmax(x, -1), y), F.softmax(x, 0)]


def _batch_norm_train(dev):
    bn = torch.nn.BatchNorm2d(3).to(dev)
    x = _t(dev, 4, 3, 5, 5).requires_grad_(True)
    y = bn(x)
    (y ** 2).sum().backward()
    return [y, x.grad, bn.weight.grad, bn.running_mean]


def _avg_pool_upsample(dev):
    x = _t(dev, 2, 3, 8, 8)
    return [F.avg_pool2d(x, 2), F.interpolate(x, scale_factor=2, mode="nearest"), F.adaptive_avg_pool2d(x, 3)]


def _index_put_gather(dev):
    x = _t(dev, 6, 5)
    idx = torch.tensor([4, 1, 1], device=dev)
    y = x.index_put((idx,), torch.ones(3, 5, device=dev), accumulate=True)
    return [x[idx], torch.gather(x, 1, torch.tensor([[0, 4]] * 6, device=dev)), y,
            x.scatter_add(0, torch.zeros(2, 5, dtype=torch.long, device=dev), _t(dev, 2, 5))]


def _bf16_linear(dev):
    x, w = _t(dev, 4, 8, dtype=torch.bfloat16), _t(dev, 3, 8, seed=1, dtype=torch.bfloat16)
    return [F.linear(x, w), (x.float() * 2).sum(1)]


def _random(dev):
    torch.manual_seed(3)
    x = torch.ones(4, 5, device=dev)
    return [torch.rand(3, 4, device=dev), torch.randn(2, 3, device=dev), F.dropout(x, 0.5),
            torch.randint(0, 10, (5,), device=dev)]


def _transformer_layer_backward(dev):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True).to(dev)
    y = layer(torch.randn(2, 7, 32).to(dev))
    y.sum().backward()
    return [y, layer.linear1.weight.grad, layer.self_attn.in_proj_weight.grad]


def _small_resnet_step(dev):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                            torch.nn.Conv2d(8, 8, 3, stride=2, padding=1), torch.nn.AdaptiveAvgPool2d(1),
                            torch.nn.Flatten(), torch.nn.Linear(8, 5)).to(dev)
    loss = F.cross_entropy(m(torch.randn(4, 3, 16, 16).to(dev)), torch.tensor([1, 2, 3, 4]).to(dev))
    loss.backward()
    return [loss, m[0].weight.grad, m[6].weight.grad]


def _gru(dev):
    torch.manual_seed(0)
    out, h = torch.nn.GRU(6, 8, batch_first=True).to(dev)(torch.randn(3, 5, 6).to(dev))
    return [out, h]


GRAPHS = [_transformer_layer_backward, _small_resnet_step, _gru, _random, _mlp_train_step, _adam_step, _layer_norm_backward, _attention, _conv_backward, _embedding_backward,
          _cumsum_argmax_sort, _dtypes, _where_clamp_cat_flip, _unary_math, _integer_ops, _softmax_nll,
          _batch_norm_train, _avg_pool_upsample, _index_put_gather, _bf16_linear]


@pytest.mark.parametrize("build", GRAPHS, ids=[g.__name__.strip("_") for g in GRAPHS])
def test_matches_torch_xla_cpu(build):
    ours, ref = run_torch_xla(build)
    assert_close(ours, ref, rtol=1e-4, atol=1e-4) if any(a.dtype.name == "float32" for a in ref) else assert_close(ours, ref)
