#!/usr/bin/env bash
# Sets up the environment (once) and runs the main job. Extra arguments go to the main job.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$root"
# The main job runs torch_xla on the neuron PJRT device (bootstrap.sh exports PJRT_DEVICE=CPU).
PJRT_DEVICE=NEURON exec python examples/mlp_training/train.py "$@"
