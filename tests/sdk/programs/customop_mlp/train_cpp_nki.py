"""A 20-step torch_xla training loop whose model has a C++ custom op (my_ops.Relu, forward and
backward) and an NKI kernel (an addition, inside a torch.autograd.Function): plain torch_xla,
xm.mark_step() per step. With --reference the same model uses torch's own ops instead (for a run
on PJRT_DEVICE=CPU, with cpu_ops/ first on the path). Saves the losses and final parameters
(xm.save) to the path given."""
import sys

import torch
import torch_xla.core.xla_model as xm

import my_ops
from data import train_dataset

REFERENCE = "--reference" in sys.argv

if not REFERENCE:
    import neuronxcc.nki as nki
    import neuronxcc.nki.language as nl

    @nki.jit
    def nki_add_kernel(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        i = nl.arange(a.shape[0])[:, None]
        j = nl.arange(a.shape[1])[None, :]
        nl.store(out[i, j], value=nl.load(a[i, j]) + nl.load(b[i, j]))
        return out


class NkiAdd(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        return torch.add(a, b) if REFERENCE else nki_add_kernel(a, b)

    @staticmethod
    def backward(ctx, dy):
        return dy, dy


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(28 * 28, 96)
        self.skip = torch.nn.Linear(28 * 28, 96)
        self.fc2 = torch.nn.Linear(96, 10)

    def forward(self, x):
        h = NkiAdd.apply(my_ops.Relu.apply(self.fc1(x)), self.skip(x))
        return torch.log_softmax(self.fc2(h), dim=1)


def main(out_path):
    torch.manual_seed(0)
    device = xm.xla_device()
    model = Model().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = torch.nn.NLLLoss()
    loader = torch.utils.data.DataLoader(train_dataset, batch_size=32)
    losses = []
    for x, y in loader:  # 20 batches
        optimizer.zero_grad()
        loss = loss_fn(model(x.view(x.size(0), -1).to(device)), y.to(device))
        loss.backward()
        optimizer.step()
        xm.mark_step()
        losses.append(loss.detach())
    xm.save({"losses": torch.stack(losses), "state_dict": model.state_dict()}, out_path)
    print("steps", len(losses), "final loss", float(losses[-1].cpu()))


if __name__ == "__main__":
    main(sys.argv[1])
