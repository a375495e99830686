"""One process of a two-process world on the neuron device, started as xmp.spawn starts its
children (the environment torch_xla's Neuron set-up writes: NEURON_PJRT_PROCESSES_NUM_DEVICES,
NEURON_PJRT_PROCESS_INDEX, NEURON_RT_VISIBLE_CORES, NEURON_RT_ROOT_COMM_ID): two xm.all_reduce
calls between the processes. argv: mode out.json; mode "run" (both run), "die" (process 1 exits
after the first), "hang" (process 1 sleeps instead of the second). Writes what it saw."""
import json
import os
import sys
import time

import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr

mode, out = sys.argv[1], sys.argv[2]
dev = torch_xla.device()
xm.set_replication(dev, [dev])  # what xmp.spawn does in each child: this process replicates its device
index = xr.process_index()
seen = {"process_index": index, "global_devices": xr.global_runtime_device_count(),
        "addressable_devices": xr.addressable_runtime_device_count(), "ordinal": xr.global_ordinal()}
t = torch.arange(4, dtype=torch.float32).to(dev) + 10 * index
seen["first"] = xm.all_reduce(xm.REDUCE_SUM, t, groups=[[0, 1]]).cpu().tolist()
if index == 1 and mode == "die":
    os._exit(3)
if index == 1 and mode == "hang":
    time.sleep(600)
start = time.monotonic()
try:
    seen["second"] = xm.all_reduce(xm.REDUCE_MAX, t * 2, groups=[[0, 1]]).cpu().tolist()
except Exception as e:  # noqa: BLE001 - the error is what the test checks
    seen["error"] = f"{type(e).__name__}: {e}"
seen["seconds"] = time.monotonic() - start
with open(out, "w") as f:
    json.dump(seen, f)
