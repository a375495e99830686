# build.py of the C++ custom-op MLP tutorials (customop-mlp-training-tutorial.rst), as printed.
import os
from torch_neuronx.xla_impl import custom_op

custom_op.load(
    name='relu',
    compute_srcs=['relu.cpp'],
    shape_srcs=['shape.cpp'],
    build_directory=os.getcwd()
)
