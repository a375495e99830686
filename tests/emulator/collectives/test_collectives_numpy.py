"""What XLA:CPU can not run, against NumPy: collective-broadcast, all-reduce with a reducer of
its own, partition-id with several partitions; and the failure behaviour of run_devices (a device
raising, a device that never arrives, devices at different collectives)."""
from __future__ import annotations

import time

import numpy as np
import pytest

import hlo
from emulator.collectives import (CollectiveError, CollectiveTimeout, DeviceContext, SoloCommunicator, current,
                                  run_devices, running_as)
from emulator.errors import EmulatorError
from neuron_customcall.compiler import CompileError
from tests.neuron_customcall.compiler.ours import compile_proto


ADD = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}"""


def _compile(text: str):
    return compile_proto(hlo.load(text.strip()).to_bytes())


def _inputs(n: int, shape=(3, 5), seed: int = 0) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal(shape).astype(np.float32)] for _ in range(n)]


CUSTOM = """
HloModule m, replica_count=3
f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  m = f32[] multiply(b, b)
  ROOT r = f32[] subtract(a, m)
}
ENTRY e {
  p = f32[3,5] parameter(0)
  ROOT r = f32[3,5] all-reduce(p), replica_groups={{2,0,1}}, to_apply=f
}
"""


def test_all_reduce_with_a_computation_folds_in_group_order():
    ins = _inputs(3)
    outs = run_devices(_compile(CUSTOM), ins, 3, 1, timeout_s=30)
    x = [i[0] for i in ins]
    want = (x[2] - x[0] * x[0]) - x[1] * x[1]  # group {2,0,1}: device 2's value first
    for o in outs:
        np.testing.assert_array_equal(o[0], want)


@pytest.mark.parametrize("layout", ["{1,0}", "{0,1}"])
def test_constrain_layout_exchanges_logical_values_whatever_the_layout(layout):
    """torch_xla's xm.all_reduce pins layouts (constrain_layout=true), column-major for a Linear
    weight's gradient: the values are the logical ones all the same."""
    text = f"""
HloModule m, replica_count=2
{ADD}
ENTRY e {{
  p = f32[3,5] parameter(0)
  t = f32[3,5]{layout} copy(p)
  r = f32[3,5]{layout} all-reduce(t), replica_groups={{}}, constrain_layout=true, to_apply=add
  g = f32[6,5]{layout} all-gather(t), replica_groups={{}}, dimensions={{0}}, constrain_layout=true
  ROOT o = (f32[3,5], f32[6,5]) tuple(r, g)
}}"""
    ins = _inputs(2)
    outs = run_devices(_compile(text), ins, 2, 1, timeout_s=30)
    for o in outs:
        np.testing.assert_array_equal(o[0], ins[0][0] + ins[1][0])
        np.testing.assert_array_equal(o[1], np.concatenate([ins[0][0], ins[1][0]]))


def test_collective_broadcast_sends_the_first_device_of_each_group():
    text = """
HloModule m, replica_count=4
ENTRY e {
  p = f32[3,5] parameter(0)
  ROOT r = f32[3,5] collective-broadcast(p), replica_groups={{1,0},{2,3}}
}"""
    ins = _inputs(4)
    outs = run_devices(_compile(text), ins, 4, 1, timeout_s=30)
    for d, root in enumerate([1, 1, 2, 2]):
        np.testing.assert_array_equal(outs[d][0], ins[root][0])


IDS = """
ENTRY e {
  p = f32[2] parameter(0)
  r = u32[] replica-id()
  q = u32[] partition-id()
  ROOT t = (u32[], u32[]) tuple(r, q)
}"""


def test_device_ids_with_partitions():
    text = "HloModule m, replica_count=2, num_partitions=3\n" + IDS
    outs = run_devices(_compile(text), [[np.zeros(2, np.float32)]] * 6, 2, 3, timeout_s=30)
    assert [(int(r), int(q)) for r, q in outs] == [(d // 3, d % 3) for d in range(6)]


def test_one_device_runs_as_replica_zero_and_the_program_serves_any_device():
    text = "HloModule m\n" + IDS
    exe = _compile(text)
    assert [int(v) for v in exe.run([np.zeros(2, np.float32)])] == [0, 0]
    with running_as(DeviceContext(1, 2, 2, 3, SoloCommunicator())):
        assert [int(v) for v in exe.run([np.zeros(2, np.float32)])] == [1, 2]
    assert current().replica_id == 0  # restored


def test_a_collective_on_one_device_is_the_identity():
    text = """
HloModule m
""" + ADD + """
ENTRY e {
  p = f32[3,5] parameter(0)
  r = f32[3,5] all-reduce(p), to_apply=add
  g = f32[3,5] all-gather(p), dimensions={0}
  ROOT t = (f32[3,5], f32[3,5]) tuple(r, g)
}"""
    x = _inputs(1)[0]
    r, g = _compile(text).run(x)
    np.testing.assert_array_equal(r, x[0])
    np.testing.assert_array_equal(g, x[0])
    r[...] = 1  # the caller's own
    np.testing.assert_array_equal(g, x[0])


FAILING = """
HloModule m, replica_count=4
""" + ADD + """
ENTRY e {
  p = f32[3,5] parameter(0)
  d = f32[3,5] divide(p, p)
  r = f32[3,5] all-reduce(d), to_apply=add
  ROOT s = f32[3,5] all-reduce(r), to_apply=add
}
"""


class _Raising:
    """An executable whose device `bad` raises before its first collective."""

    def __init__(self, exe, bad: int) -> None:
        self.exe, self.bad = exe, bad

    def run(self, inputs):
        if current().device == self.bad:
            raise ValueError("kernel exploded")
        return self.exe.run(inputs)


def test_a_device_that_raises_makes_the_others_fail_fast_naming_it():
    exe = _Raising(_compile(FAILING), bad=2)
    t0 = time.monotonic()
    with pytest.raises(EmulatorError, match=r"device 2 \(replica 2, partition 0\): kernel exploded") as info:
        run_devices(exe, _inputs(4), 4, 1, timeout_s=60)
    assert time.monotonic() - t0 < 30  # long before the timeout: the others were aborted
    assert isinstance(info.value.__cause__, ValueError)


def test_the_others_see_a_collective_error_naming_the_failed_device():
    """Devices 0, 1, 3 wait in the first all-reduce; device 2 fails: each gets CollectiveError."""
    seen = {}
    inner = _compile(FAILING)

    class Recording:
        def run(self, inputs):
            d = current().device
            if d == 2:
                raise ValueError("boom")
            try:
                return inner.run(inputs)
            except CollectiveError as e:
                seen[d] = e
                raise
    with pytest.raises(EmulatorError, match="device 2"):
        run_devices(Recording(), _inputs(4), 4, 1, timeout_s=60)
    assert sorted(seen) == [0, 1, 3]
    assert all(e.origin == 2 and "device 2 failed: ValueError: boom" in str(e) for e in seen.values())


def test_a_device_that_never_arrives_times_out():
    class Late:
        def __init__(self) -> None:
            self.exe = _compile(FAILING)

        def run(self, inputs):
            if current().device == 3:
                time.sleep(3)  # longer than the timeout; then its collective finds the world failed
            return self.exe.run(inputs)
    t0 = time.monotonic()
    with pytest.raises(CollectiveTimeout, match=r"devices \[3\] did not arrive within 0.5 s") as info:
        run_devices(Late(), _inputs(4), 4, 1, timeout_s=0.5)
    assert time.monotonic() - t0 < 10
    assert info.value.devices == (3,)
    assert "all-reduce" in str(info.value)  # names the instruction


def test_mismatched_collectives_are_an_error_not_a_wrong_answer():
    gather = _compile("""
HloModule m, replica_count=2
ENTRY e {
  p = f32[3,5] parameter(0)
  ROOT g = f32[6,5] all-gather(p), dimensions={0}
}""")
    reduce_ = _compile("""
HloModule m, replica_count=2
""" + ADD + """
ENTRY e {
  p = f32[3,5] parameter(0)
  ROOT g = f32[3,5] all-reduce(p), to_apply=add
}""")

    class Mixed:
        def run(self, inputs):
            return (gather if current().device == 0 else reduce_).run(inputs)
    with pytest.raises(CollectiveError, match="mismatched collectives at call 1"):
        run_devices(Mixed(), _inputs(2), 2, 1, timeout_s=30)


def test_a_device_outside_every_group_is_a_clear_error():
    text = """
HloModule m, replica_count=4
""" + ADD + """
ENTRY e {
  p = f32[3,5] parameter(0)
  ROOT r = f32[3,5] all-reduce(p), replica_groups={{0,1}}, to_apply=add
}"""
    with pytest.raises(CollectiveError, match=r"replica [23] is in 0 of the replica groups \[\[0, 1\]\]"):
        run_devices(_compile(text), _inputs(4), 4, 1, timeout_s=30)


def test_all_gather_of_a_group_bigger_than_declared_is_a_clear_error():
    text = """
HloModule m, replica_count=4
ENTRY e {
  p = f32[3,5] parameter(0)
  g = f32[6,5] all-gather(p), dimensions={0}
  ROOT s = f32[6,5] negate(g)
}"""
    with pytest.raises(CollectiveError, match=r"all-gather g: a group of 4 devices \[0, 1, 2, 3\] gives \[12, 5\], "
                                              r"the program declares \[6, 5\]"):
        run_devices(_compile(text), _inputs(4), 4, 1, timeout_s=30)


@pytest.mark.parametrize("body, message", [
    ("ROOT r = f32[3,5] all-to-all(p), dimensions={0}", "needs explicit replica_groups"),
    ("ROOT r = f32[3,5] all-reduce(p), replica_groups={{0,1},{2}}, to_apply=add", "different sizes"),
    ("ROOT r = f32[3,5] all-reduce(p), use_global_device_ids=true, replica_groups={{0}}, to_apply=add",
     "needs a channel_id"),
    ("ROOT r = f32[9,5] all-gather(p), replica_groups={{0,1}}, dimensions={0}", "groups of 2"),
    ("ROOT r = f32[2,5] reduce-scatter(p), replica_groups={{0,1,2}}, dimensions={0}, to_apply=add", "groups of 3"),
    ("o = s32[2] constant({0,0})\n  ROOT r = f32[3,5] ragged-all-to-all(p, p, o, o, o, o), replica_groups={{0,1,2,3}}",
     "offsets s32\\[2\\]\\{0\\} for groups of 4 devices"),
    ("o = f32[4] constant({0,0,0,0})\n  ROOT r = f32[3,5] ragged-all-to-all(p, p, o, o, o, o), replica_groups={}",
     "of s32 or s64"),
    ("o = s32[4] constant({0,0,0,0})\n  ROOT r = f32[3,5] ragged-all-to-all(p, p, o, o, o), replica_groups={}",
     "takes 6 operands"),
])
def test_malformed_collectives_are_compile_errors(body, message):
    text = f"""
HloModule m, replica_count=4
{ADD}
ENTRY e {{
  p = f32[3,5] parameter(0)
  {body}
}}"""
    with pytest.raises(CompileError, match=message):
        _compile(text)


def test_a_device_hanging_outside_any_collective_does_not_hang_the_caller():
    exe = _compile(FAILING)

    class Hanging:
        def run(self, inputs):
            if current().device == 1:
                time.sleep(8)  # stands for a device stuck in a long computation
            return exe.run(inputs)
    t0 = time.monotonic()
    with pytest.raises(CollectiveTimeout, match=r"devices \[1\] did not arrive"):
        run_devices(Hanging(), _inputs(4), 4, 1, timeout_s=0.5)
    assert time.monotonic() - t0 < 6  # the timeout and the abort grace, not the 8 s


CHUNKED = f"""
HloModule m, replica_count=4
{ADD}
ENTRY e {{
  p = f32[300,101] parameter(0)
  ROOT r = f32[300,101] all-reduce(p), replica_groups={{{{3,1,0,2}}}}, to_apply=add
}}
"""


def test_a_large_all_reduce_reduce_scatters_then_gathers_with_the_bits_of_the_whole_fold(monkeypatch):
    """Above CHUNKED_ALL_REDUCE_BYTES every member folds only its chunk (all_to_all), in group
    order: the result is the same bits as gathering whole values and folding them."""
    from emulator.collectives.local import ThreadEndpoint
    from emulator.ops import collective

    calls = []
    real = ThreadEndpoint.all_to_all

    def spy(self, group, pieces, *, op=""):
        calls.append([p.size for p in pieces])
        return real(self, group, pieces, op=op)
    monkeypatch.setattr(ThreadEndpoint, "all_to_all", spy)
    ins = _inputs(4, (300, 101), seed=3)
    exe = _compile(CHUNKED)
    chunked = run_devices(exe, ins, 4, 1, timeout_s=30)
    assert len(calls) == 4 and all(sizes == [7575] * 4 for sizes in calls)  # 30300 elements in 4 chunks
    monkeypatch.setattr(collective, "CHUNKED_ALL_REDUCE_BYTES", 1 << 40)
    whole = run_devices(_compile(CHUNKED), ins, 4, 1, timeout_s=30)
    assert len(calls) == 4
    x = [i[0] for i in ins]
    want = ((x[3] + x[1]) + x[0]) + x[2]
    for a, b in zip(chunked, whole):
        np.testing.assert_array_equal(a[0], want)
        np.testing.assert_array_equal(b[0], want)



def _ragged_reference(inputs, outputs, in_off, sizes, out_off):
    """XLA's RaggedAllToAll on NumPy (operation_semantics.md): device r's rows
    in_off[r][j,k] : +sizes[r][j,k] land at out_off[r][j,k] of device j's output."""
    results = [o.copy() for o in outputs]
    for r in range(len(inputs)):
        for j in range(len(inputs)):
            for o_in, size, o_out in zip(in_off[r][j], sizes[r][j], out_off[r][j]):
                results[j][o_out:o_out + size] = inputs[r][o_in:o_in + size]
    return results


RAGGED = """
HloModule m, replica_count=2
ENTRY e {
  x = f32[3] parameter(0)
  out = f32[4] parameter(1)
  io = s32[2] parameter(2)
  ss = s32[2] parameter(3)
  oo = s32[2] parameter(4)
  rs = s32[2] parameter(5)
  ROOT r = f32[4] ragged-all-to-all(x, out, io, ss, oo, rs), replica_groups={{0,1}}
}
"""


def _ragged_example() -> list[list[np.ndarray]]:
    """operation_semantics.md's two replicas: (input, output, input_offsets, send_sizes,
    output_offsets, recv_sizes) each."""
    f, i = np.float32, np.int32
    return [[np.array(x, f), np.zeros(4, f), *(np.array(v, i) for v in idx)] for x, idx in (
        ([1, 2, 2], ([0, 1], [1, 2], [0, 0], [1, 1])), ([3, 4, 0], ([0, 1], [1, 1], [1, 2], [2, 1])))]


def test_ragged_all_to_all_the_example_of_operation_semantics():
    """XLA:CPU has no ragged-all-to-all ('not supported by XLA:CPU ThunkEmitter', jaxlib 0.10.2)."""
    f = np.float32
    outs = run_devices(_compile(RAGGED), _ragged_example(), 2, 1, timeout_s=30)
    np.testing.assert_array_equal(outs[0][0], np.array([1, 3, 0, 0], f))
    np.testing.assert_array_equal(outs[1][0], np.array([2, 2, 4, 0], f))


@pytest.mark.parametrize("n,updates", [(2, 1), (4, 1), (4, 3), (8, 2)])
def test_ragged_all_to_all_random_updates_against_numpy(n, updates):
    rng = np.random.default_rng(n * 10 + updates)
    rows, cap = 12, 5  # every sender owns `cap` rows of each target's output per update slot
    text = f"""
HloModule m, replica_count={n}
ENTRY e {{
  x = bf16[{rows},3] parameter(0)
  out = bf16[{n * updates * cap},3] parameter(1)
  io = s64[{n},{updates}] parameter(2)
  ss = s64[{n},{updates}] parameter(3)
  oo = s64[{n},{updates}] parameter(4)
  rs = s64[{n},{updates}] parameter(5)
  ROOT r = bf16[{n * updates * cap},3] ragged-all-to-all(x, out, io, ss, oo, rs), replica_groups={{}}
}}"""
    import ml_dtypes
    data = [rng.standard_normal((rows, 3)).astype(ml_dtypes.bfloat16) for _ in range(n)]
    outputs = [rng.standard_normal((n * updates * cap, 3)).astype(ml_dtypes.bfloat16) for _ in range(n)]
    sizes = [rng.integers(0, cap + 1, (n, updates)) for _ in range(n)]
    in_off = [rng.integers(0, rows - cap + 1, (n, updates)) for _ in range(n)]
    out_off = [np.array([[(r * updates + k) * cap for k in range(updates)] for _ in range(n)]) for r in range(n)]
    ins = [[data[r], outputs[r], in_off[r], sizes[r], out_off[r], sizes[r]] for r in range(n)]
    got = run_devices(_compile(text), ins, n, 1, timeout_s=60)
    want = _ragged_reference(data, outputs, in_off, sizes, out_off)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g[0], w)


def test_ragged_all_to_all_out_of_range_is_a_clear_error():
    ins = _ragged_example()
    ins[0][2] = np.array([0, 2], np.int32)  # rows 2:4 of 3
    with pytest.raises(EmulatorError, match="sends rows 2:4 of an input of 3 rows"):
        run_devices(_compile(RAGGED), ins, 2, 1, timeout_s=30)
