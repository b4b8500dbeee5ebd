#!/usr/bin/env bash
# Checkpoint throughput and how long a save holds up training (docs/benchmarks.md).
#   bench/compare_checkpoint.sh [FOLDER]   (default: build/checkpoint_bench, on the disk to test)
# 1. bench/checkpoint_benchmark.cpp: save and load of 512 MB on 2 in-process ranks against one
#    thread's plain sequential write and read of the same bytes, caches dropped before reads.
# 2. `shardwise train --model small` saving every 4 steps, synchronously and with --save-async:
#    the seconds the step that saves waits (the whole save, or the copy to memory), and with
#    --save-async what a later step waits when it commits (the last save's commit waits for its
#    whole write: training has ended).
# Rows go to bench/results/checkpoint.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
folder="${1:-build/checkpoint_bench}"
out=bench/results/checkpoint.jsonl
mkdir -p "$folder" bench/results
g++ -O2 -std=c++20 -Iinclude bench/checkpoint_benchmark.cpp build/release/src/libshardwise.a \
  -lre2 -ldnnl -lgomp -lpthread -o build/checkpoint_benchmark
build/checkpoint_benchmark "$folder" 512 2 5 | tee "$out"
bin=build/release/bin/shardwise
for mode in sync async; do
  flags=()
  if [ "$mode" = async ]; then flags=(--save-async); fi
  rm -rf "$folder/train"
  "$bin" train --model small --batch 8 --seq 128 --steps 12 --threads 1 --mesh fsdp=2 --zero 3 \
    --save "$folder/train" --save-every 4 "${flags[@]}" |
    python3 -c '
import re, sys, json, statistics
mode = sys.argv[1]
steps, waits, commits = [], [], []
for line in sys.stdin:
    m = re.search(r"step +(\d+)/\d+ .* ([0-9]+) tok/s", line)
    if m: steps.append(int(m.group(2)))
    m = re.search(r"saved .*\([0-9.]+ MB, ([0-9.]+) s\)", line)
    if m: waits.append(float(m.group(1)))
    m = re.search(r"waited ([0-9.]+) s for the copy, a later one ([0-9.]+) s", line)
    if m:
        waits.append(float(m.group(1)))
        commits.append(float(m.group(2)))
step_s = 8 * 128 / statistics.median(steps)
print(json.dumps({"mode": mode, "median_step_s": round(step_s, 4), "save_waits_s": waits,
                  "commit_waits_s": commits}))
' "$mode" | tee -a "$out"
done
rm -rf "$folder"
