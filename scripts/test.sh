#!/usr/bin/env bash
# README command 2 (and CI): install what is missing (Debian packages; the Python package's test
# environment, build/python-venv), build with warnings as errors, run every test (the Python
# package's `pip install .` and pytest suite among them). Pass a preset name (debug-asan, tsan)
# to test a sanitizer build instead.
set -euo pipefail
cd "$(dirname "$0")/.."

preset="${1:-release}"
# The comparisons with JAX, tokenizers, PyTorch and transformers run here, never skipped: the
# environment below holds them, and a test that finds one missing fails.
export SHARDWISE_REQUIRE_COMPARISONS=1
scripts/install_deps.sh
scripts/install_python_env.sh
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"
ctest --preset "$preset"
