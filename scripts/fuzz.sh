#!/usr/bin/env bash
# Builds the fuzz targets with Clang, libFuzzer, ASan and UBSan in
# $BUILD_DIR (default: build-fuzz) and runs one of them (docs/Fuzzing.md).
#
#   scripts/fuzz.sh model|deploy|plan|checkpoint|data [SECONDS] [libFuzzer options...]
#
# The corpus grows in $BUILD_DIR/corpus/TARGET, seeded from the examples,
# the test inputs and (plan) the plans of the examples; inputs that crash are
# written to $BUILD_DIR/crashes/TARGET. Add a crash, once fixed, to
# test/Fuzz/Inputs/TARGET so that the test suite replays it.
set -euo pipefail
cd "$(dirname "$0")/.."

target=${1:-}
case "$target" in
  model|deploy|plan|checkpoint|data) ;;
  *) echo "usage: scripts/fuzz.sh model|deploy|plan|checkpoint|data [SECONDS] [libFuzzer options...]" >&2
     exit 2 ;;
esac
seconds=${2:-60}
# libFuzzer reads -max_total_time with atoi: "1m" would be 1 second and
# "-runs=9" no limit at all.
if ! [[ $seconds =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  echo "fuzz.sh: SECONDS must be a whole number of seconds, got '$seconds'" \
    "(usage: scripts/fuzz.sh TARGET [SECONDS] [libFuzzer options...])" >&2
  exit 2
fi
shift $(( $# < 2 ? $# : 2 ))

export BUILD_DIR=${BUILD_DIR:-build-fuzz}
export CC=${CC:-clang-14} CXX=${CXX:-clang++-14}
MDPLAN_EXTRA_PACKAGES="clang-14 libomp-14-dev ${MDPLAN_EXTRA_PACKAGES:-}" \
  scripts/setup.sh -DMDPLAN_BUILD_FUZZERS=ON -DMDPLAN_BUILD_TESTS=OFF \
    -DMDPLAN_ENABLE_MPI=OFF

corpus=$BUILD_DIR/corpus/$target
crashes=$BUILD_DIR/crashes/$target
mkdir -p "$corpus" "$crashes"
seeds=()
case "$target" in
  model)
    seeds=(examples test/Fuzz/Inputs/model)
    # The test suite's models (lit tests themselves, RUN lines in comments).
    find test -name '*.mdg' | while read -r f; do
      cp "$f" "$corpus/$(echo "${f#test/}" | tr / _)"
    done ;;
  deploy)
    seeds=(test/Fuzz/Inputs/deploy)
    ;;
  plan)
    seeds=(test/Fuzz/Inputs/plan)
    for m in examples/*.mdg; do
      n=$(basename "$m" .mdg)
      "$BUILD_DIR/bin/mdplan" "$m" --clone-on-cpu -o "$corpus/$n.mdp"
      "$BUILD_DIR/bin/mdplan" "$m" --num-clones=2 --strategy=mirrored \
        -o "$corpus/$n-mirrored.mdp"
    done ;;
  checkpoint|data)
    seeds=("test/Fuzz/Inputs/$target") ;;
esac

# The text formats' tokens (fuzz/make_dict.py) for the text targets.
dict=()
if [ "$target" = model ] || [ "$target" = deploy ]; then
  python3 fuzz/make_dict.py "$BUILD_DIR/fuzz.dict"
  dict=(-dict="$BUILD_DIR/fuzz.dict")
fi

echo "== fuzzing $target for $seconds s (corpus: $corpus, crashes: $crashes)"
# Leaks are not what this looks for (a failed compilation may keep what an
# llvm::Error owns until exit); allocation limits keep large graphs from
# exhausting the machine.
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:allocator_may_return_null=1} \
  "$BUILD_DIR/bin/mdplan-$target-fuzzer" "$corpus" "${seeds[@]}" \
  -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 \
  -artifact_prefix="$crashes/" -print_final_stats=1 "${dict[@]}" "$@"
