"""A torch_xla graph met before is not lowered again (lazy.compile_graph keys it by torch_xla's
graph hash), and the cases where that hash can not tell graphs apart are lowered every time:
kernels that differ only in their backend_config, custom-calls built by hand, tensor lists the
hash describes differently from LoweringContext. Kernels that differ only in their backend_config
get different graph hashes (torch_xla's own cache keys executables by them)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch
import torch_xla

from neuron_customcall import backend
from neuron_customcall.kernels.descriptor import TensorSig
from neuron_customcall.torch_xla import custom_call, lazy, mark_step, tensors, to_cpu
from tests.neuron_customcall.kernels.seed_kernels import scale_and_shift
from tests.neuron_customcall.torch_xla.mlp_training import batch, clone_to, make_mlp, train

_X = torch_xla._XLAC


@pytest.fixture
def lowerings(monkeypatch):
    """Counts the graphs lowered and handed to the backend by compile_graph."""
    calls: list[bytes] = []
    compile_cached = backend.compile_cached

    def counting(source, *args, **kwargs):
        calls.append(source)
        return compile_cached(source, *args, **kwargs)

    monkeypatch.setattr(backend, "compile_cached", counting)
    return calls


def _train(sync, steps: int, lrs=None):
    dev = torch_xla.device()
    model = clone_to(make_mlp(), dev)
    x, y = (t.to(dev) for t in batch())
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for k in range(steps):
        if lrs is not None:
            opt.param_groups[0]["lr"] = lrs[k]
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        sync(model, opt, loss)
        losses.append(loss.detach().cpu())
    return [p.detach().cpu() for p in model.parameters()], losses


def test_a_training_loop_lowers_each_graph_once_and_matches_torch_xla(lowerings) -> None:
    # The learning rate changes every step: a device-data scalar, so one graph with new inputs.
    lrs = [0.1, 0.05, 0.2, 0.1, 0.01, 0.3, 0.1, 0.1]
    ref_params, ref_losses = _train(lambda *state: torch_xla.sync(), len(lrs), lrs)
    params, losses = _train(lambda model, opt, loss: mark_step(model, opt, loss), len(lrs), lrs)
    # The first step (no momentum buffers yet), then one graph for every later step.
    assert len(lowerings) == 2
    for p, q in zip(params, ref_params):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(torch.stack(losses), torch.stack(ref_losses), rtol=1e-4, atol=1e-5)


def test_clear_memo_makes_the_next_step_lower_again(lowerings) -> None:
    dev = torch_xla.device()
    model = clone_to(make_mlp(), dev)
    x, y = (t.to(dev) for t in batch())
    sync = lambda model, opt, loss: mark_step(model, opt, loss)  # noqa: E731
    train(model, x, y, 3, sync)
    assert len(lowerings) == 1
    backend.clear_memo()  # what tests do to reach the disk cache again
    train(model, x, y, 2, sync)
    assert len(lowerings) == 2


def test_kernels_the_graph_hash_confuses_are_lowered_every_time(lowerings) -> None:
    dev = torch_xla.device()
    x_cpu = torch.randn(128, 64, generator=torch.Generator().manual_seed(3))
    x = x_cpu.to(dev)
    graphs = []
    for factor in (2.0, 3.0, 2.0, 3.0):
        y, _ = scale_and_shift(x * 1, factor, 1.0)  # the factor lives in the backend_config only
        graphs.append(_X._get_graph_hash([y]))
        torch.testing.assert_close(to_cpu(y), x_cpu * factor)
    # The second kernel on these operands gets a rewritten operand, so torch_xla's own compile
    # cache (PJRT_DEVICE=NEURON: no mark_step of ours) tells the two graphs apart too.
    assert graphs[0] == graphs[2] != graphs[1] == graphs[3]
    assert len(lowerings) == 4


def test_a_second_call_on_the_same_operands_makes_their_signature_ambiguous() -> None:
    x = torch.ones(3, 5, device=torch_xla.device()) * 2
    sigs = [TensorSig("out", (3, 5), "f32")]
    config = "graph-memo-test-config"  # never run: only recorded
    custom_call.custom_call([x], config, sigs)
    signatures = custom_call.operand_signatures([config])
    assert signatures and not custom_call.ambiguous(signatures)
    custom_call.custom_call([x], config, sigs)  # the same call again: still one kernel
    assert not custom_call.ambiguous(signatures)
    custom_call.custom_call([x], config, [TensorSig("out", (15,), "f32")])  # other output types
    assert custom_call.ambiguous(signatures)
    assert custom_call.operand_signatures([config, "a config never emitted"]) is None


def test_a_hand_built_custom_call_keeps_its_graph_out_of_the_memo() -> None:
    from torch_xla.experimental.stablehlo_custom_call import stablehlo_custom_call

    x = torch.ones(4, 4, device=torch_xla.device()) * 3
    out = stablehlo_custom_call([x], custom_call.TARGET, [[4, 4]], [torch.float32], backend_config="e30=")
    tensors = [out + 1]
    ctx = _X.lowering.LoweringContext()
    ctx.build(tensors)
    graph = lazy._describe(ctx, tensors, ctx.hlo(), len(ctx.parameter_id_tensor_mapping()))
    assert graph.order is None


def test_tensor_lists_the_hash_describes_differently_are_lowered(lowerings) -> None:
    dev = torch_xla.device()
    a = torch.arange(6, dtype=torch.float32).reshape(2, 3).to(dev)
    torch_xla.sync(wait=True)
    for _ in range(2):
        b = a * 2 + 1
        # `a` is device data and `b` appears twice: torch_xla's hash leaves both facts out.
        values = lazy.execute([b, a, b])
        assert [v.tolist() for v in values] == [(a.cpu() * 2 + 1).tolist(), a.cpu().tolist(),
                                                (a.cpu() * 2 + 1).tolist()]
    assert lazy._graph_hash([b, a]) is None and lazy._graph_hash([b, b]) is None
    assert len(lowerings) == 2


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.int32, torch.int64])
def test_inputs_taken_from_device_data_keep_their_dtype(lowerings, dtype) -> None:
    dev = torch_xla.device()
    w = torch.arange(12).reshape(3, 4).to(dtype).to(dev)
    step = torch.tensor([1, 2, 3, 4]).to(dtype).to(dev)
    expected = torch.arange(12).reshape(3, 4).to(dtype)
    for _ in range(4):
        w = w * 2 - step  # one graph; each step starts from the last step's device data
        mark_step(w)
        expected = expected * 2 - torch.tensor([1, 2, 3, 4]).to(dtype)
        torch.testing.assert_close(w.cpu(), expected)
    assert len(lowerings) == 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.bool, torch.float8_e4m3fn])
def test_device_data_is_read_in_place_and_read_only(dtype) -> None:
    # On the CPU PJRT device a graph's inputs are views of the XLA buffers (no 35 ms copy of an
    # MLP's weights every run); fp8, which DLPack can not carry, is copied out instead.
    dev = torch_xla.device()
    host = (torch.arange(12).reshape(3, 4) % 5).to(dtype)
    w = host.to(dev)
    _, data = _X._get_tensors_xla_device_data_node([w * 1])
    (value,) = tensors.device_data_to_numpy(data)
    torch.testing.assert_close(tensors.from_numpy(value.copy()), host)
    assert not value.flags.writeable
    in_place = value.ctypes.data == _X._unsafe_buffer_pointer(data[0])
    assert in_place == (dtype != torch.float8_e4m3fn)


def test_a_graph_run_does_not_change_its_inputs_device_data(lowerings) -> None:
    dev = torch_xla.device()
    w = torch.arange(6.0).reshape(2, 3).to(dev)
    for _ in range(3):
        to_cpu(torch.relu(w - 2) * 3)  # the second and third runs take w's buffer in place
    torch.testing.assert_close(w.cpu(), torch.arange(6.0).reshape(2, 3))
    assert len(lowerings) == 1


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.bool_, ml_dtypes.float8_e4m3fn])
def test_results_become_device_data_without_a_copy(dtype) -> None:
    # A large 64-byte aligned array becomes the XLA buffer itself (no 23 ms copy of a 32 MB
    # weight); fp8 (no DLPack type), small and empty arrays are copied.
    dev = str(torch_xla.device())
    a = tensors._aligned((np.arange(256 * 512) % 3).astype(dtype).reshape(256, 512))
    small = tensors._aligned(np.ones((4, 6), np.float32))
    empty = np.zeros((0, 3), np.float32)
    d, s, e = tensors.numpy_to_device_data([a, small, empty], [dev, dev, dev])
    assert str(d.device) == dev and e.shape == (0, 3)
    torch.testing.assert_close(d.cpu(), tensors.from_numpy(a.copy()))
    torch.testing.assert_close(s.cpu(), torch.ones(4, 6))
    in_place = _X._unsafe_buffer_pointer(d) == a.ctypes.data
    assert in_place == (dtype != ml_dtypes.float8_e4m3fn)
    assert _X._unsafe_buffer_pointer(s) != small.ctypes.data


def test_unaligned_and_read_only_results_are_copied_to_aligned_memory() -> None:
    dev = str(torch_xla.device())
    n = tensors._VIEW_MIN_BYTES // 4
    raw = np.arange(n + 16, dtype=np.float32)
    unaligned = raw[1:n + 1] if raw.ctypes.data % 64 == 0 else raw[:n]  # XLA:CPU refuses it as is
    assert unaligned.ctypes.data % 64
    read_only = tensors._aligned(raw[:n].copy())
    read_only.flags.writeable = False
    d, r = tensors.numpy_to_device_data([unaligned, read_only], [dev, dev])
    torch.testing.assert_close(d.cpu(), torch.from_numpy(unaligned.copy()))
    torch.testing.assert_close(r.cpu(), torch.from_numpy(read_only.copy()))
    assert _X._unsafe_buffer_pointer(r) != read_only.ctypes.data


def test_training_keeps_matching_after_results_are_written_back_in_place(lowerings) -> None:
    # Parameters written back as views of the emulator's outputs feed the next step's graph
    # (read in place again) and torch_xla's own ops on them.
    dev = torch_xla.device()
    w = torch.arange(256 * 128.0).reshape(256, 128).to(dev)  # 128 KB: written back as a view
    expected = torch.arange(256 * 128.0).reshape(256, 128)
    for _ in range(3):
        w = w * 0.5 + 1
        mark_step(w)
        expected = expected * 0.5 + 1
    torch.testing.assert_close(w.cpu(), expected)
    torch.testing.assert_close((w + 1).cpu(), expected + 1)  # run by torch_xla on its own device


def test_the_kth_kernel_on_an_operand_signature_gets_its_own_graph_hash_and_exact_operands() -> None:
    dev = torch_xla.device()
    special = torch.tensor([[-0.0, 0.0, float("nan"), float("inf"), -float("inf"), 1e-45, -3.5, 7.0]])
    x = special.to(dev)
    sigs = [TensorSig("out", (1, 8), "f32")]
    hashes = [_X._get_graph_hash(custom_call.custom_call([x], config, sigs))
              for config in ("graph-hash-a", "graph-hash-b", "graph-hash-c", "graph-hash-a")]
    assert len(set(hashes[:3])) == 3 and hashes[3] == hashes[0]
    for rank in (1, 2):  # the rewritten operand is x, bit for bit
        kept = custom_call._distinguished([x], rank, "graph-hash-b")[0].cpu()
        assert kept.view(torch.int32).tolist() == special.view(torch.int32).tolist()
    ints = torch.tensor([-128, 0, 127], dtype=torch.int8)
    assert custom_call._distinguished([ints.to(dev)], 3, "")[0].cpu().tolist() == ints.tolist()


def test_distinct_kernels_on_boolean_only_operands_are_refused_by_name() -> None:
    flags = torch.ones(2, 3, dtype=torch.bool, device=torch_xla.device())
    with pytest.raises(NotImplementedError, match="boolean-only operand signature"):
        custom_call._distinguished([flags], 1, _seed_config())


def _seed_config() -> str:
    """A real kernel descriptor (the error names the kernel)."""
    from neuron_customcall.kernels import build
    from tests.neuron_customcall.kernels.seed_kernels import nki_tensor_add_kernel_

    x = build.nki_spec((128, 512), "f32")
    return build.nki_call(nki_tensor_add_kernel_, (1, 1), (x, x), {}).config
