"""C++ custom operators for the GpSimd engine: the build front end (compiler driver, content-
addressed build cache, signature checks), loading, and registration as torch ops.

The public entry points are in ``neuron_customcall.custom_op``; the device runtime and the headers
that user sources include belong to the emulator (``emulator/gpsimd``).
"""
