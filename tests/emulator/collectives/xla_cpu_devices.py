"""Runs HLO modules on XLA:CPU with several replicas and partitions: the reference the emulator's
collectives are compared with.

Run as a script in its own process (`python -m tests.emulator.collectives.xla_cpu_devices SPEC OUT`):
XLA:CPU's host device count (`--xla_force_host_platform_device_count`) is read once, when jax
starts its CPU backend, so the parent test process (which may already have started it with one
device) can not provide 8 devices. SPEC is a JSON list of cases {"name", "hlo", "replicas",
"partitions", "inputs": npz path, optionally "proto": a serialized HloModuleProto run instead of
the text, or "xla_text": true to have XLA's own parser read the text}; OUT gets one npz per case (or its error text). Arrays travel as
raw bytes with their dtype name and shape (no pickling).
"""
from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence

import numpy as np

DEVICES = 8


def save_arrays(path: str, per_device: Sequence[Sequence[np.ndarray]]) -> None:
    """Device d's k-th array as raw bytes, dtype name and shape (bf16 survives, nothing pickled)."""
    meta, blobs = [], {}
    for d, arrays in enumerate(per_device):
        row = []
        for k, a in enumerate(arrays):
            a = np.ascontiguousarray(a)
            blobs[f"a{d}_{k}"] = np.frombuffer(a.tobytes(), np.uint8)
            row.append([a.dtype.name, list(a.shape)])
        meta.append(row)
    blobs["meta"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    np.savez(path, **blobs)


def load_arrays(path: str) -> list[list[np.ndarray]]:
    import ml_dtypes  # noqa: F401 - registers bfloat16 and friends with NumPy

    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(z["meta"].tobytes().decode())
        out = []
        for d, row in enumerate(meta):
            arrays = []
            for k, (dtype, shape) in enumerate(row):
                dt = np.dtype(getattr(ml_dtypes, dtype)) if hasattr(ml_dtypes, dtype) else np.dtype(dtype)
                arrays.append(np.frombuffer(z[f"a{d}_{k}"].tobytes(), dt).reshape(shape).copy())
            out.append(arrays)
    return out


def _run_case(case: dict, devs: list) -> list[list[np.ndarray]]:
    import jax
    from jax._src import xla_bridge
    from jax._src.lib import _jax
    from jax._src.lib import xla_client as xc
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    from hlo.schema import hlo_pb2
    from hlo.text import parse_hlo_text

    nr, npart = case["replicas"], case["partitions"]
    n = nr * npart
    if case.get("proto"):  # a form given as a proto: the proto itself
        proto = hlo_pb2.HloModuleProto.FromString(open(case["proto"], "rb").read())
    elif case.get("xla_text"):  # read by XLA's own text parser, not ours
        proto = hlo_pb2.HloModuleProto.FromString(
            xc.hlo.hlo_module_from_text(case["hlo"]).as_serialized_hlo_module_proto())
    else:
        proto = parse_hlo_text(case["hlo"])
    backend = xla_bridge.get_backend("cpu")
    opts = xc.CompileOptions()
    build = opts.executable_build_options
    build.num_replicas, build.num_partitions = nr, npart
    build.use_spmd_partitioning = npart > 1  # XLA:CPU refuses partitions otherwise
    build.device_assignment = xc.DeviceAssignment.create(np.arange(n).reshape(nr, npart))
    exe = backend.compile_and_load(_jax.mlir.hlo_to_stablehlo(proto.SerializeToString()),
                                   xc.DeviceList(tuple(devs[:n])), opts)
    inputs = load_arrays(case["inputs"])
    mesh = Mesh(np.array(devs[:n]), ("d",))
    args = []
    for k in range(len(inputs[0])):
        shards = [jax.device_put(inputs[d][k], devs[d]) for d in range(n)]
        shape = inputs[0][k].shape
        args.append(jax.make_array_from_single_device_arrays(
            (shape[0] * n,) + shape[1:], NamedSharding(mesh, PartitionSpec("d")), shards))
    results = exe.execute_sharded(args).disassemble_into_single_device_arrays()
    return [[np.asarray(per_output[d]) for per_output in results] for d in range(n)]


def main(spec_path: str, out_dir: str) -> None:
    import jax

    devs = sorted(jax.devices("cpu"), key=lambda d: d.id)
    report = {}
    for case in json.loads(open(spec_path).read()):
        try:
            save_arrays(os.path.join(out_dir, case["name"] + ".npz"), _run_case(case, devs))
            report[case["name"]] = ""
        except Exception as e:  # noqa: BLE001 - reported to the test, which decides
            report[case["name"]] = f"{type(e).__name__}: {e}"
    with open(os.path.join(out_dir, "report.json"), "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={DEVICES}"
    os.environ["JAX_PLATFORMS"] = "cpu"
    main(sys.argv[1], sys.argv[2])
