#!/usr/bin/env bash
# README command 2 (and CI): install what is missing, build with warnings as errors, run
# every test. Pass a preset name (debug-asan, tsan) to test a sanitizer build instead.
set -euo pipefail
cd "$(dirname "$0")/.."

preset="${1:-release}"
scripts/install_deps.sh
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"
ctest --preset "$preset"
