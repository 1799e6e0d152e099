#!/bin/bash
# One case of numpy-reference.test: trains PLAN (DIR/NAME.mdp) for one step
# with mdrun, then on to STEPS from that step's checkpoint, runs
# numpy_reference.py MODEL from the same checkpoint, and compares the
# losses (1e-12) and the tensors after the last step (1e-10 of each
# tensor's largest value). Prints `== NAME`, `losses: ...` and
# `tensors after step STEPS: ...`; exits 1 when either differs.
#
#   numpy-reference.sh DIR NUMPY_PYTHON PYTHON DIFF_CHECKPOINTS \
#       MODEL NAME STEPS BATCH [numpy_reference.py options...]
set -euo pipefail
DIR=$1 NPY=$2 PY=$3 DIFF=$4 MODEL=$5 NAME=$6 STEPS=$7 BATCH=$8
shift 8
HERE=$(cd "$(dirname "$0")" && pwd)
DATA=/usr/share/datasets/fashion-mnist
CK=$DIR/$NAME-ck
echo "== $NAME"
rm -rf "$CK"
RUN=(mdrun "$DIR/$NAME.mdp" --data=$DATA --no-shuffle --no-eval
     --checkpoint-dir="$CK" --log-every=0 --no-progress)
"${RUN[@]}" --steps=1 > /dev/null
mdrun --print-checkpoint="$CK/ckpt-000000000001.mdck" > "$DIR/$NAME-1.txt"
"${RUN[@]}" --steps="$STEPS" --resume --print-losses > "$DIR/$NAME-mdrun.log"
mdrun --print-checkpoint="$(ls "$CK"/ckpt-*.mdck | tail -1)" \
  > "$DIR/$NAME-last.txt"
"$NPY" "$HERE/numpy_reference.py" "$MODEL" "$DIR/$NAME-1.txt" "$DATA" \
  --steps="$STEPS" --batch="$BATCH" --final="$DIR/$NAME-numpy-last.txt" "$@" \
  > "$DIR/$NAME-numpy.log"
S=0
echo -n "losses: "
"$PY" "$HERE/compare_losses.py" 1e-12 "$DIR/$NAME-numpy.log" \
  "$DIR/$NAME-mdrun.log" 2>&1 || S=1
echo -n "tensors after step $STEPS: "
"$PY" "$DIFF" "$DIR/$NAME-last.txt" "$DIR/$NAME-numpy-last.txt" --max 1e-10 \
  > "$DIR/$NAME-tensors.txt" 2>&1 || S=1
tail -1 "$DIR/$NAME-tensors.txt"
exit $S
