"""rng-bit-generator with XLA's counter-based generators, bit for bit as XLA:CPU expands them
(xla/service/rng_bit_generator_expander.cc and the ThreeFry/Philox bit generators of
xla/client/lib/prng.cc): the state is u64[n], state[0] the key, the rest the counter; RNG_DEFAULT
is Philox, as on XLA:CPU. All arithmetic is whole-array u32/u64 NumPy (wrapping).

The older stateful ops are here too: `rng` (uniform or normal values from a generator that each
run advances) and `rng-get-and-update-state`. XLA leaves their values to the implementation
(XLA:CPU seeds its state per module, and results differ from call to call); what holds here, as
there, is the distribution, a fresh draw on every run, and the state advancing by `delta`. Each
instruction keeps its own state, from a fixed seed, so a program's runs are reproducible from
load to load."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from emulator.program.context import HandlerContext
from emulator.program.dtypes import DTYPES
from emulator.program.ops import handles

U32, U64 = np.uint32, np.uint64
_ROT = (13, 15, 26, 6, 17, 29, 16, 24)


def _rotl(v: np.ndarray, d: int) -> np.ndarray:
    return (v << U32(d)) | (v >> U32(32 - d))


def threefry2x32(x0: np.ndarray, x1: np.ndarray, k0: np.uint32, k1: np.uint32) -> tuple[np.ndarray, np.ndarray]:
    """Threefry-2x32 with 20 rounds (Salmon et al. 2011), as XLA's ThreeFry2x32."""
    ks = (U32(k0), U32(k1), U32(0x1BD11BDA ^ int(k0) ^ int(k1)))
    x0 = x0 + ks[0]
    x1 = x1 + ks[1]
    for block in range(5):
        rots = _ROT[:4] if block % 2 == 0 else _ROT[4:]
        for r in rots:
            x0 = x0 + x1
            x1 = _rotl(x1, r) ^ x0
        x0 = x0 + ks[(block + 1) % 3]
        x1 = x1 + U32((int(ks[(block + 2) % 3]) + block + 1) & 0xFFFFFFFF)
    return x0, x1


def _split_halves(shape: tuple[int, ...]) -> tuple[tuple[int, ...], int]:
    """XLA's SplitShapeIntoHalves: the half shape (with a trivial concat dim) and the split dim."""
    if not shape:
        return (1,), -1
    split = next((i for i, d in enumerate(shape) if d % 2 == 0), -1)
    if split == -1:
        split = max(range(len(shape)), key=lambda i: (shape[i], -i))
    half = list(shape)
    half[split] = (shape[split] + 1) // 2
    return tuple(half[: split + 1]) + (1,) + tuple(half[split + 1:]), split


def _threefry_inputs(counter: np.uint64, shape: tuple[int, ...]) -> np.ndarray:
    """state + linear index over the dims of size >= 2 (XLA's GetThreeFryInputsAndUpdatedState)."""
    inp = np.full(shape, counter, U64)
    prod = 1
    for i in range(len(shape) - 1, -1, -1):
        if shape[i] < 2:
            continue
        iota = np.arange(shape[i], dtype=U64).reshape([shape[i] if j == i else 1 for j in range(len(shape))])
        inp = inp + iota * U64(prod)
        prod *= shape[i]
    return inp


def threefry_bits(key: np.uint64, counter: np.uint64, shape: tuple[int, ...], bits: int) -> tuple[np.ndarray, np.uint64]:
    k0, k1 = U32(int(key) & 0xFFFFFFFF), U32(int(key) >> 32)
    if bits == 64:
        inp = _threefry_inputs(counter, shape)
        a, b = threefry2x32(inp.astype(U32), (inp >> U64(32)).astype(U32), k0, k1)
        out = a.astype(U64) | (b.astype(U64) << U64(32))
        return out, U64(int(counter) + int(np.prod(shape, dtype=np.int64)))
    half, split = _split_halves(shape)
    inp = _threefry_inputs(counter, half)
    a, b = threefry2x32(inp.astype(U32), (inp >> U64(32)).astype(U32), k0, k1)
    new_counter = U64((int(counter) + int(np.prod(half, dtype=np.int64))) % 2**64)
    if not shape:
        return a.reshape(()), new_counter
    cat = np.concatenate([a, b], axis=split + 1)
    full = list(shape)
    full[split] = (shape[split] + 1) // 2 * 2
    out = cat.reshape(full)
    return out[tuple(slice(0, d) for d in shape)], new_counter


_PHILOX_M = (U64(0xD2511F53), U64(0xCD9E8D57))
_PHILOX_W = (U32(0x9E3779B9), U32(0xBB67AE85))


def philox4x32(x: list[np.ndarray], k0: np.uint32, k1: np.uint32) -> list[np.ndarray]:
    """Philox-4x32 with 10 rounds, as XLA's Philox4x32."""
    for _ in range(10):
        p0 = x[0].astype(U64) * _PHILOX_M[0]
        p1 = x[2].astype(U64) * _PHILOX_M[1]
        x = [(p1 >> U64(32)).astype(U32) ^ x[1] ^ k0, p1.astype(U32),
             (p0 >> U64(32)).astype(U32) ^ x[3] ^ k1, p0.astype(U32)]
        k0, k1 = U32((int(k0) + int(_PHILOX_W[0])) & 0xFFFFFFFF), U32((int(k1) + int(_PHILOX_W[1])) & 0xFFFFFFFF)
    return x


def _philox_blocks(key: np.uint64, lo: int, hi: int, n: int) -> tuple[list[np.ndarray], int, int]:
    iota = np.arange(n, dtype=U64)
    new_lo = U64(lo) + iota
    new_hi = np.where(new_lo < U64(lo), U64((hi + 1) % 2**64), U64(hi))
    x = [new_lo.astype(U32), (new_lo >> U64(32)).astype(U32), new_hi.astype(U32), (new_hi >> U64(32)).astype(U32)]
    k0, k1 = U32(int(key) & 0xFFFFFFFF), U32(int(key) >> 32)
    out = philox4x32(x, k0, k1)
    end_lo = (lo + n) % 2**64
    end_hi = (hi + 1) % 2**64 if end_lo < lo else hi
    return out, end_lo, end_hi


def philox_bits(key: np.uint64, lo: int, hi: int, shape: tuple[int, ...], bits: int) -> tuple[np.ndarray, int, int]:
    n = int(np.prod(shape, dtype=np.int64))
    if bits == 64:
        m = (n + 1) // 2
        out, lo, hi = _philox_blocks(key, lo, hi, (2 * n + 3) // 4)
        w0 = out[0].astype(U64) | (out[1].astype(U64) << U64(32))
        w1 = out[2].astype(U64) | (out[3].astype(U64) << U64(32))
        flat = np.stack([w0[:m], w1[:m]], axis=1).reshape(-1)[:n]
        return flat.reshape(shape), lo, hi
    m = (n + 3) // 4
    out, lo, hi = _philox_blocks(key, lo, hi, m)
    flat = np.stack(out, axis=1).reshape(-1)[:n]
    return flat.reshape(shape), lo, hi


@handles("rng-bit-generator")
def _rng_bit_generator(ctx: HandlerContext) -> Callable:
    algorithm = ctx.attrs["algorithm"]
    out_type = ctx.type[1][1]
    dt = DTYPES[out_type[0]]
    shape = tuple(out_type[1])
    state_len = ctx.in_shape(0)[0]
    # 8- and 16-bit values are the low bits of the 32-bit ones (as XLA:CPU generates them)
    bits = 64 if dt.itemsize == 8 else 32
    narrow = np.dtype(f"u{dt.itemsize}")
    if state_len < 2:
        raise ValueError(f"rng_bit_generator state of {state_len} words is too short")

    def generate(state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        s = np.asarray(state, U64)
        key = s[0]
        if algorithm == "THREE_FRY":
            value, counter = threefry_bits(key, s[1], shape, bits)
            new_state = s.copy()
            new_state[1] = counter
        else:
            lo, hi = (int(s[1]), int(s[2])) if state_len >= 3 else (int(s[1]), int(s[0]))
            value, lo, hi = philox_bits(key, lo, hi, shape, bits)
            new_state = s.copy()
            if state_len >= 3:
                new_state[1], new_state[2] = lo, hi
            else:
                new_state[1] = lo  # XLA: counter = (lo=state[1], hi=state[0]); keeps [key, new lo]
        return new_state, value.astype(narrow).view(dt)
    return generate


#: The first state of every `rng` / `rng-get-and-update-state` instruction (any fixed value).
_SEED = 0x6E6575726F6E


@handles("rng")
def _rng(ctx: HandlerContext) -> Callable:
    """XLA's `rng`: RNG_UNIFORM gives values in [a, b) (integers for integer types), RNG_NORMAL
    normal values with mean a and standard deviation b; a and b are scalars of the result type.
    Drawn in float64 (float types) and rounded once to the result type."""
    gen = np.random.Generator(np.random.Philox(_SEED))
    dtype, shape, dist = ctx.dtype, ctx.shape, ctx.attrs["distribution"]
    if dist not in ("uniform", "normal"):
        raise ValueError(f"rng distribution must be uniform or normal, not {dist!r}")
    if dtype.kind in "iu":
        if dist != "uniform":
            raise ValueError("rng_normal needs a float type")
        return lambda a, b: gen.integers(int(a), int(b), size=shape, dtype=dtype) if int(b) > int(a) \
            else np.full(shape, a, dtype)
    if dist == "normal":
        return lambda a, b: (gen.standard_normal(shape) * float(b) + float(a)).astype(dtype)

    def uniform(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        lo, hi = float(a), float(b)
        out = (gen.random(shape) * (hi - lo) + lo).astype(dtype)
        # rounding to a narrow type may reach b itself: keep the half-open interval
        return np.where(out >= hi, np.nextafter(dtype.type(hi), dtype.type(lo)), out) if hi > lo else out
    return uniform


@handles("rng-get-and-update-state")
def _rng_get_and_update_state(ctx: HandlerContext) -> Callable:
    """Returns the state (u64[2]: a counter and 0, the layout XLA:CPU returns) and advances the
    counter by `delta`, wrapping at 2**64."""
    delta = int(ctx.attrs["delta"])
    state = [_SEED]

    def get_and_update() -> np.ndarray:
        out = np.array([state[0], 0], U64)
        state[0] = (state[0] + delta) % 2**64
        return out
    return get_and_update


@handles("rng-seed")
def _rng_seed(ctx: HandlerContext) -> Callable:
    """XLA's GetRngSeed custom-call (what XLA's rng expanders read a seed from): a u64 scalar that
    differs from run to run, as XLA:CPU's (it returns the run's seed, new each execution). Drawn
    from this instruction's own generator, so a program's runs are reproducible from load to load."""
    if ctx.dtype != np.uint64 or ctx.shape != ():
        raise ValueError(f"GetRngSeed returns u64[], not {ctx.dtype}{list(ctx.shape)}")
    gen = np.random.Generator(np.random.Philox(_SEED))
    return lambda: np.asarray(gen.integers(0, 2**64, dtype=U64))
