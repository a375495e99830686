#!/usr/bin/env bash
# Sets up the environment (once) and runs the whole test suite. Extra arguments go to pytest.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$root"
exec python -m pytest -n 2 -q "$@"
