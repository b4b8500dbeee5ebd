#!/usr/bin/env bash
# Runs the communication and resharding benchmarks with their baselines and writes JSON lines
# under bench/results/, then prints the tables docs/benchmarks.md shows (bench/report.py).
# Usage: bench/run_benchmarks.sh [sizes] (default 4K,64K,1M,16M,64M)
set -euo pipefail
cd "$(dirname "$0")/.."
sizes="${1:-4K,64K,1M,16M,64M}"
bin=build/release/bin/shardwise
out=bench/results
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

"$bin" bench comm --ranks 2,4 --sizes "$sizes" --json > "$out/comm_local.jsonl"
: > "$out/comm_mpi.jsonl"
for ranks in 2 4; do
  mpirun -np "$ranks" --oversubscribe "$bin" bench comm --sizes "$sizes" --json >> "$out/comm_mpi.jsonl"
done
"$bin" bench runtime --ranks 8 --json > "$out/runtime_local.jsonl"
"$bin" bench runtime --ranks 2 --json >> "$out/runtime_local.jsonl"
mpirun -np 8 --oversubscribe "$bin" bench runtime --json > "$out/runtime_mpi.jsonl"
mpirun -np 2 --oversubscribe "$bin" bench runtime --json >> "$out/runtime_mpi.jsonl"
"$bin" bench reshard --ranks 8 --bytes 64M --json > "$out/reshard_local.jsonl"
mpirun -np 8 --oversubscribe "$bin" bench reshard --bytes 64M --json > "$out/reshard_mpi.jsonl"
# The DTensor peer, where scripts/install_bench_peers.sh has set it up.
if [ -x build/peer-venv/bin/python ]; then
  build/peer-venv/bin/python bench/dtensor_peer.py --ranks 8 --bytes 64M \
    > "$out/reshard_dtensor.jsonl" 2> /dev/null
  python3 bench/compare_dtensor.py --dtensor "$out/reshard_dtensor.jsonl" \
    --shardwise "$out/reshard_local.jsonl" "$out/reshard_mpi.jsonl" > "$out/dtensor_comparison.md"
fi
{ lscpu | grep -E "Model name|^CPU\(s\)|L3"; free -g | head -2; } > "$out/machine.txt"
python3 bench/report.py "$out"
