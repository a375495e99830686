"""The NeuronLink cost model of collectives (emulator/cost/neuronlink.py): ring step counts and
bytes per member, trn1's topology (two cores a chip, NeuronLink between chips shared by the hops
leaving a chip), trn2's (four or eight logical cores a chip, NeuronLink-v3 within and between
instances), and that profiles of HLO collectives and NKI collectives carry those costs."""
from __future__ import annotations

import math
import threading

import numpy as np
import pytest

import hlo
from emulator import platforms
from emulator.collectives import DeviceContext, ThreadCommunicator, running_as
from emulator.cost import constants as C
from emulator.cost import neuronlink as nl
from emulator.cost.engines import DMA
from emulator.cost.kernel_ir import kernel_cost
from emulator.kernel_ir import ir
from tests.neuron_customcall.compiler.ours import compile_proto

MB = float(1 << 20)
ALPHA = C.HOP_LATENCY_S
TRN1 = platforms.topology("trn1")
LINK, CHIP = TRN1.platform.link_bytes_per_second_per_chip, TRN1.intra_chip_bytes_per_second


def _cycles(seconds: float) -> float:
    return math.ceil(seconds * C.CLOCK_HZ)


@pytest.fixture(autouse=True)
def _trn1(monkeypatch):
    """These tests cost on trn1, the default platform, whatever the environment selects."""
    monkeypatch.delenv(platforms.TARGET_ENV, raising=False)
    monkeypatch.delenv(platforms.LNC_ENV, raising=False)


def test_the_documented_constants():
    assert LINK == 384 * 2**30  # trn1.32xlarge, GiB/s per device
    assert CHIP == 410e9  # half of a trn1 chip's 820 GB/s of HBM
    assert TRN1.cores_per_chip == 2 and 1e-6 <= C.HOP_LATENCY_S <= 2e-6  # "about 1-2 us" per hop


@pytest.mark.parametrize("n", [2, 4, 8, 32])
def test_ring_step_counts_and_bytes_per_member(n):
    """all-reduce moves 2(n-1)/n of the value per member, all-gather/reduce-scatter/all-to-all (n-1)/n."""
    s = 64 * MB
    steps, chunk = nl.RING_STEPS["all-reduce"](n, s)
    assert steps == 2 * (n - 1) and steps * chunk == pytest.approx(2 * (n - 1) / n * s)
    for kind in ("all-gather", "reduce-scatter", "all-to-all"):
        steps, chunk = nl.RING_STEPS[kind](n, s)
        assert steps == n - 1 and steps * chunk == pytest.approx((n - 1) / n * s)


def test_the_two_cores_of_a_chip_use_the_intra_chip_path():
    s = 8 * MB
    assert nl.collective_cost("all-reduce", (0, 1), s) == {DMA: _cycles(2 * (ALPHA + s / 2 / CHIP))}
    # cores 0 and 2 are on chips 0 and 1: NeuronLink, one hop leaving each chip
    assert nl.collective_cost("all-reduce", (0, 2), s) == {DMA: _cycles(2 * (ALPHA + s / 2 / LINK))}


def test_hops_leaving_one_chip_share_its_neuronlink():
    s = 8 * MB
    # ring 0->1->2->3->0: 1->2 and 3->0 cross chips, one leaving each chip; 0->1, 2->3 on chip
    assert nl.hop_bandwidth(nl.ring_hops((0, 1, 2, 3))) == min(LINK, CHIP)
    # ring 0->2->1->3->0: every hop crosses; two leave each chip
    assert nl.hop_bandwidth(nl.ring_hops((0, 2, 1, 3))) == LINK / 2
    assert nl.collective_cost("all-gather", (0, 2, 1, 3), s) == {DMA: _cycles(3 * (ALPHA + s / 4 / (LINK / 2)))}
    assert nl.collective_cost("all-gather", (0, 1, 2, 3), s) == {DMA: _cycles(3 * (ALPHA + s / 4 / min(LINK, CHIP)))}


def test_permute_broadcast_and_a_group_of_one():
    s = 4 * MB
    assert nl.collective_cost("collective-permute", (), s, [(0, 2), (2, 0)]) == {DMA: _cycles(ALPHA + s / LINK)}
    assert nl.collective_cost("collective-permute", (), s, [(0, 1)]) == {DMA: _cycles(ALPHA + s / CHIP)}
    assert nl.collective_cost("collective-broadcast", (0, 1, 2, 3), s) == {
        DMA: _cycles(3 * ALPHA + s / min(LINK, CHIP))}
    one = nl.collective_cost("all-reduce", (3,), s)
    assert one == {DMA: C.DMA_FIXED_CYCLES + math.ceil(s / C.DMA_BYTES_PER_CYCLE)}  # a copy, no link


def test_latency_dominates_small_and_bandwidth_large_values():
    small = nl.collective_cost("all-reduce", tuple(range(8)), 1024)[DMA]
    assert small == pytest.approx(14 * ALPHA * C.CLOCK_HZ, rel=0.01)  # 2(n-1) hops of latency
    big = nl.collective_cost("all-reduce", tuple(range(8)), 256 * MB)[DMA]
    assert big == pytest.approx(2 * 7 / 8 * 256 * MB / min(LINK, CHIP) * C.CLOCK_HZ, rel=0.03)  # latency: 2%


_PROGRAM = """HloModule m, replica_count=4
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}
ENTRY e {
  p = f32[256,1024] parameter(0)
  ar = f32[256,1024] all-reduce(p), replica_groups={{0,2,1,3}}, to_apply=add
  ag = f32[512,1024] all-gather(p), replica_groups={{0,1},{2,3}}, dimensions={0}
  cp = f32[256,1024] collective-permute(p), source_target_pairs={{0,2},{2,0},{1,3},{3,1}}
  ROOT t = (f32[256,1024], f32[512,1024], f32[256,1024]) tuple(ar, ag, cp)
}"""


def _profiles_on_four_cores(program: str) -> list:
    """`program` run as replicas 0-3, one thread each, profiled."""
    # one executable per device: an executable's profile records into one timeline
    exes = [compile_proto(hlo.load(program).to_bytes()) for _ in range(4)]
    world = ThreadCommunicator(4, 60)
    profiles: list = [None] * 4
    errors: list = []

    def device(d: int) -> None:
        try:
            with running_as(DeviceContext(d, 0, 4, 1, world.endpoint(d))):
                profiles[d] = exes[d].profile([np.ones((256, 1024), np.float32)])[1]
        except BaseException as e:  # noqa: BLE001
            errors.append(e)
            world.abort(d, e)
    threads = [threading.Thread(target=device, args=(d,)) for d in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    return profiles


def _collective_cycles(prof, ops) -> dict[str, float]:
    return {t.op: t.cycles for t in prof.top(20) if t.op in ops}


def test_a_profile_on_four_cores_shows_the_neuronlink_costs():
    profiles = _profiles_on_four_cores(_PROGRAM)
    s = 256 * 1024 * 4
    want = {"all-reduce": nl.collective_cost("all-reduce", (0, 2, 1, 3), s)[DMA],
            "all-gather": nl.collective_cost("all-gather", (0, 1), 2 * s)[DMA],
            "collective-permute": _cycles(ALPHA + s / (LINK / 2))}  # two pairs leave each chip
    for prof in profiles:
        assert _collective_cycles(prof, want) == pytest.approx(want)
    # the whole-ring all-reduce over chips is slower than the on-chip all-gather pair
    assert want["all-reduce"] > want["all-gather"]


def _kernel(body, tensors):
    return ir.KernelIR(name="k", grid=(), tensors=tensors, inputs=("a",), outputs=("b",), body=body)


def test_nki_collectives_are_costed_on_the_ring_not_as_a_dma():
    tensors = {"a": ir.TensorDecl("a", (128, 512), "float32", "hbm"),
               "b": ir.TensorDecl("b", (128, 512), "float32", "hbm")}
    src, dst = ir.Access("a", (128, 512), ()), ir.Access("b", (128, 512), ())
    s = 128 * 512 * 4
    body = [ir.Instruction("collective", dst, (src,), {"kind": "all_reduce", "groups": [0, 1, 2, 3],
                                                       "group_size": 4, "op": "add"})]
    cost = kernel_cost(_kernel(body, tensors))
    assert cost[DMA] == nl.collective_cost("all-reduce", (0, 1, 2, 3), s)[DMA]
    permute = [ir.Instruction("collective", dst, (src,), {"kind": "permute", "pairs": [0, 2, 2, 0]})]
    assert kernel_cost(_kernel(permute, tensors))[DMA] == _cycles(ALPHA + s / LINK)


def test_ragged_all_to_all_is_costed_by_its_input_as_an_all_to_all():
    from types import SimpleNamespace

    ctx = SimpleNamespace(op="ragged-all-to-all", name="r", attrs={"mode": "cross_replica", "groups": [[0, 1, 2, 3]]},
                          type=["f32", [64, 128]], in_types=[["f32", [32, 128]], ["f32", [64, 128]], ["s32", [4]],
                                                             ["s32", [4]], ["s32", [4]], ["s32", [4]]])
    world = ThreadCommunicator(4, 10)
    with running_as(DeviceContext(1, 0, 4, 1, world.endpoint(1))):
        got = nl.instruction_coster(ctx)()
    assert got == nl.collective_cost("all-to-all", (0, 1, 2, 3), 32 * 128 * 4)


def test_send_is_costed_as_a_permute_of_its_data():
    from types import SimpleNamespace

    ctx = SimpleNamespace(op="send", name="s", attrs={"channel": 1, "pairs": [[0, 2], [2, 0]]},
                          type=["tuple", [["f32", [256, 1024]], ["u32", []], ["token", []]]],
                          in_types=[["f32", [256, 1024]], ["token", []]])
    world = ThreadCommunicator(4, 10)
    with running_as(DeviceContext(0, 0, 4, 1, world.endpoint(0))):  # replicas: pairs name replicas
        got = nl.instruction_coster(ctx)()
    assert got == {DMA: _cycles(ALPHA + 256 * 1024 * 4 / LINK)}


def test_in_place_permute_is_costed_by_its_slices():
    from types import SimpleNamespace

    # two groups of pairs, one slice of 64 rows each: 2 * 64 * 1024 * 4 bytes move
    ctx = SimpleNamespace(op="collective_permute_in_place", name="p",
                          attrs={"mode": "cross_replica", "pairs": [[0, 1], [1, 0], [0, 1], [1, 0]],
                                 "start": False, "slice_sizes": [[64, 1024], [64, 1024]]},
                          type=["f32", [256, 1024]],
                          in_types=[["f32", [256, 1024]], ["f32", [256, 1024]], ["tuple", [["s32", []], ["s32", []]]],
                                    ["tuple", [["s32", []], ["s32", []]]]])
    world = ThreadCommunicator(2, 10)
    with running_as(DeviceContext(0, 0, 2, 1, world.endpoint(0))):
        got = nl.instruction_coster(ctx)()
    assert got == nl.collective_cost("collective-permute", (), 2 * 64 * 1024 * 4, [(0, 1), (1, 0), (0, 1), (1, 0)])


# -- trn2 (NEURON_PLATFORM_TARGET_OVERRIDE=trn2): hand-computed against the published rates ------
TRN2 = platforms.topology("trn2")            # LNC=2: 4 logical cores a chip
TRN2_LNC1 = platforms.topology("trn2", "1")  # 8 a chip
V3 = 1024e9                                  # NeuronLink-v3 within an instance, bytes/s a chip
ON_CHIP_LNC2, ON_CHIP_LNC1 = 2.9e12 / 4, 2.9e12 / 8  # a logical core's share of 2.9 TB/s of HBM


def test_trn2_rings_within_a_chip_between_chips_and_between_instances():
    s = 8 * MB
    # four logical cores of chip 0: every hop on the chip
    assert nl.collective_cost("all-reduce", (0, 1, 2, 3), s, topo=TRN2) == \
        {DMA: _cycles(6 * (ALPHA + s / 4 / ON_CHIP_LNC2))}
    # cores 0 and 4 are chips 0 and 1: NeuronLink-v3, one hop leaving each chip
    assert nl.collective_cost("all-reduce", (0, 4), s, topo=TRN2) == {DMA: _cycles(2 * (ALPHA + s / 2 / V3))}
    # ring 0->4->1->5->0: every hop leaves its chip, two per chip share its 1,024 GB/s
    assert nl.collective_cost("all-gather", (0, 4, 1, 5), s, topo=TRN2) == \
        {DMA: _cycles(3 * (ALPHA + s / 4 / (V3 / 2)))}
    # cores 0 and 64 are chips 0 and 16: two trn2.48xlarge instances (an UltraServer), 256 GB/s
    assert nl.collective_cost("all-reduce", (0, 64), s, topo=TRN2) == {DMA: _cycles(2 * (ALPHA + s / 2 / 256e9))}
    # a ring with both kinds of chip-to-chip hops: the inter-instance one is the slowest
    assert nl.hop_bandwidth(nl.ring_hops((0, 4, 64, 68)), TRN2) == 256e9
    # LNC=1: eight cores a chip, each with an eighth of the HBM bandwidth; core 8 is chip 1
    assert nl.collective_cost("all-reduce", tuple(range(8)), s, topo=TRN2_LNC1) == \
        {DMA: _cycles(14 * (ALPHA + s / 8 / ON_CHIP_LNC1))}
    assert nl.collective_cost("collective-permute", (), s, [(0, 8)], topo=TRN2_LNC1) == {DMA: _cycles(ALPHA + s / V3)}


def test_trn2_against_trn1_for_the_same_group():
    """The same four devices: two trn1 chips (NeuronLink-v2 between them) but one trn2 chip."""
    s = 64 * MB
    trn1 = nl.collective_cost("all-reduce", (0, 1, 2, 3), s, topo=TRN1)[DMA]
    trn2 = nl.collective_cost("all-reduce", (0, 1, 2, 3), s, topo=TRN2)[DMA]
    assert trn1 == _cycles(6 * (ALPHA + s / 4 / min(LINK, CHIP)))
    assert trn2 == _cycles(6 * (ALPHA + s / 4 / ON_CHIP_LNC2)) and trn2 < trn1


def test_the_selected_platform_costs_hlo_and_nki_collectives(monkeypatch):
    monkeypatch.setenv(platforms.TARGET_ENV, "trn2")
    s = 256 * 1024 * 4
    # _PROGRAM's groups on one trn2 chip: every ring and pair stays on it
    want = {"all-reduce": _cycles(6 * (ALPHA + s / 4 / ON_CHIP_LNC2)),
            "all-gather": _cycles(1 * (ALPHA + 2 * s / 2 / ON_CHIP_LNC2)),
            "collective-permute": _cycles(ALPHA + s / ON_CHIP_LNC2)}
    for prof in _profiles_on_four_cores(_PROGRAM):
        assert _collective_cycles(prof, want) == pytest.approx(want)
    tensors = {"a": ir.TensorDecl("a", (128, 512), "float32", "hbm"),
               "b": ir.TensorDecl("b", (128, 512), "float32", "hbm")}
    src, dst = ir.Access("a", (128, 512), ()), ir.Access("b", (128, 512), ())
    k = 128 * 512 * 4
    body = [ir.Instruction("collective", dst, (src,), {"kind": "all_reduce", "groups": [0, 4],
                                                       "group_size": 2, "op": "add"})]
    assert kernel_cost(_kernel(body, tensors))[DMA] == _cycles(2 * (ALPHA + k / 2 / V3))
    monkeypatch.setenv(platforms.LNC_ENV, "1")  # now cores 0 and 4 share a chip
    assert kernel_cost(_kernel(body, tensors))[DMA] == _cycles(2 * (ALPHA + k / 2 / ON_CHIP_LNC1))
