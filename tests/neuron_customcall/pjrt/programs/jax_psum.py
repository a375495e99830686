"""One process of a jax.distributed run on the neuron device: the global devices, then a psum and
an all_gather of every process's local data across processes (shard_map over all devices).
argv: process_id num_processes coordinator_port out.json."""
import json
import sys

import numpy as np

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

pid, n, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=n, process_id=pid)
seen = {"devices": [[d.id, d.process_index] for d in jax.devices()],
        "local": [d.id for d in jax.local_devices()], "platform": jax.devices()[0].platform}
try:
    mesh = jax.make_mesh((jax.device_count(),), ("x",))
    rows = len(jax.local_devices())
    local = np.arange(4 * rows, dtype=np.float32).reshape(rows, 4) + 10 * pid
    x = jax.make_array_from_process_local_data(NamedSharding(mesh, P("x")), local)
    f = jax.jit(jax.shard_map(lambda a: (jax.lax.psum(a, "x"), jax.lax.all_gather(a, "x", tiled=True)),
                              mesh=mesh, in_specs=P("x"), out_specs=(P(), P()), check_vma=False))
    total, gathered = f(x)
    seen["psum"] = np.asarray(total.addressable_data(0)).tolist()
    seen["all_gather"] = np.asarray(gathered.addressable_data(0)).tolist()
except Exception as e:  # noqa: BLE001 - the error is what the test checks
    seen["error"] = f"{type(e).__name__}: {e}"
with open(out, "w") as f:
    json.dump(seen, f)
jax.distributed.shutdown()
