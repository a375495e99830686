"""One process of a two-process world holding two devices each (run as a script by
test_gloo_local_first.py): ProcessWorld runs this process's devices as threads, their collectives
meeting each other locally and the other process's devices over gloo. Runs the program twice
(the second time its all-reduces go through bucket groups) and writes each run's outputs per
device and how many reductions gloo's all_reduce did here.

argv: rank port hlo_path inputs.npz out_prefix"""
from __future__ import annotations

import json
import sys

import numpy as np


def main() -> int:
    rank, port, hlo_path, inputs_path, out_prefix = int(sys.argv[1]), sys.argv[2], *sys.argv[3:6]
    import hlo
    from emulator import load_artifact
    from emulator.collectives import run_devices
    from neuron_customcall.compiler import compile_module
    from neuron_customcall.distributed import gloo
    from neuron_customcall.distributed.rendezvous import gloo_group

    calls = []
    over = gloo.GlooCommunicator._reduce_over_processes

    def counted(self, groups, group, value, reducer, op, names, **kw):
        calls.append([self.device, reducer])
        return over(self, groups, group, value, reducer, op, names, **kw)
    gloo.GlooCommunicator._reduce_over_processes = counted
    exe = load_artifact(compile_module(hlo.load(open(hlo_path).read())))
    mine = [2 * rank, 2 * rank + 1]
    with np.load(inputs_path, allow_pickle=False) as z:
        inputs = [[z[f"d{d}_{k}"] for k in range(len([n for n in z.files if n.startswith(f"d{d}_")]))] for d in mine]
    group = gloo_group(rank, 2, 60, env={"NEURON_RT_ROOT_COMM_ID": f"127.0.0.1:{port}"})
    world = gloo.ProcessWorld([0, 0, 1, 1], rank, group, 60)
    for run in (1, 2):
        outs = run_devices(exe, inputs, 4, 1, devices=mine, communicator=world.new_run())
        np.savez(f"{out_prefix}{rank}.run{run}.npz", **{f"d{d}_{k}": o for d, out in zip(mine, outs)
                                                       for k, o in enumerate(out)})
    with open(f"{out_prefix}{rank}.calls.json", "w") as f:
        json.dump(calls, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
