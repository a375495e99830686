"""The executor on hand-built programs: validation at load, freeing, run-time errors naming the
instruction, sub-programs, input checks, fresh outputs, the kernel placeholder."""
from __future__ import annotations

import numpy as np
import pytest

from emulator import ArtifactError, load_artifact
from emulator.artifact import ArtifactContents, write_artifact
from emulator.executor import EmulatorError
import emulator.ops  # noqa: F401 - registers the handlers
from emulator.program import OPS, Computation, Instruction, Program

F = ["f32", [3]]


def _manifest(inputs, outputs):
    io = lambda ts: [{"name": f"v{k}", "dtype": t[0], "shape": t[1]} for k, t in enumerate(ts)]  # noqa: E731
    return {"format": "neuron-customcall-neff", "module_name": "t", "hlo_fingerprint": "", "compiler_version": "t",
            "flags": {}, "aliases": [], "inputs": io(inputs), "outputs": io(outputs)}


def _load(comps, inputs, outputs, constants=()):
    return load_artifact(write_artifact(ArtifactContents(_manifest(inputs, outputs), Program(comps, 0), list(constants))))


def test_every_op_has_a_handler():
    assert all(spec.handler is not None for spec in OPS.values())


def test_straight_line_with_frees_and_constant():
    comp = Computation("main", 4, [0, 1], [F, F], [
        Instruction("add", 2, [0, 1], F, free=[0, 1], name="a"),
        Instruction("constant", 3, [], F, {"index": 0}, name="c"),
        Instruction("multiply", 0, [2, 3], F, free=[2, 3], name="m"),
    ], 0, F)
    exe = _load([comp], [F, F], [F], [np.array([1, 2, 3], np.float32)])
    x = np.ones(3, np.float32)
    np.testing.assert_array_equal(exe.run([x, x])[0], [2, 4, 6])


def test_reading_a_slot_before_writing_it_is_an_artifact_error():
    comp = Computation("main", 3, [0], [F], [Instruction("add", 1, [0, 2], F, name="bad")], 1, F)
    with pytest.raises(ArtifactError, match="reads slot 2 before it is written"):
        _load([comp], [F], [F])


def test_reading_a_freed_slot_is_an_artifact_error():
    comp = Computation("main", 3, [0], [F], [
        Instruction("negate", 1, [0], F, free=[0], name="n"),
        Instruction("add", 2, [1, 0], F, name="late"),
    ], 2, F)
    with pytest.raises(ArtifactError, match="late"):
        _load([comp], [F], [F])


def test_manifest_must_match_the_entry():
    comp = Computation("main", 2, [0], [F], [Instruction("negate", 1, [0], F, name="n")], 1, F)
    with pytest.raises(ArtifactError, match="manifest"):
        _load([comp], [["f32", [4]]], [F])


def test_runtime_failure_names_the_instruction():
    comp = Computation("main", 3, [0], [F], [
        Instruction("tuple", 1, [0], ["tuple", [F]], name="t"),
        Instruction("get-tuple-element", 2, [1], F, {"index": 3}, name="oops"),
    ], 2, F)
    exe = _load([comp], [F], [F])
    with pytest.raises(EmulatorError, match=r"oops \(get-tuple-element\) failed: IndexError"):
        exe.run([np.ones(3, np.float32)])


def test_an_output_of_the_wrong_shape_is_an_error_not_a_broadcast():
    comp = Computation("main", 2, [0], [["f32", []]], [Instruction("copy", 1, [0], F, name="c")], 1, F)
    exe = _load([comp], [["f32", []]], [F])
    with pytest.raises(EmulatorError, match="declares"):
        exe.run([np.float32(1)])


def test_while_and_call_sub_programs():
    S = ["s32", []]
    T = ["tuple", [S, F]]
    cond = Computation("cond", 4, [0], [T], [
        Instruction("get-tuple-element", 1, [0], S, {"index": 0}),
        Instruction("constant", 2, [], S, {"index": 0}),
        Instruction("compare", 3, [1, 2], ["pred", []], {"direction": "LT", "total_order": False}),
    ], 3, ["pred", []])
    double = Computation("double", 2, [0], [F], [Instruction("add", 1, [0, 0], F)], 1, F)
    body = Computation("body", 7, [0], [T], [
        Instruction("get-tuple-element", 1, [0], S, {"index": 0}),
        Instruction("get-tuple-element", 2, [0], F, {"index": 1}),
        Instruction("constant", 3, [], S, {"index": 1}),
        Instruction("add", 4, [1, 3], S),
        Instruction("call", 5, [2], F, {"computation": 3}),
        Instruction("tuple", 6, [4, 5], T),
    ], 6, T)
    main = Computation("main", 5, [0], [F], [
        Instruction("constant", 1, [], S, {"index": 1}),
        Instruction("tuple", 2, [1, 0], T),
        Instruction("while", 3, [2], T, {"cond": 1, "body": 2}),
        Instruction("get-tuple-element", 4, [3], F, {"index": 1}),
    ], 4, F)
    consts = [np.array(4, np.int32), np.array(1, np.int32)]
    exe = _load([main, cond, body, double], [F], [F], consts)
    np.testing.assert_array_equal(exe.run([np.ones(3, np.float32)])[0], [8, 8, 8])


def test_inputs_are_checked_and_outputs_are_fresh():
    comp = Computation("main", 1, [0], [F], [], 0, F)
    exe = _load([comp], [F], [F])
    x = np.ones(3, np.float32)
    out = exe.run([x])[0]
    assert out is not x and not np.shares_memory(out, x)
    with pytest.raises(EmulatorError, match="dtype"):
        exe.run([x.astype(np.float64)])
    with pytest.raises(EmulatorError, match="expected 1 inputs"):
        exe.run([])


def _owned_outputs(outs, inputs):
    """Every output writeable, sharing memory with no input and no other output."""
    for k, out in enumerate(outs):
        assert out.flags.writeable
        assert not any(np.shares_memory(out, x) for x in inputs)
        assert not any(np.shares_memory(out, o) for o in outs[:k])


def test_outputs_aliasing_inputs_or_each_other_are_copied():
    T4 = ["tuple", [F, F, F, F]]
    comp = Computation("main", 5, [0, 1], [F, ["f32", [6]]], [
        Instruction("slice", 2, [1], F, {"start": [0], "limit": [6], "stride": [2]}, name="s"),
        Instruction("negate", 3, [0], F, name="n"),
        Instruction("tuple", 4, [0, 2, 3, 3], T4, name="t"),
    ], 4, T4)
    exe = _load([comp], [F, ["f32", [6]]], [F, F, F, F])
    x, w = np.arange(3, dtype=np.float32), np.arange(6, dtype=np.float32)
    for inputs in ([x, w], [x, w[::-1].copy()[::-1]], [x.copy(), np.ascontiguousarray(w)]):
        outs = exe.run(inputs)
        _owned_outputs(outs, inputs)
        np.testing.assert_array_equal(outs[0], inputs[0])
        np.testing.assert_array_equal(outs[1], inputs[1][::2])
        np.testing.assert_array_equal(outs[2], -inputs[0])
        np.testing.assert_array_equal(outs[3], -inputs[0])


def test_outputs_of_read_only_and_foreign_inputs_are_copied():
    comp = Computation("main", 4, [0, 1], [F, F], [
        Instruction("reshape", 2, [1], F, name="r"),
        Instruction("tuple", 3, [0, 2], ["tuple", [F, F]], name="t"),
    ], 3, ["tuple", [F, F]])
    exe = _load([comp], [F, F], [F, F])
    base = np.arange(6, dtype=np.float32)
    read_only = base[:3]
    read_only.flags.writeable = False
    foreign = np.frombuffer(memoryview(bytearray(base[3:].tobytes())), np.float32)  # base: not an array
    for inputs in ([read_only, foreign], [base[3:], base[:3]], [foreign, foreign]):
        outs = exe.run(inputs)
        _owned_outputs(outs, inputs)
        np.testing.assert_array_equal(outs[0], inputs[0])
        np.testing.assert_array_equal(outs[1], inputs[1])


def test_a_constant_output_is_copied_and_the_constant_stays():
    comp = Computation("main", 2, [0], [F], [Instruction("constant", 1, [], F, {"index": 0}, name="c")], 1, F)
    exe = _load([comp], [F], [F], [np.array([1, 2, 3], np.float32)])
    out = exe.run([np.zeros(3, np.float32)])[0]
    _owned_outputs([out], [])
    out[:] = 7
    np.testing.assert_array_equal(exe.run([np.zeros(3, np.float32)])[0], [1, 2, 3])


def test_outputs_not_owned_are_copied_only_off_writeable_inputs():
    T5 = ["tuple", [F, F, F, F, F]]
    comp = Computation("main", 7, [0, 1], [F, F], [
        Instruction("negate", 2, [0], F, name="n"),
        Instruction("constant", 3, [], F, {"index": 0}, name="c"),
        Instruction("reshape", 4, [1], F, name="r"),
        Instruction("reshape", 5, [0], F, name="r0"),
        Instruction("tuple", 6, [2, 2, 3, 4, 5], T5, name="t"),
    ], 6, T5)
    exe = _load([comp], [F, F], [F, F, F, F, F], [np.array([1, 2, 3], np.float32)])
    read_only = np.frombuffer(np.arange(3, dtype=np.float32).tobytes(), np.float32)  # as JAX arrays look
    writeable = np.arange(3, dtype=np.float32) + 10
    neg, neg2, const, ro, w = exe.run([writeable, read_only], owned=False)
    assert neg is neg2 and np.shares_memory(ro, read_only) and not const.flags.writeable
    assert not np.shares_memory(w, writeable)
    np.testing.assert_array_equal(ro, [0, 1, 2])
    flippable = np.arange(3, dtype=np.float32)
    flippable.flags.writeable = False  # its owner may set it writeable again
    assert not np.shares_memory(exe.run([writeable, flippable], owned=False)[3], flippable)
    np.testing.assert_array_equal(w, writeable)
    np.testing.assert_array_equal(neg, -writeable)
    np.testing.assert_array_equal(const, [1, 2, 3])
    _owned_outputs(exe.run([writeable, read_only]), [writeable, read_only])


def test_kernel_op_naming_a_missing_payload_is_an_artifact_error():
    comp = Computation("main", 2, [0], [F], [Instruction("kernel", 1, [0], F, {"payload": 0}, name="k")], 1, F)
    with pytest.raises(ArtifactError, match="kernel payload 0 does not exist"):
        _load([comp], [F], [F])


def test_attribute_schema_is_enforced_at_load():
    comp = Computation("main", 2, [0], [F], [Instruction("transpose", 1, [0], F, {"perm": "0"})], 1, F)
    with pytest.raises(ArtifactError, match="not of kind ints"):
        _load([comp], [F], [F])
    comp = Computation("main", 2, [0], [F], [Instruction("transpose", 1, [0], F, {"perm": [5]})], 1, F)
    with pytest.raises(ArtifactError, match="can not be built: ValueError: permutation"):
        _load([comp], [F], [F])


def test_check_mode_catches_a_wrong_intermediate_type(monkeypatch):
    G = ["f32", [4]]
    comp = Computation("main", 3, [0], [F], [
        Instruction("copy", 1, [0], G, name="liar"),
        Instruction("negate", 2, [1], G, name="n"),
        Instruction("slice", 0, [2], F, {"start": [0], "limit": [3], "stride": [1]}, name="s"),
    ], 0, F)
    x = np.ones(3, np.float32)
    np.testing.assert_array_equal(_load([comp], [F], [F]).run([x])[0], -x)  # unnoticed without checks
    monkeypatch.setenv("NEURON_EMULATOR_CHECK", "1")
    with pytest.raises(EmulatorError, match=r"liar \(copy\) produced float32\[3\]"):
        _load([comp], [F], [F]).run([x])


def test_the_blas_thread_policy_is_applied_only_to_programs_that_may_call_blas(monkeypatch):
    """...with threads: OpenBLAS runs a GEMM under 65536 x 4 multiply-adds on one thread anyway,
    so a program whose dots are all smaller skips the policy's system calls too."""
    import contextlib

    from emulator import executor

    entered = []

    @contextlib.contextmanager
    def policy():
        entered.append(True)
        yield

    monkeypatch.setattr(executor, "blas_threads_for_run", policy)
    elementwise = Computation("main", 3, [0, 1], [F, F], [Instruction("add", 2, [0, 1], F, name="a")], 2, F)
    x = np.ones(3, np.float32)
    np.testing.assert_array_equal(_load([elementwise], [F, F], [F]).run([x, x])[0], 2)
    assert not entered

    def dot(n: int) -> tuple[Computation, list]:
        M = ["f32", [n, n]]
        return Computation("main", 3, [0, 1], [M, M], [
            Instruction("dot", 2, [0, 1], M, {"lhs_contracting": [1], "rhs_contracting": [0], "lhs_batch": [],
                                              "rhs_batch": [], "out_perm": []}, name="d"),
        ], 2, M), M
    for n, threaded in ((3, False), (63, False), (64, True)):  # 64^3 = 65536 x 4
        entered.clear()
        comp, M = dot(n)
        m = np.eye(n, dtype=np.float32)
        np.testing.assert_array_equal(_load([comp], [M, M], [M]).run([m, m])[0], m)
        assert entered == ([True] if threaded else []), n


def test_a_convolution_counts_its_multiply_adds_per_output_feature():
    """The policy's estimate for a convolution: outputs x the kernel's taps and input features
    (not its output features), so a small one skips the policy and a training step's does not."""
    from emulator.executor import SINGLE_THREAD_GEMM, _multiply_adds

    def conv(out: list[int], kernel: list[int]) -> int | None:
        inst = Instruction("convolution", 2, [0, 1], ["f32", out], {"kernel_output_feature": 3}, name="c")
        return _multiply_adds(inst, [["f32", [1, 1, 1, 1]], ["f32", kernel]])
    assert conv([1, 4, 4, 1], [3, 3, 1, 1]) == 16 * 9 < SINGLE_THREAD_GEMM
    assert conv([32, 28, 28, 16], [3, 3, 16, 16]) == 32 * 28 * 28 * 16 * 144 >= SINGLE_THREAD_GEMM
    assert conv([1, 4, 4, 1], [3, 3]) is None  # a kernel shape that does not fit: counted as BLAS
