"""bitcast-convert to and from the types narrower than a byte (s2, u2, s4, u4, f4e2m1fn), which
XLA packs little-endian along the narrower side's trailing dimension (element i at bit
i * width): every pair XLA allows, against XLA:CPU on the same module, compared bit for bit.
Refused by name until XLA's algebraic-simplifier module `s4[5,2] -> s8[5]` found it (issue 15);
the compiler computes s4/u4/s2/u2 in 8 bits (compiler/subbyte.py) and the emulator's bitcast-bits
packs and unpacks their patterns."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import emulator
import hlo
from hlo.ir.dtypes import bit_width
from neuron_customcall.compiler import compile_module
from neuron_customcall.jax.xla_cpu import XlaCpuExecutable

NARROW = {"s2": ml_dtypes.int2, "u2": ml_dtypes.uint2, "s4": ml_dtypes.int4, "u4": ml_dtypes.uint4,
          "f4e2m1fn": ml_dtypes.float4_e2m1fn}
WHOLE = {"s8": np.int8, "u8": np.uint8, "f8e5m2": ml_dtypes.float8_e5m2, "f8e4m3fn": ml_dtypes.float8_e4m3fn,
         "s16": np.int16, "u16": np.uint16, "f16": np.float16, "bf16": ml_dtypes.bfloat16, "s32": np.int32,
         "u32": np.uint32, "f32": np.float32, "s64": np.int64, "u64": np.uint64, "f64": np.float64}
TYPES = {**NARROW, **WHOLE}
N = 6


def _bits(t: str) -> int:
    return bit_width(t.upper())


def _dims(src: str, dst: str) -> tuple[list[int], list[int]]:
    a, b = _bits(src), _bits(dst)
    if a < b:
        return [N, b // a], [N]
    if a > b:
        return [N], [N, a // b]
    return [N], [N]


def _targets(src: str) -> list[str]:
    """Every type src may be bitcast-converted to where one side is narrower than a byte."""
    return [t for t in TYPES if t != src and (src in NARROW or t in NARROW) and
            max(_bits(src), _bits(t)) % min(_bits(src), _bits(t)) == 0]


def _random(t: str, dims: list[int], rng: np.random.Generator) -> np.ndarray:
    """Every bit pattern equally likely (NaN payloads included: a bitcast carries them)."""
    bits = _bits(t)
    n = int(np.prod(dims))
    if t in NARROW and t != "f4e2m1fn":
        info = ml_dtypes.iinfo(NARROW[t])
        return rng.integers(int(info.min), int(info.max) + 1, size=dims).astype(NARROW[t])
    patterns = rng.integers(0, 1 << min(bits, 8), size=n * max(1, bits // 8), dtype=np.uint8)
    return patterns.view(TYPES[t]).reshape(dims)


def _pattern(a: np.ndarray, t: str) -> np.ndarray:
    """Each element's bit pattern as u64 (a sub-byte integer by its value's low bits)."""
    if t in NARROW and t != "f4e2m1fn":
        return (a.astype(np.int64) & ((1 << _bits(t)) - 1)).astype(np.uint64)
    return np.ascontiguousarray(a).view(np.dtype(f"u{a.dtype.itemsize}")).astype(np.uint64)


@pytest.mark.parametrize("src", sorted(t for t in TYPES if _targets(t)))
def test_every_narrow_bitcast_convert_matches_xla_cpu(src: str) -> None:
    targets = _targets(src)
    params, outs, shapes, args = [], [], [], []
    rng = np.random.default_rng(_bits(src) * 31 + len(src))
    for k, dst in enumerate(targets):
        a, b = _dims(src, dst)
        params.append(f"  p{k} = {src}[{','.join(map(str, a))}] parameter({k})")
        outs.append(f"  o{k} = {dst}[{','.join(map(str, b))}] bitcast-convert(p{k})")
        shapes.append(f"{dst}[{','.join(map(str, b))}]")
        args.append(_random(src, a, rng))
    text = (f"HloModule bc\nENTRY e {{\n" + "\n".join(params + outs) +
            f"\n  ROOT r = ({', '.join(shapes)}) tuple({', '.join(f'o{k}' for k in range(len(targets)))})\n}}")
    module = hlo.load(text)
    ours = emulator.load_artifact(compile_module(module)).run(args)
    ref = XlaCpuExecutable(module.to_bytes()).run(args)
    for dst, o, r in zip(targets, ours, ref):
        assert o.dtype == r.dtype and o.shape == r.shape, (src, dst, o.dtype, r.dtype, o.shape, r.shape)
        np.testing.assert_array_equal(_pattern(o, dst), _pattern(r, dst), err_msg=f"{src} -> {dst}")


def test_the_packing_order_is_little_endian() -> None:
    """s4 {1, 2} is the byte 0x21: element 0 in the low nibble (XLA:CPU's answer, checked above too)."""
    text = "HloModule m\nENTRY e {\n  x = s4[3,2] parameter(0)\n  ROOT r = s8[3] bitcast-convert(x)\n}"
    x = np.array([[1, 2], [-1, 0], [7, -8]], ml_dtypes.int4)
    out = emulator.load_artifact(compile_module(hlo.load(text))).run([x])[0]
    np.testing.assert_array_equal(out, np.array([0x21, 0x0F, -121], np.int8))
