"""The NeuronCores this process sees, from the Neuron runtime's own variables.

`NEURON_RT_VISIBLE_CORES` lists core indices ("0", "0-3", "0,2,5-6"), `NEURON_RT_NUM_CORES` asks for
a count starting at core 0; with neither, one chip's cores. Which chip is the platform's
(emulator/platforms.py: `NEURON_PLATFORM_TARGET_OVERRIDE`, `NEURON_LOGICAL_NC_CONFIG`): by default
one trn1 chip, two NeuronCore-v2 ("NC_v2"); on trn2 four logical cores "NC_v3d" (LNC=2, the
default) or eight "NC_v3" (LNC=1). The indices count logical cores, as the runtime's do under
LNC=2, and must lie within the platform's largest instance. Each core is a PJRT device; a program
of several devices runs them concurrently (their collectives meet).
"""
from __future__ import annotations

import os
from collections.abc import Mapping

from emulator import platforms


class DeviceConfigError(ValueError):
    """A malformed or contradictory NEURON_RT_VISIBLE_CORES, NEURON_RT_NUM_CORES,
    NEURON_PLATFORM_TARGET_OVERRIDE or NEURON_LOGICAL_NC_CONFIG."""


def topology(env: Mapping[str, str] | None = None) -> platforms.Topology:
    """The platform and LNC setting the variables select (emulator/platforms.py)."""
    try:
        return platforms.current(env)
    except platforms.PlatformConfigError as exc:
        raise DeviceConfigError(str(exc)) from None


def _parse_visible(spec: str) -> list[int]:
    cores: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            first, last = int(lo), int(hi) if sep else int(lo)
        except ValueError:
            raise DeviceConfigError(f"NEURON_RT_VISIBLE_CORES={spec!r}: {part!r} is neither a core index nor a "
                                    "range like 0-3") from None
        if first < 0 or last < first:
            raise DeviceConfigError(f"NEURON_RT_VISIBLE_CORES={spec!r}: bad range {part!r}")
        cores.extend(range(first, last + 1))
    if len(set(cores)) != len(cores):
        raise DeviceConfigError(f"NEURON_RT_VISIBLE_CORES={spec!r} lists a core twice")
    if not cores:
        raise DeviceConfigError(f"NEURON_RT_VISIBLE_CORES={spec!r} lists no core")
    return cores


def _within_instance(name: str, value: str, cores: list[int], topo: platforms.Topology) -> list[int]:
    """Refuse cores the platform's largest instance does not have (the runtime refuses them too)."""
    if max(cores) >= topo.cores_per_instance:
        p = topo.platform
        raise DeviceConfigError(f"{name}={value!r}: core {max(cores)} does not exist on {topo.describe()}: "
                                f"{p.chips_per_instance} chips x {topo.cores_per_chip} = "
                                f"{topo.cores_per_instance} logical cores (0-{topo.cores_per_instance - 1})")
    return cores


def visible_cores(env: Mapping[str, str] | None = None) -> list[int]:
    """Indices of the (logical) NeuronCores this process uses."""
    env = os.environ if env is None else env
    topo = topology(env)
    visible = env.get("NEURON_RT_VISIBLE_CORES", "").strip()
    if visible:
        return _within_instance("NEURON_RT_VISIBLE_CORES", visible, _parse_visible(visible), topo)
    count = env.get("NEURON_RT_NUM_CORES", "").strip()
    if count:
        try:
            n = int(count)
        except ValueError:
            raise DeviceConfigError(f"NEURON_RT_NUM_CORES={count!r} is not a number") from None
        if n < 1:
            raise DeviceConfigError(f"NEURON_RT_NUM_CORES={count!r}: at least one core is needed")
        return _within_instance("NEURON_RT_NUM_CORES", count, list(range(n)), topo)
    return list(range(topo.cores_per_chip))
