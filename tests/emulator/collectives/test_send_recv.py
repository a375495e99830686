"""send / send-done / recv / recv-done with `_xla_send_recv_source_target_pairs`, as XLA's SPMD
pipelining emits them, against NumPy and against the collective-permute they decompose. XLA:CPU
through jaxlib runs no device-to-device send/recv, so NumPy is the oracle. Modules follow the
shapes of XLA's own tests (collective_ops_test's two-channel select, the pipelined while loop)."""
from __future__ import annotations

import numpy as np
import pytest

import hlo
from emulator.collectives import CollectiveError, run_devices
from neuron_customcall.compiler import CompileError
from tests.neuron_customcall.compiler.ours import compile_proto

RING = "{{0,1},{1,2},{2,3},{3,0}}"


def _module(pairs: str, header: str = "replica_count=4", extra: str = "") -> str:
    return f"""HloModule m, {header}
ENTRY e {{
  data = f32[3,5] parameter(0)
  after-all = token[] after-all()
  recv = (f32[3,5], u32[], token[]) recv(after-all), channel_id=1,
    frontend_attributes={{_xla_send_recv_source_target_pairs="{pairs}"{extra}}}
  send = (f32[3,5], u32[], token[]) send(data, after-all), channel_id=1,
    frontend_attributes={{_xla_send_recv_source_target_pairs="{pairs}"{extra}}}, control-predecessors={{recv}}
  recv-done = (f32[3,5], token[]) recv-done(recv), channel_id=1, control-predecessors={{send}}
  send-done = token[] send-done(send), channel_id=1
  ROOT recv-data = f32[3,5] get-tuple-element(recv-done), index=0
}}"""


def _permute_module(pairs: str) -> str:
    return f"""HloModule m, replica_count=4
ENTRY e {{
  data = f32[3,5] parameter(0)
  ROOT r = f32[3,5] collective-permute(data), source_target_pairs={pairs}
}}"""


def _inputs(n: int = 4) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(7)
    return [[rng.standard_normal((3, 5)).astype(np.float32)] for _ in range(n)]


def _run(text: str, ins, replicas: int = 4, partitions: int = 1):
    return run_devices(compile_proto(hlo.load(text).to_bytes()), ins, replicas, partitions, timeout_s=60)


@pytest.mark.parametrize("pairs", [RING, "{{0,2},{3,1}}", "{{1,0}}", "{}"])
def test_equals_numpy_and_collective_permute(pairs):
    ins = _inputs()
    ours = _run(_module(pairs), ins)
    permuted = _run(_permute_module(pairs), ins)
    table = dict(tuple(map(int, p.split(","))) for p in pairs.strip("{}").split("},{") if p)
    for d in range(4):
        want = ins[next(s for s, t in table.items() if t == d)][0] if d in table.values() else np.zeros((3, 5), np.float32)
        np.testing.assert_array_equal(ours[d][0], want)
        np.testing.assert_array_equal(ours[d][0], permuted[d][0])


def test_partitions_name_the_pairs_without_replicas():
    ins = _inputs()
    ours = _run(_module(RING, "num_partitions=4"), ins, 1, 4)
    for d in range(4):
        np.testing.assert_array_equal(ours[d][0], ins[(d - 1) % 4][0])


def test_sends_are_scheduled_before_an_independent_recv_done():
    """The root reaches recv-done first and the send only through nothing: the send still runs,
    before the recv-done, on every device."""
    text = _module(RING).replace(", control-predecessors={send}", "").replace(", control-predecessors={recv}", "")
    ins = _inputs()
    ours = _run(text, ins)
    for d in range(4):
        np.testing.assert_array_equal(ours[d][0], ins[(d - 1) % 4][0])


#: XLA's collective_ops_test shape: two send/recv of one channel with opposite pairs, the result
#: chosen by replica-id (each replica keeps what its source sent)
TWO_WAY = """HloModule m, replica_count=2
ENTRY e {
  c0 = u32[] constant(0)
  c1 = u32[] constant(1)
  replica = u32[] replica-id()
  a = u32[] add(c1, replica)
  send-data = u32[2] broadcast(a), dimensions={}
  after-all.0 = token[] after-all()
  recv.0 = (u32[2], u32[], token[]) recv(after-all.0), channel_id=0,
    frontend_attributes={_xla_send_recv_source_target_pairs="{{1,0}}", _xla_send_recv_pipeline="1"}
  send.0 = (u32[2], u32[], token[]) send(send-data, after-all.0), channel_id=0,
    frontend_attributes={_xla_send_recv_source_target_pairs="{{1,0}}", _xla_send_recv_pipeline="1"}
  after-all.1 = token[] after-all()
  recv.1 = (u32[2], u32[], token[]) recv(after-all.1), channel_id=0,
    frontend_attributes={_xla_send_recv_source_target_pairs="{{0,1}}"}
  send.1 = (u32[2], u32[], token[]) send(send-data, after-all.1), channel_id=0,
    frontend_attributes={_xla_send_recv_source_target_pairs="{{0,1}}"}
  recv-done.0 = (u32[2], token[]) recv-done(recv.0), channel_id=0
  recv-data.0 = u32[2] get-tuple-element(recv-done.0), index=0
  recv-done.1 = (u32[2], token[]) recv-done(recv.1), channel_id=0
  recv-data.1 = u32[2] get-tuple-element(recv-done.1), index=0
  compare0 = pred[] compare(replica, c0), direction=EQ
  compare = pred[2] broadcast(compare0), dimensions={}
  recv-data = u32[2] select(compare, recv-data.0, recv-data.1)
  send-done.0 = token[] send-done(send.0), channel_id=0
  send-done.1 = token[] send-done(send.1), channel_id=0
  ROOT r = u32[2] copy(recv-data)
}"""


def test_two_channels_of_one_id_with_opposite_pairs():
    ours = run_devices(compile_proto(hlo.load(TWO_WAY).to_bytes()), [[], []], 2, 1, timeout_s=60)
    np.testing.assert_array_equal(ours[0][0], [2, 2])  # replica 0 gets replica 1's 1 + 1
    np.testing.assert_array_equal(ours[1][0], [1, 1])


#: a pipelined loop: each iteration sends the state round the ring and adds what arrives
LOOP = """HloModule m, replica_count=4
cond {
  p = (u32[], f32[2]) parameter(0)
  i = u32[] get-tuple-element(p), index=0
  n = u32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  p = (u32[], f32[2]) parameter(0)
  i = u32[] get-tuple-element(p), index=0
  x = f32[2] get-tuple-element(p), index=1
  tok = token[] after-all()
  recv = (f32[2], u32[], token[]) recv(tok), channel_id=2,
    frontend_attributes={_xla_send_recv_source_target_pairs="{{0,1},{1,2},{2,3},{3,0}}"}
  send = (f32[2], u32[], token[]) send(x, tok), channel_id=2,
    frontend_attributes={_xla_send_recv_source_target_pairs="{{0,1},{1,2},{2,3},{3,0}}"}
  recv-done = (f32[2], token[]) recv-done(recv), channel_id=2
  send-done = token[] send-done(send), channel_id=2
  got = f32[2] get-tuple-element(recv-done), index=0
  two = f32[] constant(2)
  twos = f32[2] broadcast(two), dimensions={}
  scaled = f32[2] multiply(x, twos)
  y = f32[2] add(scaled, got)
  one = u32[] constant(1)
  j = u32[] add(i, one)
  ROOT t = (u32[], f32[2]) tuple(j, y)
}
ENTRY e {
  x = f32[2] parameter(0)
  zero = u32[] constant(0)
  init = (u32[], f32[2]) tuple(zero, x)
  w = (u32[], f32[2]) while(init), condition=cond, body=body
  ROOT out = f32[2] get-tuple-element(w), index=1
}"""


def test_pipelined_loop_against_numpy():
    ins = [[np.array([d + 1, 10 * (d + 1)], np.float32)] for d in range(4)]
    ours = _run(LOOP, ins)
    xs = [i[0].copy() for i in ins]
    for _ in range(3):
        xs = [2 * xs[d] + xs[(d - 1) % 4] for d in range(4)]
    for d in range(4):
        np.testing.assert_array_equal(ours[d][0], xs[d])


@pytest.mark.parametrize("change, message", [
    (lambda t: t.replace(',\n    frontend_attributes={_xla_send_recv_source_target_pairs="' + RING + '"}', ""),
     "without _xla_send_recv_source_target_pairs"),
    (lambda t: t.replace("channel_id=1,\n    frontend", "channel_id=1, is_host_transfer=true,\n    frontend"),
     "is_host_transfer=true"),
    (lambda t: t.replace(RING, "{{0,1},{1,1}}"), "repeats a source or a target"),
    (lambda t: t.replace(RING, "{{0,1},{1"), "is not a list of"),
    (lambda t: t.replace("(f32[3,5], u32[], token[]) recv(", "((f32[3,5]), u32[], token[]) recv(")
     .replace("recv-done = (f32[3,5], token[])", "recv-done = ((f32[3,5]), token[])")
     .replace("ROOT recv-data = f32[3,5] get-tuple-element(recv-done), index=0",
              "t = (f32[3,5]) get-tuple-element(recv-done), index=0\n  ROOT recv-data = f32[3,5] "
              "get-tuple-element(t), index=0"), "of a tuple"),
])
def test_refused_forms_name_themselves(change, message):
    with pytest.raises(CompileError, match=message):
        compile_proto(hlo.load(change(_module(RING))).to_bytes())


def test_recv_done_with_a_send_of_other_pairs_is_a_clear_error():
    text = _module(RING).replace(
        'send(data, after-all), channel_id=1,\n    frontend_attributes={_xla_send_recv_source_target_pairs="' + RING,
        'send(data, after-all), channel_id=1,\n    frontend_attributes={_xla_send_recv_source_target_pairs="'
        "{{1,0},{2,1},{3,2},{0,3}}")
    with pytest.raises(CollectiveError, match="before any send of the same channel and pairs"):
        _run(text, _inputs())
