#!/usr/bin/env bash
# Creates (or reuses) the project's virtual environment in .venv and installs the package with its
# test tools, and the SDK import names (sdk/). Idempotent: the install is skipped when neither
# pyproject.toml has changed since the last successful one, so a second run costs a second.
# Sourced by run-main.sh and run-tests.sh.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
py="${PYTHON:-}"
if [ -z "$py" ]; then
  for cand in python3.11 python3; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
      py="$cand"; break
    fi
  done
fi
[ -n "$py" ] || { echo "bootstrap: Python 3.11 is required (set PYTHON=/path/to/python3.11)" >&2; exit 1; }
if [ ! -x "$venv/bin/python" ]; then
  echo "bootstrap: creating $venv" >&2
  "$py" -m venv "$venv"
fi
stamp="$venv/.neuron-customcall-installed"
want="$(cat "$root/pyproject.toml" "$root/sdk/pyproject.toml" | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "bootstrap: installing neuron-customcall and its dependencies (first run takes a few minutes)" >&2
  free_kb="$(df -Pk "$root" | awk 'NR==2 {print $4}')"
  if [ -n "$free_kb" ] && [ "$free_kb" -lt $((10 * 1024 * 1024)) ]; then
    echo "bootstrap: warning: $((free_kb / 1024)) MiB free under $root; the environment takes about 8 GiB, and the install one large wheel more" >&2
  fi
  # No wheel cache: torch's CUDA dependencies alone are several GB, and caching them as well as
  # installing them nearly doubles the disk an install needs (a full disk fails the install).
  "$venv/bin/python" -m pip install --quiet --no-cache-dir --upgrade pip
  # One pip call downloads every wheel before it installs any, so a single install of the project
  # needs the 4 GB of wheels and the 8 GB they unpack to at the same time (a CI machine with 9.6 GB
  # free failed there). The large wheels (torch and the CUDA libraries PyPI's torch pulls in,
  # triton, torch-xla, jaxlib) therefore go first, one pip call each, at the exact versions a dry
  # run resolves; the last call installs the rest. At most one large wheel is on disk at a time.
  report="$(mktemp "${TMPDIR:-/tmp}/neuron-customcall-resolve.XXXXXX")"
  "$venv/bin/python" -m pip install --quiet --no-cache-dir --dry-run --report "$report" -e "$root[test]"
  "$venv/bin/python" - "$report" <<'PY' > "$report.large"
import json, sys
LARGE = ("torch", "torch-xla", "triton", "jaxlib")
with open(sys.argv[1], encoding="utf-8") as f:
    wanted = [item["metadata"] for item in json.load(f)["install"]]
def name(m):  # as PEP 503 compares names: torch_xla, Torch-XLA and torch-xla are one
    return m["name"].lower().replace("_", "-").replace(".", "-")
large = [m for m in wanted if name(m) in LARGE or name(m).startswith("nvidia-")]
# torch's wheel is the largest: first, while the disk holds least.
large.sort(key=lambda m: name(m) != "torch")
for m in large:
    print(f"{m['name']}=={m['version']}")
PY
  while read -r requirement; do
    "$venv/bin/python" -m pip install --quiet --no-cache-dir --no-deps "$requirement"
  done < "$report.large"
  rm -f "$report" "$report.large"
  "$venv/bin/python" -m pip install --quiet --no-cache-dir -e "$root[test]"
  # The Neuron SDK's import names (torch_neuronx, jax_neuronx, neuronxcc.nki, nki): sdk/pyproject.toml
  "$venv/bin/python" -m pip install --quiet --no-cache-dir -e "$root/sdk"
  echo "$want" > "$stamp"
fi
# The neuron PJRT plugin (libneuronpjrt.so) from its C++ sources; a no-op when it is up to date.
"$venv/bin/python" -m neuron_customcall.pjrt.build >/dev/null
export PATH="$venv/bin:$PATH"
export PJRT_DEVICE="${PJRT_DEVICE:-CPU}"
