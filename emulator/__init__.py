"""The emulated NeuronCore: memories, engines, instruction set, artifact format, executor and
cost model. Depends on nothing else in this project (nor on torch or jax)."""

# Lazy exports keep `import emulator` light: the executor (and NumPy handlers) load on first use.
_LAZY = {
    "load_artifact": ("emulator.executor", "load_artifact"),
    "Executable": ("emulator.executor", "Executable"),
    "EmulatorError": ("emulator.executor", "EmulatorError"),
    "ArtifactError": ("emulator.artifact.errors", "ArtifactError"),
}


def __getattr__(name: str):  # noqa: ANN202 - module-level lazy attribute
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'emulator' has no attribute {name!r}")
