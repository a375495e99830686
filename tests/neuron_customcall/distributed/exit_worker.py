"""One process of a two-process world (run as a script by test_gloo_exit.py) that meets the other
through rendezvous.gloo_group, as the PJRT device's processes do, makes a few collectives and
exits: what the plugin does with its gloo groups at exit is what the test checks.

argv: rank port mode timeout_s; mode "run" (both reduce twice), "default" (the same with a
GlooCommunicator on torch.distributed's default group, destroyed before exit), "die" (rank 1 exits at once
after the first reduce), "hang" (rank 1 sleeps instead of the second), "mismatch" (both reduce a
5000-element value, then rank 1 again where rank 0 reduces the small one: each waits in another
bucket's group until their probes meet, and both end with a CollectiveError). Prints one JSON line per
event: the second reduce's outcome, then (from an atexit handler registered before the groups
exist, so it runs after the plugin's) whether the groups were closed and how many threads the
process has left."""
from __future__ import annotations

import atexit
import json
import os
import sys
import time

import numpy as np


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def main() -> int:
    rank, port, mode, timeout_s = int(sys.argv[1]), sys.argv[2], sys.argv[3], float(sys.argv[4])
    import logging

    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    from emulator.collectives import CollectiveError
    from neuron_customcall.distributed import GlooCommunicator
    from neuron_customcall.distributed.rendezvous import gloo_group

    seen: dict = {}

    def at_exit() -> None:  # runs after the plugin's handler (atexit: last registered, first run)
        print(json.dumps({"closed": groups.closed, "threads_before": seen["threads"],
                          "threads_after": _threads()}), flush=True)
    atexit.register(at_exit)
    if mode == "default":  # a communicator on torch.distributed's default group (torchrun's scripts)
        import torch.distributed as dist

        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
        comm = GlooCommunicator(timeout_s)
        groups = comm._process_groups()
    else:
        groups = gloo_group(rank, 2, timeout_s, env={"NEURON_RT_ROOT_COMM_ID": f"127.0.0.1:{port}"})
        comm = GlooCommunicator(timeout_s, group=groups)
    x = np.arange(6, dtype=np.float32) + 10 * rank
    first = comm.reduce((0, 1), x, "add", op="first")  # gloo's own all_reduce
    gathered = comm.all_gather((0, 1), x, op="gather")  # point-to-point, headers first
    seen["threads"] = _threads()
    assert first is not None and first.tolist() == (2 * np.arange(6) + 10).tolist(), first
    assert np.concatenate(gathered).tolist() == np.concatenate([np.arange(6), np.arange(6) + 10]).tolist()
    if rank == 1 and mode == "die":
        os._exit(3)
    if rank == 1 and mode == "hang":
        time.sleep(600)
    big = np.ones(5000, np.float32)
    if mode == "mismatch":  # the big value's bucket group is made here, with agreeing headers
        assert comm.reduce((0, 1), big, "add", op="big").tolist() == (2 * big).tolist()
    start = time.monotonic()
    try:
        second = comm.reduce((0, 1), big if mode == "mismatch" and rank == 1 else x * 2, "add", op="second")
        outcome = {"second": second.tolist()}
    except CollectiveError as e:
        outcome = {"error": f"{type(e).__name__}: {e}"}
    outcome["seconds"] = time.monotonic() - start
    print(json.dumps(outcome), flush=True)
    if mode == "default":
        dist.destroy_process_group()  # as the script should: its own groups; the buckets are the plugin's
    return 0


if __name__ == "__main__":
    sys.exit(main())
