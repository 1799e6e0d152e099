#!/usr/bin/env bash
# mdrun against PyTorch (CPU, eager) on the same model, batch, data and
# thread count, measured side by side in one run.
#
#   bench/compare.sh                       # everything, threads 1 and 2, 3 reps
#   MODELS="mlp tiny" THREADS=1 REPS=5 bench/compare.sh
#
# Models:
#   mlp   examples/fashion_mlp.mdg, batch 64, real Fashion-MNIST
#   cnn   examples/tf_tutorial_cnn.mdg, batch 100, real Fashion-MNIST
#   resnet examples/fashion_resnet.mdg, batch 64, real Fashion-MNIST
#   tiny  bench/gen_graph.py tiny --ops=$TINY_OPS: a chain of Add/Mul/Relu
#         on a [1,8] tensor, synthetic data; per-kernel dispatch cost
#
# For each thread count and repetition, every model runs once under mdrun
# (--threads=N) and once under PyTorch (torch.set_num_threads(N)), the order
# alternating between repetitions. OMP_NUM_THREADS and OPENBLAS_NUM_THREADS
# are set to N for both. Each run does WARMUP untimed steps, then timed
# intervals of LOG steps; a run's time per step is the median over its
# intervals (mdrun: from its --metrics lines, 1000 * batch /
# examples_per_sec; PyTorch: the same interval timing in
# bench/torch_models.py). The report (bench/compare_report.py) gives the
# median over repetitions and the ratio PyTorch / mdrun (> 1: mdrun is
# faster). Raw results go to $OUT (default $BUILD/bench-compare).
#
# Variables: BUILD (build), OUT, PYTHON (/usr/bin/python3), MODELS
# ("mlp cnn resnet tiny"), THREADS ("1 2"), REPS (3), TINY_OPS (300),
# DATA (/usr/share/datasets/fashion-mnist), TRACE (1: also write one
# mdrun Chrome trace per model and thread count).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/bench-compare}
PYTHON=${PYTHON:-/usr/bin/python3}
MODELS=${MODELS:-mlp cnn resnet tiny}
THREADS=${THREADS:-1 2}
REPS=${REPS:-3}
TINY_OPS=${TINY_OPS:-300}
DATA=${DATA:-/usr/share/datasets/fashion-mnist}
TRACE=${TRACE:-1}
MDPLAN=$BUILD/bin/mdplan
MDRUN=$BUILD/bin/mdrun
for t in "$MDPLAN" "$MDRUN"; do
  [ -x "$t" ] || { echo "compare.sh: no $t (build first: scripts/setup.sh, or set BUILD)" >&2; exit 1; }
done
mkdir -p "$OUT"
rm -f "$OUT"/*.jsonl "$OUT"/*.json

# Plans: one clone on the CPU, as scripts/train.sh compiles the MLP.
"$MDPLAN" examples/fashion_mlp.mdg --clone-on-cpu --no-eval -o "$OUT/mlp.mdp"
"$MDPLAN" examples/tf_tutorial_cnn.mdg --clone-on-cpu --no-eval -o "$OUT/cnn.mdp"
"$MDPLAN" examples/fashion_resnet.mdg --clone-on-cpu --no-eval -o "$OUT/resnet.mdp"
"$PYTHON" bench/gen_graph.py tiny --ops="$TINY_OPS" -o "$OUT/tiny.mdg"
"$MDPLAN" "$OUT/tiny.mdg" --clone-on-cpu --no-eval -o "$OUT/tiny.mdp"
"$MDPLAN" --dump-plan="$OUT/tiny.mdp" | grep -E "^  device" > "$OUT/tiny.kernels"

# steps: warm-up, timed, log interval
params() {
  case $1 in
    mlp) echo "100 1000 100" ;;
    cnn) echo "10 60 10" ;;
    resnet) echo "10 60 10" ;;
    tiny) echo "2000 20000 2000" ;;
  esac
}

run_mdrun() { # model threads rep
  local m=$1 n=$2 r=$3 w s k data
  read -r w s k <<< "$(params "$m")"
  if [ "$m" = tiny ]; then data=(--synthetic); else data=(--data="$DATA"); fi
  local trace=()
  if [ "$TRACE" = 1 ] && [ "$r" = 1 ]; then
    trace=(--trace="$OUT/trace-$m-t$n.json" --trace-steps=5)
  fi
  OMP_NUM_THREADS=$n OPENBLAS_NUM_THREADS=$n "$MDRUN" "$OUT/$m.mdp" "${data[@]}" \
    --steps=$((w + s)) --log-every="$k" --no-eval --threads="$n" --quiet \
    --metrics="$OUT/mdrun-$m-t$n-r$r.jsonl" "${trace[@]}" > /dev/null
}

run_torch() { # model threads rep
  local m=$1 n=$2 r=$3 w s k extra=()
  read -r w s k <<< "$(params "$m")"
  if [ "$m" = tiny ]; then extra=(--ops="$TINY_OPS"); else extra=(--data="$DATA"); fi
  OMP_NUM_THREADS=$n OPENBLAS_NUM_THREADS=$n "$PYTHON" bench/torch_models.py "$m" \
    --threads="$n" --warmup="$w" --steps="$s" --log-every="$k" "${extra[@]}" \
    > "$OUT/torch-$m-t$n-r$r.jsonl"
}

{
  echo "date: $(date -u +%FT%TZ)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "torch: $("$PYTHON" -c 'import torch; print(torch.__version__)')"
} | tee "$OUT/machine.txt"

for r in $(seq 1 "$REPS"); do
  for n in $THREADS; do
    for m in $MODELS; do
      if (( r % 2 )); then
        run_mdrun "$m" "$n" "$r"; run_torch "$m" "$n" "$r"
      else
        run_torch "$m" "$n" "$r"; run_mdrun "$m" "$n" "$r"
      fi
    done
  done
  echo "rep $r/$REPS done, load $(cut -d' ' -f1 /proc/loadavg)"
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt"

"$PYTHON" bench/compare_report.py "$OUT" | tee "$OUT/report.txt"
