"""NKI kernels and C++ custom ops on torch tensors: one AwsNeuronCustomNativeKernel custom-call
per call on XLA tensors, run by our backend inside the whole graph; forward and backward through
torch.autograd.Function; eager CPU tensors; an MLP with a C++ ReLU trained through torch_xla and
through torch.compile(backend="neuron") like the same model with torch.relu on the CPU."""
from __future__ import annotations

import pytest
import torch
import torch_xla

import neuron_customcall.torch_xla  # noqa: F401  (adapters and the "neuron" backend)
from neuron_customcall.torch_xla import mark_step, to_cpu
from tests.neuron_customcall.kernels.seed_kernels import nki_tensor_add, scale_and_shift
from tests.neuron_customcall.torch_xla.mlp_training import batch, make_mlp, train

_X = torch_xla._XLAC


def _inputs(shape=(256, 1024)):
    g = torch.Generator().manual_seed(0)
    return torch.randn(*shape, generator=g), torch.randn(*shape, generator=g)


def test_seed_forward_is_one_custom_call_and_matches_torch():
    device = torch_xla.device()
    a_cpu, b_cpu = _inputs()
    a, b = a_cpu.to(device), b_cpu.to(device)
    c = nki_tensor_add(a, b)  # calling a NKI kernel, instead of the built-in torch op
    out = a * b * c
    text = _X._get_xla_tensors_hlo([out])
    calls = [line for line in text.splitlines() if "custom-call(" in line]
    assert len(calls) == 1
    assert 'custom_call_target="AwsNeuronCustomNativeKernel"' in calls[0]
    assert "api_version=API_VERSION_UNSPECIFIED" in calls[0]
    torch.testing.assert_close(to_cpu(out), a_cpu * b_cpu * (a_cpu + b_cpu))


class NkiAddFunc(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        return nki_tensor_add(a, b)

    @staticmethod
    def backward(ctx, dy, *args):
        return dy, dy  # gradients for a and b


def test_seed_training_graph_forward_and_gradients():
    device = torch_xla.device()
    a_cpu, b_cpu = _inputs()
    a = a_cpu.to(device).detach().requires_grad_()
    b = b_cpu.to(device).detach().requires_grad_()
    c = NkiAddFunc.apply(a, b)
    out = a * b * c
    loss = out.sum()
    loss.backward()
    assert mark_step(out, loss, a.grad, b.grad) == 4

    ra, rb = a_cpu.clone().requires_grad_(), b_cpu.clone().requires_grad_()
    ref = ra * rb * (ra + rb)
    ref.sum().backward()
    torch.testing.assert_close(to_cpu(out), ref.detach())
    torch.testing.assert_close(to_cpu(a.grad), ra.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(to_cpu(b.grad), rb.grad, rtol=1e-5, atol=1e-5)


def test_cpu_tensors_run_eagerly_and_tuples_and_statics_work_on_xla():
    a, b = _inputs()
    torch.testing.assert_close(nki_tensor_add(a, b), a + b)
    x = _inputs((128, 64))[0]
    y, z = scale_and_shift(x, 2.0, 1.0)
    torch.testing.assert_close(y, 2 * x)
    xy, xz = scale_and_shift(x.to(torch_xla.device()), 2.0, 1.0)
    torch.testing.assert_close(to_cpu(xz), x + 1)
    torch.testing.assert_close(to_cpu(xy), 2 * x)


# --- C++ ReLU in training graphs -----------------------------------------------------------------

@pytest.fixture(scope="module")
def relu_ops():
    from tests.neuron_customcall.cpp import cpp_kernels

    cpp_kernels.load("relu")
    return torch.ops.relu_ops


class CppRelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.ops.relu_ops.relu_forward(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return torch.ops.relu_ops.relu_backward(grad, x)


class CppReLU(torch.nn.Module):
    def forward(self, x):
        return CppRelu.apply(x)


def _with_cpp_relu(model: torch.nn.Sequential) -> torch.nn.Sequential:
    return torch.nn.Sequential(*[CppReLU() if isinstance(m, torch.nn.ReLU) else m for m in model])


def _cpu_reference(steps: int) -> list[float]:
    x, y = batch()
    losses = train(make_mlp(), x, y, steps, lambda *state: None)
    return [float(loss.detach()) for loss in losses]


def test_mlp_with_cpp_relu_trains_on_xla_like_torch_relu_on_cpu(relu_ops):
    device = torch_xla.device()
    model = _with_cpp_relu(make_mlp()).to(device)
    x, y = (t.to(device) for t in batch())
    losses = train(model, x, y, 20, lambda model, opt, loss: mark_step(model, opt, loss))
    text = _X._get_xla_tensors_hlo([losses[-1]])
    got = [float(to_cpu(loss)) for loss in losses]
    torch.testing.assert_close(torch.tensor(got), torch.tensor(_cpu_reference(20)), rtol=1e-4, atol=1e-5)
    assert got[-1] < got[0]
    assert "custom-call" not in text  # materialised: the next graph starts from device data


def test_mlp_training_graph_holds_forward_and_backward_custom_calls(relu_ops):
    device = torch_xla.device()
    model = _with_cpp_relu(make_mlp()).to(device)
    x, y = (t.to(device) for t in batch())
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    grads = [p.grad for p in model.parameters()]
    text = _X._get_xla_tensors_hlo([loss, *grads])
    assert text.count('custom_call_target="AwsNeuronCustomNativeKernel"') == 4  # 2 relus, 2 grads
    mark_step(loss, *grads)


def test_mlp_with_cpp_relu_under_torch_compile(relu_ops):
    torch._dynamo.reset()
    model = _with_cpp_relu(make_mlp())
    x, y = batch()
    losses = train(model, x, y, 20, lambda *state: None,
                   forward=torch.compile(model, backend="neuron"))
    got = [float(loss.detach()) for loss in losses]
    torch.testing.assert_close(torch.tensor(got), torch.tensor(_cpu_reference(20)), rtol=1e-4, atol=1e-5)


def test_torch_export_traces_the_cpp_op(relu_ops):
    model = _with_cpp_relu(make_mlp())
    exported = torch.export.export(model, (batch()[0],))
    targets = {str(n.target) for n in exported.graph.nodes if n.op == "call_function"}
    assert "relu_ops.relu_forward.default" in targets


def test_nki_kernel_under_torch_compile_and_torch_export(tmp_path, monkeypatch):
    from neuron_customcall import backend

    a, b = _inputs()
    torch._dynamo.reset()
    backend.clear_memo()  # graphs are dumped when first compiled in the process
    monkeypatch.setenv("NEURON_FRAMEWORK_DEBUG", "1")
    monkeypatch.setenv("NEURON_FRAMEWORK_DEBUG_DIR", str(tmp_path))
    compiled = torch.compile(lambda a, b: nki_tensor_add(a, b) * a, backend="neuron", fullgraph=True)
    torch.testing.assert_close(compiled(a, b), (a + b) * a)
    (dump,) = tmp_path.glob("*.hlo.txt")  # one graph, the kernel inside it
    assert 'custom_call_target="AwsNeuronCustomNativeKernel"' in dump.read_text()

    ra, rb = a.clone().requires_grad_(), b.clone().requires_grad_()
    step = torch.compile(lambda a, b: (NkiAddFunc.apply(a, b) * a * b).sum(), backend="neuron")
    step(ra, rb).backward()
    torch.testing.assert_close(ra.grad, 2 * a * b + b * b, rtol=1e-5, atol=1e-5)

    class Model(torch.nn.Module):
        def forward(self, a, b):
            return nki_tensor_add(a, b) * a

    exported = torch.export.export(Model(), (a, b), strict=False)
    targets = [str(n.target) for n in exported.graph.nodes if n.op == "call_function"]
    assert "neuron.nki_call.default" in targets
    torch.testing.assert_close(exported.module()(a, b), (a + b) * a)


def test_cpp_ops_with_inline_scalars_multicore_and_bf16_on_xla():
    from tests.neuron_customcall.cpp import cpp_kernels

    for name in ("dtype_ops", "relu_multicore"):
        cpp_kernels.load(name)
    device = torch_xla.device()
    x, y = _inputs((4, 50))
    z = torch.ops.dtype_ops.axpb(x.to(device), y.to(device), -1.25, 2.0, -2)
    torch.testing.assert_close(to_cpu(z), -1.25 * x + 2 * y - 2)
    r = torch.ops.relu_mc.relu_forward(x.to(device))
    torch.testing.assert_close(to_cpu(r), torch.relu(x))
    h = x[0].to(torch.bfloat16)  # add_one takes 1-D tensors
    torch.testing.assert_close(to_cpu(torch.ops.dtype_ops.add_one(h.to(device))), h + 1)


def test_kernel_writing_its_input_updates_the_tensor_on_cpu_xla_and_under_compile():
    from tests.neuron_customcall.kernels.test_batching import with_scratch

    x = torch.rand(128, 32)
    expected = (torch.exp(x) + 1) * x
    on_cpu = x.clone()
    assert with_scratch(on_cpu) is None
    on_xla = x.to(torch_xla.device())
    with_scratch(on_xla)

    def doubled(t):
        t = t.clone()
        with_scratch(t)
        return 2 * t

    compiled = torch.compile(doubled, backend="neuron")
    for got, want in ((on_cpu, expected), (to_cpu(on_xla), expected), (compiled(x), 2 * expected)):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_bfloat16_nki_kernel_on_xla_and_cpu():
    from tests.neuron_customcall.nki.test_nki_kernels import axpy_kernel

    x, y = (t.to(torch.bfloat16) for t in _inputs((256, 64)))
    expected = (3 * x.float() + y.float()).to(torch.bfloat16)
    on_xla = to_cpu(axpy_kernel[2](x.to(torch_xla.device()), y.to(torch_xla.device())))
    assert on_xla.dtype == torch.bfloat16
    torch.testing.assert_close(on_xla, expected, rtol=1e-2, atol=1e-1)
    torch.testing.assert_close(axpy_kernel[2](x, y), on_xla, rtol=0, atol=0)


def test_torch_func_vmap_batches_the_kernel():
    from tests.neuron_customcall.kernels.seed_kernels import nki_tensor_add_kernel_

    x, y = _inputs((3, 128, 512))
    both = torch.func.vmap(lambda p, q: nki_tensor_add_kernel_[1, 1](p, q))
    torch.testing.assert_close(both(x, y), x + y)
    one = torch.func.vmap(lambda p: nki_tensor_add_kernel_[1, 1](p, y[0]), in_dims=0)
    torch.testing.assert_close(one(x), x + y[0])
    a, b = _inputs((2, 2, 256, 1024))
    nested = torch.func.vmap(torch.func.vmap(nki_tensor_add))  # the second level loops (grid full)
    torch.testing.assert_close(nested(a, b), a + b)


def test_cpp_op_on_xla_reuses_its_config_per_argument_signature(relu_ops, monkeypatch):
    """The XLA kernel asks for the shape and config once per argument signature and library
    object: the same call again skips them, a new shape or a reloaded library does not."""
    import dataclasses

    from neuron_customcall.cpp import loader
    from neuron_customcall.torch_xla import custom_call

    loaded = loader.get("relu_ops")
    asked: list[tuple] = []
    shape = loaded.host.shape
    monkeypatch.setattr(loaded.host, "shape", lambda op, specs: asked.append(tuple(specs)) or shape(op, specs))
    device = torch_xla.device()
    x = torch.randn(3, 41)
    for _ in range(2):
        torch.testing.assert_close(to_cpu(relu_ops.relu_forward(x.to(device))), torch.relu(x))
    assert len(asked) == 1
    y = torch.randn(5, 41)
    torch.testing.assert_close(to_cpu(relu_ops.relu_forward(y.to(device))), torch.relu(y))
    assert len(asked) == 2
    monkeypatch.setitem(loader._LOADED, "relu_ops", dataclasses.replace(loaded))
    torch.testing.assert_close(to_cpu(relu_ops.relu_forward(x.to(device))), torch.relu(x))
    assert len(asked) == 3
    assert custom_call._argument_key("float", -0.0) != custom_call._argument_key("float", 0.0)
    assert custom_call._argument_key("int", True) != custom_call._argument_key("int", 1)


def test_a_training_graphs_runs_prime_the_worker_and_hint_its_calls(relu_ops, monkeypatch):
    # The executor tells a GpSimd kernel's worker when each run of its graph begins (a prime,
    # WorkerProcess.prime), and with each call the host says whether the run has more to make
    # (page word MORE), from the count of the graph's previous run (emulator/gpsimd/control.py:
    # a graph's runs). The training step's graph makes four calls. Its first run starts the
    # worker (nothing to prime yet) and its second is the first the worker counts, so from the
    # third run on the calls carry the hints 1, 1, 1, 0; the losses stay torch's on the CPU.
    from emulator.gpsimd import control
    from emulator.gpsimd.process import WorkerProcess

    monkeypatch.setattr(control, "worker_spin", lambda: 50e-6)  # a CPU for each side: hints are written
    primes: list[tuple[int, int]] = []
    hints: list[int] = []
    real_prime, real_call = WorkerProcess.prime, WorkerProcess.call

    def prime(self, graph: int, run: int) -> None:
        primes.append((graph, run))
        real_prime(self, graph, run)

    def call(self, call_id: int, timeout: float) -> int:
        code = real_call(self, call_id, timeout)
        hints.append(self.control.words[control.MORE])
        return code

    monkeypatch.setattr(WorkerProcess, "prime", prime)
    monkeypatch.setattr(WorkerProcess, "call", call)
    device = torch_xla.device()
    model = _with_cpp_relu(make_mlp()).to(device)
    x, y = (t.to(device) for t in batch())
    steps = 6
    losses = train(model, x, y, steps, lambda model, opt, loss: mark_step(model, opt, loss))
    got = [float(to_cpu(loss)) for loss in losses]
    torch.testing.assert_close(torch.tensor(got), torch.tensor(_cpu_reference(steps)), rtol=1e-4, atol=1e-5)
    graphs = {graph for graph, _ in primes}
    runs = sorted(set(run for _, run in primes))  # each kernel payload's hook tells the worker once a run
    assert len(graphs) == 1 and [run for _, run in primes] == sorted(run for _, run in primes)
    assert len(runs) == steps - 1 and len(hints) == 4 * steps
    assert hints[:8] == [0] * 8  # the first two runs: nothing counted yet
    assert hints[8:] == [1, 1, 1, 0] * (steps - 2)
