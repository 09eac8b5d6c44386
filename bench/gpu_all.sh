#!/usr/bin/env bash
# Checks and times every CUDA kernel in one call (run on the GPU machine): each bench/gpu_*.py in turn.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
# Without a GPU each bench failed on its own, a traceback apiece (ModuleNotFoundError: torch, or no CUDA device).
if ! python3 -c "import sys, torch; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then
  echo "make bench-gpu needs a CUDA GPU and python3 with CUDA torch (as on the GPU machine); $(command -v python3 || echo 'no python3') has none" >&2
  exit 1
fi
status=0
for script in bench/gpu_*.py; do
  [ -e "$script" ] || continue
  mod="bench.$(basename "$script" .py)"
  echo "=== $mod"
  python3 -m "$mod" || status=1
done
exit $status
