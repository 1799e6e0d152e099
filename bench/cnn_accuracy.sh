#!/usr/bin/env bash
# CNN accuracy bench run: compiles examples/tf_tutorial_cnn.mdg (or MODEL)
# for one clone on the CPU and trains it with mdrun on Fashion-MNIST,
# evaluating on the test split after every epoch; then checks the final
# test accuracy against 91.6% (the Fashion-MNIST benchmark table's figure
# for this 2-conv + pooling model; TARGET for another). Not part of the
# test suite (minutes of CPU).
#
#   bench/cnn_accuracy.sh                     # 20 epochs, all cores
#   EPOCHS=15 THREADS=1 bench/cnn_accuracy.sh
#   MODEL=examples/fashion_resnet.mdg EPOCHS=10 TARGET=92 bench/cnn_accuracy.sh
#   MDPLAN_FLAGS="--lr-decay-steps=3000 --lr-decay-rate=0.5" bench/cnn_accuracy.sh
#
# Variables: MODEL (examples/tf_tutorial_cnn.mdg), BUILD (build), OUT
# ($BUILD/cnn-accuracy, or $BUILD/NAME-accuracy for MODEL NAME.mdg), EPOCHS (20), THREADS
# (mdrun's default: all cores), SEED (1), MDPLAN_FLAGS (extra mdplan
# options, e.g. a learning-rate schedule), TARGET (91.6), DATA.
# Exit status 0 when the final accuracy reaches TARGET, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
MODEL=${MODEL:-examples/tf_tutorial_cnn.mdg}
name=$(basename "$MODEL" .mdg)
[ "$name" = tf_tutorial_cnn ] && name=cnn
OUT=${OUT:-$BUILD/$name-accuracy}
EPOCHS=${EPOCHS:-20}
SEED=${SEED:-1}
TARGET=${TARGET:-91.6}
DATA=${DATA:-/usr/share/datasets/fashion-mnist}
MDPLAN_FLAGS=${MDPLAN_FLAGS:-}
for t in "$BUILD/bin/mdplan" "$BUILD/bin/mdrun"; do
  [ -x "$t" ] || { echo "cnn_accuracy.sh: no $t (build first: scripts/setup.sh, or set BUILD)" >&2; exit 1; }
done
mkdir -p "$OUT"
# Short OpenMP spins (docs/Performance.md, "OpenMP's idle threads"): a long
# run meets whatever else the machine does.
if [ -z "${OMP_WAIT_POLICY:-}" ]; then export GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-10000}; fi
threads=()
if [ -n "${THREADS:-}" ]; then threads=(--threads="$THREADS"); fi

read -r -a extra_flags <<< "$MDPLAN_FLAGS"  # a list of options
cmd_plan=("$BUILD/bin/mdplan" "$MODEL" --clone-on-cpu "${extra_flags[@]}" -o "$OUT/$name.mdp")
cmd_run=("$BUILD/bin/mdrun" "$OUT/$name.mdp" --data="$DATA" --epochs="$EPOCHS" --seed="$SEED"
         "${threads[@]}" --log-every=600 --no-progress --metrics="$OUT/metrics.jsonl")
echo "== $(date -u +%FT%TZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== ${cmd_plan[*]}"
"${cmd_plan[@]}"
"$BUILD/bin/mdplan" --dump-plan="$OUT/$name.mdp" | sed -n 2p
echo "== ${cmd_run[*]}"
start=$(date +%s.%N)
"${cmd_run[@]}" | tee "$OUT/log.txt"
end=$(date +%s.%N)
echo "== load at end $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$OUT/metrics.jsonl" "$start" "$end" "$EPOCHS" "$TARGET" <<'EOF'
import json, sys
path, start, end, epochs, target = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], float(sys.argv[5])
evals = [d for d in map(json.loads, open(path)) if "eval_accuracy" in d]
accs = [100 * d["eval_accuracy"] for d in evals]
print("test accuracy per evaluation: " + " ".join(f"{a:.2f}" for a in accs))
final, best = accs[-1], max(accs)
print(f"epochs {epochs}, wall {end - start:.0f} s, final test accuracy {final:.2f}%, "
      f"best {best:.2f}% (after evaluation {accs.index(best) + 1}), target {target}%: "
      + ("reached" if final >= target else "NOT reached"))
sys.exit(0 if final >= target else 1)
EOF
