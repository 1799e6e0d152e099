#!/bin/bash
# One case of numpy-reference.test: trains PLAN (DIR/NAME.mdp) for STEPS
# steps with mdrun, checkpointing the state it starts from; runs
# numpy_reference.py MODEL from that step-0 checkpoint, which it first
# checks against the model's initializers (--check-initial); and compares
# the losses (1e-12) and the tensors after the last step (1e-10 of each
# tensor's largest value), and then the evaluation of the last step's
# variables over the t10k split of DATA (default: Fashion-MNIST): the
# accuracy exactly and the mean loss to 1e-12 (the metrics file has every
# digit of a float64 model's numbers). Prints `== NAME`, `initial state:
# ...`, `losses: ...`, `tensors after step STEPS: ...` and `evaluation:
# ...`; exits 1 when any differs.
#
# LOSS_TOL, TENSOR_TOL and EVAL_TOL change the three bounds, and
# EVAL_ACCURACY_TOL lets the accuracies differ (a float32 plan against the
# float64 reference: a near tie of two logits may go either way).
# PLAN names the plan instead (`DIR/r{replica}.mdp`), LAUNCH a command
# that starts mdrun (`mpirun -n 2`, which may quote its arguments), and
# MDRUN_FLAGS more mdrun options (`--soft-placement`, words split at
# spaces).
#
#   [DATA=DIR] numpy-reference.sh DIR NUMPY_PYTHON PYTHON DIFF_CHECKPOINTS \
#       MODEL NAME STEPS BATCH [numpy_reference.py options...]
set -euo pipefail
DIR=$1 NPY=$2 PY=$3 DIFF=$4 MODEL=$5 NAME=$6 STEPS=$7 BATCH=$8
shift 8
HERE=$(cd "$(dirname "$0")" && pwd)
DATA=${DATA:-/usr/share/datasets/fashion-mnist}
LOSS_TOL=${LOSS_TOL:-1e-12} TENSOR_TOL=${TENSOR_TOL:-1e-10}
EVAL_TOL=${EVAL_TOL:-1e-12} EVAL_ACCURACY_TOL=${EVAL_ACCURACY_TOL:-0}
CK=$DIR/$NAME-ck
echo "== $NAME"
rm -rf "$CK" "$DIR/$NAME-metrics.jsonl"
RUN=(mdrun "${PLAN:-$DIR/$NAME.mdp}" --data="$DATA" --no-shuffle
     --checkpoint-dir="$CK" --checkpoint-at-start --log-every=0 --no-progress
     --steps="$STEPS" --print-losses --metrics="$DIR/$NAME-metrics.jsonl"
     ${MDRUN_FLAGS:-})
eval "${LAUNCH:-}"' "${RUN[@]}"' > "$DIR/$NAME-mdrun.log"
mdrun --print-checkpoint="$CK/ckpt-000000000000.mdck" > "$DIR/$NAME-0.txt"
mdrun --print-checkpoint="$CK/ckpt-$(printf %012d "$STEPS").mdck" \
  > "$DIR/$NAME-last.txt"
"$NPY" "$HERE/numpy_reference.py" "$MODEL" "$DIR/$NAME-0.txt" "$DATA" \
  --steps="$STEPS" --batch="$BATCH" --final="$DIR/$NAME-numpy-last.txt" \
  --evaluate --check-initial "$@" > "$DIR/$NAME-numpy.log"
S=0
grep "^initial state: " "$DIR/$NAME-numpy.log"
echo -n "losses: "
"$PY" "$HERE/compare_losses.py" "$LOSS_TOL" "$DIR/$NAME-numpy.log" \
  "$DIR/$NAME-mdrun.log" 2>&1 || S=1
echo -n "tensors after step $STEPS: "
"$PY" "$DIFF" "$DIR/$NAME-last.txt" "$DIR/$NAME-numpy-last.txt" --max "$TENSOR_TOL" \
  > "$DIR/$NAME-tensors.txt" 2>&1 || S=1
tail -1 "$DIR/$NAME-tensors.txt"
echo -n "evaluation: "
"$PY" - "$DIR/$NAME-metrics.jsonl" "$DIR/$NAME-numpy.log" "$EVAL_TOL" \
  "$EVAL_ACCURACY_TOL" <<'COMPARE' || S=1
import json, sys
ev = [r for r in map(json.loads, open(sys.argv[1])) if "eval_loss" in r][-1]
line = [l.split() for l in open(sys.argv[2]) if l.startswith("eval ")][-1]
acc, loss = float(line[2]), float(line[4])
rel = abs(ev["eval_loss"] - loss) / abs(loss)
print("accuracy %s and %s, loss %.17g and %.17g (relative %.2g)" % (
    ev["eval_accuracy"], acc, ev["eval_loss"], loss, rel))
sys.exit(abs(ev["eval_accuracy"] - acc) > float(sys.argv[4]) or
         rel > float(sys.argv[3]))
COMPARE
# What differed, where lit shows it (stderr).
[ $S = 0 ] || tail -25 "$DIR/$NAME-tensors.txt" >&2
exit $S
