"""The compiler's differential tests (tests/neuron_customcall/compiler/test_diff_*.py) run through
the neuron PJRT plugin as well as through the direct path (issue 11), XLA:CPU staying the oracle.

The suite runs them on the direct path (compile_module -> load_artifact -> run) with JAX on its CPU
platform. Here they run again in fresh processes with JAX_PLATFORMS=neuron,cpu and
NEURON_DIFF_THROUGH_PLUGIN=1 (tests/neuron_customcall/compiler/ours.py): a JAX function goes
through plain jax.jit on the neuron device, an HLO module is compiled and run by the plugin's PJRT
client, and the reference is computed on `jax.devices("cpu")` named explicitly (neuron is then
JAX's default device) or by XLA:CPU's own client; torch_xla's references stay on PJRT_DEVICE=CPU.

The files are split into groups, one fresh process each, so that the suite's workers share them.
A test may be skipped there only for a reason listed in ALLOWED_SKIPS: its own (integer gradients)
or a module jaxlib can not hand to any PJRT plugin (HLO-only constructs, which reach a plugin only
as torch_xla's HLO protos).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.neuron_customcall.compiler.ours import SKIP_REASON
from tests.neuron_customcall.pjrt._proc import ROOT

GROUPS = 4
ALLOWED_SKIPS = (SKIP_REASON, "gradients of integers")


def _groups() -> list[list[str]]:
    """The test_diff files in GROUPS groups of about equal size (largest first, to the smallest group)."""
    files = sorted((ROOT / "tests" / "neuron_customcall" / "compiler").glob("test_diff_*.py"),
                   key=lambda p: -p.stat().st_size)
    groups: list[list[str]] = [[] for _ in range(GROUPS)]
    sizes = [0] * GROUPS
    for f in files:
        k = sizes.index(min(sizes))
        groups[k].append(str(f.relative_to(ROOT)))
        sizes[k] += f.stat().st_size
    return groups


@pytest.mark.parametrize("group", range(GROUPS))
def test_compiler_diff_tests_pass_through_the_plugin(group: int) -> None:
    files = _groups()[group]
    env = {**os.environ, "JAX_PLATFORMS": "neuron,cpu", "NEURON_DIFF_THROUGH_PLUGIN": "1", "PJRT_DEVICE": "CPU",
           "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", "no:xdist",
                           *files], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    tail = proc.stdout[-6000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, tail
    passed = re.search(r"(\d+) passed", proc.stdout)
    assert passed and int(passed.group(1)) > 0, tail
    skips = [line for line in proc.stdout.splitlines() if line.startswith("SKIPPED")]
    assert all(any(reason in line for reason in ALLOWED_SKIPS) for line in skips), "\n".join(skips)
