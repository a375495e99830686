"""The trn2 topology option of the neuron PJRT device (issue 18, "Devices"): with AWS's own
variables (NEURON_PLATFORM_TARGET_OVERRIDE, NEURON_LOGICAL_NC_CONFIG) the device count, kind,
chip grouping and memory follow the platform; NEURON_RT_NUM_CORES / NEURON_RT_VISIBLE_CORES count
logical cores; contradictory values are DeviceConfigErrors naming the variable. JAX lists the
devices and runs a jit and a 4-device collective on them (a fresh process each)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from neuron_customcall.pjrt import devices, world
from tests.neuron_customcall.pjrt._proc import ROOT, run_json, run_script

TRN2 = {"NEURON_PLATFORM_TARGET_OVERRIDE": "trn2"}
TRN2_LNC1 = {**TRN2, "NEURON_LOGICAL_NC_CONFIG": "1"}


@pytest.mark.parametrize("env, cores, kind", [
    ({}, [0, 1], "NC_v2"),                                          # one trn1 chip
    ({"NEURON_PLATFORM_TARGET_OVERRIDE": "inf2"}, [0, 1], "NC_v2"),
    (TRN2, [0, 1, 2, 3], "NC_v3d"),                                 # LNC=2: four logical cores a chip
    ({**TRN2, "NEURON_LOGICAL_NC_CONFIG": "2"}, [0, 1, 2, 3], "NC_v3d"),
    (TRN2_LNC1, list(range(8)), "NC_v3"),                           # LNC=1: the eight physical ones
    ({**TRN2, "NEURON_RT_NUM_CORES": "64"}, list(range(64)), "NC_v3d"),  # a trn2.48xlarge: 16 chips
    ({**TRN2_LNC1, "NEURON_RT_NUM_CORES": "128"}, list(range(128)), "NC_v3"),
    ({**TRN2, "NEURON_RT_VISIBLE_CORES": "4-7"}, [4, 5, 6, 7], "NC_v3d"),  # logical indices: chip 1
    ({"NEURON_RT_NUM_CORES": "32"}, list(range(32)), "NC_v2"),       # a trn1.32xlarge
])
def test_cores_and_kinds_per_option(env, cores, kind):
    assert devices.visible_cores(env) == cores
    w = world.from_environment(env)
    assert [d[3] for d in w.devices()] == [kind] * len(cores)
    assert [d[2] for d in w.devices()] == cores


@pytest.mark.parametrize("env, message", [
    ({"NEURON_LOGICAL_NC_CONFIG": "2"}, "NEURON_LOGICAL_NC_CONFIG='2': trn1 has no Logical NeuronCore"),
    ({**TRN2, "NEURON_LOGICAL_NC_CONFIG": "3"}, "NEURON_LOGICAL_NC_CONFIG='3': trn2 accepts 1 or 2"),
    ({"NEURON_PLATFORM_TARGET_OVERRIDE": "trn3"}, "NEURON_PLATFORM_TARGET_OVERRIDE='trn3': Trainium3"),
    ({"NEURON_PLATFORM_TARGET_OVERRIDE": "h100"}, "NEURON_PLATFORM_TARGET_OVERRIDE='h100' is not a Neuron"),
    ({**TRN2, "NEURON_RT_NUM_CORES": "65"}, r"NEURON_RT_NUM_CORES='65': core 64 does not exist on trn2 "
                                            r"\(LNC=2: 4 NC_v3d a chip\): 16 chips x 4 = 64 logical cores"),
    ({**TRN2, "NEURON_RT_VISIBLE_CORES": "60-64"}, "NEURON_RT_VISIBLE_CORES='60-64': core 64 does not exist"),
    ({"NEURON_RT_VISIBLE_CORES": "32"}, r"core 32 does not exist on trn1 .* \(0-31\)"),
])
def test_contradictory_settings_are_named(env, message):
    with pytest.raises(devices.DeviceConfigError, match=message):
        devices.visible_cores(env)
    with pytest.raises(devices.DeviceConfigError, match=message):
        world.from_environment(env)


def test_every_process_of_a_trn2_world_lists_the_same_kind():
    """Under torchrun each process sees one logical core; the others' devices carry the platform's
    kind too (every process of a run reads the same variables)."""
    env = {**TRN2, "NEURON_PJRT_PROCESSES_NUM_DEVICES": "1,2,1", "NEURON_PJRT_PROCESS_INDEX": "1",
           "NEURON_RT_VISIBLE_CORES": "4-5"}
    w = world.from_environment(env)
    assert w.devices() == [(0, 0, -1, "NC_v3d"), (1, 1, 4, "NC_v3d"), (2, 1, 5, "NC_v3d"), (3, 2, -1, "NC_v3d")]
    assert w.topology.cores_per_chip == 4 and w.topology.chip_of(5) == 1


_DESCRIBE = """
report(n=len(NEURON), kinds=sorted({d.device_kind for d in NEURON}), chips=[d.chip_id for d in NEURON],
       on_chip=[d.core_on_chip for d in NEURON], hw=[d.local_hardware_id for d in NEURON],
       limit=NEURON[0].memory_stats()["bytes_limit"], version=NEURON[0].client.platform_version)
"""


def test_jax_lists_the_trn2_devices():
    got = run_json(_DESCRIBE, env=TRN2)
    assert got["n"] == 4 and got["kinds"] == ["NC_v3d"] and got["chips"] == [0] * 4
    assert got["on_chip"] == [0, 1, 2, 3] and got["limit"] == 24 << 30  # one 24 GiB HBM bank
    assert "trn2 (LNC=2: 4 NC_v3d a chip)" in got["version"]
    got = run_json(_DESCRIBE, env={**TRN2, "NEURON_RT_VISIBLE_CORES": "6-9"})
    assert got["hw"] == [6, 7, 8, 9] and got["chips"] == [1, 1, 2, 2] and got["on_chip"] == [2, 3, 0, 1]
    got = run_json(_DESCRIBE, env=TRN2_LNC1)
    assert got["n"] == 8 and got["kinds"] == ["NC_v3"] and got["on_chip"] == list(range(8))
    assert got["limit"] == 12 << 30
    got = run_json(_DESCRIBE, env={})  # the default is unchanged: one trn1 chip
    assert got["n"] == 2 and got["kinds"] == ["NC_v2"] and got["limit"] == 16 << 30


def test_jax_runs_a_jit_and_a_four_device_collective_on_trn2():
    got = run_json("""
        from jax.sharding import Mesh, PartitionSpec as P
        x = np.arange(64, dtype=np.float32).reshape(8, 8) / 7
        f = lambda x: jnp.tanh(x @ x.T) + 1
        one = np.asarray(jax.jit(f)(jax.device_put(x, NEURON[3])))
        def psum(devs):
            mesh = Mesh(np.array(devs[:4]), ("x",))
            g = jax.shard_map(lambda b: jax.lax.psum(b * 2, "x"), mesh=mesh, in_specs=P("x"), out_specs=P())
            return np.asarray(jax.jit(g)(x))
        ours, cpu = psum(NEURON), psum(jax.devices("cpu"))
        report(kinds=[d.device_kind for d in NEURON], jit=float(np.max(np.abs(one - on_cpu(f, x)))),
               psum=float(np.max(np.abs(ours - cpu))), shape=list(ours.shape))
    """, env={**TRN2, "XLA_FLAGS": "--xla_force_host_platform_device_count=4"})
    assert got["kinds"] == ["NC_v3d"] * 4 and got["shape"] == [2, 8]
    assert got["jit"] <= 1e-5 and got["psum"] == 0.0


def test_a_bad_platform_setting_reaches_jax_named():
    proc = run_script("report(n=len(jax.devices('neuron')))", check=False,
                      env={**TRN2, "NEURON_LOGICAL_NC_CONFIG": "3"})
    assert proc.returncode != 0
    assert "NEURON_LOGICAL_NC_CONFIG='3': trn2 accepts 1 or 2" in proc.stderr


_TORCH_XLA = """
import json
import torch, torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr
x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
y = (x.to(torch_xla.device()) * 2 + 1).sum(0).cpu()
attrs = xr.global_runtime_device_attributes()
print("RESULT " + json.dumps({"kind": xm.xla_device_kind(), "n": xr.global_runtime_device_count(),
                              "chips": [a["chip_id"] for a in attrs], "on_chip": [a["core_on_chip"] for a in attrs],
                              "limit": xm.get_memory_info()["bytes_limit"],
                              "err": float((y - (x * 2 + 1).sum(0)).abs().max())}))
"""


def test_torch_xla_sees_the_trn2_device_kind_and_chips():
    env = {**os.environ, **TRN2, "PJRT_DEVICE": "NEURON", "NEURON_RT_VISIBLE_CORES": "2-5",
           "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = subprocess.run([sys.executable, "-c", _TORCH_XLA], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    got = json.loads(lines[-1][len("RESULT "):])
    assert got == {"kind": "NC_v3d", "n": 4, "chips": [0, 0, 1, 1], "on_chip": [2, 3, 0, 1],
                   "limit": 24 << 30, "err": 0.0}
