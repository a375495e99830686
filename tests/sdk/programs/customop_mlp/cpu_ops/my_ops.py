# The reference run's my_ops.py (not in the tutorials): the same autograd function with torch's own
# ReLU, so that train.py and inference.py run unchanged on torch_xla's PJRT_DEVICE=CPU, which can
# not run Neuron custom-calls. The tests put this folder first on PYTHONPATH for that run.
import torch

class Relu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return torch.relu(input)

    @staticmethod
    def backward(ctx, grad):
        input, = ctx.saved_tensors
        return torch.where(input > 0.0, grad, torch.zeros_like(grad)), None
