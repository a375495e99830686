"""What a torch_xla training script touches, on whatever PJRT_DEVICE says (no project import but
the hand-built custom-call's kernel descriptor):
each step prints one "ok <name>" line after comparing with PyTorch eager on the CPU. The tests run
it on PJRT_DEVICE=NEURON in a fresh process (and the same checks hold on PJRT_DEVICE=CPU, apart
from the Neuron kernels, which XLA:CPU can not run: --no-kernels)."""
import io
import sys
import threading

import torch
import torch_xla
import torch_xla.core.xla_model as xm


def close(a, b, tol=1e-5):
    torch.testing.assert_close(a, b, rtol=tol, atol=tol)


def main(kernels: bool) -> None:
    g = torch.Generator().manual_seed(0)
    x_cpu = torch.randn(64, 32, generator=g)
    w_cpu = torch.randn(32, 16, generator=g)
    dev = xm.xla_device()
    assert dev == torch_xla.device()
    x = x_cpu.to(dev)

    y = torch.tanh(x @ w_cpu.to(dev)) * 2
    xm.mark_step()
    close(y.cpu(), torch.tanh(x_cpu @ w_cpu) * 2)
    print("ok mark_step .cpu()")

    s = (x * 3).sum()
    torch_xla.sync()
    close(torch.tensor(s.item()), (x_cpu * 3).sum())
    print("ok torch_xla.sync() .item()")

    text = str(x[:2, :3] + 1)
    assert "device='xla:0'" in text and f"{float(x_cpu[0, 0] + 1):.4f}" in text, text
    print("ok print")

    buffer = io.BytesIO()
    xm.save({"w": (x * 2)[:4]}, buffer)
    buffer.seek(0)
    saved = torch.load(buffer)["w"]
    assert saved.device.type == "cpu"
    close(saved, (x_cpu * 2)[:4])
    print("ok xm.save")

    # autograd and an optimizer, five steps, against the same on the CPU
    def train(device):
        torch.manual_seed(1)
        model = torch.nn.Sequential(torch.nn.Linear(32, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).to(device)
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        xd, yd = x_cpu.to(device), torch.arange(64).remainder(4).to(device)
        losses = []
        for _ in range(5):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(xd), yd)
            loss.backward()
            opt.step()
            if device != "cpu":
                xm.mark_step()
            losses.append(loss.item())
        return losses, [p.detach().cpu() for p in model.parameters()]

    (l_dev, p_dev), (l_cpu, p_cpu) = train(dev), train("cpu")
    close(torch.tensor(l_dev), torch.tensor(l_cpu), 1e-4)
    for a, b in zip(p_dev, p_cpu):
        close(a, b, 1e-4)
    print("ok autograd Adam")

    compiled = torch.compile(lambda a, b: torch.nn.functional.gelu(a @ b) + 1, backend="openxla")
    close(compiled(x, w_cpu.to(dev)).cpu(), torch.nn.functional.gelu(x_cpu @ w_cpu) + 1, 1e-4)
    print("ok torch.compile openxla")

    # torch_xla's own thread runs the graph while this thread holds the GIL and then waits in .cpu()
    results = {}

    def worker():
        z = x * 5 - 1
        torch_xla.sync()
        results["z"] = z.cpu()

    t = threading.Thread(target=worker)
    t.start()
    total = 0
    for k in range(200000):  # pure Python: this thread keeps taking the GIL
        total += k
    t.join(timeout=120)
    assert not t.is_alive(), "a .cpu() in another thread did not finish"
    close(results["z"], x_cpu * 5 - 1)
    print("ok threads")

    if not kernels:
        return
    from spmd_tensor_addition_nki_kernels import nki_tensor_add, nki_tensor_add_kernel_

    a_cpu, b_cpu = torch.randn(256, 1024, generator=g), torch.randn(256, 1024, generator=g)
    a, b = a_cpu.to(dev), b_cpu.to(dev)
    out = nki_tensor_add(a, b) * a
    ref = (a_cpu + b_cpu) * a_cpu
    assert torch.allclose(ref.to(dev), out)
    assert torch.allclose(ref, out.cpu())
    print("ok NKI kernel, torch.allclose")

    # a custom-call built by hand, with the kernel descriptor our NKI front end makes
    from torch_xla.experimental.stablehlo_custom_call import stablehlo_custom_call
    from neuron_customcall.kernels import build

    spec = build.nki_spec((256, 1024), "f32")
    config = build.nki_call(nki_tensor_add_kernel_, (2, 2), (spec, spec)).config
    by_hand = stablehlo_custom_call([a, b], "AwsNeuronCustomNativeKernel", [[256, 1024]], [torch.float32],
                                    backend_config=config)
    close((by_hand * 2).cpu(), (a_cpu + b_cpu) * 2)
    print("ok stablehlo_custom_call")

    # two kernels on the same operands: torch_xla's graph hash does not see backend_config
    import neuronxcc.nki as nki
    import neuronxcc.nki.language as nl

    @nki.jit
    def nki_tensor_mul_kernel_(a_input, b_input):
        c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
        ix = nl.program_id(0) * 128 + nl.arange(128)[:, None]
        iy = nl.program_id(1) * 512 + nl.arange(512)[None, :]
        nl.store(c_output[ix, iy], value=nl.load(a_input[ix, iy]) * nl.load(b_input[ix, iy]))
        return c_output

    for _ in range(2):
        added = nki_tensor_add(a, b) * a
        xm.mark_step()
        multiplied = nki_tensor_mul_kernel_[2, 2](a, b) * a
        xm.mark_step()
        close(added.cpu(), (a_cpu + b_cpu) * a_cpu)
        close(multiplied.cpu(), (a_cpu * b_cpu) * a_cpu)
    print("ok two kernels on one operand signature")


if __name__ == "__main__":
    main(kernels="--no-kernels" not in sys.argv)
    print("done")
