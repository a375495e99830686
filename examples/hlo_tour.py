"""The HLO library on live graphs: lower a JAX training step and a torch_xla training step, read
each module in all three forms (binary proto, protobuf text, HLO text), show that the forms agree,
and print the JAX module as HLO text.

This is the main job until the backend and the custom operators take over (README, Quick start).

    python examples/hlo_tour.py [--out DIR]
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("PJRT_DEVICE", "CPU")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np  # noqa: E402

import hlo  # noqa: E402

log = logging.getLogger("hlo_tour")


def jax_train_step() -> bytes:
    """A two-layer MLP's SGD step, lowered by jax.jit to a serialized HloModuleProto."""
    import jax
    import jax.numpy as jnp

    def step(params, x, y):
        def loss(p):
            h = jax.nn.relu(x @ p["w1"] + p["b1"])
            logits = h @ p["w2"] + p["b2"]
            return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * y, axis=1))

        value, grads = jax.value_and_grad(loss)(params)
        return value, jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)

    rng = np.random.default_rng(0)
    params = {"w1": rng.standard_normal((64, 32), np.float32), "b1": np.zeros(32, np.float32),
              "w2": rng.standard_normal((32, 10), np.float32), "b2": np.zeros(10, np.float32)}
    x = rng.standard_normal((16, 64), np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 16)]
    return jax.jit(step).lower(params, x, y).compiler_ir("hlo").as_serialized_hlo_module_proto()


def torch_xla_train_step() -> bytes:
    """The same kind of step in PyTorch (autograd + optimizer), lowered by torch_xla."""
    import torch
    import torch_xla

    dev = torch_xla.device()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(16, 64).to(dev)
    y = torch.randint(0, 10, (16,)).to(dev)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    ctx = torch_xla._XLAC.lowering.LoweringContext()
    ctx.build([loss] + [p for p in model.parameters()])
    return ctx.hlo()


def tour(name: str, proto: bytes, out: Path | None) -> hlo.HloModule:
    module = hlo.load(proto)
    forms = {"proto": module.to_bytes(), "pbtxt": module.to_pbtxt().encode(), "text": module.to_text().encode()}
    for form, data in forms.items():
        again = hlo.load(data)
        if not hlo.modules_equal(again, module) and form != "text":
            raise SystemExit(f"{name}: the {form} form did not read back equal")
        if out is not None:
            (out / f"{name}.{ {'proto': 'pb', 'pbtxt': 'pbtxt', 'text': 'hlo.txt'}[form] }").write_bytes(data)
    ops: dict[str, int] = {}
    for inst in module.instructions():
        ops[inst.opcode] = ops.get(inst.opcode, 0) + 1
    top = ", ".join(f"{k} x{v}" for k, v in sorted(ops.items(), key=lambda kv: -kv[1])[:8])
    print(f"{name}: {len(module.computations)} computations, {sum(ops.values())} instructions ({top}); "
          f"fingerprint {module.fingerprint()[:16]}; forms: " + ", ".join(f"{k} {len(v)} B" for k, v in forms.items()))
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="also write each module in its three forms here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    steps = [("jax_train_step", jax_train_step), ("torch_xla_train_step", torch_xla_train_step)]
    modules = {}
    for i, (name, lower) in enumerate(steps, 1):
        t = time.perf_counter()
        print(f"[{i}/{len(steps)}] lowering {name} ...", flush=True)
        modules[name] = tour(name, lower(), args.out)
        print(f"      done in {time.perf_counter() - t:.2f} s")
    print("\n" + modules["jax_train_step"].to_text())
    print("All modules read back equal from binary proto, protobuf text and HLO text.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
