"""MLP training with a C++ custom ReLU through torch_xla on the emulated NeuronCore, beside the same
model with torch.relu on the CPU (the training tutorial, on data available offline).

    python examples/mlp_training/train.py [--epochs N] [--batch-size B] [--mnist DIR]

Data: scikit-learn's bundled 8x8 handwritten digits, or MNIST IDX files in DIR. The model is the
tutorial's MLP (hidden layers 120 and 84, log-softmax, NLL loss, SGD); its ReLU forward and
backward are C++ GpSimd ops (relu.cpp, shape.cpp), so each training step is one graph with four
custom-calls, compiled once and run on the emulator. The loop is the tutorial script's: plain
torch_xla on ``PJRT_DEVICE=NEURON`` (the neuron PJRT plugin), ``xm.mark_step()`` after each step
and ``.item()``/``.cpu()`` to read results. Prints progress, the tutorial's throughput and
final-loss lines for both runs, and a closing summary.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

# The tutorial on the (emulated) NeuronCore: this script's torch_xla runs are NEURON ones whatever
# the shell says (scripts/bootstrap.sh exports PJRT_DEVICE=CPU for the test suite); the reference
# run is plain PyTorch on the CPU.
os.environ["PJRT_DEVICE"] = "NEURON"
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import dataset  # noqa: E402
from mlp import MLP, Activation  # noqa: E402

Sync = Callable[[torch.nn.Module, torch.optim.Optimizer, torch.Tensor], None]


@dataclass
class Run:
    """One training run's record: what the summary and the tests compare."""
    label: str
    losses: list[float] = field(default_factory=list)
    first_step_s: float = 0.0
    steady_s: float = 0.0
    accuracy: float = 0.0

    @property
    def throughput(self) -> float:
        """Iterations per second after the first step (which traces and compiles the graph)."""
        steady_steps = len(self.losses) - 1
        return steady_steps / self.steady_s if steady_steps > 0 and self.steady_s > 0 else float("nan")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mnist", metavar="DIR", help="train on MNIST IDX files in DIR instead of the digits")
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.1, help="SGD learning rate")
    parser.add_argument("--limit-steps", type=int, default=0, help="stop after this many steps (0: no limit)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log-every", type=int, default=0, help="progress line every N steps (0: 20 lines a run)")
    parser.add_argument("--json", metavar="PATH", help="also write the summary as JSON")
    return parser.parse_args(argv)


def total_steps(data: dataset.Dataset, args: argparse.Namespace) -> int:
    steps = args.epochs * (len(data.x_train) // args.batch_size)
    return min(steps, args.limit_steps) if args.limit_steps else steps


def train(run: Run, model: torch.nn.Module, device: torch.device, data: dataset.Dataset,
          args: argparse.Namespace, sync: Sync, value: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """The tutorial's loop: batches, NLL loss, backward, SGD step; `sync` materialises the step."""
    steps = total_steps(data, args)
    every = args.log_every or max(1, steps // 20)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    loss_fn = torch.nn.NLLLoss()
    print(f"----------Training ({run.label}) ---------------", flush=True)
    start = time.perf_counter()
    for epoch in range(args.epochs):
        for xb, yb in dataset.batches(data.x_train, data.y_train, args.batch_size, args.seed + epoch):
            if len(run.losses) == steps:
                break
            x, y = torch.from_numpy(xb).to(device), torch.from_numpy(yb).to(device)
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            sync(model, opt, loss)
            run.losses.append(float(value(loss)))
            step = len(run.losses)
            if step == 1:
                run.first_step_s = time.perf_counter() - start
                start = time.perf_counter()
            if step % every == 0 or step == steps:
                run.steady_s = time.perf_counter() - start
                rate = f"{run.throughput:8.1f} it/s" if step > 1 else f"first step {run.first_step_s:.2f} s"
                print(f"[{step:>5d}/{steps}] epoch {epoch + 1}/{args.epochs}  loss {run.losses[-1]:.4f}  {rate}",
                      flush=True)
    run.steady_s = time.perf_counter() - start
    print(f"Train throughput (iter/sec): {run.throughput}")
    print(f"Final loss is {run.losses[-1]:.4f}")
    print("----------End Training ---------------", flush=True)


def accuracy(model: torch.nn.Module, device: torch.device, data: dataset.Dataset,
             value: Callable[[torch.Tensor], torch.Tensor]) -> float:
    with torch.no_grad():
        scores = value(model(torch.from_numpy(data.x_test).to(device)))
    return float((scores.argmax(dim=1).numpy() == data.y_test).mean())


def make_model(activation: Activation, data: dataset.Dataset, seed: int) -> MLP:
    torch.manual_seed(seed)  # same initial weights for both runs
    return MLP(activation, input_size=data.features, output_size=10)


def emulator_run(data: dataset.Dataset, args: argparse.Namespace) -> tuple[Run, dict[str, torch.Tensor]]:
    import torch_xla.core.xla_model as xm

    import relu_ops

    relu_ops.build()
    device = xm.xla_device()
    model = make_model(relu_ops.relu, data, args.seed).to(device)
    run = Run("emulated NeuronCore, torch_xla, C++ ReLU")
    train(run, model, device, data, args, lambda *state: xm.mark_step(), lambda t: t.cpu())
    run.accuracy = accuracy(model, device, data, lambda t: t.cpu())
    return run, {k: v.cpu() for k, v in model.state_dict().items()}


def cpu_run(data: dataset.Dataset, args: argparse.Namespace) -> tuple[Run, dict[str, torch.Tensor]]:
    device = torch.device("cpu")
    model = make_model(torch.relu, data, args.seed)
    run = Run("CPU reference, torch.relu")
    train(run, model, device, data, args, lambda *state: None, lambda t: t.detach())
    run.accuracy = accuracy(model, device, data, lambda t: t.detach())
    return run, {k: v.detach() for k, v in model.state_dict().items()}


def summary(data: dataset.Dataset, args: argparse.Namespace, ours: Run, ref: Run,
            ours_params: dict[str, torch.Tensor], ref_params: dict[str, torch.Tensor]) -> dict:
    steps = len(ours.losses)
    per_epoch = len(data.x_train) // args.batch_size
    return {
        "dataset": data.name, "train_samples": len(data.x_train), "held_out_samples": len(data.x_test),
        "model": f"MLP {data.features}-120-84-10", "steps": steps, "steps_per_epoch": per_epoch,
        "batch_size": args.batch_size, "epochs": args.epochs,
        "emulator": asdict(ours) | {"throughput": ours.throughput},
        "cpu": asdict(ref) | {"throughput": ref.throughput},
        "max_loss_diff": float(np.max(np.abs(np.subtract(ours.losses, ref.losses)))),
        "max_param_diff": max(float((ours_params[k] - ref_params[k]).abs().max()) for k in ref_params),
    }


def print_summary(s: dict) -> None:
    ours, ref = s["emulator"], s["cpu"]
    rows = [
        ("final loss", f"{ours['losses'][-1]:.4f}", f"{ref['losses'][-1]:.4f}"),
        ("held-out accuracy", f"{100 * ours['accuracy']:.1f} %", f"{100 * ref['accuracy']:.1f} %"),
        ("throughput (iter/s)", f"{ours['throughput']:.1f}", f"{ref['throughput']:.1f}"),
        ("first step (s, compiles)", f"{ours['first_step_s']:.2f}", f"{ref['first_step_s']:.3f}"),
    ]
    print("\n========== Summary ==========")
    print(f"dataset   {s['dataset']}: {s['train_samples']} training, {s['held_out_samples']} held-out samples")
    print(f"model     {s['model']}, ReLU forward and backward as C++ GpSimd custom ops")
    print(f"steps     {s['steps']} (batch {s['batch_size']}, {s['steps_per_epoch']} steps per epoch, "
          f"{s['epochs']} epoch(s) asked)")
    print(f"{'':26s} {'emulator (torch_xla)':>22s} {'CPU (torch.relu)':>18s}")
    for name, a, b in rows:
        print(f"{name:26s} {a:>22s} {b:>18s}")
    print(f"max |loss difference| over all steps: {s['max_loss_diff']:.2e}")
    print(f"max |parameter difference| after training: {s['max_param_diff']:.2e}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    data = dataset.mnist(args.mnist, seed=args.seed) if args.mnist else dataset.digits(seed=args.seed)
    print(f"{data.name}: {len(data.x_train)} training, {len(data.x_test)} held-out samples; "
          f"{total_steps(data, args)} steps of batch {args.batch_size}", flush=True)
    ours, ours_params = emulator_run(data, args)
    ref, ref_params = cpu_run(data, args)
    s = summary(data, args, ours, ref, ours_params, ref_params)
    print_summary(s)
    if args.json:
        Path(args.json).write_text(json.dumps(s, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
