"""Issue 13's speed targets: NKI kernels launched on NumPy arrays against their NumPy floor and
the Triton interpreter, in the same run.

Workloads (each checked against NumPy before it is timed): a row softmax 4096x1024 (grid 32), a
layer norm 4096x1024 (grid 32; mean and variance by reductions, then scale and shift), the tiled
matmul 1024^3 of nki_peers.py, and a flash-attention forward (q, k, v [2048, 128]; 16 programs
of 128 queries, an online softmax over 4 blocks of 512 keys in a sequential loop; Triton's
kernel takes the same blocks).

Each round times one call of every implementation in turn (ours, the NumPy floor, Triton), so
a change of load hits all of them alike; a workload's figure is the best round, wall and CPU
time (process CPU of every thread) side by side. The NumPy floor is the same arithmetic on whole
arrays (flash attention: the full score matrix, which the kernel never forms), the better of
NumPy as it is and NumPy under the BLAS thread policy of our runs.

Targets: ours <= 1.5x the NumPy floor; >= 50x faster than the Triton interpreter
(``TRITON_INTERPRET=1``; triton 3.5 with torch 2.9). Run:
``python benchmarks/nki_kernel_speed.py [--rounds N | --quick] [--skip-peers] [--json PATH]``;
the figures and their history are in benchmarks/nki_kernel_speed.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Callable

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from benchmarks._results import Row, ratio_target, write_json  # noqa: E402
from emulator import blas  # noqa: E402
from benchmarks.nki_peers import nki_matmul, nki_softmax, np_softmax, triton_impls  # noqa: E402
from neuron_customcall import nki  # noqa: E402
from neuron_customcall.nki import language as nl  # noqa: E402

SUITE = "NKI kernels on NumPy arrays: NumPy floor and Triton interpreter (issue 13)"
NUMPY_AT_MOST = 1.5
INTERPRETER_AT_MOST = 1 / 50
EPS = 1e-5


@nki.jit
def nki_layernorm(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    rows = nl.program_id(0) * 128 + nl.arange(128)[:, None]
    cols = nl.arange(x.shape[1])[None, :]
    t = nl.load(x[rows, cols])
    centred = nl.subtract(t, nl.mean(t, axis=1, keepdims=True))
    var = nl.mean(nl.square(centred), axis=1, keepdims=True)
    nl.store(out[rows, cols], value=nl.multiply(centred, nl.rsqrt(nl.add(var, EPS))))
    return out


@nki.jit
def nki_flash_fwd(q, k_t, v):
    """128 queries per program; keys in blocks of 512 (TensorE's moving free size), k given
    transposed ([d, s_k], the contraction on the partitions); p @ v in four 128-key steps."""
    s_q, d = q.shape
    out = nl.ndarray((s_q, d), dtype=nl.float32, buffer=nl.shared_hbm)
    rows = nl.ds(nl.program_id(0) * 128, 128)
    qt = nl.load(q[rows, :])
    m = nl.full((128, 1), -1e30, nl.float32)
    l = nl.zeros((128, 1), nl.float32)
    o = nl.zeros((128, d), nl.float32)
    for j in nl.sequential_range(k_t.shape[1] // 512):
        scores = nl.multiply(nl.matmul(qt, nl.load(k_t[:, nl.ds(j * 512, 512)])),
                             1.0 / np.sqrt(d))
        m_new = nl.maximum(m, nl.max(scores, axis=1, keepdims=True))
        p = nl.exp(nl.subtract(scores, m_new))
        corr = nl.exp(nl.subtract(m, m_new))
        l[...] = nl.add(nl.multiply(l, corr), nl.sum(p, axis=1, keepdims=True))
        pv = nl.zeros((128, d), nl.float32, buffer=nl.psum)
        for c in nl.affine_range(4):
            pv += nl.matmul(p[:, nl.ds(c * 128, 128)], nl.load(v[nl.ds(j * 512 + c * 128, 128), :]))
        o[...] = nl.add(nl.multiply(o, corr), nl.copy(pv))
        m[...] = m_new
    nl.store(out[rows, :], value=nl.divide(o, l))
    return out


# --- NumPy floors: the arithmetic on whole arrays ------------------------------------------------

def np_layernorm(x: np.ndarray) -> np.ndarray:
    c = x - x.mean(axis=1, keepdims=True)
    return c / np.sqrt((c * c).mean(axis=1, keepdims=True) + EPS)


def np_flash_fwd(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    s = q @ k.T
    s *= 1.0 / np.sqrt(q.shape[1])
    return np_softmax(s) @ v


# --- Triton (interpreter) for the two workloads nki_peers.py does not have ----------------------

def triton_extra() -> dict[str, Callable]:
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def layernorm_k(x, y, ncols, eps, BM: tl.constexpr, BN: tl.constexpr):
        rows = tl.program_id(0) * BM + tl.arange(0, BM)[:, None]
        cols = tl.arange(0, BN)[None, :]
        t = tl.load(x + rows * ncols + cols)
        c = t - (tl.sum(t, axis=1) / BN)[:, None]
        var = tl.sum(c * c, axis=1) / BN
        tl.store(y + rows * ncols + cols, c / tl.sqrt(var + eps)[:, None])

    @triton.jit
    def flash_k(q, k, v, o, N_KEYS: tl.constexpr, SCALE: tl.constexpr, BM: tl.constexpr,
                BN: tl.constexpr, D: tl.constexpr):
        rq = tl.program_id(0) * BM + tl.arange(0, BM)
        rd = tl.arange(0, D)
        qt = tl.load(q + rq[:, None] * D + rd[None, :])
        m = tl.full((BM,), -1e30, tl.float32)
        l = tl.zeros((BM,), tl.float32)
        acc = tl.zeros((BM, D), tl.float32)
        for j in range(0, N_KEYS, BN):
            rk = j + tl.arange(0, BN)
            kt = tl.load(k + rk[:, None] * D + rd[None, :])
            vt = tl.load(v + rk[:, None] * D + rd[None, :])
            s = tl.dot(qt, tl.trans(kt)) * SCALE
            m_new = tl.maximum(m, tl.max(s, axis=1))
            p = tl.exp(s - m_new[:, None])
            corr = tl.exp(m - m_new)
            l = l * corr + tl.sum(p, axis=1)
            acc = acc * corr[:, None] + tl.dot(p, vt)
            m = m_new
        tl.store(o + rq[:, None] * D + rd[None, :], acc / l[:, None])

    def layernorm(x):
        tx = torch.from_numpy(x)
        ty = torch.empty_like(tx)
        layernorm_k[(x.shape[0] // 128,)](tx, ty, x.shape[1], EPS, BM=128, BN=x.shape[1])
        return ty.numpy()

    def flash(q, k, v):
        tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
        to = torch.empty_like(tq)
        flash_k[(q.shape[0] // 128,)](tq, tk, tv, to, N_KEYS=k.shape[0],
                                      SCALE=float(1 / np.sqrt(q.shape[1])), BM=128, BN=512,
                                      D=q.shape[1])
        return to.numpy()

    return {"layernorm": layernorm, "flash": flash}


def triton_per_row() -> dict[str, Callable]:
    """Softmax and layer norm as Triton's own tutorials write them (fused softmax, layer norm):
    one program per row, a power-of-two block of columns with a mask. The interpreter then runs
    4096 small programs where the 128-row kernels above run 32: the form Triton users write,
    measured beside the one with our tiling."""
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def softmax_row(x, y, ncols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        keep = cols < ncols
        t = tl.load(x + row * ncols + cols, mask=keep, other=-float("inf"))
        e = tl.exp(t - tl.max(t, axis=0))
        tl.store(y + row * ncols + cols, e / tl.sum(e, axis=0), mask=keep)

    @triton.jit
    def layernorm_row(x, y, ncols, eps, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        keep = cols < ncols
        t = tl.load(x + row * ncols + cols, mask=keep, other=0.0)
        mean = tl.sum(t, axis=0) / ncols
        c = tl.where(keep, t - mean, 0.0)
        var = tl.sum(c * c, axis=0) / ncols
        tl.store(y + row * ncols + cols, c / tl.sqrt(var + eps), mask=keep)

    def run(kernel, x, *extra):
        tx = torch.from_numpy(x)
        ty = torch.empty_like(tx)
        kernel[(x.shape[0],)](tx, ty, x.shape[1], *extra,
                              BLOCK=triton.next_power_of_2(x.shape[1]))
        return ty.numpy()

    return {"softmax": lambda x: run(softmax_row, x),
            "layernorm": lambda x: run(layernorm_row, x, EPS)}


# --- driver ------------------------------------------------------------------------------------------

def workloads(rng: np.random.Generator):
    sx = rng.standard_normal((4096, 1024), dtype=np.float32)
    ma, mb = (rng.standard_normal((1024, 1024), dtype=np.float32) for _ in range(2))
    q, k, v = (rng.standard_normal((2048, 128), dtype=np.float32) for _ in range(3))
    k_t = np.ascontiguousarray(k.T)  # the kernel's layout, made once outside the timing
    return [
        ("softmax 4096x1024, grid 32", "softmax", (sx,), lambda: nki_softmax[32](sx),
         lambda: np_softmax(sx), 1e-5),
        ("layer norm 4096x1024, grid 32", "layernorm", (sx,), lambda: nki_layernorm[32](sx),
         lambda: np_layernorm(sx), 1e-4),
        ("matmul 1024^3, tiled", "matmul", (ma, mb), lambda: nki_matmul(ma, mb),
         lambda: ma @ mb, 1e-3),
        ("flash-attention fwd 2048x128, grid 16", "flash", (q, k, v),
         lambda: nki_flash_fwd[16](q, k_t, v), lambda: np_flash_fwd(q, k, v), 1e-4),
    ]


def _policy(fn: Callable[[], object]) -> object:
    """``fn`` under the BLAS thread policy our runs use (emulator/blas.py): on a busy host one
    OpenBLAS thread beats two spinning ones, so the floor is the better of NumPy with and
    without it."""
    with blas.blas_threads_for_run():
        return fn()


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """One call's wall and process CPU time (every thread's)."""
    w, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w, time.process_time() - c


def interleaved(impls: dict[str, Callable[[], object]], rounds: int,
                slow_rounds: int) -> dict[str, tuple[float, float]]:
    """Best wall and CPU time of each implementation over rounds that call each in turn; an
    implementation slower than 1 s per call (the interpreter) takes part in ``slow_rounds``."""
    best = {name: (float("inf"), float("inf")) for name in impls}
    for name, fn in impls.items():
        fn()  # warm-up: traces, compiles, first-touch pages
    for r in range(rounds):
        for name, fn in impls.items():
            if r >= slow_rounds and best[name][0] > 1.0:
                continue
            w, c = timed(fn)
            best[name] = (min(best[name][0], w), min(best[name][1], c))
    return best


def fmt(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms" if seconds < 1 else f"{seconds:.2f} s"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15, help="interleaved rounds [15]")
    ap.add_argument("--quick", action="store_true", help="3 rounds (run_all.py --quick)")
    ap.add_argument("--skip-peers", action="store_true", help="only ours against NumPy")
    ap.add_argument("--only", metavar="TEXT", help="only the workloads whose title holds TEXT")
    ap.add_argument("--json", metavar="PATH", help="also write the rows in the shared format")
    args = ap.parse_args(argv)
    if args.quick:
        args.rounds = 3
    peers: dict[str, Callable] = {}
    per_row: dict[str, Callable] = {}
    if not args.skip_peers:
        peers = {**triton_impls(), **triton_extra()}
        per_row = triton_per_row()
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    print(f"{'workload':40s} {'ours wall/cpu':>20s} {'numpy wall/cpu':>20s} "
          f"{'triton wall/cpu':>20s}  ratios (wall, cpu)")
    rows: list[Row] = []
    for title, kind, inputs, ours, numpy_fn, tol in workloads(np.random.default_rng(0)):
        if args.only and args.only not in title:
            continue
        ref = numpy_fn()
        np.testing.assert_allclose(ours(), ref, rtol=tol, atol=tol)
        impls = {"ours": ours, "numpy": numpy_fn, "numpy-policy": lambda f=numpy_fn: _policy(f)}
        if kind in peers:
            fn = peers[kind]
            np.testing.assert_allclose(fn(*inputs), ref, rtol=max(tol, 1e-4), atol=1e-3)
            impls["triton"] = lambda fn=fn: fn(*inputs)
        if kind in per_row:
            fn = per_row[kind]
            np.testing.assert_allclose(fn(*inputs), ref, rtol=max(tol, 1e-4), atol=1e-3)
            impls["triton-rows"] = lambda fn=fn: fn(*inputs)
        best = interleaved(impls, args.rounds, slow_rounds=2)
        (ow, oc) = best["ours"]
        nw = min(best["numpy"][0], best["numpy-policy"][0])
        nc = min(best["numpy"][1], best["numpy-policy"][1])
        ratios = f"{ow / nw:.2f}x / {oc / nc:.2f}x numpy"
        rows.append(Row(SUITE, title, ow, "numpy floor (wall)", nw,
                        *ratio_target(ow, nw, NUMPY_AT_MOST)))
        rows.append(Row(SUITE, title + " [cpu]", oc, "numpy floor (cpu)", nc,
                        *ratio_target(oc, nc, NUMPY_AT_MOST)))
        tcol = ""
        if "triton" in best:
            tw, tc = best["triton"]
            ratios += f", {tw / ow:.0f}x / {tc / oc:.0f}x faster than triton"
            rows.append(Row(SUITE, title, ow, "triton-interpret (wall)", tw,
                            *ratio_target(ow, tw, INTERPRETER_AT_MOST)))
            tcol = f"{fmt(tw)} / {fmt(tc)}"
        if "triton-rows" in best:
            rw, rc = best["triton-rows"]
            ratios += (f"; Triton's tutorial form (one row per program) {fmt(rw)} / {fmt(rc)}: "
                       f"{rw / ow:.0f}x / {rc / oc:.0f}x")
            rows.append(Row(SUITE, title, ow, "triton-interpret, one row per program (wall)", rw,
                            *ratio_target(ow, rw, INTERPRETER_AT_MOST)))
        print(f"{title:40s} {fmt(ow) + ' / ' + fmt(oc):>20s} {fmt(nw) + ' / ' + fmt(nc):>20s} "
              f"{tcol:>20s}  {ratios}", flush=True)
    print(f"load average at end: {os.getloadavg()[0]:.1f}")
    write_json(args.json, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
