"""Data-parallel training as torch_xla users write it: one process per NeuronCore (torchrun or
xmp.spawn), each taking its shard of every global batch; xm.optimizer_step all-reduces the
gradients, xm.mark_step runs the step. The model holds a C++ custom op (the tutorial's ReLU,
forward and backward) and an NKI kernel (an addition in an autograd.Function). Run alone, the same
script trains on the whole global batch in one process: the reference.

argv: out_dir [--steps N] [--spawn]. Writes out_dir/rank<k>.json: the losses of its shard and its
final parameters."""
import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np
import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "examples" / "mlp_training"))
import relu_ops  # noqa: E402

from neuron_customcall import nki  # noqa: E402
from neuron_customcall.nki import language as nl  # noqa: E402

GLOBAL_BATCH = 16


@nki.jit
def nki_add(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i = nl.arange(a.shape[0])[:, None]
    j = nl.arange(a.shape[1])[None, :]
    nl.store(out[i, j], value=nl.load(a[i, j]) + nl.load(b[i, j]))
    return out


class NkiAdd(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        return nki_add(a, b)

    @staticmethod
    def backward(ctx, dy):
        return dy, dy


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(20, 32)
        self.skip = torch.nn.Linear(20, 32)
        self.fc2 = torch.nn.Linear(32, 5)

    def forward(self, x):
        h = NkiAdd.apply(relu_ops.relu(self.fc1(x)), self.skip(x))
        return torch.log_softmax(self.fc2(h), dim=1)


def train(index, out_dir, steps, distributed):
    if distributed:
        import torch.distributed as dist
        import torch_xla.distributed.xla_backend  # noqa: F401  (the "xla" backend)

        dist.init_process_group("xla", init_method="xla://")
    relu_ops.build()
    device = xm.xla_device()
    rank, world = xr.global_ordinal(), xr.world_size()
    torch.manual_seed(0)
    model = Model().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(1)
    losses = []
    shard = GLOBAL_BATCH // world
    for _ in range(steps):
        x = torch.from_numpy(rng.standard_normal((GLOBAL_BATCH, 20)).astype(np.float32))
        y = torch.from_numpy(rng.integers(0, 5, GLOBAL_BATCH))
        x, y = x[rank * shard:(rank + 1) * shard], y[rank * shard:(rank + 1) * shard]
        optimizer.zero_grad()
        loss = torch.nn.functional.nll_loss(model(x.to(device)), y.to(device))
        loss.backward()
        xm.optimizer_step(optimizer)
        xm.mark_step()
        losses.append(loss.item())
    params = {k: v.cpu().tolist() for k, v in model.state_dict().items()}
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps({
        "rank": rank, "world": world, "losses": losses, "params": params,
        "process_index": xr.process_index(), "devices": xr.global_runtime_device_count()}))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out_dir")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--spawn", action="store_true")
    args = parser.parse_args()
    if args.spawn:
        import torch_xla.distributed.xla_multiprocessing as xmp

        xmp.spawn(train, args=(args.out_dir, args.steps, True))
    else:
        train(0, args.out_dir, args.steps, "TORCHELASTIC_RUN_ID" in os.environ)


if __name__ == "__main__":
    main()
