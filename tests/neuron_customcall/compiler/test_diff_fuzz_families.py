"""Fuzzed shapes and attributes (hypothesis) against XLA:CPU on the same HLO module, one test per
family issue 15 names: element-wise, reduce, dot, convolution, gather/scatter, sort and complex.
Each example writes a module with drawn shapes, dimension numbers, windows, groups, directions
and element types, runs it on our compiler + emulator and on XLA:CPU (jaxlib) with the same drawn
inputs, and compares (exactly where the values make the answer exact: small integers, integer
types, max/min; per-dtype tolerances for transcendentals)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import hlo
from neuron_customcall.jax.xla_cpu import XlaCpuExecutable
from tests.neuron_customcall.compiler.ours import assert_close, compile_proto

FUZZ = settings(max_examples=12, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
NP = {"f32": np.float32, "f64": np.float64, "bf16": ml_dtypes.bfloat16, "f16": np.float16, "s32": np.int32,
      "s8": np.int8, "u8": np.uint8, "s64": np.int64, "pred": np.bool_, "c64": np.complex64, "c128": np.complex128}


def _shape(t: str, dims: list[int]) -> str:
    return f"{t}[{','.join(map(str, dims))}]"


def _csv(xs: list[int]) -> str:
    return ",".join(map(str, xs))


def _both(text: str, args: list[np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    proto = hlo.load(text).to_bytes()
    return compile_proto(proto).run(args), XlaCpuExecutable(proto).run(args)


def _values(data: st.DataObject, t: str, dims: list[int], *, small: bool = False, special: bool = False) -> np.ndarray:
    """Drawn values: small integers (exact sums and products), or normal floats with NaN, +-inf and
    +-0 mixed in where `special`."""
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    rng = np.random.default_rng(seed)
    dt = np.dtype(NP[t])
    if dt == np.bool_:
        return rng.random(dims) < 0.5
    if dt.kind in "iu" or small:
        lo = 0 if dt.kind == "u" else -4
        return rng.integers(lo, 5, size=dims).astype(dt)
    if dt.kind == "c":
        x = rng.standard_normal(dims) + 1j * rng.standard_normal(dims)
    else:
        x = rng.standard_normal(dims) * 3
    if special and x.size:
        picks = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0])
        mask = rng.random(dims) < 0.3
        if dt.kind == "c":
            re = np.where(mask, rng.choice(picks, dims), x.real)
            im = np.where(rng.random(dims) < 0.3, rng.choice(picks, dims), x.imag)
            x = re + 1j * im
        else:
            x = np.where(mask, rng.choice(picks, dims), x)
    return np.asarray(x).astype(dt)


dims_st = st.lists(st.integers(0, 4), min_size=0, max_size=3)

UNARY = ["abs", "negate", "exponential", "log", "sqrt", "tanh", "floor", "ceil", "sign", "round-nearest-even",
         "round-nearest-afz", "cosine", "sine", "logistic", "exponential-minus-one", "log-plus-one", "rsqrt", "cbrt",
         "is-finite"]
BINARY = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "atan2", "remainder", "compare"]


@FUZZ
@given(data=st.data(), t=st.sampled_from(["f32", "f64", "bf16", "f16"]), dims=dims_st,
       op=st.sampled_from(UNARY + BINARY))
def test_elementwise_float_ops_match_xla_cpu(data, t, dims, op) -> None:
    x = _values(data, t, dims, special=True)
    if op in BINARY:
        y = _values(data, t, dims, special=True)
        if op == "compare":
            direction = data.draw(st.sampled_from(["EQ", "NE", "LT", "LE", "GT", "GE"]))
            body, out = f"compare(x, y), direction={direction}", _shape("pred", dims)
        else:
            body, out = f"{op}(x, y)", _shape(t, dims)
        params, args = f"  x = {_shape(t, dims)} parameter(0)\n  y = {_shape(t, dims)} parameter(1)", [x, y]
    else:
        out = _shape("pred" if op == "is-finite" else t, dims)
        params, args, body = f"  x = {_shape(t, dims)} parameter(0)", [x], f"{op}(x)"
    text = f"HloModule ew\nENTRY e {{\n{params}\n  ROOT r = {out} {body}\n}}"
    ours, ref = _both(text, args)
    # transcendentals: XLA:CPU's polynomial approximations differ from libm in the last bits
    assert_close(ours, ref, rtol=1e-4 if t == "f32" else None, atol=1e-5 if t == "f32" else None)


REDUCERS = {"add": ("add", {"f32": "0", "f64": "0", "s32": "0", "bf16": "0"}),
            "maximum": ("maximum", {"f32": "-inf", "f64": "-inf", "s32": "-2147483648", "bf16": "-inf"}),
            "minimum": ("minimum", {"f32": "inf", "f64": "inf", "s32": "2147483647", "bf16": "inf"}),
            "multiply": ("multiply", {"s32": "1"})}


@FUZZ
@given(data=st.data(), t=st.sampled_from(["f32", "f64", "s32", "bf16"]),
       dims=st.lists(st.integers(0, 5), min_size=1, max_size=4), reducer=st.sampled_from(sorted(REDUCERS)))
def test_reduce_over_drawn_dimensions_matches_xla_cpu(data, t, dims, reducer) -> None:
    op, inits = REDUCERS[reducer]
    assume(t in inits and not (t == "bf16" and reducer == "add"))  # bf16 sums: XLA:CPU accumulates in bf16
    reduced = sorted(data.draw(st.sets(st.integers(0, len(dims) - 1), min_size=1), label="dimensions"))
    out = [d for k, d in enumerate(dims) if k not in reduced]
    text = f"""HloModule rd
r {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT c = {t}[] {op}(a, b)
}}
ENTRY e {{
  x = {_shape(t, dims)} parameter(0)
  i = {t}[] constant({inits[t]})
  ROOT s = {_shape(t, out)} reduce(x, i), dimensions={{{_csv(reduced)}}}, to_apply=r
}}"""
    x = _values(data, t, dims, small=True)
    ours, ref = _both(text, [x])
    assert_close(ours, ref, rtol=0, atol=0)  # small integers: every order of summation is exact


DOT_TYPES = [("f32", "f32", "f32"), ("s8", "s8", "s32"), ("bf16", "bf16", "f32"), ("f64", "f64", "f64"),
             ("s32", "s32", "s32"), ("c64", "c64", "c64"), ("u8", "u8", "s32")]


@FUZZ
@given(data=st.data(), types=st.sampled_from(DOT_TYPES),
       batch=st.lists(st.integers(1, 3), max_size=2), contract=st.lists(st.integers(1, 4), max_size=2),
       lfree=st.lists(st.integers(1, 4), max_size=2), rfree=st.lists(st.integers(1, 4), max_size=2))
def test_dot_with_drawn_dimension_numbers_matches_xla_cpu(data, types, batch, contract, lfree, rfree) -> None:
    lt, rt, ot = types
    # each operand's dimensions (batch, then contracting, then free) in a drawn order
    lhs_roles = [("b", k) for k in range(len(batch))] + [("c", k) for k in range(len(contract))] + \
        [("f", k) for k in range(len(lfree))]
    rhs_roles = [("b", k) for k in range(len(batch))] + [("c", k) for k in range(len(contract))] + \
        [("f", k) for k in range(len(rfree))]
    lhs_roles = data.draw(st.permutations(lhs_roles), label="lhs order")
    rhs_roles = data.draw(st.permutations(rhs_roles), label="rhs order")
    size = {"b": batch, "c": contract}
    lhs_dims = [(size.get(r) or lfree)[k] for r, k in lhs_roles]
    rhs_dims = [(size.get(r) or rfree)[k] for r, k in rhs_roles]
    pos = lambda roles, role: [roles.index((role, k)) for k in range(len(size.get(role, [])))]  # noqa: E731
    out = batch + [lhs_dims[k] for k, (r, _) in enumerate(lhs_roles) if r == "f"] + \
        [rhs_dims[k] for k, (r, _) in enumerate(rhs_roles) if r == "f"]
    text = f"""HloModule dt
ENTRY e {{
  a = {_shape(lt, lhs_dims)} parameter(0)
  b = {_shape(rt, rhs_dims)} parameter(1)
  ROOT d = {_shape(ot, out)} dot(a, b), lhs_batch_dims={{{_csv(pos(lhs_roles, "b"))}}}, lhs_contracting_dims={{{_csv(pos(lhs_roles, "c"))}}}, rhs_batch_dims={{{_csv(pos(rhs_roles, "b"))}}}, rhs_contracting_dims={{{_csv(pos(rhs_roles, "c"))}}}
}}"""
    args = [_values(data, lt, lhs_dims, small=True), _values(data, rt, rhs_dims, small=True)]
    ours, ref = _both(text, args)
    assert_close(ours, ref, rtol=0, atol=0)


CONV_LABELS = {1: ["b0f_0io->b0f", "bf0_oi0->bf0", "0bf_io0->f0b"], 2: ["b01f_01io->b01f", "bf01_oi01->bf01",
                                                                         "f01b_i01o->01bf"]}


@FUZZ
@given(data=st.data(), types=st.sampled_from([("f32", "f32"), ("s8", "s32"), ("s32", "s32"), ("f64", "f64")]),
       rank=st.sampled_from([1, 2]))
def test_convolution_with_drawn_windows_and_groups_matches_xla_cpu(data, types, rank) -> None:
    t, ot = types
    labels = data.draw(st.sampled_from(CONV_LABELS[rank]), label="dim_labels")
    groups = data.draw(st.integers(1, 3), label="feature_group_count")
    cin, cout, n = groups * data.draw(st.integers(1, 2)), groups * data.draw(st.integers(1, 2)), data.draw(
        st.integers(1, 2))
    spatial = [data.draw(st.integers(1, 6)) for _ in range(rank)]
    size = [data.draw(st.integers(1, 3)) for _ in range(rank)]
    stride = [data.draw(st.integers(1, 2)) for _ in range(rank)]
    pad = [(data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))) for _ in range(rank)]
    lhs_dil = [data.draw(st.integers(1, 2)) for _ in range(rank)]
    rhs_dil = [data.draw(st.integers(1, 2)) for _ in range(rank)]
    out_sp = []
    for k in range(rank):
        padded = (spatial[k] - 1) * lhs_dil[k] + 1 + pad[k][0] + pad[k][1]
        span = (size[k] - 1) * rhs_dil[k] + 1
        assume(padded >= span)
        out_sp.append((padded - span) // stride[k] + 1)
    lhs_l, rest = labels.split("_")
    rhs_l, out_l = rest.split("->")

    def dims_of(layout: str, sizes: dict[str, int], sp: list[int]) -> list[int]:
        return [sizes[c] if c in sizes else sp[int(c)] for c in layout]

    lhs_dims = dims_of(lhs_l, {"b": n, "f": cin}, spatial)
    rhs_dims = dims_of(rhs_l, {"i": cin // groups, "o": cout}, size)
    out_dims = dims_of(out_l, {"b": n, "f": cout}, out_sp)
    window = (f"size={'x'.join(map(str, size))} stride={'x'.join(map(str, stride))} "
              f"pad={'x'.join(f'{lo}_{hi}' for lo, hi in pad)} lhs_dilate={'x'.join(map(str, lhs_dil))} "
              f"rhs_dilate={'x'.join(map(str, rhs_dil))}")
    text = f"""HloModule cv
ENTRY e {{
  a = {_shape(t, lhs_dims)} parameter(0)
  b = {_shape(t, rhs_dims)} parameter(1)
  ROOT c = {_shape(ot, out_dims)} convolution(a, b), window={{{window}}}, dim_labels={labels}, feature_group_count={groups}
}}"""
    args = [_values(data, t, lhs_dims, small=True), _values(data, t, rhs_dims, small=True)]
    ours, ref = _both(text, args)
    assert_close(ours, ref, rtol=0, atol=0)


@FUZZ
@given(data=st.data(), t=st.sampled_from(["f32", "s32"]), dims=st.lists(st.integers(1, 5), min_size=2, max_size=3),
       scatter=st.booleans())
def test_gather_and_scatter_with_drawn_dimension_numbers_match_xla_cpu(data, t, dims, scatter) -> None:
    """Indices drawn out of bounds too: a gather clamps the start, a scatter skips the window."""
    rank = len(dims)
    mapped = data.draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=2, unique=True), label="index map")
    sizes = [data.draw(st.integers(1 if k in mapped else 0, d), label=f"slice {k}") if k in mapped else
             data.draw(st.integers(0, d)) for k, d in enumerate(dims)]
    sizes = [max(1, s) if k in mapped else s for k, s in enumerate(sizes)]
    collapsed = sorted(k for k in mapped if sizes[k] == 1 and data.draw(st.booleans(), label=f"collapse {k}"))
    n = data.draw(st.integers(1, 4), label="indices")
    idx = np.array([[data.draw(st.integers(-2, dims[k] + 1)) for k in mapped] for _ in range(n)], np.int32)
    window = [s for k, s in enumerate(sizes) if k not in collapsed]
    offset = list(range(1, 1 + len(window)))
    x = _values(data, t, dims, small=True)
    if not scatter:
        text = f"""HloModule ga
ENTRY e {{
  x = {_shape(t, dims)} parameter(0)
  i = s32[{n},{len(mapped)}] parameter(1)
  ROOT g = {_shape(t, [n] + window)} gather(x, i), offset_dims={{{_csv(offset)}}}, collapsed_slice_dims={{{_csv(collapsed)}}}, start_index_map={{{_csv(mapped)}}}, index_vector_dim=1, slice_sizes={{{_csv(sizes)}}}
}}"""
        args = [x, idx]
    else:
        text = f"""HloModule sc
add {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT s = {t}[] add(a, b)
}}
ENTRY e {{
  x = {_shape(t, dims)} parameter(0)
  i = s32[{n},{len(mapped)}] parameter(1)
  u = {_shape(t, [n] + window)} parameter(2)
  ROOT s = {_shape(t, dims)} scatter(x, i, u), update_window_dims={{{_csv(offset)}}}, inserted_window_dims={{{_csv(collapsed)}}}, scatter_dims_to_operand_dims={{{_csv(mapped)}}}, index_vector_dim=1, to_apply=add
}}"""
        args = [x, idx, _values(data, t, [n] + window, small=True)]
    ours, ref = _both(text, args)
    assert_close(ours, ref, rtol=0, atol=0)


@FUZZ
@given(data=st.data(), t=st.sampled_from(["f32", "s32", "bf16", "u8"]),
       dims=st.lists(st.integers(1, 6), min_size=1, max_size=3), operands=st.integers(1, 2),
       direction=st.sampled_from(["LT", "GT"]))
def test_sort_along_a_drawn_dimension_matches_xla_cpu(data, t, dims, operands, direction) -> None:
    """Several operands sort stably (ties would leave their order to XLA otherwise)."""
    dim = data.draw(st.integers(0, len(dims) - 1), label="dimension")
    stable = operands > 1 or data.draw(st.booleans(), label="stable")
    keys = _values(data, t, dims, small=True)
    params = "\n".join(f"  p{k} = {_shape(t if k == 0 else 's32', dims)} parameter({k})" for k in range(operands))
    cmp_params = "\n".join(f"  a{k} = {t if k == 0 else 's32'}[] parameter({2 * k})\n"
                           f"  b{k} = {t if k == 0 else 's32'}[] parameter({2 * k + 1})" for k in range(operands))
    shapes = ", ".join(_shape(t if k == 0 else "s32", dims) for k in range(operands))
    result = f"({shapes})" if operands > 1 else shapes
    text = f"""HloModule so
cmp {{
{cmp_params}
  ROOT c = pred[] compare(a0, b0), direction={direction}
}}
ENTRY e {{
{params}
  ROOT s = {result} sort({', '.join(f'p{k}' for k in range(operands))}), dimensions={{{dim}}}, is_stable={'true' if stable else 'false'}, to_apply=cmp
}}"""
    args = [keys] + [np.arange(np.prod(dims), dtype=np.int32).reshape(dims)] * (operands - 1)
    ours, ref = _both(text, args)
    assert_close(ours, ref, rtol=0, atol=0)


COMPLEX_UNARY = ["negate", "exponential", "log", "sqrt", "abs", "sign", "real", "imag", "tanh", "cosine", "sine"]
COMPLEX_BINARY = ["add", "subtract", "multiply", "divide"]


@FUZZ
@given(data=st.data(), t=st.sampled_from(["c64", "c128"]), dims=dims_st,
       op=st.sampled_from(COMPLEX_UNARY + COMPLEX_BINARY))
def test_complex_ops_with_special_values_match_xla_cpu(data, t, dims, op) -> None:
    """Components drawn from NaN, +-inf, +-0 and normal values: XLA's C99 Annex G-style semantics."""
    x = _values(data, t, dims, special=True)
    real = {"c64": "f32", "c128": "f64"}[t]
    if op in COMPLEX_BINARY:
        y = _values(data, t, dims, special=True)
        params, args, body, out = (f"  x = {_shape(t, dims)} parameter(0)\n  y = {_shape(t, dims)} parameter(1)",
                                   [x, y], f"{op}(x, y)", _shape(t, dims))
    else:
        out = _shape(real if op in ("abs", "real", "imag") else t, dims)
        params, args, body = f"  x = {_shape(t, dims)} parameter(0)", [x], f"{op}(x)"
    text = f"HloModule cx\nENTRY e {{\n{params}\n  ROOT r = {out} {body}\n}}"
    ours, ref = _both(text, args)
    assert_close(ours, ref, rtol=1e-4 if t == "c64" else 1e-9, atol=1e-5 if t == "c64" else 1e-9)
