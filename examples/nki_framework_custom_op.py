"""The seed's walk-through (NKI kernel as a framework custom operator), end to end on the emulator.

    python examples/nki_framework_custom_op.py [--dump DIR]

The NKI addition kernel replaces `a + b` in `a * b * (a + b)`, in PyTorch/XLA and in JAX, forward
and through autograd (`torch.autograd.Function`, `jax.custom_vjp`), then a few SGD steps whose
gradients flow through the kernel (losses checked against the plain framework's run on the CPU);
the printed HLO holds the
`AwsNeuronCustomNativeKernel` custom-call; every result is checked against the plain framework.
With --dump, NEURON_FRAMEWORK_DEBUG writes each compiled graph there (.pbtxt and .hlo.txt), ready
for `neuron-customcall compile`.
"""
from __future__ import annotations

import argparse
import os

import numpy as np


TRAIN_STEPS = 5
TRAIN_LR = 50.0  # the loss is a mean over 256 x 1024 elements: each element's gradient is tiny


def nki_kernels():
    from neuron_customcall import nki
    from neuron_customcall.nki import language as nl

    @nki.jit
    def nki_tensor_add_kernel_(a_input, b_input):
        c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
        ix = nl.program_id(0) * 128 + nl.arange(128)[:, None]
        iy = nl.program_id(1) * 512 + nl.arange(512)[None, :]
        nl.store(c_output[ix, iy], value=nl.load(a_input[ix, iy]) + nl.load(b_input[ix, iy]))
        return c_output

    def nki_tensor_add(a_input, b_input):
        return nki_tensor_add_kernel_[a_input.shape[0] // 128, a_input.shape[1] // 512](a_input, b_input)

    return nki_tensor_add


def custom_call_line(hlo_text: str) -> str:
    line = next(line for line in hlo_text.splitlines() if "custom-call(" in line)
    return line[:line.index("backend_config=")] + 'backend_config="..."'


def pytorch(nki_tensor_add) -> None:
    import torch
    import torch_xla

    from neuron_customcall.torch_xla import mark_step, to_cpu

    device = torch_xla.device()
    a_cpu, b_cpu = torch.randn(256, 1024), torch.randn(256, 1024)
    a, b = a_cpu.to(device), b_cpu.to(device)
    out = a * b * nki_tensor_add(a, b)
    print("torch_xla:", custom_call_line(torch_xla._XLAC._get_xla_tensors_hlo([out])).strip())
    torch.testing.assert_close(to_cpu(out), a_cpu * b_cpu * (a_cpu + b_cpu))

    class NkiAddFunc(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return nki_tensor_add(a, b)

        @staticmethod
        def backward(ctx, dy, *args):
            return dy, dy

    a = a_cpu.to(device).detach().requires_grad_()
    b = b_cpu.to(device).detach().requires_grad_()
    loss = (NkiAddFunc.apply(a, b) * a * b).sum()
    loss.backward()
    mark_step(loss, a.grad, b.grad)
    torch.testing.assert_close(to_cpu(a.grad), 2 * a_cpu * b_cpu + b_cpu ** 2)
    print("torch_xla: forward and gradients match PyTorch")

    def train(add, device: torch.device, sync) -> list[float]:
        """SGD on a and b towards a target of a * b * (a + b): the gradient flows through `add`."""
        g = torch.Generator().manual_seed(0)
        a, b, target = (torch.randn(256, 1024, generator=g).to(device) for _ in range(3))
        a.requires_grad_()
        b.requires_grad_()
        opt = torch.optim.SGD([a, b], lr=TRAIN_LR)
        losses = []
        for _ in range(TRAIN_STEPS):
            opt.zero_grad()
            loss = ((a * b * add(a, b) - target) ** 2).mean()
            loss.backward()
            opt.step()
            sync(opt, loss)
            losses.append(float(to_cpu(loss)))
        return losses

    ours = train(NkiAddFunc.apply, device, lambda opt, loss: mark_step(opt, loss))
    plain = train(torch.add, torch.device("cpu"), lambda *state: None)
    np.testing.assert_allclose(ours, plain, rtol=1e-4)
    assert ours[-1] < ours[0]
    print(f"torch_xla: {TRAIN_STEPS} SGD steps, loss {ours[0]:.4f} -> {ours[-1]:.4f} (PyTorch on CPU: {plain[-1]:.4f})")


def jax_version(nki_tensor_add) -> None:
    import jax
    import jax.numpy as jnp

    import neuron_customcall.jax as nj

    def jax_customop_tutorial(a, b):
        return a * b * nki_tensor_add(a, b)

    seed_a, seed_b = jax.random.split(jax.random.PRNGKey(0))
    a = jax.random.normal(seed_a, (256, 1024), dtype=jnp.float32)
    b = jax.random.normal(seed_b, (256, 1024), dtype=jnp.float32)
    print("jax:      ", custom_call_line(nj.jit(jax_customop_tutorial).lower(a, b).as_text(dialect="hlo")).strip())
    np.testing.assert_allclose(nj.jit(jax_customop_tutorial)(a, b), a * b * (a + b), rtol=1e-6)

    @jax.custom_vjp
    def nki_add_func(a, b):
        return nki_tensor_add(a, b)

    nki_add_func.defvjp(lambda a, b: (nki_add_func(a, b), (a, b)), lambda res, grad: (grad, grad))
    grads = nj.jit(jax.grad(lambda x, y: (nki_add_func(x, y) * x * y).sum(), argnums=(0, 1)))(a, b)
    np.testing.assert_allclose(grads[0], 2 * a * b + b ** 2, rtol=1e-5, atol=1e-5)
    print("jax: forward and gradients match JAX")

    def make_step(add):
        def step(a, b, target):
            loss, (ga, gb) = jax.value_and_grad(lambda x, y: jnp.mean((x * y * add(x, y) - target) ** 2),
                                                argnums=(0, 1))(a, b)
            return a - TRAIN_LR * ga, b - TRAIN_LR * gb, loss
        return step

    def train(step) -> list[float]:
        x, y, target = (jax.random.normal(k, (256, 1024), dtype=jnp.float32) for k in jax.random.split(jax.random.PRNGKey(1), 3))
        losses = []
        for _ in range(TRAIN_STEPS):
            x, y, loss = step(x, y, target)
            losses.append(float(loss))
        return losses

    ours = train(nj.jit(make_step(nki_add_func)))
    plain = train(jax.jit(make_step(jnp.add)))
    np.testing.assert_allclose(ours, plain, rtol=1e-4)
    assert ours[-1] < ours[0]
    print(f"jax: {TRAIN_STEPS} SGD steps, loss {ours[0]:.4f} -> {ours[-1]:.4f} (jax.jit on XLA:CPU: {plain[-1]:.4f})")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dump", help="write each compiled graph here (NEURON_FRAMEWORK_DEBUG)")
    args = parser.parse_args(argv)
    if args.dump:
        os.environ["NEURON_FRAMEWORK_DEBUG"] = "1"
        os.environ["NEURON_FRAMEWORK_DEBUG_DIR"] = args.dump
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    add = nki_kernels()
    pytorch(add)
    jax_version(add)


if __name__ == "__main__":
    main()
