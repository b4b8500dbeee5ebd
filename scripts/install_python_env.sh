#!/usr/bin/env bash
# Makes the virtual environment the Python package's tests run in (build/python-venv): what
# `pip install .` builds with (scikit-build-core, nanobind) and what its tests use (pytest,
# NumPy, JAX and Flax on the CPU); the JAX layout conformance and tokenizer comparisons run in it
# too (the tokenizers library). Idempotent: where the environment already holds this list it
# changes nothing. PyTorch is left out (over 1 GB from PyPI); the DTensor tests run where it is
# installed in the environment and are skipped otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=build/python-venv
requirements=(
  "scikit-build-core>=0.10" "nanobind>=2.4" "pytest>=7" "numpy>=1.24" "jax[cpu]>=0.4.36"
  "flax>=0.10" "tokenizers>=0.20"
)
stamp="$venv/.shardwise-requirements"
wanted="${requirements[*]}"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ] && [ -x "$venv/bin/python" ]; then
  exit 0
fi

mkdir -p build
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
# PyPI may drop a connection; a second and third try cost nothing when the first succeeds.
for attempt in 1 2 3; do
  if "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
       "${requirements[@]}"; then
    echo "$wanted" >"$stamp"
    exit 0
  fi
  echo "pip install failed (attempt $attempt of 3)" >&2
  sleep $((attempt * 10))
done
exit 1
