"""The emulated NeuronCore: memories, engines, instruction set, artifact format, executor and
cost model. Depends on nothing else in this project (nor on torch or jax)."""
