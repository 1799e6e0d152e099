#!/bin/bash
# The GPU checks of docs/Cuda.md, on a machine with a GPU, nvcc, CMake,
# ninja and PyTorch, but no internet, no apt and no LLVM / Protobuf /
# FlatBuffers: builds mdrun alone (MDPLAN_BUILD_COMPILER=OFF) from this
# repository plus shared/gpu-carry/ (made by tools/gpu/pack.sh on the
# development machine), then runs
#   1. losses: the MLP and CNN planned for one GPU (default and mirrored
#      placement) against the CPU's losses, carried and recomputed here,
#      20 steps, 1e-4 relative;
#   2. shared: 2 and 4 clones sharing GPU 0 (ps and mirrored) against one
#      clone at the combined batch, 1e-4 relative;
#   3. graph: --cuda-graph against eager, 1e-6 relative;
#   4. memcheck: compute-sanitizer on a few steps (eager, graphs, shared GPU);
#   5. accuracy: MLP (MLP_EPOCHS, 15) and CNN (CNN_EPOCHS, 20) on
#      Fashion-MNIST against 88.3% and 91.6% (SKIP_ACCURACY=1 skips);
#   6. bench: mdrun CNN per-step time against PyTorch eager and CUDA graphs
#      (bench/gpu/cnn_torch_gpu.py).
# Prints PASS / FAIL per check and exits non-zero when any failed. Logs in
# $OUT (default: gpu-checks/).
#
#   tools/gpu/run-gpu-checks.sh
#   CUDA_ARCH=80 tools/gpu/run-gpu-checks.sh     # an A100 (default: native)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CARRY=${CARRY:-$ROOT/shared/gpu-carry}
BUILD=${BUILD:-$ROOT/build-gpu}
OUT=${OUT:-$ROOT/gpu-checks}
PY=${PYTHON:-python3}
JOBS=${JOBS:-$(nproc)}
[ -d "$CARRY/plans" ] || { echo "no $CARRY: run tools/gpu/pack.sh first" >&2; exit 2; }
mkdir -p "$OUT"
export PATH=$PATH:/usr/local/cuda/bin
DATA=$CARRY/fashion-mnist

# Build (runtime only). The carried headers are copied out of the source
# tree: CMake refuses exported include directories inside it.
HDRS=${TMPDIR:-/tmp}/mdplan-gpu-headers
rm -rf "$HDRS" && mkdir -p "$HDRS"
cp -r "$CARRY/flatbuffers" "$CARRY/zlib" "$CARRY/plan_generated.h" "$HDRS/"
ARGS=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DMDPLAN_BUILD_COMPILER=OFF
      -DMDPLAN_BUILD_TESTS=OFF -DMDPLAN_ENABLE_MPI=OFF
      -DMDPLAN_FLATBUFFERS_INCLUDE_DIR="$HDRS/flatbuffers/include"
      -DMDPLAN_PREGENERATED_PLAN_HEADER="$HDRS/plan_generated.h"
      -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-native}")
command -v nvcc > /dev/null || ARGS+=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
if [ ! -e /usr/include/zlib.h ]; then
  LIBZ=$(ls /usr/lib/x86_64-linux-gnu/libz.so* /lib/x86_64-linux-gnu/libz.so* 2>/dev/null | head -1)
  ARGS+=(-DZLIB_INCLUDE_DIR="$HDRS/zlib/include" -DZLIB_LIBRARY="$LIBZ")
fi
echo "== build: cmake ${ARGS[*]}"
cmake -S "$ROOT" -B "$BUILD" "${ARGS[@]}" > "$OUT/cmake.log" 2>&1 || {
  tail -30 "$OUT/cmake.log"; echo "FAIL build (configure)"; exit 1; }
grep -E "CUDA backend|cuDNN|NCCL" "$OUT/cmake.log"
START=$(date +%s)
ninja -C "$BUILD" -j"$JOBS" mdrun > "$OUT/build.log" 2>&1 || {
  grep -E "error|FAILED" -A5 "$OUT/build.log" | head -60; echo "FAIL build"; exit 1; }
echo "built mdrun in $(( $(date +%s) - START )) s"
MDRUN=$BUILD/bin/mdrun
nvidia-smi -L || true

FAILED=()
result() { # name status
  if [ "$2" = 0 ]; then echo "PASS $1"; else echo "FAIL $1"; FAILED+=("$1"); fi
}
compare() { # tol logs...
  "$PY" "$CARRY/compare_losses.py" "$@"
}
run20() { # plan log extra...
  local P=$1 L=$2; shift 2
  "$MDRUN" "$P" --data="$DATA" --steps=20 --no-shuffle --no-eval \
    --print-losses --log-every=0 --no-progress "$@" > "$L" 2>&1
}
P=$CARRY/plans

echo "== 1. losses on the GPU against the CPU"
S=0
for m in mlp cnn mlp-mirrored cnn-mirrored; do
  run20 "$P/$m.mdp" "$OUT/$m-gpu.log" || { cat "$OUT/$m-gpu.log"; S=1; continue; }
  env CUDA_VISIBLE_DEVICES= "$MDRUN" "$P/$m.mdp" --soft-placement \
    --data="$DATA" --steps=20 --no-shuffle --no-eval --print-losses \
    --log-every=0 --no-progress > "$OUT/$m-cpu.log" 2>&1 || S=1
  echo -n "$m: "; compare 1e-4 "$CARRY/cpu/$m.log" "$OUT/$m-cpu.log" "$OUT/$m-gpu.log" || S=1
done
result losses $S

echo "== 2. clones sharing GPU 0 against one clone"
S=0
LOGS=()
for n in 1 2 4; do for s in ps mirrored; do
  run20 "$P/shared-$n-$s.mdp" "$OUT/shared-$n-$s.log" --gpu-map=0,0,0,0 || {
    cat "$OUT/shared-$n-$s.log"; S=1; }
  LOGS+=("$OUT/shared-$n-$s.log")
done; done
compare 1e-4 "${LOGS[@]}" || S=1
result shared $S

echo "== 3. --cuda-graph against eager"
S=0
for m in cnn mlp-mirrored cnn-mirrored; do
  run20 "$P/$m.mdp" "$OUT/$m-graph.log" --cuda-graph || { cat "$OUT/$m-graph.log"; S=1; continue; }
  grep -E "^note: (cuda graph|--cuda-graph)" "$OUT/$m-graph.log"
  if grep -q "capture.*failed" "$OUT/$m-graph.log"; then
    grep "capture.*failed" "$OUT/$m-graph.log"; S=1
  fi
  echo -n "$m: "; compare 1e-6 "$OUT/$m-gpu.log" "$OUT/$m-graph.log" || S=1
done
result graph $S

echo "== 4. compute-sanitizer memcheck"
S=0
if command -v compute-sanitizer > /dev/null; then
  for args in "cnn-small.mdp" "cnn-small.mdp --cuda-graph" \
              "mlp-small-shared.mdp --gpu-map=0,0"; do
    set -- $args
    PLAN=$1; shift
    compute-sanitizer --tool=memcheck --error-exitcode=1 "$MDRUN" "$P/$PLAN" \
      --synthetic --synthetic-examples=64 --steps=3 --no-eval --log-every=0 \
      "$@" > "$OUT/memcheck.log" 2>&1 || { tail -40 "$OUT/memcheck.log"; S=1; }
    echo "$args: $(grep "ERROR SUMMARY" "$OUT/memcheck.log")"
  done
else
  echo "compute-sanitizer not found"; S=1
fi
result memcheck $S

if [ "${SKIP_ACCURACY:-0}" != 1 ]; then
  echo "== 5. accuracy on Fashion-MNIST"
  S=0
  for spec in "mlp ${MLP_EPOCHS:-15} 88.3" "cnn ${CNN_EPOCHS:-20} 91.6"; do
    set -- $spec
    "$MDRUN" "$P/$1.mdp" --data="$DATA" --epochs="$2" --log-every=0 \
      --no-progress > "$OUT/$1-accuracy.log" 2>&1 || { tail "$OUT/$1-accuracy.log"; S=1; continue; }
    ACC=$(grep -o "test accuracy [0-9.]*" "$OUT/$1-accuracy.log" | tail -1 | awk '{print $3}')
    echo "$1: $2 epochs, test accuracy $ACC% (target $3%)"
    "$PY" -c "import sys; a=float(sys.argv[1]); a=a*100 if a<=1 else a; sys.exit(a < float(sys.argv[2]))" \
      "${ACC:-0}" "$3" || S=1
  done
  result accuracy $S
fi

echo "== 6. CNN per-step time: mdrun against PyTorch"
"$PY" "$ROOT/bench/gpu/cnn_torch_gpu.py" --mdrun "$MDRUN" --plan "$P/cnn.mdp" \
  --data "$DATA" 2>&1 | tee "$OUT/bench.log"
result bench "${PIPESTATUS[0]}"

if [ ${#FAILED[@]} -eq 0 ]; then echo "all GPU checks passed"; exit 0; fi
echo "failed: ${FAILED[*]}"
exit 1
