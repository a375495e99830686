"""Checks an installed neuron-relu: where it was imported from, forward and gradient against
torch.relu, its Meta implementation, and a torch.compile trace of forward and backward.

Run by build_and_try.py with the fresh virtual environment's interpreter, from a directory
outside the source tree (and with ``-P``), so that only the installed package can be imported.
Prints a short report; exits non-zero on the first failed check.
"""
from __future__ import annotations

import sys
import sysconfig
from pathlib import Path

import torch

import neuron_relu


def check_origin() -> None:
    """The package and its library come from this interpreter's site-packages."""
    site = Path(sysconfig.get_paths()["platlib"]).resolve()
    for label, path in (("package", Path(neuron_relu.__file__)), ("library", neuron_relu.LIBRARY_PATH)):
        if site not in Path(path).resolve().parents:
            raise SystemExit(f"{label} {path} is not under this environment's site-packages {site}")
        print(f"{label:8s} {path}")
    print(f"python   {sys.executable} (prefix {sys.prefix})")


def check_values() -> None:
    """Forward and gradient equal torch.relu's, on shapes of rank 1 to 3 (zeros included)."""
    torch.manual_seed(0)
    for shape in ((7,), (64, 33), (4, 8, 130)):
        x = torch.randn(shape)
        x.view(-1)[::5] = 0.0
        ours, ref = x.clone().requires_grad_(), x.clone().requires_grad_()
        y, y_ref = neuron_relu.relu(ours), torch.relu(ref)
        grad = torch.randn(shape)
        y.backward(grad)
        y_ref.backward(grad)
        if not (torch.equal(y, y_ref) and torch.equal(ours.grad, ref.grad)):
            raise SystemExit(f"relu on {shape}: forward or gradient differs from torch.relu")
    print("forward and gradient equal torch.relu on shapes (7,), (64, 33), (4, 8, 130)")


def check_graph_mode() -> None:
    """The Meta kernel gives shapes without data; torch.compile traces forward and backward."""
    meta = neuron_relu.relu(torch.empty(5, 9, device="meta"))
    if meta.shape != (5, 9) or meta.device.type != "meta":
        raise SystemExit(f"meta relu gave {meta.shape} on {meta.device}")

    def loss(x: torch.Tensor) -> torch.Tensor:
        return (neuron_relu.relu(x) * 3.0).sum()

    compiled = torch.compile(loss, backend="aot_eager", fullgraph=True)
    x = torch.randn(16, 24, requires_grad=True)
    value = compiled(x)
    value.backward()
    if not torch.allclose(value, (torch.relu(x) * 3.0).sum()) or not torch.equal(x.grad, (x > 0) * 3.0):
        raise SystemExit("torch.compile(relu) gave a different value or gradient")
    print("meta tensors: shape only; torch.compile(fullgraph=True): value and gradient equal")


def main() -> int:
    check_origin()
    check_values()
    check_graph_mode()
    print("neuron-relu works from the installed wheel")
    return 0


if __name__ == "__main__":
    sys.exit(main())
