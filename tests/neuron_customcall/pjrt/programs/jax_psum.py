"""One process of a jax.distributed run on the neuron device: the global devices, then a psum and
an all_gather of every process's local data across processes (shard_map over all devices), and
where the plugin's gloo group met (JAX's key-value store, passed at client creation).
argv: process_id num_processes coordinator_port out.json."""
import json
import logging
import os
import sys

import numpy as np

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

pid, n, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]


class _Joins(logging.Handler):
    """Where the plugin's gloo group met (distributed.rendezvous logs it)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


joins = _Joins()
logging.getLogger("neuron_customcall.distributed.rendezvous").addHandler(joins)
logging.getLogger("neuron_customcall.distributed.rendezvous").setLevel(logging.INFO)
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
seen["joined"] = joins.messages
# the plugin's bridge to JAX's store (pjrt/native: the PJRT_Client_Create callbacks) directly
from neuron_customcall.pjrt import service  # noqa: E402

if service._kv is not None:
    get, put, try_get = service._kv
    put(f"test/{pid}".encode(), f"from {pid}".encode())
    kv = {"peer": get(f"test/{1 - pid}".encode(), 30000).decode(), "absent": try_get(b"test/absent")}
    try:
        get(b"test/absent", 200)
    except Exception as e:  # noqa: BLE001 - its type is what the test checks
        kv["timeout"] = type(e).__name__
    seen["kv"] = kv
seen["env"] = sorted(k for k in ("NEURON_RT_ROOT_COMM_ID", "MASTER_ADDR", "MASTER_PORT") if k in os.environ)
with open(out, "w") as f:
    json.dump(seen, f)
jax.distributed.shutdown()
