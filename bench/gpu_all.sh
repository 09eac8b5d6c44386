#!/usr/bin/env bash
# Checks and times every CUDA kernel in one call (run on the GPU machine): each bench/gpu_*.py in turn.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
status=0
for script in bench/gpu_*.py; do
  [ -e "$script" ] || continue
  mod="bench.$(basename "$script" .py)"
  echo "=== $mod"
  python3 -m "$mod" || status=1
done
exit $status
