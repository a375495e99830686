"""The per-iteration cost of a data-dependent NKI loop (issue 13), report only.

One kernel body, three ways, 1000 iterations each, in the same run: an ``nl.while_loop`` whose
condition register the body reloads every iteration (a counter in SBUF), an
``nl.dynamic_range`` with a register bound, and a ``sequential_range`` of the same body (a
static loop whose carried dependency makes it run as a Python loop: the floor a data-dependent
loop can hope for), against the same arithmetic as a NumPy Python loop. The body is one
``tensor_scalar`` on a [128, 512] fp32 tile (plus the counter update and the register load in
the while form). Wall and CPU time are the best of ``--repeat`` calls, after a warm-up call.

Run: ``python benchmarks/nki_dynamic_loop.py [--iterations N] [--repeat R]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import nki.isa as nisa  # noqa: E402
from neuron_customcall import nki  # noqa: E402
from neuron_customcall.nki import language as nl  # noqa: E402


def _tile_and_count(x, count):
    """What both data-dependent forms start with (traced inline): the output, the working tile,
    the count tile and a register holding the count."""
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    c = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=c, src=count)
    reg = nisa.register_alloc()
    nisa.register_load(reg, c)
    return out, t, c, reg


@nki.jit
def while_form(x, count):
    out, t, c, reg = _tile_and_count(x, count)

    def body(r):
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=0.999, op1=nl.add,
                           operand1=0.001)
        nisa.tensor_scalar(dst=c, data=c, op0=nl.subtract, operand0=1)
        nisa.register_load(r, c)
        return r

    nl.while_loop(reg, body)
    nisa.dma_copy(dst=out, src=t)
    return out


@nki.jit
def dynamic_form(x, count):
    out, t, _, hi = _tile_and_count(x, count)
    for _ in nl.dynamic_range(hi):
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=0.999, op1=nl.add,
                           operand1=0.001)
    nisa.dma_copy(dst=out, src=t)
    return out


@nki.jit
def static_form(x, n):
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    for _ in nl.sequential_range(n):
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=0.999, op1=nl.add,
                           operand1=0.001)
    nisa.dma_copy(dst=out, src=t)
    return out


def numpy_form(x: np.ndarray, n: int) -> np.ndarray:
    t = x.copy()
    for _ in range(n):
        np.multiply(t, np.float32(0.999), out=t)
        np.add(t, np.float32(0.001), out=t)
    return t


def best(fn, repeat: int) -> tuple[float, float, np.ndarray]:
    out = fn()  # warm-up (traces the kernel)
    wall = cpu = float("inf")
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        wall = min(wall, time.perf_counter() - w0)
        cpu = min(cpu, time.process_time() - c0)
    return wall, cpu, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iterations", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    n = args.iterations
    x = np.random.default_rng(0).random((128, 512)).astype(np.float32)
    count = np.array([[n]], np.int32)
    want = numpy_form(x, n)
    rows = [("numpy Python loop", lambda: numpy_form(x, n)),
            ("sequential_range (static)", lambda: static_form(x, n)),
            ("dynamic_range (register bound)", lambda: dynamic_form(x, count)),
            ("while_loop (register condition)", lambda: while_form(x, count))]
    print(f"{n} iterations of a [128, 512] fp32 tensor_scalar, best of {args.repeat}; load "
          f"{os.getloadavg()[0]:.1f}")
    print(f"{'form':34s} {'wall ms':>9s} {'cpu ms':>9s} {'us/iter':>9s} {'cpu us/iter':>12s}")
    floor = None
    for name, fn in rows:
        wall, cpu, out = best(fn, args.repeat)
        np.testing.assert_allclose(out, want, rtol=1e-5)
        floor = floor or wall
        print(f"{name:34s} {wall * 1e3:9.2f} {cpu * 1e3:9.2f} {wall / n * 1e6:9.1f} "
              f"{cpu / n * 1e6:12.1f}   ({wall / floor:.2f}x NumPy)")


if __name__ == "__main__":
    main()
