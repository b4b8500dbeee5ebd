#!/usr/bin/env bash
# sgemm GFLOP/s of the GPT's own matrix shapes on every BLAS that installs here: Debian's
# OpenBLAS (pthread and OpenMP builds; its run-time kernel choice printed), BLIS, oneDNN and
# MKL (mkl_rt from PyPI in build/peer-venv). Install them with
#   apt-get install libblis-dev libdnnl-dev libopenblas-openmp-dev; build/peer-venv/bin/pip install mkl
# Libraries that are absent are skipped. Rows go to bench/results/blas.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
bin=build/sgemm_libraries
# One file and libdl: built here, so that it needs neither the bench build nor any BLAS to link.
g++ -O2 -std=c++20 -Wall -Wextra bench/sgemm_libraries.cpp -ldl -o "$bin" || exit 1
lib=/usr/lib/x86_64-linux-gnu
out=bench/results/blas.txt
: > "$out"
python3 - <<'PY' | tee -a "$out"
import ctypes
for path in ("/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0",):
    try:
        core = ctypes.CDLL(path).openblas_get_corename
        core.restype = ctypes.c_char_p
        print(f"OpenBLAS kernel chosen at run time: {core().decode()}")
    except OSError:
        pass
PY
for preset in tiny small; do
  for threads in 1 2; do
    for path in "$lib/openblas-pthread/libopenblas.so.0" "$lib/openblas-openmp/libopenblas.so.0" \
                "$lib/libblis.so.4" "$lib/blis-openmp/libblis.so.4" "$lib/libdnnl.so.2" \
                "$(ls build/peer-venv/lib/libmkl_rt.so.* 2>/dev/null | head -1)"; do
      [ -n "$path" ] && [ -e "$path" ] || continue
      OMP_NUM_THREADS=$threads MKL_NUM_THREADS=$threads "$bin" "$path" "$threads" "$preset" | tee -a "$out"
    done
  done
done
