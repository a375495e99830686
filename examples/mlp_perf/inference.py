"""The C++ custom-op performance tutorial on the emulator: the enlarged MLP (784-4096-2048-10) in
inference with three ReLU implementations (element-wise accessor, TCM accessor, TCM on all eight
GpSimd cores), each through torch_xla.

    python examples/mlp_perf/inference.py [--iters N] [--batch-size B] [--variants tcm,multicore]
                                          [--estimate profile|gpsimd]

For each variant: its output checked against torch.relu on the CPU, the measured emulator
throughput (the tutorial's loop: forward, materialise, read the result), and the throughput of a
trn1 NeuronCore that the emulator's cost model estimates for one graph (device time only).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

os.environ.setdefault("PJRT_DEVICE", "CPU")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent / "mlp_training"))  # the tutorials' MLP, shared

import torch  # noqa: E402

import trn1_estimate  # noqa: E402
from mlp import MLP  # noqa: E402
from variants import VARIANTS, Variant  # noqa: E402

LAYERS = (4096, 2048)
INPUT_SIZE = 28 * 28


@dataclass
class Result:
    variant: str
    title: str
    emulator_iters_per_s: float
    emulator_inferences_per_s: float
    trn1_iters_per_s: float
    trn1_inferences_per_s: float
    trn1_scope: str
    trn1_engines_s: dict[str, float]
    max_abs_diff: float


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=20, help="timed iterations per variant")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--variants", default=",".join(v.name for v in VARIANTS),
                        help="comma-separated subset of: " + ", ".join(v.name for v in VARIANTS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--estimate", choices=("profile", "gpsimd"), default="profile",
                        help="trn1 estimate from the whole graph's per-engine profile, or from the GpSimd "
                             "cost model alone (the ReLUs only)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    return parser.parse_args(argv)


def make_model(activation, seed: int) -> MLP:
    torch.manual_seed(seed)  # the same weights for every variant and the CPU reference
    return MLP(activation, input_size=INPUT_SIZE, output_size=10, layers=LAYERS).eval()


def measure(variant: Variant, x: torch.Tensor, reference: torch.Tensor, args: argparse.Namespace) -> Result:
    import torch_xla

    import neuron_customcall.torch_xla as ntx

    variant.build()
    device = torch_xla.device()
    model = make_model(variant.op(), args.seed).to(device)
    xd = x.to(device)
    with torch.no_grad():
        out = model(xd)
        if args.estimate == "profile":
            estimate = trn1_estimate.whole_graph([out])
        else:
            activations = [torch.Size((len(x), n)) for n in LAYERS]
            estimate = trn1_estimate.gpsimd_only(variant.library, variant.op(), activations)
        diff = float((ntx.to_cpu(out) - reference).abs().max())  # compiles (and warms) the graph
        start = time.perf_counter()
        for _ in range(args.iters):
            ntx.to_cpu(model(xd))
        seconds = time.perf_counter() - start
    iters = args.iters / seconds
    return Result(variant.name, variant.title, iters, iters * len(x), estimate.throughput,
                  estimate.throughput * len(x), estimate.scope, estimate.engines, diff)


def report(results: list[Result], batch: int) -> None:
    print(f"\nMLP {INPUT_SIZE}-{LAYERS[0]}-{LAYERS[1]}-10 inference, batch {batch}; throughput in "
          f"iterations (batches) per second, inferences per second in brackets")
    print(f"{'ReLU variant':42s} {'emulator (measured)':>26s} {'trn1 (estimated)':>26s}  max |diff| vs CPU")
    for r in results:
        print(f"{r.title:42s} {r.emulator_iters_per_s:9.1f} ({r.emulator_inferences_per_s:10.0f}/s)   "
              f"{r.trn1_iters_per_s:9.1f} ({r.trn1_inferences_per_s:10.0f}/s)  {r.max_abs_diff:.1e}")
    scopes = sorted({r.trn1_scope for r in results})
    print("trn1 estimate: " + "; ".join(scopes) + " (device time only: no host or launch overhead)")
    for r in results:
        if r.trn1_engines_s:
            busy = ", ".join(f"{e} {s * 1e6:.1f} us" for e, s in sorted(r.trn1_engines_s.items(), key=lambda kv: -kv[1]))
            print(f"  {r.variant}: engines busy per iteration: {busy}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    chosen = [v for name in args.variants.split(",") for v in VARIANTS if v.name == name.strip()]
    if not chosen:
        raise SystemExit(f"no known variant in {args.variants!r}")
    x = torch.rand(args.batch_size, INPUT_SIZE, generator=torch.Generator().manual_seed(args.seed))
    with torch.no_grad():
        reference = make_model(torch.relu, args.seed)(x)
    results = []
    for variant in chosen:
        print(f"----------Inference: ReLU with {variant.title} ---------------", flush=True)
        r = measure(variant, x, reference, args)
        print(f"Inf throughput (iter/sec): {r.emulator_iters_per_s}  (emulator, measured)")
        print(f"Inf throughput (iter/sec): {r.trn1_iters_per_s}  (trn1 NeuronCore, estimated: {r.trn1_scope})")
        print("----------End Inference ---------------", flush=True)
        results.append(r)
    report(results, args.batch_size)
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in results], indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
