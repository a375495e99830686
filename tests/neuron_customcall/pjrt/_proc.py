"""Runs a JAX program on the neuron PJRT device in a fresh process and returns what it reports.

Why subprocesses: tests/conftest.py pins JAX_PLATFORMS=cpu for the suite, and JAX picks its
backends once per process. Each script here runs with JAX_PLATFORMS=neuron,cpu (the plugin through
its `jax_plugins` entry point, XLA:CPU kept as the oracle: `jax.devices("cpu")`) and prints one JSON
line, the last of its stdout, prefixed by RESULT.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]

PRELUDE = """
import json, os, sys
import numpy as np
import jax, jax.numpy as jnp
NEURON = jax.devices("neuron") if "neuron" in os.environ.get("JAX_PLATFORMS", "neuron") else []
CPU = jax.devices("cpu")[0]
def on_cpu(f, *args):
    return jax.jit(f)(*jax.device_put(args, CPU))
def report(**values):
    print("RESULT " + json.dumps(values), flush=True)
"""


def run_script(body: str, *, platforms: str = "neuron,cpu", env: dict[str, str] | None = None,
               timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
    """Runs PRELUDE + body in a fresh interpreter (the repository first on sys.path)."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [full_env.get("PYTHONPATH")])])
    if platforms is None:
        full_env.pop("JAX_PLATFORMS", None)
    else:
        full_env["JAX_PLATFORMS"] = platforms
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(body)], capture_output=True,
                          text=True, env=full_env, timeout=timeout, cwd=str(ROOT))
    if check and proc.returncode != 0:
        raise AssertionError(f"subprocess failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
    return proc


def run_json(body: str, **kw: Any) -> dict[str, Any]:
    """Runs `body`, which calls report(...) once; returns the reported values."""
    proc = run_script(body, **kw)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, f"no RESULT line:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return json.loads(lines[-1][len("RESULT "):])
