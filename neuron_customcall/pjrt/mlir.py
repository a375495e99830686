"""StableHLO/MHLO (the "mlir" program format JAX sends) to an HloModuleProto, with jaxlib's own
converter.

Why jaxlib's: JAX serializes its module as a versioned StableHLO portable artifact (MLIR bytecode);
jaxlib ships the matching deserializer and the MHLO-to-HLO translation
(`jaxlib._jax.mlir.mlir_module_to_xla_computation`), so the HLO we compile is exactly what XLA:CPU
would. This is the one module of the plugin that imports jaxlib (a framework adapter).

Why sometimes in a child process: the converter runs inside the user's process (the plugin's
compile), and on some modules it does not fail but aborts the whole process: an `rng` inside a
`while` condition, as `hlo_to_stablehlo` writes it, ends in XlaBuilder's
"Check failed: builder_ != nullptr" (jaxlib 0.10.2). A compile must never kill the host, so a module
that holds an `rng` operation at all (JAX's own `jax.random` emits none; `lax.rng_uniform` does) is
converted in a fresh Python process running this same function, bytes in and bytes out over pipes;
if that process dies, the compile fails with an error naming the crash. Every other module is
converted in process: the child costs about half a second.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

#: Bytes that every MLIR module holding an rng operation carries, in text and in bytecode (where
#: the op name is a string of its own): a conservative test, `rng_bit_generator` and any name with
#: "rng" in it pass too, and only cost the child process.
RISKY_MARKER = b"rng"
#: How long the child may take: a conversion of a large module takes seconds, not minutes.
CHILD_TIMEOUT_S = 600.0
#: The repository root the child imports this module from (it may not be installed).
_ROOT = Path(__file__).resolve().parents[2]


class MlirConversionError(ValueError):
    """The program could not be converted from MLIR to HLO."""


def to_hlo_proto(code: bytes) -> bytes:
    """Serialized HloModuleProto of an MLIR module (bytecode, portable artifact or text)."""
    if RISKY_MARKER in code:
        return _convert_in_child(code)
    return convert(code)


def convert(code: bytes) -> bytes:
    """The conversion itself, in this process."""
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


#: What the child runs: this module's `_child_main`, imported from the repository root.
_CHILD_CODE = ("import sys; sys.path.insert(0, sys.argv[1]); "
               "from neuron_customcall.pjrt.mlir import _child_main; _child_main()")
#: The child's exit status for a conversion error it reported on stderr (not a crash).
_REPORTED = 3


def _convert_in_child(code: bytes) -> bytes:
    try:
        proc = subprocess.run([sys.executable, "-c", _CHILD_CODE, str(_ROOT)], input=code, capture_output=True,
                              timeout=CHILD_TIMEOUT_S, env=_child_env())
    except subprocess.TimeoutExpired as e:
        raise MlirConversionError(f"jaxlib's MLIR-to-HLO converter did not finish in {CHILD_TIMEOUT_S:.0f} s "
                                  "(run in a child process because the module holds an rng operation)") from e
    except OSError as e:
        raise MlirConversionError(f"could not start the process that converts the MLIR program to HLO: {e}") from e
    if proc.returncode == 0:
        return proc.stdout
    message = proc.stderr.decode("utf-8", "replace").strip()
    if proc.returncode == _REPORTED:
        raise MlirConversionError(message)
    if proc.returncode < 0:
        try:
            cause = f"was killed by {signal.Signals(-proc.returncode).name}"
        except ValueError:
            cause = f"was killed by signal {-proc.returncode}"
    else:
        cause = f"exited with status {proc.returncode}"
    check = next((line.strip() for line in message.splitlines() if "Check failed" in line), "")
    raise MlirConversionError(
        f"jaxlib's MLIR-to-HLO converter crashed on this program: the child process converting it {cause}"
        + (f" ({check[check.index('Check failed'):]})" if check else "")
        + ". The program can not be compiled for the neuron device (XLA:CPU, converting it with the same "
          "code, aborts the whole process). A known case: an rng operation inside a "
          "while loop's condition written by hand or by hlo_to_stablehlo; compute the random value in the "
          "loop body and carry it into the condition.")


def _child_env() -> dict[str, str]:
    """The parent's environment, without what would make the child load the plugin or print warnings."""
    env = dict(os.environ)
    env["JAX_PLATFORMS"] = "cpu"
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    return env


def _child_main() -> None:
    """Reads an MLIR module on stdin, writes the HloModuleProto on stdout (exit 0), or the
    conversion's error message on stderr (exit `_REPORTED`). A crash is the parent's to report."""
    code = sys.stdin.buffer.read()
    try:
        out = convert(code)
    except MlirConversionError as e:
        sys.stderr.write(str(e))
        sys.exit(_REPORTED)
    sys.stdout.buffer.write(out)
    sys.stdout.flush()
