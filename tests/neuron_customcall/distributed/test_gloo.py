"""Emulated devices in separate processes, one world over torch.distributed (gloo on localhost):
each rank runs its device's part of a program with collectives, and every rank's outputs equal
those of the same devices run as threads of one process (emulator.collectives.run_devices, itself
matched against XLA:CPU and, for the in-place collective-permute and send/recv, NumPy). A peer that dies or hangs ends the others' collective with a clear
CollectiveError within the timeout; mismatched programs are named."""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

import hlo
from emulator import load_artifact
from emulator.collectives import run_devices
from neuron_customcall.compiler import compile_module
from tests.neuron_customcall.distributed import ranks

ROOT = Path(__file__).resolve().parents[3]
WORKER = Path(__file__).with_name("gloo_worker.py")

PROGRAM = """HloModule gloo_{n}, replica_count={n}
add_{n} {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}}
max_{n} {{
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT r = s32[] maximum(a, b)
}}
ENTRY e_{n} {{
  x = f32[4,{n}] parameter(0)
  i = s32[3] parameter(1)
  y = f32[67,251] parameter(2)
  big = f32[67,251] all-reduce(y), replica_groups={groups}, to_apply=add_{n}
  a2a = f32[4,{n}] all-to-all(x), dimensions={{1}}, replica_groups={groups}
  ar = f32[4,{n}] all-reduce(x), replica_groups={groups}, to_apply=add_{n}
  mx = s32[3] all-reduce(i), replica_groups={{}}, to_apply=max_{n}
  ag = f32[4,{gathered}] all-gather(x), dimensions={{1}}, replica_groups={groups}
  rs = f32[4,{scattered}] reduce-scatter(x), dimensions={{1}}, replica_groups={groups}, to_apply=add_{n}
  cp = f32[4,{n}] collective-permute(x), source_target_pairs={pairs}
  rid = u32[] replica-id()
  zero = f32[] constant(0)
  total = f32[] reduce(x, zero), dimensions={{0,1}}, to_apply=add_{n}
  scalar = f32[] all-reduce(total), replica_groups={{}}, to_apply=add_{n}
  fill = f32[] constant(-1)
  buf = f32[4,{n}] broadcast(fill), dimensions={{}}
  c0 = s32[] constant(0)
  c1 = s32[] constant(1)
  st_in = (s32[], s32[]) tuple(c1, c0)
  st_out = (s32[], s32[]) tuple(c0, c1)
  ip = f32[4,{n}] collective-permute(x, buf, st_in, st_out), source_target_pairs={pairs}, slice_sizes={{{{2,1}}}}
  tok = token[] after-all()
  rv = (f32[4,{n}], u32[], token[]) recv(tok), channel_id=5,
    frontend_attributes={{_xla_send_recv_source_target_pairs="{pairs}"}}
  sd = (f32[4,{n}], u32[], token[]) send(x, tok), channel_id=5,
    frontend_attributes={{_xla_send_recv_source_target_pairs="{pairs}"}}
  rd = (f32[4,{n}], token[]) recv-done(rv), channel_id=5
  sdd = token[] send-done(sd), channel_id=5
  got = f32[4,{n}] get-tuple-element(rd), index=0
  ROOT t = (f32[4,{n}], s32[3], f32[4,{gathered}], f32[4,{scattered}], f32[4,{n}], u32[], f32[], f32[67,251], f32[4,{n}], f32[4,{n}], f32[4,{n}]) tuple(ar, mx, ag, rs, cp, rid, scalar, big, a2a, ip, got)
}}"""


def _program(n: int) -> str:
    if n == 2:
        groups, size, pairs = "{{0,1}}", 2, "{{0,1},{1,0}}"
    else:
        groups, size, pairs = "{{0,2},{1,3}}", 2, "{{0,1},{1,2},{2,3}}"  # device 0 receives nothing: zeros
    return PROGRAM.format(n=n, groups=groups, gathered=n * size, scattered=n // size, pairs=pairs)


def _inputs(n: int) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(n)
    # the third value is above CHUNKED_ALL_REDUCE_BYTES: reduce-scatter then all-gather across processes
    return [[rng.standard_normal((4, n)).astype(np.float32), rng.integers(-50, 50, 3).astype(np.int32),
             rng.standard_normal((67, 251)).astype(np.float32)] for _ in range(n)]


def _start(tmp_path: Path, text: str, inputs: list[list[np.ndarray]], mode: str,
           timeout_s: float) -> list[subprocess.Popen]:
    """One worker process per rank (the env:// rendezvous torchrun would set up)."""
    (tmp_path / "m.hlo").write_text(text)
    np.savez(tmp_path / "in.npz", **{f"r{r}_{k}": a for r, ins in enumerate(inputs) for k, a in enumerate(ins)})
    return ranks.start(WORKER, [str(tmp_path / "m.hlo"), str(tmp_path / "in.npz"), str(tmp_path / "out"), mode],
                       len(inputs), TEST_COLLECTIVE_TIMEOUT=str(timeout_s))


def _finish(procs: list[subprocess.Popen], wait_for: int | None = None) -> list[int]:
    """The exit codes of the first `wait_for` ranks (all by default); the rest are killed."""
    return ranks.finish(procs, (0, 2, 3), wait_for)


@pytest.mark.parametrize("n", [2, 4])
def test_ranks_match_the_same_devices_run_as_threads(tmp_path: Path, n: int) -> None:
    text = _program(n)
    inputs = _inputs(n)
    assert _finish(_start(tmp_path, text, inputs, "run", 60)) == [0] * n
    exe = load_artifact(compile_module(hlo.load(text)))
    want = run_devices(exe, inputs, n, 1, timeout_s=60)
    for rank in range(n):
        with np.load(tmp_path / f"out{rank}.npz", allow_pickle=False) as z:
            got = [z[f"arr_{k}"] for k in range(len(z.files))]
        assert len(got) == len(want[rank])
        for g, w in zip(got, want[rank]):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_array_equal(g, w)


def test_a_peer_that_dies_ends_the_collective_with_a_clear_error(tmp_path: Path) -> None:
    start = time.monotonic()
    assert _finish(_start(tmp_path, _program(2), _inputs(2), "die", 60)) == [2, 3]
    message = (tmp_path / "out0.txt").read_text()
    assert message.startswith("CollectiveError") and "over torch.distributed failed" in message
    assert time.monotonic() - start < 55  # the closed connection, not the 60 s timeout


def test_a_peer_that_hangs_ends_the_collective_at_the_timeout(tmp_path: Path) -> None:
    start = time.monotonic()
    procs = _start(tmp_path, _program(2), _inputs(2), "hang", 5)  # rank 1 sleeps for 600 s
    assert _finish(procs, wait_for=1) == [2]
    message = (tmp_path / "out0.txt").read_text()
    assert message.startswith("CollectiveTimeout") and "NEURON_RT_EXEC_TIMEOUT" in message, message
    assert time.monotonic() - start < 200


def test_different_programs_on_the_ranks_are_named(tmp_path: Path) -> None:
    """Rank 1 runs a module whose first collective is another instruction."""
    text = _program(2)
    assert _finish(_start(tmp_path, text, _inputs(2), "other", 60)) == [2, 2]
    for rank in range(2):  # call 1 is the send (scheduled first, and the same on both ranks); 2 is the all-reduce
        assert "mismatched collectives at call 2" in (tmp_path / f"out{rank}.txt").read_text()


NATIVE = """HloModule native_{n}, replica_count={n}
{reducers}
ENTRY e {{
  f = f32[300,7] parameter(0)
  d = f64[33] parameter(1)
  i = s32[5000] parameter(2)
  u = u8[100000] parameter(3)
  s = s8[64] parameter(4)
  h = f32[40000] parameter(5)
  b = bf16[40000] convert(h)
  f_add = f32[300,7] all-reduce(f), replica_groups={{}}, to_apply=add_f32
  f_max = f32[300,7] all-reduce(f), replica_groups={{}}, to_apply=maximum_f32
  d_mul = f64[33] all-reduce(d), replica_groups={{}}, to_apply=multiply_f64
  i_max = s32[5000] all-reduce(i), replica_groups={{}}, to_apply=maximum_s32
  i_min = s32[5000] all-reduce(i), replica_groups={{}}, to_apply=minimum_s32
  i_and = s32[5000] all-reduce(i), replica_groups={{}}, to_apply=and_s32
  i_or = s32[5000] all-reduce(i), replica_groups={{}}, to_apply=or_s32
  i_xor = s32[5000] all-reduce(i), replica_groups={{}}, to_apply=xor_s32
  u_add = u8[100000] all-reduce(u), replica_groups={{}}, to_apply=add_u8
  s_mul = s8[64] all-reduce(s), replica_groups={{}}, to_apply=multiply_s8
  b_add = bf16[40000] all-reduce(b), replica_groups={{}}, to_apply=add_bf16
  b_f32 = f32[40000] convert(b_add)
  ROOT t = (f32[300,7], f32[300,7], f64[33], s32[5000], s32[5000], s32[5000], s32[5000], s32[5000], u8[100000], s8[64], f32[40000]) tuple(f_add, f_max, d_mul, i_max, i_min, i_and, i_or, i_xor, u_add, s_mul, b_f32)
}}"""
#: (reducer, type) of NATIVE's all-reduces, in program order; which gloo's all_reduce does (the
#: float maximum and the bf16 sum are not: gloo drops NaNs and accumulates bf16 in bf16); between
#: two processes, which a pair exchange does (all but the bf16 sum: XLA accumulates it in f32)
NATIVE_REDUCTIONS = [("add", "f32"), ("maximum", "f32"), ("multiply", "f64"), ("maximum", "s32"), ("minimum", "s32"),
                     ("and", "s32"), ("or", "s32"), ("xor", "s32"), ("add", "u8"), ("multiply", "s8"),
                     ("add", "bf16")]
NUMPY_NAMES = {"f32": "float32", "f64": "float64", "s32": "int32", "u8": "uint8", "s8": "int8"}


def _native_program(n: int) -> str:
    reducers = "\n".join(f"{op}_{t} {{\n  a = {t}[] parameter(0)\n  b = {t}[] parameter(1)\n  ROOT r = {t}[] {op}(a, b)\n}}"
                         for op, t in dict.fromkeys(NATIVE_REDUCTIONS))
    return NATIVE.format(n=n, reducers=reducers)


def _native_inputs(n: int) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(7 + n)
    out = []
    for _ in range(n):
        f = rng.standard_normal((300, 7)).astype(np.float32)
        f[3, 4] = np.nan  # a sum propagates it; a maximum too (not gloo's: that one stays ours)
        out.append([f, rng.uniform(0.5, 2, 33), rng.integers(-2**31, 2**31, 5000).astype(np.int32),
                    rng.integers(0, 256, 100000).astype(np.uint8), rng.integers(-128, 128, 64).astype(np.int8),
                    rng.standard_normal(40000).astype(np.float32)])
    return out


@pytest.mark.parametrize("n", [2, 3])
def test_gloo_reduces_what_it_reduces_as_xla_and_the_rest_stays_ours(tmp_path: Path, n: int) -> None:
    """Three processes: every all-reduce over all of them whose reducer and type gloo's all_reduce
    computes as XLA does goes to it in one call, within rounding of the devices run as threads
    (gloo's ring order), wrapping integers included. The program runs twice: the first run agrees
    by headers and makes each reduction's bucket group (eight at most: the ninth stays on
    headers), the second reduces in them with trailers (xor of three members on headers: its
    trailer says nothing for three). Two processes: every reduction by a reducer XLA names, in
    a type that computes in itself, is a pair exchange (the float maximum's NaN included), with
    the same bits as the devices run as threads (group order), at the first run (after headers
    that make the pair's group) and at the second (its header beside its value)."""
    text, inputs = _native_program(n), _native_inputs(n)
    assert _finish(_start(tmp_path, text, inputs, "twice", 60)) == [0] * n
    want = run_devices(load_artifact(compile_module(hlo.load(text))), inputs, n, 1, timeout_s=60)
    ours = {("add", "bf16")} if n == 2 else {("maximum", "f32"), ("add", "bf16")}
    native = [[NUMPY_NAMES[t], op] for op, t in NATIVE_REDUCTIONS if (op, t) not in ours]
    for rank, run in [(rank, run) for rank in range(n) for run in ("", ".second")]:
        assert json.loads((tmp_path / f"out{rank}.native.json").read_text()) == native * 2
        with np.load(tmp_path / f"out{rank}{run}.npz", allow_pickle=False) as z:
            got = [z[f"arr_{k}"] for k in range(len(z.files))]
        for (op, t), g, w in zip(NATIVE_REDUCTIONS, got, want[rank]):
            assert g.dtype == w.dtype and g.shape == w.shape, (op, t)
            if n == 2 or t not in ("f32", "f64") or (op, t) == ("maximum", "f32"):
                np.testing.assert_array_equal(g, w, err_msg=f"{op} {t}")
            else:
                np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6, err_msg=f"{op} {t}")
        assert np.isnan(got[0][3, 4]) and np.isnan(got[1][3, 4])


SHAPES = """HloModule shapes, replica_count={n}
add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}}
ENTRY e {{
  x = f32[{m}] parameter(0)
  ROOT s = f32[{m}] all-reduce(x), replica_groups={{}}, to_apply=add
}}"""


def test_ranks_reducing_different_shapes_are_named_before_gloo_sees_them(tmp_path: Path) -> None:
    """gloo's all_reduce aborts the process on a size mismatch ("terminate called"): the header
    exchange stops both ranks with a CollectiveError first."""
    (tmp_path / "m.hlo.rank1").write_text(SHAPES.format(n=2, m=500))
    inputs = [[np.ones(1000, np.float32)], [np.ones(500, np.float32)]]
    assert _finish(_start(tmp_path, SHAPES.format(n=2, m=1000), inputs, "run", 60)) == [2, 2]
    for rank in range(2):
        message = (tmp_path / f"out{rank}.txt").read_text()
        assert message.startswith("CollectiveError") and "mismatched collectives at call 1" in message, message


@pytest.mark.parametrize("mode, error", [("die", "CollectiveError"), ("hang", "CollectiveTimeout"),
                                         ("die2", "CollectiveError"), ("hang2", "CollectiveTimeout")])
def test_a_dead_or_hung_peer_ends_gloos_own_all_reduce_with_a_clear_error(tmp_path: Path, mode: str,
                                                                           error: str) -> None:
    """die/hang: at the first call (headers, then the pair exchange's group); die2/hang2: after a
    first run, in the pair exchange, whose waits end at gloo's error or the group's timeout."""
    start = time.monotonic()
    procs = _start(tmp_path, SHAPES.format(n=2, m=1 << 18), [[np.ones(1 << 18, np.float32)]] * 2, mode, 5)
    assert _finish(procs, wait_for=1) == [2]
    message = (tmp_path / "out0.txt").read_text()
    assert message.startswith(error) and "over torch.distributed failed" in message, message
    assert time.monotonic() - start < 200


@pytest.mark.parametrize("below", [1, 0])
def test_from_native_max_bytes_the_sum_of_three_stays_chunked(tmp_path: Path, below: int) -> None:
    """At NATIVE_MAX_BYTES the operand's copy for gloo's in-place reduction costs more than the
    round trips it saves: the reduce-scatter and all-gather of three processes run, and match
    the devices run as threads; an element less (4 MB and more) goes to gloo's all_reduce, and
    matches them within rounding (its ring's order)."""
    from neuron_customcall.distributed.gloo import NATIVE_MAX_BYTES

    m = NATIVE_MAX_BYTES // 4 - below
    assert m * 4 >= 4 << 20
    text = SHAPES.format(n=3, m=m)
    inputs = [[np.random.default_rng(r).standard_normal(m).astype(np.float32)] for r in range(3)]
    assert _finish(_start(tmp_path, text, inputs, "run", 60)) == [0, 0, 0]
    want = run_devices(load_artifact(compile_module(hlo.load(text))), inputs, 3, 1, timeout_s=60)
    for rank in range(3):
        assert json.loads((tmp_path / f"out{rank}.native.json").read_text()) == [["float32", "add"]] * below
        with np.load(tmp_path / f"out{rank}.npz", allow_pickle=False) as z:
            np.testing.assert_allclose(z["arr_0"], want[rank][0], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", ["f32", "s32"])
def test_two_processes_exchange_values_of_any_size_whole(tmp_path: Path, dtype: str) -> None:
    """Between two processes a reduction of every size up to PAIR_MAX_BYTES is a pair exchange,
    at NATIVE_MAX_BYTES too (where three processes reduce-scatter), with the bits of NumPy's sum."""
    from neuron_customcall.distributed.gloo import NATIVE_MAX_BYTES

    m = NATIVE_MAX_BYTES // 4
    text = SHAPES.format(n=2, m=m).replace("f32", dtype)
    rng = np.random.default_rng(3)
    inputs = [[rng.standard_normal(m).astype(np.float32) if dtype == "f32" else
               rng.integers(-2**31, 2**31, m).astype(np.int32)] for _ in range(2)]
    assert _finish(_start(tmp_path, text, inputs, "twice", 60)) == [0, 0]
    for rank, run in [(rank, run) for rank in range(2) for run in ("", ".second")]:
        assert json.loads((tmp_path / f"out{rank}.native.json").read_text()) == [[NUMPY_NAMES[dtype], "add"]] * 2
        with np.load(tmp_path / f"out{rank}{run}.npz", allow_pickle=False) as z:
            np.testing.assert_array_equal(z["arr_0"], inputs[0][0] + inputs[1][0])


PAIRS = """HloModule pairs, replica_count=2
or_pred {
  a = pred[] parameter(0)
  b = pred[] parameter(1)
  ROOT r = pred[] or(a, b)
}
add_c64 {
  a = c64[] parameter(0)
  b = c64[] parameter(1)
  ROOT r = c64[] add(a, b)
}
xor_s64 {
  a = s64[] parameter(0)
  b = s64[] parameter(1)
  ROOT r = s64[] xor(a, b)
}
add_u16 {
  a = u16[] parameter(0)
  b = u16[] parameter(1)
  ROOT r = u16[] add(a, b)
}
min_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] minimum(a, b)
}
ENTRY e {
  p = pred[7] parameter(0)
  c = c64[5] parameter(1)
  x = s64[] parameter(2)
  u = u16[300] parameter(3)
  m = f32[3,5] parameter(4)
  t = f32[5,3] transpose(m), dimensions={1,0}
  p_or = pred[7] all-reduce(p), replica_groups={}, to_apply=or_pred
  c_add = c64[5] all-reduce(c), replica_groups={}, to_apply=add_c64
  x_xor = s64[] all-reduce(x), replica_groups={}, to_apply=xor_s64
  u_add = u16[300] all-reduce(u), replica_groups={}, to_apply=add_u16
  t_min = f32[5,3] all-reduce(t), replica_groups={}, to_apply=min_f32
  ROOT r = (pred[7], c64[5], s64[], u16[300], f32[5,3]) tuple(p_or, c_add, x_xor, u_add, t_min)
}"""


def test_two_processes_exchange_every_type_that_computes_in_itself(tmp_path: Path) -> None:
    """The pair exchange's reducers and types beyond gloo's: bool or, complex sum, a scalar's xor,
    u16's wrapping sum, and the minimum of a transposed (strided) operand with a NaN; the same
    bits as the devices run as threads, at the first run and the repeated second."""
    rng = np.random.default_rng(11)
    inputs = []
    for _ in range(2):
        m = rng.standard_normal((3, 5)).astype(np.float32)
        m[1, 2] = np.nan
        c = (rng.standard_normal(5) + 1j * rng.standard_normal(5)).astype(np.complex64)
        inputs.append([rng.random(7) < 0.3, c, np.array(rng.integers(-2**62, 2**62), np.int64),
                       rng.integers(0, 2**16, 300).astype(np.uint16), m])
    assert _finish(_start(tmp_path, PAIRS, inputs, "twice", 60)) == [0, 0]
    want = run_devices(load_artifact(compile_module(hlo.load(PAIRS))), inputs, 2, 1, timeout_s=60)
    for rank, run in [(rank, run) for rank in range(2) for run in ("", ".second")]:
        assert len(json.loads((tmp_path / f"out{rank}.native.json").read_text())) == 10
        with np.load(tmp_path / f"out{rank}{run}.npz", allow_pickle=False) as z:
            got = [z[f"arr_{k}"] for k in range(len(z.files))]
        for g, w in zip(got, want[rank], strict=True):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_array_equal(g, w)
    assert np.isnan(got[4][2, 1])


CALLS = """HloModule calls, replica_count={n}
add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}}
ENTRY e {{
  a = f32[1000] parameter(0)
  b = f32[5000] parameter(1)
  r1 = f32[1000] all-reduce(a), replica_groups={{}}, to_apply=add
  e1 = f32[1] slice(r1), slice={{[0:1]}}
  e = f32[] reshape(e1)
  eb = f32[5000] broadcast(e), dimensions={{}}
  b2 = f32[5000] add(b, eb)
  r2 = f32[5000] all-reduce(b2), replica_groups={{}}, to_apply=add
  s2 = f32[1000] slice(r2), slice={{[0:1000]}}
  a3 = f32[1000] add(r1, s2)
  {third}
  ROOT t = ({shape}, f32[5000]) tuple(r3, r2)
}}"""


MISMATCHES = [
    # the same bucket (f32 add, 1024 elements) in another instruction, or of another shape: the
    # trailer says so after the reduction
    ("q3 = f32[1000] all-reduce(a3), replica_groups={}, to_apply=add\n  r3 = f32[1000] add(q3, a)",
     "f32[1000]", "mismatched collectives at call 3"),
    ("s = f32[900] slice(a3), slice={[0:900]}\n  r3 = f32[900] all-reduce(s), replica_groups={}, to_apply=add",
     "f32[900]", "mismatched collectives at call 3"),
    # another bucket (5000 elements): the ranks wait in different groups until their probes meet in the store
    ("b3 = f32[5000] add(r2, r2)\n  r3 = f32[5000] all-reduce(b3), replica_groups={}, to_apply=add", "f32[5000]",
     "waits in call 3"),
    # a reduction whose bucket rank 1 has no group for yet: it exchanges headers, the others wait
    # in the bucket; their probes meet as well
    ("b3 = f32[3000] slice(r2), slice={[0:3000]}\n  r3 = f32[3000] all-reduce(b3), replica_groups={}, "
     "to_apply=add", "f32[3000]", "waits in call 3"),
    # another collective (its headers first, as every exchange's): two processes only, since with
    # three the bucket's members do not answer a permute's header (a CollectiveTimeout, noted in
    # benchmarks/collectives_gloo.md, session 15)
    ("r3 = f32[1000] collective-permute(a3), source_target_pairs={{0,1},{1,0}}", "f32[1000]", None),
]


@pytest.mark.parametrize("third_on_rank1, shape, expect, n", [(*case, n) for case in MISMATCHES for n in (2, 3)
                                                             if case[2] is not None or n == 2])
def test_ranks_reducing_different_collectives_are_named(tmp_path: Path, third_on_rank1: str, shape: str,
                                                        expect: str | None, n: int) -> None:
    """Calls 1 and 2 agree (headers, then each reduction's group is made); at call 3 rank 1
    reduces another collective. Three processes: no header checks gloo's all_reduce in a bucket
    any more; the trailer or the probes name the mismatch. Two: the pair exchange's header,
    sent beside its value, names it at once, whatever the other rank reached."""
    rank0 = CALLS.format(n=n, third="r3 = f32[1000] all-reduce(a3), replica_groups={}, to_apply=add",
                         shape="f32[1000]")
    (tmp_path / "m.hlo.rank1").write_text(CALLS.format(n=n, third=third_on_rank1, shape=shape))
    inputs = [[np.ones(1000, np.float32), np.ones(5000, np.float32)]] * n
    start = time.monotonic()
    assert _finish(_start(tmp_path, rank0, inputs, "run", 120)) == [2] * n
    for rank in range(n):
        message = (tmp_path / f"out{rank}.txt").read_text()
        assert message.startswith("CollectiveError") and (expect if n == 3 else "mismatched collectives at call 3") \
            in message, message
    assert time.monotonic() - start < (100 if n == 3 else 30)  # not the 120 s timeout
