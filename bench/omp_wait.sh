#!/usr/bin/env bash
# OpenMP wait settings side by side: mdrun's step time with two threads
# under GCC's OpenMP runtime's default spin (GOMP_SPINCOUNT=300000), the
# 30,000 mdrun sets when the environment names none, 10,000, 3,000, and no
# spinning (OMP_WAIT_POLICY=passive), alternating in one run; optionally with LOAD
# busy loops on the machine's cores, as other users' processes would be.
# Reports the median time of each setting and its ratio to the default's.
#
#   bench/omp_wait.sh               # idle machine
#   LOAD=2 bench/omp_wait.sh        # two busy loops beside mdrun
#
# Variables: BUILD (build), LOAD (0), REPS (5), THREADS (2), MODELS
# ("resnet mlp": examples/fashion_resnet.mdg, 40 steps; fashion_mlp.mdg,
# 2,000 steps; synthetic data, no evaluation).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
LOAD=${LOAD:-0}
REPS=${REPS:-5}
THREADS=${THREADS:-2}
MODELS=${MODELS:-resnet mlp}
OUT=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$OUT"' EXIT

for m in $MODELS; do
  "$BUILD/bin/mdplan" "examples/fashion_$m.mdg" --clone-on-cpu --no-eval -o "$OUT/$m.mdp"
done
for _ in $(seq 1 "$LOAD"); do (while :; do :; done) & done

settings=("GOMP_SPINCOUNT=300000" "GOMP_SPINCOUNT=30000" "GOMP_SPINCOUNT=10000"
          "GOMP_SPINCOUNT=3000" "OMP_WAIT_POLICY=passive")
echo "== $(date -u +%FT%TZ), $(nproc) cores, $LOAD busy loops, load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$REPS"); do
  for m in $MODELS; do
    steps=40; [ "$m" = mlp ] && steps=2000
    for s in "${settings[@]}"; do
      t=$(env "$s" "$BUILD/bin/mdrun" "$OUT/$m.mdp" --synthetic --steps=$steps \
            --no-eval --threads="$THREADS" --log-every=0 2>&1 |
          sed -n 's/^done: .* in \([0-9.e+-]*\) s .*/\1/p')
      echo "$m $s ${t:-nan}" >> "$OUT/times"
    done
  done
done
echo "== load at end $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$OUT/times" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m, s, t = line.split()
    runs[(m, s)].append(float(t))
models = list(dict.fromkeys(m for m, _ in runs))
print(f"{'model':8} {'setting':26} {'median s':>9} {'vs default':>10}  runs")
for m in models:
    base = statistics.median(runs[(m, "GOMP_SPINCOUNT=300000")])
    for (mm, s), v in runs.items():
        if mm == m:
            med = statistics.median(v)
            print(f"{m:8} {s:26} {med:9.3f} {base / med:10.2f}  "
                  + " ".join(f"{x:.3g}" for x in v))
PY
