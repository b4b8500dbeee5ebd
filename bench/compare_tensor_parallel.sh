#!/usr/bin/env bash
# Tensor parallelism on this machine, and its traffic against the closed form:
#  1. small (batch 16): one rank with two threads against model=2 with one thread per rank,
#     with and without sequence parallelism, five rounds taken in turns (median, range);
#  2. tiny (batch 8): the bytes each rank sends along `model` per step, measured by
#     `shardwise train --json`, against the closed form of docs/training.md computed here
#     independently of the planner.
# Needs build/release. Prints markdown; rows in bench/results/tensor_parallel.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/release/bin/shardwise
out=bench/results/tensor_parallel.jsonl
: > "$out"
median_tokens() {  # the median tokens/s of the steps after the third
  python3 -c 'import json,sys,statistics; r=[json.loads(l) for l in sys.stdin]; s=[x["tokens_per_s"] for x in r if "step" in x][3:]; print(statistics.median(s))'
}
for round in 1 2 3 4 5; do
  one=$("$bin" train --model small --batch 16 --steps 10 --threads 2 --json | median_tokens)
  tp=$("$bin" train --model small --batch 16 --steps 10 --mesh model=2 --threads 1 --json | median_tokens)
  sp=$("$bin" train --model small --batch 16 --steps 10 --mesh model=2 --threads 1 \
       --sequence-parallel --json | median_tokens)
  echo "{\"round\": $round, \"one_rank_2_threads\": $one, \"model2\": $tp, \"model2_sp\": $sp}" >> "$out"
done
python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
one = [r["one_rank_2_threads"] for r in rows]
print("| small, batch 16 | tok/s median (range) | against one rank |")
print("|---|---|---|")
base = statistics.median(one)
for key, name in [("one_rank_2_threads", "one rank, 2 threads"), ("model2", "model=2, 1 thread each"),
                  ("model2_sp", "model=2 + sequence parallel, 1 thread each")]:
    v = [r[key] for r in rows]
    print(f"| {name} | {statistics.median(v):.0f} ({min(v):.0f}-{max(v):.0f}) | "
          f"{statistics.median(v) / base:.2f} |")
PY
echo
echo "| tiny, batch 8 | bytes along model per step, measured | closed form | equal |"
echo "|---|---|---|---|"
for layout in "model=2" "model=4" "data=2,model=2" "fsdp=2,model=2 --zero 3" \
              "model=2 --sequence-parallel" "model=4 --sequence-parallel" \
              "data=2,fsdp=2,model=2 --zero 3 --sequence-parallel"; do
  measured=$("$bin" train --model tiny --batch 8 --steps 2 --mesh $layout --json | tail -1)
  python3 - "$layout" "$measured" "$out" <<'PY'
import json, sys
layout, summary, out = sys.argv[1], json.loads(sys.argv[2])["summary"], sys.argv[3]
axes = dict(a.split("=") for a in layout.split()[0].split(","))
t = int(axes["model"]); dp = int(axes.get("data", 1)) * int(axes.get("fsdp", 1))
sp = "--sequence-parallel" in layout
L, h, s, b = 4, 128, 64, 8 // dp
def all_reduce(n, element=4):  # what one rank sends: 2 (n - floor(n / t)) elements
    return 2 * (n - n // t) * element
def gather(chunk):              # an all-gather or reduce-scatter: t - 1 chunks
    return (t - 1) * chunk * 4
if not sp:
    expected = (4 * L + 2) * all_reduce(b * s * h)
else:
    expected = 2 * (4 * L + 2) * gather(b * s * h // t)
    expected += (2 * L + 1) * all_reduce(2 * h) + all_reduce(s * h)
expected += all_reduce(b * s) + all_reduce(2 * b * s) + all_reduce(1, 8)
measured = summary["comm_bytes_per_step"]["model"]
open(out, "a").write(json.dumps({"layout": layout, "measured": measured, "closed_form": expected}) + "\n")
print(f"| {layout} | {measured:,} | {expected:,} | {'yes' if measured == expected else 'NO'} |")
PY
done
