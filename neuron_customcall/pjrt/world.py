"""The world of processes a neuron PJRT client belongs to: which devices are global, which are ours.

Why from the environment: the Neuron runtime's PJRT plugin learns its place in a multi-process
run from variables the framework writes before the client starts (torch_xla's
``_internal/neuron.py`` under ``torchrun`` and ``xmp.spawn``), and we read the same ones:

- ``NEURON_PJRT_PROCESS_INDEX``: this process's index (0 when unset);
- ``NEURON_PJRT_PROCESSES_NUM_DEVICES``: the NeuronCore count of every process, comma-separated
  ("1,1"), or ``NEURON_PJRT_WORLD_SIZE``: that many processes of one core each;
- with neither, the client's create options ``num_nodes`` / ``node_id`` (what JAX passes after
  ``jax.distributed.initialize``), every process having as many cores as this one;
- with none of these, a world of this process alone (every device addressable).

Device ids are global: process p's cores are numbered after those of processes 0 .. p-1, in the
order NEURON_RT_VISIBLE_CORES lists them, as the frameworks expect (XLA's device assignment names
global ids; torch_xla numbers its ordinals in that order). Nothing here talks to another process:
the transport between them is created when a program first needs it (service, distributed/).
"""
from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass

from emulator import platforms
from neuron_customcall.pjrt import devices


@dataclass(frozen=True)
class World:
    """This process's place among the processes of one run."""

    process_index: int
    #: NeuronCores of every process, by process index
    counts: tuple[int, ...]
    #: hardware indices of this process's cores (NEURON_RT_VISIBLE_CORES)
    local_cores: tuple[int, ...]
    #: the platform and LNC setting every process of the run uses (emulator/platforms.py)
    topology: platforms.Topology = platforms.topology()

    @property
    def num_processes(self) -> int:
        return len(self.counts)

    @property
    def num_devices(self) -> int:
        return sum(self.counts)

    @property
    def first_local_id(self) -> int:
        return sum(self.counts[:self.process_index])

    def process_of(self, device_id: int) -> int:
        """The process that owns global device `device_id`."""
        if not 0 <= device_id < self.num_devices:
            raise devices.DeviceConfigError(f"device {device_id} is not one of the {self.num_devices} devices of "
                                            f"this world of {self.num_processes} processes")
        end = 0
        for process, count in enumerate(self.counts):
            end += count
            if device_id < end:
                return process
        raise AssertionError("unreachable")

    def devices(self) -> list[tuple[int, int, int, str]]:
        """Every device of the world as (global id, process index, hardware id, kind); the
        hardware id of another process's core is -1 (PJRT's "undefined")."""
        out, next_id = [], 0
        for process, count in enumerate(self.counts):
            for k in range(count):
                hardware = self.local_cores[k] if process == self.process_index else -1
                out.append((next_id, process, hardware, self.topology.kind))
                next_id += 1
        return out


def _int(env: Mapping[str, str], name: str) -> int | None:
    text = env.get(name, "").strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise devices.DeviceConfigError(f"{name}={text!r} is not a number") from None


def _counts(env: Mapping[str, str], num_nodes: int | None, local: int) -> tuple[int, ...]:
    listed = env.get("NEURON_PJRT_PROCESSES_NUM_DEVICES", "").strip()
    if listed:
        try:
            counts = tuple(int(c) for c in listed.split(","))
        except ValueError:
            raise devices.DeviceConfigError(f"NEURON_PJRT_PROCESSES_NUM_DEVICES={listed!r} is not a comma-separated "
                                            "list of core counts") from None
        if any(c < 1 for c in counts):
            raise devices.DeviceConfigError(f"NEURON_PJRT_PROCESSES_NUM_DEVICES={listed!r}: every process needs a core")
        return counts
    size = _int(env, "NEURON_PJRT_WORLD_SIZE")
    if size is not None:
        if size < 1:
            raise devices.DeviceConfigError(f"NEURON_PJRT_WORLD_SIZE={size}: at least one process is needed")
        return (1,) * size
    if num_nodes is not None and num_nodes > 1:
        return (local,) * num_nodes
    return (local,)


def from_environment(env: Mapping[str, str] | None = None, options: Mapping[str, object] | None = None) -> World:
    """This process's world from the Neuron variables (module docstring), else the create options."""
    env = os.environ if env is None else env
    options = options or {}
    cores = tuple(devices.visible_cores(env))
    num_nodes = options.get("num_nodes")
    node_id = options.get("node_id")
    counts = _counts(env, int(num_nodes) if isinstance(num_nodes, int) else None, len(cores))
    index = _int(env, "NEURON_PJRT_PROCESS_INDEX")
    if index is None:
        index = int(node_id) if isinstance(node_id, int) and len(counts) > 1 else 0
    if not 0 <= index < len(counts):
        raise devices.DeviceConfigError(f"NEURON_PJRT_PROCESS_INDEX={index} is outside a world of {len(counts)} "
                                        "processes (NEURON_PJRT_PROCESSES_NUM_DEVICES / NEURON_PJRT_WORLD_SIZE)")
    if counts[index] != len(cores):
        raise devices.DeviceConfigError(
            f"process {index} of {len(counts)} is given {counts[index]} NeuronCore(s) "
            f"(NEURON_PJRT_PROCESSES_NUM_DEVICES / NEURON_PJRT_WORLD_SIZE) but sees {len(cores)}: {list(cores)} "
            "(NEURON_RT_VISIBLE_CORES / NEURON_RT_NUM_CORES); give each process its own cores, e.g. "
            "NEURON_RT_VISIBLE_CORES=<local rank>")
    return World(index, counts, cores, devices.topology(env))


def device_ranks(world: World, device_ids: Sequence[int]) -> tuple[int, ...]:
    """The process index of each logical device of a program (its device assignment's ids)."""
    return tuple(world.process_of(int(d)) for d in device_ids)


def configure_torchrun(env: MutableMapping[str, str] | None = None) -> None:
    """Under ``torchrun`` (and not SPMD), what torch_xla's own Neuron set-up writes before the
    client starts: one process per NeuronCore, the world's size and this process's index. Done
    once (kept when NEURON_PJRT_PROCESS_INDEX is set); a NEURON_RT_VISIBLE_CORES listing
    LOCAL_WORLD_SIZE cores gives each local rank its own."""
    env = os.environ if env is None else env
    if not env.get("TORCHELASTIC_RUN_ID") or env.get("XLA_USE_SPMD", "0") == "1" or \
            "NEURON_PJRT_PROCESS_INDEX" in env:
        return
    if "NEURON_PJRT_PROCESSES_NUM_DEVICES" not in env and "NEURON_PJRT_WORLD_SIZE" not in env:
        env["NEURON_PJRT_WORLD_SIZE"] = env.get("WORLD_SIZE", "1")
    env.setdefault("PJRT_LOCAL_PROCESS_COUNT", env.get("LOCAL_WORLD_SIZE", "1"))
    one_core_each(env, int(env.get("LOCAL_RANK", "0")), int(env.get("LOCAL_WORLD_SIZE", "1")))
    env["NEURON_PJRT_PROCESS_INDEX"] = env.get("RANK", "0")
    env.setdefault("PJRT_LOCAL_PROCESS_RANK", env.get("LOCAL_RANK", "0"))


def one_core_each(env: MutableMapping[str, str], local_rank: int, local_world_size: int) -> None:
    """This local process's core: the local_rank-th of NEURON_RT_VISIBLE_CORES when that lists
    one per local process, else core local_rank."""
    listed = env.get("NEURON_RT_VISIBLE_CORES", "").strip()
    if not listed:
        env["NEURON_RT_VISIBLE_CORES"] = str(local_rank)
        return
    cores = devices.visible_cores({"NEURON_RT_VISIBLE_CORES": listed})
    if len(cores) == 1 and local_world_size == 1:
        return
    if len(cores) != local_world_size:
        raise devices.DeviceConfigError(f"NEURON_RT_VISIBLE_CORES={listed} lists {len(cores)} cores for "
                                        f"{local_world_size} local processes (one core each)")
    env["NEURON_RT_VISIBLE_CORES"] = str(cores[local_rank])
