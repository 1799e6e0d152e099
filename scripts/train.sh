#!/usr/bin/env bash
# Sets up (packages, build), compiles the Fashion-MNIST MLP example for this
# machine's CPU and trains it on Fashion-MNIST, evaluating on the test set.
#
#   scripts/train.sh [extra mdrun options, e.g. --epochs=5]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
OUT=${OUT:-$BUILD_DIR/train}
mkdir -p "$OUT"
echo "== compiling examples/fashion_mlp.mdg (one clone on the CPU)"
"$BUILD_DIR/bin/mdplan" examples/fashion_mlp.mdg --clone-on-cpu \
  -o "$OUT/fashion_mlp.mdp"
"$BUILD_DIR/bin/mdplan" --dump-plan "$OUT/fashion_mlp.mdp" | grep -E "^(plan|deployment|device)"
# Short OpenMP spins: steady on cores other processes share too
# (docs/UserGuide.md, "Intra-op threads and a busy machine").
if [ -z "${OMP_WAIT_POLICY:-}" ]; then export GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-10000}; fi
# The run length and the data unless the arguments give them. A fresh run
# unless they say --resume: mdrun refuses a directory with an earlier run's
# checkpoints, so those move to checkpoints.previous (replacing older ones).
# Arguments that ask for no run go to mdrun alone (--help, --version,
# --print-checkpoint, --checkpoint-summary), or with the plan (--dump-plan).
DATA=--data=/usr/share/datasets/fashion-mnist
LENGTH=--epochs=${EPOCHS:-15}
RESUME=
NORUN=
for A in "$@"; do
  case "$A" in
    --steps|--steps=*|--epochs|--epochs=*) LENGTH= ;;
    --synthetic|--data|--data=*) DATA= ;;
    --resume) RESUME=1 ;;
    -h|--help|--version|--print-checkpoint|--print-checkpoint=*) NORUN=alone ;;
    --checkpoint-summary|--checkpoint-summary=*) NORUN=alone ;;
    --dump-plan) NORUN=${NORUN:-plan} ;;
  esac
done
case "$NORUN" in
  alone) exec "$BUILD_DIR/bin/mdrun" "$@" ;;
  plan) exec "$BUILD_DIR/bin/mdrun" "$OUT/fashion_mlp.mdp" "$@" ;;
esac
echo "== training on Fashion-MNIST"
CK=$OUT/checkpoints
if [ -z "$RESUME" ] && [ -n "$(ls -A "$CK" 2>/dev/null)" ]; then
  rm -rf "$CK.previous" && mv "$CK" "$CK.previous"
  echo "== the earlier run's checkpoints moved to $CK.previous"
fi
"$BUILD_DIR/bin/mdrun" "$OUT/fashion_mlp.mdp" $DATA $LENGTH \
  --log-every=938 --metrics="$OUT/metrics.jsonl" --checkpoint-dir="$CK" "$@"
