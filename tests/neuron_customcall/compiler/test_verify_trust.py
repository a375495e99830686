"""The verifier as a guard against silent corruption and raw exceptions (issue 16): parameter
numbering, the result element type of every opcode with a rule, dimension numbers out of range,
deep call nests; and hypothesis fuzzing (seeded, bounded) of attributes and element types, so
the class can not come back."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import emulator
import hlo
from neuron_customcall.compiler import CompileError, compile_module
from neuron_customcall.compiler.pipeline import MAX_CALL_DEPTH


def _compile(text_or_proto) -> emulator.Executable:
    module = hlo.load(text_or_proto)
    return emulator.load_artifact(compile_module(module))


SUB = "HloModule m\n\nENTRY e {\n  a = f32[3] parameter(0)\n  b = f32[3] parameter(1)\n  ROOT d = f32[3] subtract(a, b)\n}\n"


def _numbered(numbers: tuple[int, int]) -> bytes:
    proto = hlo.load(SUB).to_proto()
    params = [i for i in proto.computations[0].instructions if i.opcode == "parameter"]
    for inst, n in zip(params, numbers):
        inst.parameter_number = n
    return proto.SerializeToString()


@pytest.mark.parametrize("numbers", [(-1, 1), (0, 0), (1, 2), (0, 5)])
def test_parameter_numbering_must_be_zero_to_n(numbers: tuple[int, int]) -> None:
    with pytest.raises(CompileError, match=r"must be 0\.\.1, each once"):
        _compile(_numbered(numbers))  # today (-1, 1) compiles with the inputs silently reordered


def test_swapped_parameter_numbers_are_honoured() -> None:
    exe = _compile(_numbered((1, 0)))
    a, b = np.array([1, 2, 3], np.float32), np.array([10, 20, 30], np.float32)
    np.testing.assert_array_equal(exe.run([a, b])[0], b - a)  # input 0 is parameter 0, i.e. b


def _module(body: str, params: str) -> str:
    lines = [f"  p{k} = {t} parameter({k})" for k, t in enumerate(params.split(";")) if t]
    return "HloModule m\n\nENTRY e {\n" + "\n".join(lines) + f"\n  ROOT r = {body}\n}}\n"


R = "r {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n\n"
WRONG_TYPES = {
    "add": ("s32[2] add(p0, p1)", "f32[2];f32[2]"),
    "negate": ("s32[2] negate(p0)", "f32[2]"),
    "abs-complex": ("c64[2] abs(p0)", "c64[2]"),
    "real": ("c64[2] real(p0)", "c64[2]"),
    "is-finite": ("f32[2] is-finite(p0)", "f32[2]"),
    "complex": ("c128[2] complex(p0, p1)", "f32[2];f32[2]"),
    "select": ("s32[2] select(p0, p1, p1)", "pred[2];f32[2]"),
    "select-mixed": ("f32[2] select(p0, p1, p2)", "pred[2];f32[2];s32[2]"),
    "clamp": ("f16[2] clamp(p0, p1, p0)", "f32[2];f32[2]"),
    "broadcast": ("s32[2,3] broadcast(p0), dimensions={0}", "f32[2]"),
    "reshape": ("f16[2,1] reshape(p0)", "f32[2]"),
    "transpose": ("s32[3,2] transpose(p0), dimensions={1,0}", "f32[2,3]"),
    "slice": ("s32[1] slice(p0), slice={[0:1]}", "f32[2]"),
    "reverse": ("s8[2] reverse(p0), dimensions={0}", "f32[2]"),
    "concatenate": ("f32[4] concatenate(p0, p1), dimensions={0}", "f32[2];s32[2]"),
    "tuple": ("(s32[2]) tuple(p0)", "f32[2]"),
    "get-tuple-element": ("s32[2] get-tuple-element(p0), index=0", "(f32[2])"),
}


@pytest.mark.parametrize("case", sorted(WRONG_TYPES))
def test_result_element_types_are_checked(case: str) -> None:
    body, params = WRONG_TYPES[case]
    with pytest.raises(CompileError):
        _compile(_module(body, params))


def test_reduce_result_type_is_its_init_type() -> None:
    text = "HloModule m\n\n" + R + ("ENTRY e {\n  p0 = f32[2,3] parameter(0)\n  z = f32[] constant(0)\n"
                                   "  ROOT r = s32[2] reduce(p0, z), dimensions={1}, to_apply=r\n}\n")
    with pytest.raises(CompileError, match="reduce"):
        _compile(text)


@pytest.mark.parametrize("body, params, want", [
    ("f32[2] abs(p0)", "c64[2]", lambda x: np.abs(x)),
    ("f64[2] imag(p0)", "c128[2]", lambda x: np.imag(x)),
    ("pred[2] is-finite(p0)", "c64[2]", lambda x: np.isfinite(x)),
])
def test_xla_result_types_are_accepted(body: str, params: str, want) -> None:
    dt = np.complex64 if params.startswith("c64") else np.complex128
    x = np.array([3 + 4j, -1j], dt)
    np.testing.assert_allclose(_compile(_module(body, params)).run([x])[0], want(x))


@pytest.mark.parametrize("body, params", [
    ("f32[2,4] dot(p0, p1), lhs_contracting_dims={7}, rhs_contracting_dims={0}", "f32[2,3];f32[3,4]"),
    ("f32[2,4] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={-1}", "f32[2,3];f32[3,4]"),
    ("f32[3] dot(p0, p1), lhs_batch_dims={0,0}, rhs_batch_dims={0,1}, lhs_contracting_dims={}, "
     "rhs_contracting_dims={}", "f32[3];f32[3,3]"),
    ("f32[4,3] concatenate(p0, p1), dimensions={7}", "f32[2,3];f32[2,3]"),
    ("f32[4,3] concatenate(p0, p1), dimensions={}", "f32[2,3];f32[2,3]"),
])
def test_dimension_numbers_out_of_range_are_compile_errors(body: str, params: str) -> None:
    with pytest.raises(CompileError):  # today: IndexError from the verifier
        _compile(_module(body, params))


def _nested_calls(depth: int) -> str:
    comps = []
    for k in reversed(range(depth)):
        body = f"ROOT r = f32[2] call(x), to_apply=c{k + 1}" if k < depth - 1 else "ROOT r = f32[2] negate(x)"
        comps.append(f"c{k} {{\n  x = f32[2] parameter(0)\n  {body}\n}}\n")
    return "HloModule m\n\n" + "\n".join(comps) + "\nENTRY e {\n  a = f32[2] parameter(0)\n  ROOT r = f32[2] call(a), to_apply=c0\n}\n"


def test_deep_call_nests_are_a_compile_error_not_a_recursion_error() -> None:
    with pytest.raises(CompileError, match=f"nested more than {MAX_CALL_DEPTH} deep"):
        _compile(_nested_calls(1000))  # today: RecursionError
    exe = _compile(_nested_calls(MAX_CALL_DEPTH))
    np.testing.assert_array_equal(exe.run([np.array([1, -2], np.float32)])[0], [-1, 2])


# -- fuzzing: only CompileError or a correct answer ------------------------------------------
def _accepts(text: str) -> bool:
    try:
        _compile(text)
    except (CompileError, hlo.HloError):
        return False
    return True


TYPES = ["f32", "s32", "f16", "pred"]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(op=st.sampled_from(["add", "multiply", "maximum", "subtract"]), a=st.sampled_from(TYPES),
       b=st.sampled_from(TYPES), out=st.sampled_from(TYPES))
def test_fuzzed_binary_element_types_follow_xla(op: str, a: str, b: str, out: str) -> None:
    ok = _accepts(_module(f"{out}[2] {op}(p0, p1)", f"{a}[2];{b}[2]"))
    assert ok == (a == b == out)


@settings(max_examples=120, deadline=None, derandomize=True)
@given(lc=st.lists(st.integers(-2, 9), max_size=3), rc=st.lists(st.integers(-2, 9), max_size=3),
       lb=st.lists(st.integers(-2, 9), max_size=2), rb=st.lists(st.integers(-2, 9), max_size=2),
       out=st.lists(st.integers(1, 4), max_size=4))
def test_fuzzed_dot_dimension_numbers_never_raise_raw(lc, rc, lb, rb, out) -> None:
    dims = lambda xs: "{" + ",".join(map(str, xs)) + "}"  # noqa: E731
    body = (f"f32[{','.join(map(str, out))}] dot(p0, p1), lhs_batch_dims={dims(lb)}, rhs_batch_dims={dims(rb)}, "
            f"lhs_contracting_dims={dims(lc)}, rhs_contracting_dims={dims(rc)}")
    text = _module(body, "f32[2,3,4];f32[2,4,3]")
    if _accepts(text):  # then it is a real dot: compare with NumPy
        x, y = np.random.default_rng(0).standard_normal((2, 2, 3, 4)).astype(np.float32)
        y = y.reshape(2, 4, 3)
        got = _compile(text).run([x, y])[0]
        letters_l, letters_r = list("abc"), list("def")
        for i, j in zip(lb + lc, rb + rc):
            letters_r[j] = letters_l[i]
        free_l = [letters_l[k] for k in range(3) if k not in lb + lc]
        free_r = [letters_r[k] for k in range(3) if k not in rb + rc]
        spec = f"{''.join(letters_l)},{''.join(letters_r)}->{''.join([letters_l[k] for k in lb] + free_l + free_r)}"
        np.testing.assert_allclose(got, np.einsum(spec, x, y), rtol=1e-5, atol=1e-5)


@settings(max_examples=80, deadline=None, derandomize=True)
@given(axis=st.integers(-2, 5), shapes=st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=3), min_size=1,
                                                 max_size=3), out=st.lists(st.integers(0, 6), min_size=0, max_size=3))
def test_fuzzed_concatenate_never_raises_raw(axis, shapes, out) -> None:
    params = ";".join(f"f32[{','.join(map(str, s))}]" for s in shapes)
    body = f"f32[{','.join(map(str, out))}] concatenate({', '.join(f'p{k}' for k in range(len(shapes)))}), " \
           f"dimensions={{{axis}}}"
    text = _module(body, params)
    if _accepts(text):
        xs = [np.arange(np.prod(s), dtype=np.float32).reshape(s) for s in shapes]
        np.testing.assert_array_equal(_compile(text).run(xs)[0], np.concatenate(xs, axis))
