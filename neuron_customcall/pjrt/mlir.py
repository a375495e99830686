"""StableHLO/MHLO (the "mlir" program format JAX sends) to an HloModuleProto, with jaxlib's own
converter.

Why jaxlib's: JAX serializes its module as a versioned StableHLO portable artifact (MLIR bytecode);
jaxlib ships the matching deserializer and the MHLO-to-HLO translation
(`jaxlib._jax.mlir.mlir_module_to_xla_computation`), so the HLO we compile is exactly what XLA:CPU
would. This is the one module of the plugin that imports jaxlib (a framework adapter).
"""
from __future__ import annotations


class MlirConversionError(ValueError):
    """The program could not be converted from MLIR to HLO."""


def to_hlo_proto(code: bytes) -> bytes:
    """Serialized HloModuleProto of an MLIR module (bytecode, portable artifact or text)."""
    try:
        from jaxlib import _jax
    except ImportError as e:  # pragma: no cover - jaxlib is a dependency
        raise MlirConversionError("programs in MLIR form need jaxlib's converter (pip install jaxlib)") from e
    try:
        computation = _jax.mlir.mlir_module_to_xla_computation(code, use_tuple_args=False, return_tuple=False)
    except Exception as first:  # noqa: BLE001 - a portable artifact the parser does not take directly
        try:
            text = _jax.mlir.deserialize_portable_artifact(code)
            computation = _jax.mlir.mlir_module_to_xla_computation(text, use_tuple_args=False, return_tuple=False)
        except Exception as e:  # noqa: BLE001
            raise MlirConversionError(f"could not convert the MLIR program to HLO: {first}; as a portable "
                                      f"artifact: {e}") from e
    return computation.as_serialized_hlo_module_proto()
