"""``torch_neuronx.xla_impl``: only ``custom_op`` (the C++ custom-op guide's API) is provided."""
from torch_neuronx.xla_impl import custom_op  # noqa: F401

__all__ = ["custom_op"]
