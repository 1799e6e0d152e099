#!/bin/bash
# Prepares what tools/gpu/run-gpu-checks.sh needs on a GPU machine that has
# nvcc, CMake, ninja and PyTorch but no internet, no apt, no LLVM, Protobuf
# or FlatBuffers: run it here (a machine with the full build) and copy the
# repository with shared/gpu-carry/ along.
#
#   tools/gpu/pack.sh [BUILD_DIR]     (default: build-cuda, else build)
#
# shared/gpu-carry/ (CARRY, when set) then holds:
#   flatbuffers/include/flatbuffers/  the FlatBuffers headers
#   plan_generated.h                  the generated plan schema header
#   zlib/include/                     zlib.h and zconf.h (zlib1g-dev may be
#                                     missing there; libz.so.1 never is)
#   fashion-mnist/                    the dataset (gzipped IDX)
#   compare_losses.py, diff_checkpoints.py  the comparisons
#   numpy/                            test/mdrun/Inputs' NumPy reference of
#                                     the models and its driver (the numpy
#                                     check)
#   plans/*.mdp                       the plans of the checks, compiled here
#                                     (labels: from test/cuda/Inputs)
#   cnn64.mdg                         the CNN in float64 (float64_model.py)
#   cpu/*.log                         per-step losses of those plans on this
#                                     machine's CPU (soft placement); *-ref.log
#                                     with the reference kernels, for the
#                                     plans in REF_MODELS (default: mlp,
#                                     mlp-mirrored, cnn, cnn-mirrored, resnet)
#   commit, schema.sha256             what the carry was made from
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-}
if [ -z "$BUILD" ]; then
  for B in "$ROOT/build-cuda" "$ROOT/build"; do
    [ -x "$B/bin/mdplan" ] && BUILD=$B && break
  done
fi
[ -x "$BUILD/bin/mdplan" ] || { echo "pack.sh: no mdplan in '$BUILD'" >&2; exit 1; }
# The carried CPU losses come from this build: a stale one would make the
# GPU look wrong. (PACK_ALLOW_STALE=1: the test suite's dry run, which
# tests whatever the build holds.)
if [ -z "${PACK_ALLOW_STALE:-}" ] && [ -f "$BUILD/build.ninja" ] &&
   command -v ninja > /dev/null &&
   ! ninja -C "$BUILD" -n mdplan mdrun | grep -q "no work to do"; then
  echo "pack.sh: '$BUILD' is older than the sources; run 'ninja -C $BUILD' first" >&2
  exit 1
fi
MDPLAN=$BUILD/bin/mdplan
MDRUN=$BUILD/bin/mdrun
DATA=/usr/share/datasets/fashion-mnist
OUT=${CARRY:-$ROOT/shared/gpu-carry}
rm -rf "$OUT"
mkdir -p "$OUT/flatbuffers/include" "$OUT/zlib/include" "$OUT/plans" "$OUT/cpu"

cp -r /usr/include/flatbuffers "$OUT/flatbuffers/include/"
cp "$BUILD/schema/mdplan/plan_generated.h" "$OUT/plan_generated.h"
cp /usr/include/zlib.h /usr/include/zconf.h "$OUT/zlib/include/"
cp -r "$DATA" "$OUT/fashion-mnist"
cp "$ROOT/test/mdrun/Inputs/compare_losses.py" "$ROOT/tools/gpu/diff_checkpoints.py" "$OUT/"
mkdir -p "$OUT/numpy"
cp "$ROOT/test/mdrun/Inputs/"{numpy_reference.py,numpy-reference.sh,cut_test_split.py,compare_losses.py} \
  "$OUT/numpy/"

P=$OUT/plans
# One GPU, the compiler's default placement (and the mirrored variant, with
# the variables and updates on the GPU).
"$MDPLAN" "$ROOT/examples/fashion_mlp.mdg" --num-clones=1 -o "$P/mlp.mdp"
"$MDPLAN" "$ROOT/examples/tf_tutorial_cnn.mdg" --num-clones=1 -o "$P/cnn.mdp"
"$MDPLAN" "$ROOT/examples/fashion_mlp.mdg" --num-clones=1 \
  --strategy=mirrored -o "$P/mlp-mirrored.mdp"
"$MDPLAN" "$ROOT/examples/tf_tutorial_cnn.mdg" --num-clones=1 \
  --strategy=mirrored -o "$P/cnn-mirrored.mdp"
# The residual network (strided convolutions, batch norm with moving
# averages, a mean over H and W) and an SGD CNN for one-step checkpoint
# diffs (run-gpu-checks.sh's ckdiff).
"$MDPLAN" "$ROOT/examples/fashion_resnet.mdg" --num-clones=1 -o "$P/resnet.mdp"
"$MDPLAN" "$ROOT/examples/fashion_resnet.mdg" --num-clones=1 \
  --strategy=mirrored -o "$P/resnet-mirrored.mdp"
"$MDPLAN" "$ROOT/examples/tf_tutorial_cnn.mdg" --num-clones=1 \
  --optimizer=sgd --learning-rate=0.1 -o "$P/cnn-sgd.mdp"
"$MDPLAN" "$ROOT/examples/fashion_resnet.mdg" --num-clones=1 \
  --optimizer=sgd --learning-rate=0.1 -o "$P/resnet-sgd.mdp"
"$MDPLAN" "$ROOT/examples/tf_tutorial_cnn.mdg" --num-clones=1 \
  --strategy=mirrored --optimizer=sgd --learning-rate=0.1 \
  -o "$P/cnn-mirrored-sgd.mdp"
# The CNN in float64 at batch 16 (the losses check's cnn64): rounding
# differences stay far below 1e-4 over its 20 steps.
python3 "$ROOT/tools/gpu/float64_model.py" "$ROOT/examples/tf_tutorial_cnn.mdg" \
  "$OUT/cnn64.mdg" --batch=16 > /dev/null
"$MDPLAN" "$OUT/cnn64.mdg" --num-clones=1 -o "$P/cnn64.mdp"
# Clones sharing one GPU (run with --gpu-map=0,0,0,0) against one clone.
for n in 1 2 4; do
  for s in ps mirrored; do
    "$MDPLAN" "$ROOT/examples/fashion_mlp.mdg" --num-clones=$n \
      --gpus-per-worker=$n --strategy=$s --global-batch=64 --optimizer=sgd \
      --learning-rate=0.1 -o "$P/shared-$n-$s.mdp"
  done
done
# Small plans for compute-sanitizer.
"$MDPLAN" "$ROOT/examples/tf_tutorial_cnn.mdg" --num-clones=1 \
  --global-batch=16 -o "$P/cnn-small.mdp"
"$MDPLAN" "$ROOT/examples/fashion_resnet.mdg" --num-clones=1 \
  --global-batch=8 -o "$P/resnet-small.mdp"
"$MDPLAN" "$ROOT/examples/fashion_mlp.mdg" --num-clones=2 --gpus-per-worker=2 \
  --strategy=mirrored --global-batch=16 -o "$P/mlp-small-shared.mdp"
# The numpy check's plans (as test/mdrun/numpy-reference.test's, for one
# GPU): the MLP, the CNN 32 wide (its dropout too), and the ResNet, in
# float64 and float32.
sed -f "$ROOT/test/mdrun/Inputs/reference_cnn.sed" \
  "$ROOT/examples/tf_tutorial_cnn.mdg" > "$OUT/numpy/cnn.mdg"
python3 "$ROOT/tools/gpu/float64_model.py" "$ROOT/examples/fashion_mlp.mdg" \
  "$OUT/numpy/mlp64.mdg" > /dev/null
python3 "$ROOT/tools/gpu/float64_model.py" "$OUT/numpy/cnn.mdg" \
  "$OUT/numpy/cnn64.mdg" --batch=16 > /dev/null
python3 "$ROOT/tools/gpu/float64_model.py" "$ROOT/examples/fashion_resnet.mdg" \
  "$OUT/numpy/resnet64.mdg" --batch=8 > /dev/null
"$MDPLAN" "$OUT/numpy/mlp64.mdg" --num-clones=1 -o "$P/numpy-mlp.mdp"
"$MDPLAN" "$OUT/numpy/cnn64.mdg" --num-clones=1 -o "$P/numpy-cnn.mdp"
"$MDPLAN" "$OUT/numpy/resnet64.mdg" --num-clones=1 -o "$P/numpy-resnet.mdp"
"$MDPLAN" "$ROOT/examples/fashion_mlp.mdg" --num-clones=1 -o "$P/numpy-mlp32.mdp"
"$MDPLAN" "$OUT/numpy/cnn.mdg" --num-clones=1 --batch-per-clone=16 \
  -o "$P/numpy-cnn32.mdp"
"$MDPLAN" "$ROOT/examples/fashion_resnet.mdg" --num-clones=1 \
  --batch-per-clone=8 -o "$P/numpy-resnet32.mdp"
# Labels computed out of range (run-gpu-checks.sh's labels check): the step
# fails naming the label, as on the CPU (test/cuda/computed-label.test).
for m in computed-label late-label; do
  "$MDPLAN" "$ROOT/test/cuda/Inputs/$m.mdg" --no-eval -o "$P/$m.mdp"
done
"$MDPLAN" "$ROOT/test/cuda/Inputs/eval-label.mdg" -o "$P/eval-label.mdp"

# The CPU's losses of the one-GPU plans (the GPU machine recomputes them too).
for m in mlp cnn mlp-mirrored cnn-mirrored resnet cnn64; do
  env CUDA_VISIBLE_DEVICES= "$MDRUN" "$P/$m.mdp" --soft-placement \
    --data="$DATA" --steps=20 --no-shuffle --no-eval --print-losses \
    --log-every=0 > "$OUT/cpu/$m.log"
done
# And with the reference kernels (the losses check's bit-for-bit pairs).
# REF_MODELS narrows them: the dry run (test/cuda/gpu-checks-dry-run.test)
# compares the MLP only, and the CNN's and the ResNet's plain loops take
# seconds a run.
for m in ${REF_MODELS:-mlp mlp-mirrored cnn cnn-mirrored resnet}; do
  env CUDA_VISIBLE_DEVICES= MDRT_CPU_KERNELS=reference "$MDRUN" "$P/$m.mdp" \
    --soft-placement --data="$DATA" --steps=20 --no-shuffle --no-eval \
    --print-losses --log-every=0 > "$OUT/cpu/$m-ref.log"
done
git -C "$ROOT" rev-parse HEAD > "$OUT/commit" 2>/dev/null || true
# run-gpu-checks.sh refuses a carry made from another plan schema.
sha256sum "$ROOT/schema/plan.fbs" | cut -d' ' -f1 > "$OUT/schema.sha256"
du -sh "$OUT"
