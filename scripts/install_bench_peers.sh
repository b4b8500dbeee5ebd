#!/usr/bin/env bash
# Sets up build/peer-venv with torch, transformers and numpy for the peer benchmarks
# (bench/dtensor_peer.py, bench/torch_gpt_peer.py, bench/llama_peer.py), and Intel MKL's
# libmkl_rt for `shardwise train --blas mkl`.
# Benchmarks only: no CI step depends on it (the tests of MKL's products run where it is).
# Idempotent: rerunning keeps the venv and only lets pip fill in what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=build/peer-venv

# A half-created venv (interrupted run, missing ensurepip) has no usable pip; start over.
if [ -d "$venv" ] && ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
  rm -rf "$venv"
fi

if [ ! -d "$venv" ]; then
  mkdir -p build
  if ! python3 -m venv "$venv"; then
    # Debian's python3 ships venv/ensurepip in a separate package.
    rm -rf "$venv"
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then
      sudo="sudo"
    fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3-venv
    python3 -m venv "$venv"
  fi
fi

# Plain PyPI only. On Linux x86_64 the default torch wheel depends on the CUDA runtime
# wheels (nvidia-*, several GB); torch's CPU-only wheels live on a separate index that is
# not used here. The peer never touches a GPU: it runs gloo on CPU processes.
# --no-cache-dir: keep the multi-GB wheels from being stored a second time in ~/.cache.
"$venv/bin/python" -m pip install --no-cache-dir --quiet --upgrade pip
# mkl: Intel MKL's runtime library (libmkl_rt in $venv/lib), which `shardwise train --blas mkl:PATH`
# loads; bench/compare_training.sh runs shardwise on it beside PyTorch, whose wheels carry MKL.
# transformers: the Llama peer (bench/llama_peer.py) and, run with this venv's python, the
# interop tests' LlamaForCausalLM and GPT2LMHeadModel.
"$venv/bin/python" -m pip install --no-cache-dir torch numpy mkl transformers safetensors

"$venv/bin/python" - <<'PY'
import numpy, torch, transformers, torch.distributed as dist
from torch.distributed.tensor import distribute_tensor  # DTensor must be public API
assert dist.is_available(), "torch.distributed is not available in this build"
assert dist.is_gloo_available(), "gloo backend is not available in this build"
print(f"peer venv ok: torch {torch.__version__}, transformers {transformers.__version__}, "
      f"numpy {numpy.__version__}, gloo available")
PY
