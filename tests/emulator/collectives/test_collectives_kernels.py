"""Neuron kernels inside a program that runs on several devices: each device's thread runs its own
NKI kernel and GpSimd (C++) op on its own inputs, between collectives, with one loaded program."""
from __future__ import annotations

import numpy as np

import hlo
from emulator import load_artifact
from emulator.collectives import run_devices
from emulator.gpsimd.args import TensorSpec as GpSimdSpec
from neuron_customcall import custom_op
from neuron_customcall.compiler import compile_module
from neuron_customcall.kernels import build
from neuron_customcall.nki import TensorSpec
from tests.neuron_customcall.cpp import cpp_kernels
from tests.neuron_customcall.kernels.seed_kernels import nki_tensor_add_kernel_

TARGET = 'custom_call_target="AwsNeuronCustomNativeKernel"'


def test_one_gpsimd_op_run_by_four_devices_at_once_gives_each_its_own_result():
    """The op's prepared call has one output buffer; each device must copy its own result out of
    it before another device's call overwrites it (one device's result came back as another's in
    about 1 call in 16 before OpCall took a lock)."""
    cpp_kernels.load("relu")
    spec = GpSimdSpec("float32", (256, 1024))
    relu = build.gpsimd_config(custom_op.descriptor("relu_ops").op("relu_forward"),
                               custom_op.library_path("relu_ops"), [spec], spec)
    text = f"""HloModule m, replica_count=4
ENTRY e {{
  p = f32[256,1024] parameter(0)
  r = f32[256,1024] custom-call(p), {TARGET}, backend_config="{relu}"
  ROOT n = f32[256,1024] negate(r)
}}"""
    exe = load_artifact(compile_module(hlo.load(text)))
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((256, 1024), dtype=np.float32) for _ in range(4)]
    wrong = 0
    for _ in range(20):
        outs = run_devices(exe, [[x] for x in xs], 4, 1, timeout_s=120)
        wrong += sum(not np.array_equal(o[0], -np.maximum(x, 0)) for o, x in zip(outs, xs))
    assert wrong == 0


def test_nki_and_gpsimd_kernels_between_collectives_on_each_device():
    nki = build.nki_call(nki_tensor_add_kernel_, (2, 2), [TensorSpec((256, 1024), "float32")] * 2).config
    cpp_kernels.load("relu")
    spec = GpSimdSpec("float32", (256, 1024))
    relu = build.gpsimd_config(custom_op.descriptor("relu_ops").op("relu_forward"),
                               custom_op.library_path("relu_ops"), [spec], spec)
    text = f"""HloModule m, replica_count=4
add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}}
ENTRY e {{
  p = f32[256,1024] parameter(0)
  s = f32[256,1024] custom-call(p, p), {TARGET}, backend_config="{nki}"
  r = f32[256,1024] custom-call(s), {TARGET}, backend_config="{relu}"
  g = f32[256,1024] all-reduce(r), replica_groups={{{{0,1}},{{2,3}}}}, to_apply=add
  ROOT o = f32[256,1024] collective-permute(g), source_target_pairs={{{{0,3}},{{3,0}},{{1,2}},{{2,1}}}}
}}"""
    exe = load_artifact(compile_module(hlo.load(text)))
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((256, 1024), dtype=np.float32) for _ in range(4)]
    for _ in range(6):  # each run's kernels see only their own device's values (a shared GpSimd
        # output buffer gave another device's result in about 1 run in 3 before OpCall's lock)
        outs = run_devices(exe, [[x] for x in xs], 4, 1, timeout_s=120)
        relu_of = [np.maximum(x + x, 0) for x in xs]
        pair = [relu_of[0] + relu_of[1], relu_of[2] + relu_of[3]]
        for d, source in enumerate([3, 2, 1, 0]):
            np.testing.assert_array_equal(outs[d][0], pair[source // 2])
