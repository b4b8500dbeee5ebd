#!/usr/bin/env bash
# How much of the communication the overlap hides, for data parallel (data=2, all-reduce of
# each block's gradients during backward) and ZeRO-3 (fsdp=2, units gathered ahead and
# reduce-scattered during backward), on in-process ranks of one thread each. Per layout the
# median step time of three runs of:
#   overlapped    shardwise train as it runs
#   serial        --no-overlap: gradients reduced after backward, every unit gathered when used
#   compute       one rank with one rank's share of the batch, one thread: no communication
# hidden = (serial - overlapped) / (serial - compute): the share of the exposed communication
# time that overlapping removes. Rows go to bench/results/overlap.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/release/bin/shardwise
out=bench/results/overlap.jsonl
: > "$out"
step_seconds() {  # the median seconds per step of the steps after the second
  python3 -c 'import json,sys,statistics; r=[json.loads(l) for l in sys.stdin]; s=[x for x in r if "step" in x][2:]; print(statistics.median(x["tokens_per_s"] for x in s))' |
    python3 -c "import sys; print($1 / float(sys.stdin.read()))"
}
echo "| model | layout | overlapped s/step | serial s/step | compute s/step | hidden |"
echo "|---|---|---|---|---|---|"
for config in "tiny 12 64 12" "small 16 256 6"; do
  set -- $config
  model=$1 batch=$2 seq=$3 steps=$4
  tokens=$((batch * seq))
  for layout in "data=2 0" "fsdp=2 3"; do
    set -- $layout
    rows=()
    for round in 1 2 3; do
      over=$("$bin" train --model "$model" --batch "$batch" --steps "$steps" --threads 1 --mesh "$1" --zero "$2" --json | step_seconds "$tokens")
      serial=$("$bin" train --model "$model" --batch "$batch" --steps "$steps" --threads 1 --mesh "$1" --zero "$2" --no-overlap --json | step_seconds "$tokens")
      compute=$("$bin" train --model "$model" --batch $((batch / 2)) --steps "$steps" --threads 1 --json | step_seconds $((tokens / 2)))
      echo "{\"model\": \"$model\", \"mesh\": \"$1\", \"zero\": $2, \"round\": $round, \"overlapped\": $over, \"serial\": $serial, \"compute\": $compute}" >> "$out"
    done
    python3 - "$out" "$model" "$1" "$2" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rows = [r for r in rows if r["model"] == sys.argv[2] and r["mesh"] == sys.argv[3]]
over, serial, compute = (statistics.median(r[k] for r in rows) for k in ("overlapped", "serial", "compute"))
exposed = serial - compute
hidden = (serial - over) / exposed if exposed > 0 else float("nan")
print(f"| {sys.argv[2]} | {sys.argv[3]}, ZeRO {sys.argv[4]} | {over:.4f} | {serial:.4f} | {compute:.4f} | {hidden:.0%} |")
PY
  done
done
