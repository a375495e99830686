"""The generated run function: constant-only steps folded at build time (constants, iotas and
broadcasts/converts of them), never a value a later step overwrites in place, outputs of folded
values still the caller's own, and failures still naming their instruction."""
from __future__ import annotations

import numpy as np
import pytest

from emulator.codegen import foldable_steps as _foldable
from emulator.executor import EmulatorError
from emulator.program import Computation, Instruction
from tests.emulator.executor.test_executor_programs import F, _load

S32 = ["s32", []]
F32 = ["f32", []]


def _folding_program():
    """(x + convert(c3) + iota, broadcast(convert(c))): the first add writes into the convert."""
    return Computation("main", 8, [0], [F], [
        Instruction("constant", 1, [], ["s32", [3]], {"index": 1}, name="c3"),
        Instruction("convert", 2, [1], F, free=[1], name="cv3"),
        Instruction("add", 3, [2, 0], F, free=[2], reuse=0, name="in_place"),  # writes into cv3: not folded
        Instruction("iota", 4, [], F, {"dim": 0}, name="i"),
        Instruction("add", 5, [3, 4], F, free=[3, 4], name="sum"),
        Instruction("constant", 1, [], S32, {"index": 0}, name="c"),
        Instruction("convert", 2, [1], F32, free=[1], name="cv"),
        Instruction("broadcast", 6, [2], F, {"dims": []}, free=[2], name="b"),
        Instruction("tuple", 7, [5, 6], ["tuple", [F, F]], free=[5, 6], name="t"),
    ], 7, ["tuple", [F, F]])


def test_foldable_steps_exclude_values_overwritten_in_place():
    assert _foldable(_folding_program()) == {0, 3, 5, 6, 7}


def test_folded_values_give_the_same_results_every_run_and_outputs_stay_private():
    exe = _load([_folding_program()], [F], [F, F], [np.array(5, np.int32), np.array([10, 20, 30], np.int32)])
    x = np.array([1, 2, 3], np.float32)
    for _ in range(3):
        total, bcast = exe.run([x])
        np.testing.assert_array_equal(total, [11, 23, 35])  # x + c3 + iota
        np.testing.assert_array_equal(bcast, [5, 5, 5])
        assert bcast.flags.writeable and total.flags.writeable
        bcast[:] = -1  # the caller's own copy: the next run is unaffected
        total[:] = -1


def test_a_failure_after_folded_steps_names_its_instruction():
    comp = Computation("main", 4, [0], [F], [
        Instruction("constant", 1, [], S32, {"index": 0}, name="c"),
        Instruction("tuple", 2, [0, 1], ["tuple", [F, S32]], free=[1], name="t"),
        Instruction("get-tuple-element", 3, [2], F, {"index": 7}, free=[2], name="bad_index"),
    ], 3, F)
    exe = _load([comp], [F], [F], [np.array(5, np.int32)])
    with pytest.raises(EmulatorError, match=r"main: instruction bad_index \(get-tuple-element\) failed: IndexError"):
        exe.run([np.ones(3, np.float32)])
