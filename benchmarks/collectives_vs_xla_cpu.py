"""HLO collectives on emulated devices (emulator.collectives.run_devices) against XLA:CPU running
the same module with the same number of host devices, in one process.

Each row is one module (an all-reduce sum or an all-gather of f32 over all devices) at one size
per device. Ours is run_devices end to end (threads started, every device's program run, outputs
returned), checked bit for bit against XLA:CPU first; XLA:CPU is one execute of its compiled executable on inputs already on its devices,
until the results are ready. The two alternate run by run; medians of wall time and of this
process's CPU time (threads included) are reported with their ratio.

Run: ``python benchmarks/collectives_vs_xla_cpu.py [--runs N] [--quick]``
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
os.environ["JAX_PLATFORMS"] = "cpu"
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

MODULES = {
    "all-reduce": """HloModule m, replica_count={n}
add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}}
ENTRY e {{
  p = f32[{rows},1024] parameter(0)
  ROOT r = f32[{rows},1024] all-reduce(p), to_apply=add
}}""",
    "all-gather": """HloModule m, replica_count={n}
ENTRY e {{
  p = f32[{rows},1024] parameter(0)
  ROOT r = f32[{total},1024] all-gather(p), dimensions={{0}}
}}""",
}


def _xla(text: str, n: int, inputs: list[np.ndarray]) -> Callable[[], object]:
    import jax
    from jax._src import xla_bridge
    from jax._src.lib import _jax
    from jax._src.lib import xla_client as xc
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    from hlo.text import parse_hlo_text

    backend = xla_bridge.get_backend("cpu")
    devs = sorted(backend.devices(), key=lambda d: d.id)[:n]
    opts = xc.CompileOptions()
    opts.executable_build_options.num_replicas = n
    opts.executable_build_options.device_assignment = xc.DeviceAssignment.create(np.arange(n).reshape(n, 1))
    exe = backend.compile_and_load(_jax.mlir.hlo_to_stablehlo(parse_hlo_text(text).SerializeToString()),
                                   xc.DeviceList(tuple(devs)), opts)
    shards = [jax.device_put(x, d) for x, d in zip(inputs, devs)]
    arg = jax.make_array_from_single_device_arrays((inputs[0].shape[0] * n,) + inputs[0].shape[1:],
                                                   NamedSharding(Mesh(np.array(devs), ("d",)), PartitionSpec("d")),
                                                   shards)

    def run() -> object:
        outs = exe.execute_sharded([arg]).disassemble_into_single_device_arrays()
        for per_device in outs:
            for a in per_device:
                a.block_until_ready()
        return outs
    return run


def _ours(text: str, n: int, inputs: list[np.ndarray]) -> Callable[[], object]:
    import hlo
    from emulator import load_artifact
    from emulator.collectives import run_devices
    from neuron_customcall.compiler import compile_module

    exe = load_artifact(compile_module(hlo.load(text)))
    return lambda: run_devices(exe, [[x] for x in inputs], n, 1)


def _alternating(a: Callable[[], object], b: Callable[[], object], runs: int) -> list[tuple[float, float]]:
    times: list[list[tuple[float, float]]] = [[], []]
    for _ in range(2):
        a(), b()
    for _ in range(runs):
        for k, f in enumerate((a, b)):
            w, c = time.perf_counter(), time.process_time()
            f()
            times[k].append((time.perf_counter() - w, time.process_time() - c))
    return [(statistics.median(t[0] for t in ts), statistics.median(t[1] for t in ts)) for ts in times]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="small sizes, 3 runs")
    args = parser.parse_args()
    sizes_mb = (1,) if args.quick else (1, 16, 64)
    runs = 3 if args.quick else args.runs
    print(f"{'op':<11} {'devices':>7} {'MB/dev':>6} {'ours wall':>10} {'XLA wall':>10} {'ratio':>6} "
          f"{'ours CPU':>10} {'XLA CPU':>10} {'ratio':>6}")
    for op, template in MODULES.items():
        for n in (2, 4):
            for mb in sizes_mb:
                rows = mb * 256  # 1024 f32 per row: 4 KiB
                text = template.format(n=n, rows=rows, total=rows * n)
                rng = np.random.default_rng(0)
                inputs = [rng.standard_normal((rows, 1024), dtype=np.float32) for _ in range(n)]
                ours, xla = _ours(text, n, inputs), _xla(text, n, inputs)
                got, want = ours(), xla()
                for d in range(n):  # the same bits before any timing
                    if got[d][0].tobytes() != np.asarray(want[0][d]).tobytes():
                        raise SystemExit(f"{op} on {n} devices: device {d} differs from XLA:CPU")
                (ow, oc), (xw, xc_) = _alternating(ours, xla, runs)
                print(f"{op:<11} {n:>7} {mb:>6} {ow * 1e3:>8.2f}ms {xw * 1e3:>8.2f}ms {ow / xw:>5.2f}x "
                      f"{oc * 1e3:>8.2f}ms {xc_ * 1e3:>8.2f}ms {oc / max(xc_, 1e-9):>5.2f}x", flush=True)


if __name__ == "__main__":
    main()
