#!/usr/bin/env bash
# Sets up the environment (once) and runs the main job. Extra arguments go to the main job.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$root"
exec python examples/mlp_training/train.py "$@"
