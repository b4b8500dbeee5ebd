#!/usr/bin/env bash
# Makes the virtual environment the Python tests run in: what `pip install .` builds with
# (scikit-build-core, nanobind), what the package's tests use (pytest, NumPy, JAX and Flax on the
# CPU), and the peers the comparisons check shardwise against: the tokenizers library, and
# PyTorch with transformers (Hugging Face models in and out, losses, greedy generation, configs,
# chat templates). PyPI's PyTorch wheel brings the CUDA runtime's wheels (several GB), so the
# environment lives outside the clone, in a cache folder ($SHARDWISE_CACHE_DIR, default
# ~/.cache/shardwise), and build/python-venv links to it: a second clone, or a second run,
# downloads nothing. Idempotent: where the environment already holds this list it changes
# nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

cache="${SHARDWISE_CACHE_DIR:-$HOME/.cache/shardwise}"
venv="$cache/test-venv"
requirements=(
  "scikit-build-core>=0.10" "nanobind>=2.4" "pytest>=7" "numpy>=1.24" "jax[cpu]>=0.4.36"
  "flax>=0.10" "tokenizers>=0.20" "torch>=2.4" "transformers>=4.46" "safetensors>=0.4"
  "jinja2>=3.1"
)
stamp="$venv/.shardwise-requirements"
wanted="${requirements[*]}"

mkdir -p build "$cache"
link_build_venv() {
  if [ -L build/python-venv ] || [ ! -e build/python-venv ]; then
    ln -sfn "$venv" build/python-venv
  else
    echo "build/python-venv is a folder of an older layout; replacing it with a link to $venv"
    rm -rf build/python-venv
    ln -s "$venv" build/python-venv
  fi
}

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ] && [ -x "$venv/bin/python" ]; then
  link_build_venv
  exit 0
fi

# A half-made environment (an interrupted run) has no usable pip: start over.
if [ -d "$venv" ] && ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
  rm -rf "$venv"
fi
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
# PyPI may drop a connection; a second and third try cost nothing when the first succeeds.
# --no-cache-dir: the wheels are not kept a second time in pip's own cache.
for attempt in 1 2 3; do
  if "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir \
       "${requirements[@]}"; then
    echo "$wanted" >"$stamp"
    link_build_venv
    exit 0
  fi
  echo "pip install failed (attempt $attempt of 3)" >&2
  sleep $((attempt * 10))
done
exit 1
