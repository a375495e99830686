"""The NeuronCores this process sees, from the Neuron runtime's own variables.

`NEURON_RT_VISIBLE_CORES` lists core indices ("0", "0-3", "0,2,5-6"), `NEURON_RT_NUM_CORES` asks for
a count starting at core 0; with neither, one trn1 chip: two NeuronCore-v2 ("NC_v2"). Each core is a
PJRT device; a program of several devices runs them concurrently (their collectives meet).
"""
from __future__ import annotations

import os
from collections.abc import Mapping

#: cores of one trn1 chip (NeuronCore-v2): the default device count
CORES_PER_TRN1_CHIP = 2
CORE_KIND = "NC_v2"


class DeviceConfigError(ValueError):
    """A malformed NEURON_RT_VISIBLE_CORES or NEURON_RT_NUM_CORES."""


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


def visible_cores(env: Mapping[str, str] | None = None) -> list[int]:
    """Hardware indices of the NeuronCores this process uses."""
    env = os.environ if env is None else env
    visible = env.get("NEURON_RT_VISIBLE_CORES", "").strip()
    if visible:
        return _parse_visible(visible)
    count = env.get("NEURON_RT_NUM_CORES", "").strip()
    if count:
        try:
            n = int(count)
        except ValueError:
            raise DeviceConfigError(f"NEURON_RT_NUM_CORES={count!r} is not a number") from None
        if n < 1:
            raise DeviceConfigError(f"NEURON_RT_NUM_CORES={count!r}: at least one core is needed")
        return list(range(n))
    return list(range(CORES_PER_TRN1_CHIP))

