"""OCP microscaling (MX) arithmetic of ``quantize_mx`` and ``matmul_mx``, in NumPy.

Layout (NKI's reference and its MX matmul guide): a packed ``*_x4`` word holds four elements
that are consecutive along the contraction, lane ``i`` at bits ``[i*w, (i+1)*w)``; a scaling
group is 8 partitions x one packed word (32 elements) and shares one E8M0 scale ``2^e``, given
here logically as one row per 8 partitions (``[P // 8, F]``). The front end moves scales
between that logical form and the hardware's quadrant layout.

Quantization follows ``nisa.quantize_mx``'s text: for a group with largest magnitude ``a``,
``X = 2^(floor(log2 a) - (E_max - 1))`` (E_max 8 for float8_e4m3fn, 15 for float8_e5m2, two
times the OCP sample scale, so that the largest values round without saturating), ``2^-127``
for an all-zero group; elements are ``v / X`` rounded to nearest even by the element type.
Exponents are clamped to E8M0's range [-127, 127] (a group of subnormals may need less); a group
holding inf or NaN gets the largest scale and its elements become what the element type makes
of ``v / X`` (NaN, or inf for float8_e5m2).
"""

from __future__ import annotations

import numpy as np

from emulator import dtypes as records

#: Partitions and packed words of one scaling group.
GROUP_PARTITIONS = 8
LANES = 4
#: Largest unbiased exponent of each quantized element type.
E_MAX = {"float8_e4m3fn": 8, "float8_e5m2": 15}
E8M0_BIAS = 127
E8M0_MIN, E8M0_MAX = -127, 127


def group_exponents(values: np.ndarray, element: str) -> np.ndarray:
    """Scale exponents of ``values`` ``[..., P, W, 4]`` (fp32): ``[..., P // 8, W]``."""
    lead = values.shape[:-3]
    p, w = values.shape[-3:-1]
    grouped = np.abs(values).reshape(lead + (p // GROUP_PARTITIONS, GROUP_PARTITIONS, w, LANES))
    amax = grouped.max(axis=(-3, -1))
    finite = np.isfinite(amax)
    _, ex = np.frexp(np.where(finite, amax, 1.0))  # amax = m * 2^ex, m in [0.5, 1)
    exp = (ex - 1) - (E_MAX[element] - 1)
    exp = np.where(amax == 0, E8M0_MIN, exp)
    exp = np.where(finite, exp, E8M0_MAX)
    return np.clip(exp, E8M0_MIN, E8M0_MAX).astype(np.int32)


def expand(scale: np.ndarray) -> np.ndarray:
    """Per-group factors ``[..., G, W]`` as ``[..., G * 8, W, 1]`` (broadcast over lanes)."""
    return np.repeat(scale, GROUP_PARTITIONS, axis=-2)[..., None]


def quantize(values: np.ndarray, packed: str) -> tuple[np.ndarray, np.ndarray]:
    """``values`` ``[..., P, F]`` -> (packed words ``[..., P, F // 4]``, exponents
    ``[..., P // 8, F // 4]``)."""
    rec = records.BY_NKI[packed]
    v = values.astype(np.float32).reshape(values.shape[:-1] + (values.shape[-1] // LANES, LANES))
    exp = group_exponents(v, rec.packs)
    scaled = v / expand(np.ldexp(np.float32(1), exp).astype(np.float32))
    return records.pack(scaled, rec), exp


def exponents_as(exp: np.ndarray, dtype: str) -> np.ndarray:
    """Scale exponents as a scale tile of ``dtype`` holds them: float8_e8m0fnu values ``2^e``,
    uint8 biased codes ``e + 127``."""
    if dtype == "uint8":
        return (exp + E8M0_BIAS).astype(np.uint8)
    return np.ldexp(np.float32(1), exp).astype(np.float32)


def factors(scale: np.ndarray, dtype: str) -> np.ndarray:
    """A scale tile's values (float8_e8m0fnu, or uint8 biased codes) as fp32 factors."""
    if dtype == "uint8":
        return np.ldexp(np.float32(1), scale.astype(np.int32) - E8M0_BIAS).astype(np.float32)
    return scale.astype(np.float32)


def dequantize(words: np.ndarray, packed: str, scale: np.ndarray, scale_dtype: str) -> np.ndarray:
    """Packed ``[..., K, W]`` with its logical scales ``[..., K // 8, >= W]``: fp32
    ``[..., K, W, 4]``."""
    vals = records.unpack(words, records.BY_NKI[packed])
    w = words.shape[-1]
    return vals * expand(factors(scale[..., :w], scale_dtype))


__all__ = ["quantize", "dequantize", "group_exponents", "exponents_as", "factors", "E_MAX",
           "GROUP_PARTITIONS", "LANES"]
