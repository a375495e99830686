"""Host transfers of the neuron PJRT device: zero-copy where the framework allows it, the
mutation contract of lent host memory, and every array element type of the C API (narrow
floats, sub-byte integers) both ways and through a jitted op against XLA:CPU."""
from __future__ import annotations

import json
import textwrap

import pytest

from tests.neuron_customcall.pjrt._proc import run_json
from tests.sdk.subproc import check, run_python

#: NumPy memory at a chosen offset from a 64-byte boundary (jaxlib's XLA:CPU and the plugin lend
#: 64-byte aligned host arrays and copy the others).
ALIGNED = """
def aligned(n, offset=0):
    raw = np.empty(n * 4 + 256, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset
    return raw[start:start + n * 4].view(np.float32)
"""


def test_jax_host_to_device_lends_aligned_numpy_memory_and_device_to_host_is_a_view():
    got = run_json(ALIGNED + textwrap.dedent("""
        import gc
        x = aligned(4096)
        x[:] = np.arange(4096, dtype=np.float32)
        y = jax.device_put(x, NEURON[0])
        lent = y.unsafe_buffer_pointer() == x.ctypes.data        # kImmutableZeroCopy: no copy
        held = sys.getrefcount(x.base)
        z = jax.jit(lambda t: t * 2)(y)
        z_np = np.asarray(z)                                      # device-to-host: a view
        view = z_np.ctypes.data == z.unsafe_buffer_pointer()
        ident = jax.jit(lambda t: t)(y)          # the emulator's result is the argument: copied
        ident_lent = ident.unsafe_buffer_pointer() == x.ctypes.data
        del y; gc.collect()
        released = sys.getrefcount(x.base) == held - 1  # done_with_host_buffer fired
        # A host array off a 64-byte boundary is copied (and correct), as XLA:CPU copies it.
        unaligned = aligned(4096, offset=16)
        unaligned[:] = np.arange(4096, dtype=np.float32)
        u = jax.device_put(unaligned, NEURON[0])
        # A view held by NumPy keeps the memory after the array is deleted or donated.
        w = jax.jit(lambda t: t + 1)(x)
        w_np = np.asarray(w)
        w2 = jax.jit(lambda t: t * 3, donate_argnums=0)(w)
        w.is_deleted()
        report(lent=lent, view=view, writeable=bool(z_np.flags.writeable), z_ok=bool(np.array_equal(z_np, x * 2)),
               ident_lent=ident_lent, ident_ok=bool(np.array_equal(np.asarray(ident), x)), released=released,
               unaligned_copied=u.unsafe_buffer_pointer() != unaligned.ctypes.data,
               unaligned_ok=bool(np.array_equal(np.asarray(u), unaligned)),
               donated=w.is_deleted(), view_after_donation=bool(np.array_equal(w_np, x + 1)),
               w2_ok=bool(np.array_equal(np.asarray(w2), (x + 1) * 3)))
    """))
    assert got == {"lent": True, "view": True, "writeable": False, "z_ok": True, "ident_lent": False,
                   "ident_ok": True, "released": True, "unaligned_copied": True, "unaligned_ok": True,
                   "donated": True, "view_after_donation": True, "w2_ok": True}


def test_jax_mutating_lent_host_memory_is_the_callers_contract_as_on_xla_cpu():
    """jax lends NumPy memory (kImmutableZeroCopy) to XLA:CPU and to us alike: a caller who
    changes the array afterwards changes the device value on both (docs/pjrt.md)."""
    got = run_json(ALIGNED + textwrap.dedent("""
        x = aligned(1024)
        x[:] = 0
        on_neuron, on_cpu_ = jax.device_put(x, NEURON[0]), jax.device_put(x, CPU)
        x[0] = 7.0
        report(neuron=float(np.asarray(on_neuron)[0]), cpu=float(np.asarray(on_cpu_)[0]),
               neuron_jit=float(jax.jit(lambda t: t + 1)(on_neuron)[0]))
    """))
    assert got["neuron"] == got["cpu"] == 7.0
    assert got["neuron_jit"] == 8.0


def test_jax_results_never_keep_lent_memory_the_caller_may_refill_after_the_call():
    """A result that the emulator makes as a view of its argument (reshape, slice) is copied
    when the argument is lent host memory: once the call has returned, refilling the array (a
    data loader's batch) changes no result. Stronger than XLA:CPU, which runs asynchronously:
    there a refill right after the call can even reach `t * 2` (measured: jaxlib 0.10.2)."""
    got = run_json(ALIGNED + textwrap.dedent("""
        x = aligned(4096)
        x[:] = np.arange(4096, dtype=np.float32)
        want = [x.reshape(64, 64).copy(), x[:128].copy(), x * 2]
        mine = jax.jit(lambda t: (t.reshape(64, 64), t[:128], t * 2))(x)
        x[:] = -1.0  # the batch buffer is refilled
        report(same=[bool(np.array_equal(np.asarray(a), b)) for a, b in zip(mine, want)])
    """))
    assert got == {"same": [True, True, True]}


#: Every array type of PJRT_Buffer_Type beyond session 5's (codes 18-29), by ml_dtypes name.
NARROW = ["float8_e4m3b11fnuz", "float8_e5m2fnuz", "float8_e4m3fnuz", "int4", "uint4", "int2", "uint2",
          "float8_e4m3", "float8_e3m4", "float8_e8m0fnu", "float4_e2m1fn", "float8_e4m3fn", "float8_e5m2"]


def test_jax_narrow_float_and_sub_byte_types_both_ways_and_jitted_against_xla_cpu():
    got = run_json(f"""
        import ml_dtypes
        out = {{}}
        rng = np.random.default_rng(0)
        for name in {NARROW!r}:
            dt = np.dtype(getattr(ml_dtypes, name))
            info = ml_dtypes.iinfo(dt) if name.startswith(("int", "uint")) else None
            vals = (rng.integers(int(info.min), int(info.max) + 1, (5, 7)) if info is not None
                    else rng.standard_normal((5, 7)) * 3)
            host = vals.astype(dt)
            dev = jax.device_put(host, NEURON[0])
            back = np.asarray(dev)
            progs = [lambda t: t + t, lambda t: (t.astype(jnp.float32) * 1.5).astype(t.dtype),
                     lambda t: jnp.max(t, axis=1)]
            same = []
            for f in progs:
                a, b = np.asarray(jax.jit(f)(dev)), np.asarray(on_cpu(f, host))
                same.append(a.dtype == b.dtype and a.tobytes() == b.tobytes())
            out[name] = {{"dtype": str(back.dtype) == name, "bits": back.tobytes() == host.tobytes(),
                         "jit": same, "device": str(dev.devices())}}
        report(**out)
    """)
    for name in NARROW:
        r = got[name]
        assert r["dtype"] and r["bits"], (name, r)
        assert r["jit"] == [True, True, True], (name, r)
        assert "NeuronDevice" in r["device"], (name, r)


@pytest.fixture(scope="module")
def torch_xla_transfers() -> dict:
    """One plain torch_xla process on PJRT_DEVICE=NEURON."""
    script = textwrap.dedent("""
        import json
        import torch, torch_xla
        import torch_xla.core.xla_model as xm
        def report(**values):
            print("RESULT " + json.dumps(values), flush=True)
        dev = torch_xla.device()
        before = xm.get_memory_info(dev)
        a = torch.arange(1024, dtype=torch.float32)
        x = a.to(dev)
        a.add_(1)                                  # torch_xla may reuse its host memory at once
        after = xm.get_memory_info(dev)
        f8 = {}
        for dt in (torch.float8_e4m3fn, torch.float8_e5m2):
            h = torch.tensor([1.0, -2.5, 0.375, 448.0 if dt == torch.float8_e4m3fn else 57344.0]).to(dt)
            y = (h.to(dev).to(torch.float32) * 0.5).to(dt).cpu()
            ref = (h.to(torch.float32) * 0.5).to(dt)
            f8[str(dt)] = bool(torch.equal(y.view(torch.uint8), ref.view(torch.uint8)) and
                               torch.equal(h.to(dev).cpu().view(torch.uint8), h.view(torch.uint8)))
        report(copied=x.cpu()[:3].tolist(), before=before, after=after, f8=f8)
    """)
    out = check(run_python(["-c", script], env={"PJRT_DEVICE": "NEURON"}, timeout=600))
    return json.loads(next(line for line in out.splitlines() if line.startswith("RESULT "))[len("RESULT "):])


def test_torch_xla_transfer_is_a_copy_the_caller_may_reuse(torch_xla_transfers):
    """torch_xla hands its host memory over as kImmutableUntilTransferCompletes: copied, so a
    later change of the CPU tensor does not reach the device tensor (as on PJRT CPU)."""
    assert torch_xla_transfers["copied"] == [0.0, 1.0, 2.0]


def test_torch_xla_memory_info_reports_a_neuroncores_hbm(torch_xla_transfers):
    before, after = torch_xla_transfers["before"], torch_xla_transfers["after"]
    assert before["bytes_limit"] == after["bytes_limit"] == 16 << 30  # was an uninitialised value
    assert after["bytes_used"] - before["bytes_used"] >= 4096
    assert after["peak_bytes_used"] >= after["bytes_used"]


def test_torch_xla_fp8_transfers_and_ops(torch_xla_transfers):
    assert torch_xla_transfers["f8"] == {"torch.float8_e4m3fn": True, "torch.float8_e5m2": True}
