"""Framework-free HLO library: XLA's HloModuleProto schema, readers for binary proto, protobuf
text and HLO text, one in-memory IR, and a printer of HLO text.

It depends on nothing else in this project (nor on torch or jax), so that the compiler, the
command line and the tests can read and write HLO without importing a framework.
"""
