"""The neuron PJRT device across processes: torchrun, two launchers standing in for two hosts, and
xmp.spawn run a data-parallel torch_xla training script (a C++ op and an NKI kernel in the model;
xm.optimizer_step all-reduces the gradients between processes over gloo) that matches one process
training on the whole global batch. A peer that dies or hangs ends the others' collective with a
clear error within NEURON_RT_EXEC_TIMEOUT. The world's description (world.py) is checked alone."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from emulator import load_artifact
from neuron_customcall.cache import CompileCache
from neuron_customcall.pjrt import devices, world
from tests.sdk.subproc import ROOT, SDK, check, entry_points_dir, run_python

PROGRAMS = Path(__file__).resolve().parent / "programs"
TRAIN = PROGRAMS / "dp_train.py"
PEER = PROGRAMS / "peer_all_reduce.py"


# -- the world, from the environment ---------------------------------------------------------------
def test_a_process_alone_addresses_every_core():
    w = world.from_environment({})
    assert (w.process_index, w.counts, w.local_cores) == (0, (2,), (0, 1))
    assert w.devices() == [(0, 0, 0, "NC_v2"), (1, 0, 1, "NC_v2")]


def test_processes_num_devices_numbers_each_process_after_the_ones_before():
    env = {"NEURON_PJRT_PROCESSES_NUM_DEVICES": "1,2,1", "NEURON_PJRT_PROCESS_INDEX": "1",
           "NEURON_RT_VISIBLE_CORES": "4-5"}
    w = world.from_environment(env)
    assert w.num_devices == 4 and w.first_local_id == 1
    assert w.devices() == [(0, 0, -1, "NC_v2"), (1, 1, 4, "NC_v2"), (2, 1, 5, "NC_v2"), (3, 2, -1, "NC_v2")]
    assert [w.process_of(d) for d in range(4)] == [0, 1, 1, 2]
    assert world.device_ranks(w, [3, 1]) == (2, 1)
    with pytest.raises(devices.DeviceConfigError, match="device 4 is not one of the 4 devices"):
        w.process_of(4)


def test_world_size_is_one_core_per_process_and_create_options_are_jaxs():
    w = world.from_environment({"NEURON_PJRT_WORLD_SIZE": "3", "NEURON_PJRT_PROCESS_INDEX": "2",
                                "NEURON_RT_VISIBLE_CORES": "0"})
    assert (w.process_index, w.counts) == (2, (1, 1, 1))
    w = world.from_environment({"NEURON_RT_NUM_CORES": "2"}, options={"num_nodes": 2, "node_id": 1})
    assert (w.process_index, w.counts, w.first_local_id) == (1, (2, 2), 2)


@pytest.mark.parametrize("env, message", [
    ({"NEURON_PJRT_WORLD_SIZE": "2", "NEURON_PJRT_PROCESS_INDEX": "0"}, r"given 1 NeuronCore\(s\).*sees 2"),
    ({"NEURON_PJRT_WORLD_SIZE": "2", "NEURON_PJRT_PROCESS_INDEX": "2", "NEURON_RT_VISIBLE_CORES": "0"},
     "outside a world of 2 processes"),
    ({"NEURON_PJRT_PROCESSES_NUM_DEVICES": "1,x"}, "not a comma-separated list"),
    ({"NEURON_PJRT_PROCESSES_NUM_DEVICES": "1,0"}, "every process needs a core"),
    ({"NEURON_PJRT_PROCESS_INDEX": "one"}, "is not a number"),
])
def test_an_inconsistent_world_is_named(env, message):
    with pytest.raises(devices.DeviceConfigError, match=message):
        world.from_environment(env)


def test_torchrun_gives_each_local_rank_its_core_once():
    env = {"TORCHELASTIC_RUN_ID": "r", "WORLD_SIZE": "4", "RANK": "3", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}
    world.configure_torchrun(env)
    assert env["NEURON_PJRT_WORLD_SIZE"] == "4" and env["NEURON_PJRT_PROCESS_INDEX"] == "3"
    assert env["NEURON_RT_VISIBLE_CORES"] == "1" and env["PJRT_LOCAL_PROCESS_COUNT"] == "2"
    world.configure_torchrun(env)  # torch_xla's xla:// rendezvous calls it again: nothing changes
    assert env["NEURON_RT_VISIBLE_CORES"] == "1"
    env = {"TORCHELASTIC_RUN_ID": "r", "WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
           "NEURON_RT_VISIBLE_CORES": "4,6"}
    world.configure_torchrun(env)
    assert env["NEURON_RT_VISIBLE_CORES"] == "6"
    with pytest.raises(devices.DeviceConfigError, match="lists 3 cores for 2 local processes"):
        world.configure_torchrun({"TORCHELASTIC_RUN_ID": "r", "LOCAL_WORLD_SIZE": "2", "NEURON_RT_VISIBLE_CORES": "0-2"})
    untouched = {"WORLD_SIZE": "2"}
    world.configure_torchrun(untouched)  # not under torchrun
    assert untouched == {"WORLD_SIZE": "2"}


# -- processes ---------------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(cache: Path, **extra: str) -> dict[str, str]:
    entries = [str(ROOT), str(SDK), str(entry_points_dir()), os.environ.get("PYTHONPATH", "")]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEURON_PJRT_", "NEURON_RT_"))}
    env.update(PYTHONPATH=os.pathsep.join(filter(None, entries)), PJRT_DEVICE="NEURON", JAX_PLATFORMS="cpu",
               NEURON_COMPILE_CACHE_URL=str(cache), NEURON_RT_EXEC_TIMEOUT="120")
    env.update(extra)
    return env


def _results(out: Path, n: int) -> list[dict]:
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(n)]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    """One process training on the whole global batch."""
    out = tmp_path_factory.mktemp("one")
    check(run_python([str(TRAIN), str(out)], env=_env(out / "cache")))
    (got,) = _results(out, 1)
    assert got["world"] == 1
    return got


def _matches(reference: dict, ranks: list[dict]) -> None:
    n = len(ranks)
    for r, got in enumerate(ranks):
        assert (got["rank"], got["world"], got["devices"]) == (r, n, n)
        for name, want in reference["params"].items():
            np.testing.assert_allclose(np.array(got["params"][name]), np.array(want), rtol=1e-5, atol=1e-6,
                                       err_msg=f"rank {r} {name}")
    # each rank's loss is its shard's mean: their mean is the global batch's
    np.testing.assert_allclose(np.mean([g["losses"] for g in ranks], axis=0), reference["losses"], rtol=1e-5)


def _launch(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "torch.distributed.run", *args], env=env, cwd=str(ROOT),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _wait(procs: list[subprocess.Popen], timeout: float = 900) -> None:
    deadline = time.monotonic() + timeout
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=max(1.0, deadline - time.monotonic()))[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert all(p.returncode == 0 for p in procs), "\n".join(o[-6000:] for o in outs)


def test_torchrun_data_parallel_matches_one_process_and_shares_the_cache(tmp_path, reference):
    cache = tmp_path / "cache"
    port = _free_port()
    _wait([_launch(["--nproc_per_node=2", f"--master_port={port}", str(TRAIN), str(tmp_path)], _env(cache))])
    _matches(reference, _results(tmp_path, 2))
    # both processes compiled the same graphs at once into one cache: whole entries only
    store = CompileCache(cache)
    assert store.temporaries() == [] and store.entries()
    for entry in store.entries():
        load_artifact(entry)


def test_two_launchers_stand_in_for_two_hosts(tmp_path, reference):
    port = _free_port()
    env = _env(tmp_path / "cache")
    common = ["--nnodes=2", "--nproc_per_node=2", "--master_addr=127.0.0.1", f"--master_port={port}"]
    procs = [_launch([*common, f"--node_rank={node}", str(TRAIN), str(tmp_path), "--steps=2"], env) for node in (0, 1)]
    _wait(procs)
    ranks = _results(tmp_path, 4)
    for r, got in enumerate(ranks):
        assert (got["rank"], got["world"]) == (r, 4)
    # two steps of the reference's four: compare against a 2-step reference run
    ref = tmp_path / "ref"
    ref.mkdir()
    check(run_python([str(TRAIN), str(ref), "--steps=2"], env=_env(tmp_path / "cache")))
    _matches(_results(ref, 1)[0], ranks)


def test_xmp_spawn_runs_one_process_per_core(tmp_path, reference):
    check(run_python([str(TRAIN), str(tmp_path), "--spawn"], env=_env(tmp_path / "cache", MASTER_PORT=str(_free_port()))))
    _matches(reference, _results(tmp_path, 2))


def _peers(tmp_path: Path, mode: str, timeout_s: int) -> list[dict]:
    """The two processes of peer_all_reduce.py, started as xmp.spawn starts its children."""
    root = f"127.0.0.1:{_free_port()}"
    procs = []
    for index in (0, 1):
        env = _env(tmp_path / "cache", NEURON_PJRT_PROCESSES_NUM_DEVICES="1,1", NEURON_PJRT_PROCESS_INDEX=str(index),
                   NEURON_RT_VISIBLE_CORES=str(index), NEURON_RT_ROOT_COMM_ID=root,
                   NEURON_RT_EXEC_TIMEOUT=str(timeout_s))
        procs.append(subprocess.Popen([sys.executable, str(PEER), mode, str(tmp_path / f"peer{index}.json")], env=env,
                                      cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    try:
        logs = [procs[0].communicate(timeout=600)[0]]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
    # after a failed step torch_xla raises its error again at exit: only a clean run exits with 0
    assert (procs[0].returncode == 0 or mode != "run") and (tmp_path / "peer0.json").exists(), logs[0][-6000:]
    return [json.loads((tmp_path / f"peer{i}.json").read_text()) for i in (0, 1) if (tmp_path / f"peer{i}.json").exists()]


def test_processes_see_the_global_devices_and_reduce_between_them(tmp_path):
    first, second = _peers(tmp_path, "run", 120)
    for index, got in enumerate((first, second)):
        assert (got["process_index"], got["ordinal"]) == (index, index)
        assert (got["global_devices"], got["addressable_devices"]) == (2, 1)
        assert got["first"] == [10.0, 12.0, 14.0, 16.0]  # [0,1,2,3] + [10,11,12,13]
        assert got["second"] == [20.0, 22.0, 24.0, 26.0]  # max of 2x each


def test_a_dead_peer_is_a_clear_error_not_a_hang(tmp_path):
    got = _peers(tmp_path, "die", 120)[0]
    assert "second" not in got, got
    assert got["error"].startswith("RuntimeError: ExecutionError") and "CollectiveError" in got["error"], got
    assert "process(es) [1]" in got["error"] and "died" in got["error"]
    assert got["seconds"] < 100  # the closed connection ends it, not the 120 s timeout


def test_a_hung_peer_times_out_at_neuron_rt_exec_timeout(tmp_path):
    # 20 s: the same timeout bounds the first collective, which waits for the slower start
    got = _peers(tmp_path, "hang", 20)[0]
    assert "CollectiveTimeout" in got["error"] and "NEURON_RT_EXEC_TIMEOUT" in got["error"], got
    assert 15 <= got["seconds"] < 120


# -- JAX ---------------------------------------------------------------------------------------------
def _jax_processes(tmp_path: Path, cores: int) -> list[dict]:
    port = _free_port()
    env = _env(tmp_path / "cache", JAX_PLATFORMS="neuron", NEURON_RT_NUM_CORES=str(cores))
    procs = [subprocess.Popen([sys.executable, str(PROGRAMS / "jax_psum.py"), str(pid), "2", str(port),
                               str(tmp_path / f"jax{pid}.json")], env=env, cwd=str(ROOT),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for pid in (0, 1)]
    _wait(procs, timeout=600)
    return [json.loads((tmp_path / f"jax{pid}.json").read_text()) for pid in (0, 1)]


def test_jax_distributed_psum_across_processes(tmp_path):
    got = _jax_processes(tmp_path, 1)
    for pid, seen in enumerate(got):
        assert seen["platform"] == "neuron" and seen["devices"] == [[0, 0], [1, 1]] and seen["local"] == [pid]
        assert "error" not in seen, seen["error"]
        assert seen["psum"] == [[10.0, 12.0, 14.0, 16.0]]  # [0,1,2,3] + [10,11,12,13]
        assert seen["all_gather"] == [[0.0, 1.0, 2.0, 3.0], [10.0, 11.0, 12.0, 13.0]]
        # the processes met through JAX's key-value store (PJRT_Client_Create's callbacks), nothing else
        assert seen["env"] == [], seen
        assert len(seen["joined"]) == 1 and "the framework's key-value store (PJRT_Client_Create)" in \
            seen["joined"][0], seen["joined"]
        # the callbacks themselves: a value put by the other process, a missing key, an expired wait
        assert seen["kv"] == {"peer": f"from {1 - pid}", "absent": None, "timeout": "TimeoutError"}, seen["kv"]


def test_jax_distributed_with_two_cores_per_process(tmp_path):
    """Four devices, two per process: collectives meet between the threads of a process and
    over gloo between the processes."""
    got = _jax_processes(tmp_path, 2)
    rows = [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [10.0, 11.0, 12.0, 13.0], [14.0, 15.0, 16.0, 17.0]]
    for pid, seen in enumerate(got):
        assert seen["devices"] == [[0, 0], [1, 0], [2, 1], [3, 1]] and seen["local"] == [2 * pid, 2 * pid + 1]
        assert "error" not in seen, seen["error"]
        assert seen["psum"] == [np.sum(rows, axis=0).tolist()]
        assert seen["all_gather"] == rows
