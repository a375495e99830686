"""The HLO library and the emulator on live graphs: lower a JAX training step and a torch_xla
training step, read each module in all three forms (binary proto, protobuf text, HLO text), show
that the forms agree, print the JAX module as HLO text, then train the JAX model for a few steps on
the emulated NeuronCore beside XLA:CPU and compare.

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


def _jax_problem():
    """A two-layer MLP's SGD step and its data."""
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
    return step, params, x, y


def jax_train_step() -> bytes:
    """The JAX step lowered by jax.jit to a serialized HloModuleProto."""
    import jax

    step, params, x, y = _jax_problem()
    return jax.jit(step).lower(params, x, y).compiler_ir("hlo").as_serialized_hlo_module_proto()


def train_on_emulator(steps: int = 5) -> None:
    """The JAX step, trained on the emulator (neuron_customcall.jax.jit) and on XLA:CPU (jax.jit)."""
    import jax

    import neuron_customcall.jax as ncc_jax

    step, params, x, y = _jax_problem()
    ours, ref = ncc_jax.jit(step), jax.jit(step)
    p_ours = p_ref = params
    for i in range(1, steps + 1):
        t = time.perf_counter()
        loss_ours, p_ours = ours(p_ours, x, y)
        took = time.perf_counter() - t
        loss_ref, p_ref = ref(p_ref, x, y)
        print(f"      step {i}/{steps}: loss emulator {float(loss_ours):.6f}, XLA:CPU {float(loss_ref):.6f} ({took * 1e3:.1f} ms)")
    diff = max(float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
               for a, b in zip(jax.tree_util.tree_leaves(p_ours), jax.tree_util.tree_leaves(p_ref)))
    print(f"      parameters after {steps} steps differ from XLA:CPU by at most {diff:.2e}")
    if not diff < 1e-4:
        raise SystemExit("the emulator's training diverged from XLA:CPU")


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
        if not hlo.modules_equal(again, module):
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
    print("All modules read back equal from binary proto, protobuf text and HLO text.\n")
    print("Training the JAX model on the emulated NeuronCore beside XLA:CPU ...")
    train_on_emulator()
    return 0


if __name__ == "__main__":
    sys.exit(main())
