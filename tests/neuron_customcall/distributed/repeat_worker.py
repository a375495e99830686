"""One rank of a gloo world that runs one module several times (run as a script by
test_gloo_repeat.py), keeping every run's outputs until the end: the repeated all-reduces go
straight to their buckets (GlooCommunicator._reduce_again), whose buffers are the results
(distributed/blocks.py).

argv: hlo_path inputs.npz out_prefix runs; torch.distributed's env:// variables name the world.
Run k's inputs are the rank's inputs times k + 1. A file `<hlo_path>.rank<r>.run<k>` is rank r's
module at run k instead. Writes out_prefix<rank>.run<k>.npz for every run (after the last), or
out_prefix<rank>.txt with the error; out_prefix<rank>.pools.json: the buffers of each bucket
after the kept runs, then after as many runs more whose results are dropped at once, then
whether only the groups refer to each bucket group, then each reduction's polled waits and how
many of them ended within the polling window."""
from __future__ import annotations

import gc
import json
import os
import sys

import numpy as np


def main() -> int:
    hlo_path, inputs_path, out_prefix, runs = sys.argv[1:5]
    import torch.distributed as dist

    import hlo
    from emulator import load_artifact
    from emulator.collectives import CollectiveError
    from neuron_customcall.compiler import compile_module
    from neuron_customcall.distributed import GlooCommunicator, run_on_process_group

    if os.environ.get("REPEAT_WORKER_IDLE_HOST"):  # the test's: polling decided by the window alone
        from emulator import host
        host.cpu_pressure = lambda: 0.0
    dist.init_process_group("gloo", init_method="env://")
    rank = dist.get_rank()

    def executable(k: int):
        path = f"{hlo_path}.rank{rank}.run{k}"
        with open(path if os.path.exists(path) else hlo_path) as f:
            return load_artifact(compile_module(hlo.load(f.read())))
    with np.load(inputs_path, allow_pickle=False) as z:
        inputs = [z[f"r{rank}_{k}"] for k in range(len([n for n in z.files if n.startswith(f"r{rank}_")]))]
    comm = GlooCommunicator(timeout_s=60)
    kept = []
    try:
        for k in range(int(runs)):
            kept.append(run_on_process_group(executable(k), [x * (k + 1) for x in inputs], communicator=comm))
        pools = [{str(key): len(pool) for key, pool in comm._pools.items()}]
        for k, outs in enumerate(kept):
            np.savez(f"{out_prefix}{rank}.run{k}.npz", *outs)
        kept.clear()
        del outs  # the last run's outputs: nothing refers to them now
        for k in range(int(runs)):
            run_on_process_group(executable(0), inputs, communicator=comm)
        pools.append({str(key): len(pool) for key, pool in comm._pools.items()})
        # only the groups refer to their bucket groups (exit's close_at_exit drops those references
        # to stop gloo's threads while Python runs): none of the communicator's repeated calls does
        groups = comm._process_groups()
        pools.append([all(r is groups._buckets for r in gc.get_referrers(b)) for b in groups._buckets.values()])
        # how each repeated reduction waited for gloo (polling.py): polled calls, and those that ended within the window
        pools.append(sorted([call.waits.polled, call.waits.ended] for call in comm._calls.values()))
    except CollectiveError as e:
        with open(f"{out_prefix}{rank}.txt", "w") as f:
            f.write(f"{type(e).__name__}: {e}")
        return 2
    with open(f"{out_prefix}{rank}.pools.json", "w") as f:
        json.dump(pools, f)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
