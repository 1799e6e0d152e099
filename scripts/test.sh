#!/usr/bin/env bash
# Sets up (packages, build) and runs the whole test suite: the GoogleTest
# binaries and the lit suite, through ctest.
#
#   scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
echo "== running the tests"
ctest --test-dir "$BUILD_DIR" -j "${JOBS:-$(nproc)}" --output-on-failure
