"""The Neuron platforms the emulated devices can stand for: one table, read by the PJRT devices,
the collectives' cost model and the NKI launch check.

Why a table: a trn1 chip and a trn2 chip differ in how many NeuronCores they hold, how the
runtime groups them (Logical NeuronCore configuration, LNC), what the frameworks see as the
device kind, and the rates of HBM and NeuronLink between chips. Every one of those facts is
looked up here, never decided by comparing platform names elsewhere.

The platform is chosen with AWS's own variables:

* ``NEURON_PLATFORM_TARGET_OVERRIDE`` (NKI's ``nki.jit`` reference): ``trn1``/``gen2``,
  ``inf2``, ``trn2``/``gen3``; ``trn3``/``gen4`` are refused by name. Unset: trn1, the
  emulator's default machine.
* ``NEURON_LOGICAL_NC_CONFIG`` (the LNC guide): 1 or 2 physical NeuronCores per logical one,
  on platforms that have LNC (trn2: 2 by default, four ``NC_v3d`` a chip; 1 gives eight
  ``NC_v3``). trn1 and inf2 have no LNC: only 1 is accepted there.

What the option does *not* change: the emulated core executes NeuronCore-v2 semantics on every
platform (emulator/machine.py; NKI's ``get_nc_version()`` says gen2). The platform sets the
topology (cores, grouping, chips, instances) and the rates the collectives are costed with.
Facts and their sources: docs/cost-model.md ("Platforms") and docs/pjrt.md.
"""
from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass

#: The variables read here (NKI's platform override; the runtime's LNC setting).
TARGET_ENV = "NEURON_PLATFORM_TARGET_OVERRIDE"
LNC_ENV = "NEURON_LOGICAL_NC_CONFIG"

_GiB = 2**30


class PlatformConfigError(ValueError):
    """An unknown or unsupported platform, or an LNC setting the platform does not have."""


@dataclass(frozen=True, eq=False)
class Platform:
    """One Neuron chip and its largest instance (public AWS facts; sources in docs/cost-model.md).
    Each is one entry of PLATFORMS, compared and hashed by identity (a Topology is a cache key)."""

    name: str
    #: NeuronCore generation of the chip's physical cores (NKI's nc_version numbering)
    generation: int
    physical_cores_per_chip: int
    #: NEURON_LOGICAL_NC_CONFIG values the platform accepts, and the runtime's default
    lnc_values: tuple[int, ...]
    default_lnc: int
    #: LNC -> the device kind the frameworks see (PJRT device kind; the LNC guide's software ids)
    kinds: Mapping[int, str]
    #: LNC -> how many physical cores a kernel launch over ``nl.nc(n)`` / ``kernel[n]`` may
    #: spread its programs on (trn2: the logical core's own; trn1 and inf2: the chip's two
    #: NeuronCore-v2, as the emulator has always run beta 1's ``nl.nc(2)`` grids)
    launch_cores: Mapping[int, int]
    #: chips of the largest instance (trn1.32xlarge, inf2.48xlarge, trn2.48xlarge)
    chips_per_instance: int
    hbm_bytes_per_chip: int
    hbm_bytes_per_second_per_chip: float
    dma_bytes_per_second_per_chip: float
    #: NeuronLink between the chips of one instance, bytes/s per chip
    link_bytes_per_second_per_chip: float
    #: NeuronLink between instances (an UltraServer's), bytes/s per chip; None when the platform
    #: publishes none (its instances then count as one NeuronLink domain, as trn1 was modelled)
    inter_instance_bytes_per_second_per_chip: float | None


#: name -> platform. Values and sources: docs/cost-model.md, "Platforms".
PLATFORMS: dict[str, Platform] = {p.name: p for p in (
    Platform("trn1", generation=2, physical_cores_per_chip=2, lnc_values=(1,), default_lnc=1,
             kinds={1: "NC_v2"}, launch_cores={1: 2}, chips_per_instance=16,
             hbm_bytes_per_chip=32 * _GiB, hbm_bytes_per_second_per_chip=820e9,
             dma_bytes_per_second_per_chip=1e12, link_bytes_per_second_per_chip=384 * _GiB,
             inter_instance_bytes_per_second_per_chip=None),
    Platform("inf2", generation=2, physical_cores_per_chip=2, lnc_values=(1,), default_lnc=1,
             kinds={1: "NC_v2"}, launch_cores={1: 2}, chips_per_instance=12,
             hbm_bytes_per_chip=32 * _GiB, hbm_bytes_per_second_per_chip=820 * _GiB,
             dma_bytes_per_second_per_chip=1e12, link_bytes_per_second_per_chip=192 * _GiB,
             inter_instance_bytes_per_second_per_chip=None),
    Platform("trn2", generation=3, physical_cores_per_chip=8, lnc_values=(1, 2), default_lnc=2,
             kinds={1: "NC_v3", 2: "NC_v3d"}, launch_cores={1: 1, 2: 2}, chips_per_instance=16,
             hbm_bytes_per_chip=96 * _GiB, hbm_bytes_per_second_per_chip=2.9e12,
             dma_bytes_per_second_per_chip=3.5e12, link_bytes_per_second_per_chip=1024e9,
             inter_instance_bytes_per_second_per_chip=256e9),
)}

#: NEURON_PLATFORM_TARGET_OVERRIDE value -> platform name (NKI's aliases: trn1|inf2|gen2,
#: trn2|gen3; gen2 is taken as trn1, the emulator's default)
ALIASES: dict[str, str] = {"trn1": "trn1", "gen2": "trn1", "inf2": "inf2", "trn2": "trn2", "gen3": "trn2"}
#: values NKI knows that are refused here, with why
REFUSED: dict[str, str] = {
    "trn3": "Trainium3 (NeuronCore-v4) is not modelled",
    "gen4": "NeuronCore-v4 (Trainium3) is not modelled",
}
DEFAULT_PLATFORM = "trn1"


@dataclass(frozen=True)
class Topology:
    """A platform under one LNC setting: what a logical NeuronCore (one device) is and where it
    sits. Device index d counts logical cores: chip d // cores_per_chip, instance after that."""

    platform: Platform
    lnc: int

    @property
    def kind(self) -> str:
        return self.platform.kinds[self.lnc]

    @property
    def cores_per_chip(self) -> int:
        """Logical NeuronCores (devices) a chip shows."""
        return self.platform.physical_cores_per_chip // self.lnc

    @property
    def cores_per_instance(self) -> int:
        return self.cores_per_chip * self.platform.chips_per_instance

    @property
    def launch_cores(self) -> int:
        return self.platform.launch_cores[self.lnc]

    @property
    def hbm_bytes_per_core(self) -> int:
        """A logical core's share of its chip's HBM (trn1: 16 GiB; trn2 LNC=2: one 24 GiB bank)."""
        return self.platform.hbm_bytes_per_chip // self.cores_per_chip

    @property
    def intra_chip_bytes_per_second(self) -> float:
        """Between two logical cores of one chip (assumption: no published figure; the data moves
        by DMA through the chip's HBM, so a core's share of HBM and of DMA bandwidth bound it)."""
        p = self.platform
        return min(p.hbm_bytes_per_second_per_chip, p.dma_bytes_per_second_per_chip) / self.cores_per_chip

    def chip_of(self, core: int) -> int:
        return core // self.cores_per_chip

    def core_on_chip(self, core: int) -> int:
        return core % self.cores_per_chip

    def instance_of(self, core: int) -> int:
        return self.chip_of(core) // self.platform.chips_per_instance

    def describe(self) -> str:
        return f"{self.platform.name} (LNC={self.lnc}: {self.cores_per_chip} {self.kind} a chip)"


def platform_named(value: str) -> Platform:
    """The platform a NEURON_PLATFORM_TARGET_OVERRIDE value names (case-insensitive)."""
    key = value.strip().lower()
    if key in ALIASES:
        return PLATFORMS[ALIASES[key]]
    supported = ", ".join(sorted(ALIASES))
    if key in REFUSED:
        raise PlatformConfigError(f"{TARGET_ENV}={value!r}: {REFUSED[key]}; supported: {supported}")
    raise PlatformConfigError(f"{TARGET_ENV}={value!r} is not a Neuron platform; supported: {supported}")


def topology(target: str = "", lnc: str = "") -> Topology:
    """The topology the two variables' values (empty: unset) select."""
    platform = platform_named(target) if target.strip() else PLATFORMS[DEFAULT_PLATFORM]
    if not lnc.strip():
        return Topology(platform, platform.default_lnc)
    try:
        n = int(lnc)
    except ValueError:
        raise PlatformConfigError(f"{LNC_ENV}={lnc!r} is not a number; use "
                                  f"{' or '.join(map(str, platform.lnc_values))}") from None
    if n not in platform.lnc_values:
        if len(platform.lnc_values) == 1:
            raise PlatformConfigError(f"{LNC_ENV}={lnc!r}: {platform.name} has no Logical NeuronCore "
                                      f"configuration (LNC applies to trn2); only {platform.lnc_values[0]} is "
                                      f"accepted ({TARGET_ENV} selects the platform)")
        raise PlatformConfigError(f"{LNC_ENV}={lnc!r}: {platform.name} accepts "
                                  f"{' or '.join(map(str, platform.lnc_values))}")
    return Topology(platform, n)


@functools.lru_cache(maxsize=16)
def _cached(target: str, lnc: str) -> Topology:
    return topology(target, lnc)


def current(env: Mapping[str, str] | None = None) -> Topology:
    """The topology this process's variables select (read at each call: cheap, and a test or a
    launcher may change them)."""
    env = os.environ if env is None else env
    return _cached(env.get(TARGET_ENV, ""), env.get(LNC_ENV, ""))
