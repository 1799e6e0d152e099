#!/bin/bash
# One call of a lent GPU machine, for a session with little device time:
# the machine's versions, the GPU checks but accuracy (about 2 minutes with
# the build), a per-kernel profile of the CNN (default cuDNN choice,
# MDRT_CUDNN_FIND=1 and MDRT_CUDA_CONV_GEMM=1), then the accuracy check if BUDGET seconds allow it
# (about 100 s). Everything lands in $OUT (the device tool's; else
# gpu-session/): console.log, ncu.txt and logs.tgz.
#
#   tools/gpu/pack.sh                        # here, after the last commit
#   tools/gpu/session.sh [BUDGET]            # there (default 540 s)
#
# Call it with a device timeout a little above BUDGET.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUDGET=${1:-540}
START=$(date +%s)
left() { echo $((BUDGET - ($(date +%s) - START))); }
O=${OUT:-$ROOT/gpu-session}
mkdir -p "$O"
export PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
cd "$ROOT"
{
  nvidia-smi -L
  nvcc --version | tail -1
  cmake --version | head -1
  python3 -c 'import torch; print("torch", torch.__version__)'
} > "$O/console.log" 2>&1
# Checks (RUN_TIMEOUT short: every run of these takes seconds).
RUN_TIMEOUT=${RUN_TIMEOUT:-60} MEMCHECK_TIMEOUT=${MEMCHECK_TIMEOUT:-90} \
  CHECKS="losses numpy ckdiff shared graph labels memcheck bench pin" \
  timeout $(( $(left) - 60 )) tools/gpu/run-gpu-checks.sh 2>&1 |
  tee -a "$O/console.log"
# Nothing else can run without this commit's mdrun (the build's errors are
# in console.log; a warm machine may keep an earlier call's binary).
if [ ! -x build-gpu/bin/mdrun ] || grep -q "^FAIL build" "$O/console.log"; then
  echo "FAIL session: the build failed" | tee -a "$O/console.log"
  tar czf "$O/logs.tgz" gpu-checks 2>/dev/null; exit 1
fi
# Profile: 5 steps of the mirrored CNN, kernel times summed per kernel.
D=shared/gpu-carry
NCU=(ncu --clock-control none --metrics gpu__time_duration.sum --csv
     --print-units base)
: > "$O/ncu.txt"
command -v ncu > /dev/null || echo "ncu: not found, no profile" | tee "$O/ncu.txt"
for env in MDRT_CUDNN_FIND=0 MDRT_CUDNN_FIND=1 MDRT_CUDA_CONV_GEMM=1; do
  command -v ncu > /dev/null && [ "$(left)" -gt 40 ] || break
  CSV=gpu-checks/ncu-$env.csv
  timeout 40 env $env "${NCU[@]}" build-gpu/bin/mdrun \
    "$D/plans/cnn-mirrored.mdp" --data="$D/fashion-mnist" --steps=5 \
    --no-shuffle --no-eval --log-every=0 --no-progress > "$CSV" 2>&1
  echo "== $env" >> "$O/ncu.txt"
  python3 tools/gpu/ncu_summary.py "$CSV" --per 5 --top 30 >> "$O/ncu.txt" 2>&1
done
tar czf "$O/logs.tgz" gpu-checks 2>/dev/null
# Accuracy last: the longest check, in its own log folder.
if [ "$(left)" -gt 130 ]; then
  LOGS=$ROOT/gpu-checks-accuracy ACCURACY_TIMEOUT=$(( $(left) / 2 - 10 )) \
    CHECKS=accuracy timeout $(( $(left) - 5 )) tools/gpu/run-gpu-checks.sh \
    2>&1 | tee -a "$O/console.log"
  tar czf "$O/logs-accuracy.tgz" gpu-checks-accuracy 2>/dev/null
else
  echo "accuracy: skipped, $(left) s left of $BUDGET" | tee -a "$O/console.log"
fi
grep -E "^(PASS|FAIL) " "$O/console.log"
