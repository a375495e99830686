"""The platform table (emulator/platforms.py): the facts of trn1, inf2 and trn2 and how AWS's
variables (NEURON_PLATFORM_TARGET_OVERRIDE, NEURON_LOGICAL_NC_CONFIG) select one, with every
malformed or contradictory value refused by name."""
from __future__ import annotations

import pytest

from emulator import platforms as P

GiB = 2**30


def test_the_published_facts():
    trn1, inf2, trn2 = (P.PLATFORMS[n] for n in ("trn1", "inf2", "trn2"))
    # Trainium: 2 NeuronCore-v2, 32 GiB at 820 GB/s, 1 TB/s DMA; trn1.32xlarge: 16 chips, 384 GiB/s
    assert (trn1.physical_cores_per_chip, trn1.hbm_bytes_per_chip, trn1.chips_per_instance) == (2, 32 * GiB, 16)
    assert trn1.link_bytes_per_second_per_chip == 384 * GiB and trn1.generation == 2
    # Inferentia2: 2 NeuronCore-v2, 32 GiB at 820 GiB/s; inf2.48xlarge: 12 chips, 192 GiB/s
    assert (inf2.physical_cores_per_chip, inf2.chips_per_instance, inf2.link_bytes_per_second_per_chip) == \
        (2, 12, 192 * GiB)
    # Trainium2: 8 NeuronCore-v3, 96 GiB at 2.9 TB/s, 3.5 TB/s DMA; NeuronLink-v3 1,024 GB/s a chip
    # within a trn2.48xlarge (16 chips), 256 GB/s between the instances of an UltraServer
    assert (trn2.physical_cores_per_chip, trn2.hbm_bytes_per_chip, trn2.chips_per_instance) == (8, 96 * GiB, 16)
    assert trn2.hbm_bytes_per_second_per_chip == 2.9e12 and trn2.dma_bytes_per_second_per_chip == 3.5e12
    assert trn2.link_bytes_per_second_per_chip == 1024e9
    assert trn2.inter_instance_bytes_per_second_per_chip == 256e9 and trn2.generation == 3


@pytest.mark.parametrize("target, lnc, name, lnc_n, kind, per_chip, hbm_gib, instance", [
    ("", "", "trn1", 1, "NC_v2", 2, 16, 32),           # the default: one trn1 chip
    ("trn1", "1", "trn1", 1, "NC_v2", 2, 16, 32),
    ("gen2", "", "trn1", 1, "NC_v2", 2, 16, 32),       # NKI's alias
    ("inf2", "", "inf2", 1, "NC_v2", 2, 16, 24),
    ("trn2", "", "trn2", 2, "NC_v3d", 4, 24, 64),      # LNC=2, trn2's default: 4 logical cores a chip
    ("TRN2", "2", "trn2", 2, "NC_v3d", 4, 24, 64),
    ("gen3", "1", "trn2", 1, "NC_v3", 8, 12, 128),     # LNC=1: the 8 physical cores
])
def test_selection(target, lnc, name, lnc_n, kind, per_chip, hbm_gib, instance):
    t = P.topology(target, lnc)
    assert (t.platform.name, t.lnc, t.kind, t.cores_per_chip) == (name, lnc_n, kind, per_chip)
    assert t.hbm_bytes_per_core == hbm_gib * GiB and t.cores_per_instance == instance
    assert P.current({P.TARGET_ENV: target, P.LNC_ENV: lnc}) == t


def test_placement_of_logical_cores():
    t = P.topology("trn2", "2")
    assert [t.chip_of(c) for c in (0, 3, 4, 63, 64)] == [0, 0, 1, 15, 16]
    assert [t.core_on_chip(c) for c in (0, 3, 4, 7)] == [0, 3, 0, 3]
    assert [t.instance_of(c) for c in (63, 64)] == [0, 1]
    # within a chip: a logical core's share of HBM (2.9 TB/s / 4) and of DMA (3.5 TB/s / 4)
    assert t.intra_chip_bytes_per_second == 2.9e12 / 4
    assert P.topology("trn2", "1").intra_chip_bytes_per_second == 2.9e12 / 8
    assert P.topology().intra_chip_bytes_per_second == 410e9


@pytest.mark.parametrize("target, lnc, message", [
    ("trn1", "2", "NEURON_LOGICAL_NC_CONFIG='2': trn1 has no Logical NeuronCore configuration"),
    ("", "2", "NEURON_LOGICAL_NC_CONFIG='2': trn1 has no"),
    ("inf2", "2", "inf2 has no Logical NeuronCore"),
    ("trn2", "3", "NEURON_LOGICAL_NC_CONFIG='3': trn2 accepts 1 or 2"),
    ("trn2", "two", "NEURON_LOGICAL_NC_CONFIG='two' is not a number"),
    ("trn3", "", "NEURON_PLATFORM_TARGET_OVERRIDE='trn3': Trainium3 .* is not modelled; supported: gen2, gen3"),
    ("gen4", "", "NEURON_PLATFORM_TARGET_OVERRIDE='gen4'"),
    ("trn5", "", "NEURON_PLATFORM_TARGET_OVERRIDE='trn5' is not a Neuron platform; supported: .*trn2"),
])
def test_bad_settings_are_named(target, lnc, message):
    with pytest.raises(P.PlatformConfigError, match=message):
        P.current({P.TARGET_ENV: target, P.LNC_ENV: lnc})
