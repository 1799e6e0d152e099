#!/usr/bin/env bash
# Builds mdplan, mdrun and the test suite with Clang and sanitizers in
# $BUILD_DIR, then runs the whole suite there (docs/Fuzzing.md,
# "Sanitizer builds").
#
#   scripts/sanitize.sh [address|thread]
#
#   address  ASan, UBSan and LeakSanitizer (default; BUILD_DIR
#            build-asan), except for the processes mpirun starts (lit's
#            %mpirun): Open MPI's own allocations outlive MPI_Finalize.
#   thread   TSan (BUILD_DIR build-tsan): the unit tests and the lit
#            suite (the executor's device threads, the collective queue,
#            the data pipeline, mdrun under mpirun). OpenMP, OpenBLAS,
#            oneDNN and Open MPI are not instrumented: their own accesses
#            and locks are ignored (ignore_noninstrumented_modules), and
#            LLVM's OpenMP tool Archer, when installed, tells TSan about
#            OpenMP's synchronisation.
#
# CUDA is left out (nvcc does not take the flags). Extra arguments go to
# ctest, e.g. `scripts/sanitize.sh address -R Executor`.
set -euo pipefail
cd "$(dirname "$0")/.."

kind=${1:-address}
shift $(( $# < 1 ? $# : 1 ))
case "$kind" in
  address) sanitizers="Address;Undefined"; dir=build-asan ;;
  thread) sanitizers="Thread"; dir=build-tsan ;;
  *) echo "usage: scripts/sanitize.sh [address|thread] [ctest options...]" >&2
     exit 2 ;;
esac

export BUILD_DIR=${BUILD_DIR:-$dir}
export CC=${CC:-clang-14} CXX=${CXX:-clang++-14}
MDPLAN_EXTRA_PACKAGES="clang-14 libomp-14-dev ${MDPLAN_EXTRA_PACKAGES:-}" \
  scripts/setup.sh "-DMDPLAN_USE_SANITIZER=$sanitizers"

jobs=${JOBS:-$(nproc)}
# The verifier tests ask for more memory than any machine has, on
# purpose: the allocator must return null, not abort.
asan="allocator_may_return_null=1:abort_on_error=0"
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:ignore_noninstrumented_modules=1:allocator_may_return_null=1}
status=0
if [ "$kind" = address ]; then
  echo "== unit tests and lit suite (ASan, UBSan, LeakSanitizer)"
  ASAN_OPTIONS=${ASAN_OPTIONS:-$asan:detect_leaks=1} \
    ctest --test-dir "$BUILD_DIR" -j "$jobs" --output-on-failure "$@" ||
    status=1
else
  archer=/usr/lib/llvm-14/lib/libarcher.so
  if [ -z "${OMP_TOOL_LIBRARIES:-}" ] && [ -f "$archer" ]; then
    export OMP_TOOL_LIBRARIES=$archer
  fi
  echo "== unit tests and lit suite (TSan)"
  ctest --test-dir "$BUILD_DIR" -j "$jobs" --output-on-failure "$@" ||
    status=1
fi
exit $status
