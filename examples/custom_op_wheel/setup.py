"""Builds the neuron-relu wheel: the Python package plus libneuron_relu.so compiled from csrc/.

neuron-customcall's setuptools integration (neuron_customcall.cpp.extension, the counterpart of
torch.utils.cpp_extension) compiles the library with the builder custom_op.load uses and puts it
inside the package, so ``pip wheel .``, ``pip install .`` and editable installs all carry it.
"""
from setuptools import setup

from neuron_customcall.cpp.extension import BuildExtension, NeuronLibrary

setup(
    ext_modules=[NeuronLibrary("neuron_relu", "neuron_relu", ["csrc/relu.cpp"], ["csrc/relu_shape.cpp"])],
    cmdclass={"build_ext": BuildExtension},
)
