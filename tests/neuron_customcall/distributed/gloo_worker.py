"""One rank of a gloo world (run as a script by test_gloo.py): compiles an HLO text, runs its
device's part with run_on_process_group and writes the outputs (or the error) to an .npz/.txt.

argv: hlo_path inputs.npz out_prefix mode; torch.distributed's env:// variables name the world.
mode "run": every rank runs; "die": rank 1 exits before the collective; "hang": rank 1 sleeps;
"other": rank 1 runs the module with its all-reduce renamed (another instruction); "die2"/"hang2": as "die"/"hang" after a first run of every rank; "twice": every
rank runs the module twice and also writes the second run's outputs (out_prefix<rank>.second.npz:
the all-reduces of gloo's own all_reduce go through their buckets' trailers then). A file
`<hlo_path>.rank<r>` next to the module is rank r's module instead. Each rank also writes, to
out_prefix<rank>.native.json, the (dtype, reducer) of every all-reduce gloo's own all_reduce did
(GlooCommunicator.reduce)."""
from __future__ import annotations

import json
import os
import sys
import time

import numpy as np


def main() -> int:
    hlo_path, inputs_path, out_prefix, mode = sys.argv[1:5]
    import torch.distributed as dist

    import hlo
    from emulator import load_artifact
    from emulator.collectives import CollectiveError
    from neuron_customcall.compiler import compile_module
    from neuron_customcall.distributed import GlooCommunicator, run_on_process_group

    dist.init_process_group("gloo", init_method="env://")
    rank = dist.get_rank()
    text = open(f"{hlo_path}.rank{rank}" if os.path.exists(f"{hlo_path}.rank{rank}") else hlo_path).read()
    if rank == 1 and mode == "other":
        text = text.replace(" ar = ", " ar_other = ").replace("(ar, mx", "(ar_other, mx")
    exe = load_artifact(compile_module(hlo.load(text)))
    with np.load(inputs_path, allow_pickle=False) as z:
        inputs = [z[f"r{rank}_{k}"] for k in range(len([n for n in z.files if n.startswith(f"r{rank}_")]))]
    comm = GlooCommunicator(timeout_s=float(os.environ.get("TEST_COLLECTIVE_TIMEOUT", "60")))
    native, reduce = [], comm.reduce

    def counted(group, value, reducer, *, op=""):
        result = reduce(group, value, reducer, op=op)
        if result is not None:
            native.append([str(value.dtype), reducer])
        return result
    comm.reduce = counted
    if mode in ("die2", "hang2"):  # a first run together (buckets made), then rank 1 dies or hangs
        run_on_process_group(exe, inputs, communicator=comm)
        mode = mode[:-1]
    if rank == 1 and mode == "die":
        os._exit(3)
    if rank == 1 and mode == "hang":
        time.sleep(600)
    start = time.monotonic()
    try:
        outs = run_on_process_group(exe, inputs, communicator=comm)
        if mode == "twice":
            np.savez(f"{out_prefix}{rank}.second.npz", *run_on_process_group(exe, inputs, communicator=comm))
    except CollectiveError as e:
        with open(f"{out_prefix}{rank}.txt", "w") as f:
            f.write(f"{type(e).__name__} after {time.monotonic() - start:.1f} s: {e}")
        return 2
    np.savez(f"{out_prefix}{rank}.npz", *outs)
    with open(f"{out_prefix}{rank}.native.json", "w") as f:
        json.dump(native, f)
    # As torch.distributed asks of every program: a process that exits with its gloo groups alive
    # can abort in interpreter finalization ("terminate called without an active exception"),
    # gloo's worker threads still holding work that refers to Python objects. Only on this path:
    # after a peer died or hung, tearing down could wait for the dead peer.
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
