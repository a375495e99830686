"""top_k against XLA:CPU where the emulator's argpartition shortcut could go wrong: ties at the
k-th value (the first positions win), rows of equal values, NaNs and signed zeros, integer keys
over their whole range (u32 above 2^31, int32 minimum), k = 1 and k close to the row length
(the stable-argsort path), narrow floats, several batch dims."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from jax import lax

from tests.neuron_customcall.compiler.ours import CASE_ARGS, case, check_case, rand

NAN, INF = np.nan, np.inf
RNG = np.random.default_rng(11)
TIED = RNG.integers(0, 4, (6, 64)).astype(np.float32)  # ties at every boundary
SPECIAL = np.array([[0.0, -0.0, NAN, 1.0, INF, -INF, NAN, 0.0] * 8, [-0.0] * 64, [1.0] * 63 + [NAN],
                    list(range(64))], np.float32)
U32 = RNG.integers(0, 2**32, (4, 80), dtype=np.uint64).astype(np.uint32)
U32[:, 5] = U32[:, 9] = np.uint32(2**32 - 1)
I32 = RNG.integers(-5, 5, (4, 80)).astype(np.int32)
I32[:, 3] = I32[:, 70] = np.iinfo(np.int32).min


def top(k):
    return lambda x: lax.top_k(x, k)


CASES = [
    case("tied_k5", top(5), TIED), case("tied_k1", top(1), TIED), case("special_k9", top(9), SPECIAL),
    case("special_k1", top(1), SPECIAL), case("u32_k7", top(7), U32), case("i32_k6", top(6), I32),
    case("i32_negated_k6", lambda x: lax.top_k(-x, 6), I32), case("near_n", top(60), TIED),
    case("all", top(64), TIED), case("bf16", top(4), TIED.astype(ml_dtypes.bfloat16) * 0.5),
    case("f16_special", top(3), SPECIAL.astype(np.float16)), case("batch_3d", top(3), rand(2, 3, 50, seed=4)),
    case("f64", top(5), TIED.astype(np.float64), x64=True),
]


@pytest.mark.parametrize(CASE_ARGS, CASES)
def test_top_k_matches_xla_cpu(f, args, x64, rtol, atol):
    check_case(f, args, x64, rtol, atol)


@pytest.mark.parametrize("largest", ["", ", largest=true", ", largest=false"])
def test_hlo_text_topk_reads_largest_as_xla_does(largest: str) -> None:
    """Regression: `topk(x), k=2` without `largest` means the largest (XLA's parser default); it was
    read as largest=false and returned the smallest values."""
    import hlo
    from neuron_customcall.jax.xla_cpu import XlaCpuExecutable
    from tests.neuron_customcall.compiler.ours import assert_close, compile_proto, through_plugin

    proto = hlo.load("HloModule m\nENTRY e {\n  x = f32[3,8] parameter(0)\n"
                     f"  ROOT t = (f32[3,2], s32[3,2]) topk(x), k=2{largest}\n}}").to_bytes()
    x = rand(3, 8)
    exe = compile_proto(proto)
    if through_plugin() and "false" in largest:
        # jaxlib sends a smallest-k topk to a plugin as a custom-call "mhlo.topk" whose k and
        # largest attributes its StableHLO -> HLO converter drops: the plugin must refuse it
        # by name, not guess. (JAX never emits one: lax.top_k is largest-k.)
        with pytest.raises(Exception, match="custom-call target 'mhlo.topk' is not supported"):
            exe.run([x])
        return
    assert_close(exe.run([x]), XlaCpuExecutable(proto).run([x]), rtol=0, atol=0)
