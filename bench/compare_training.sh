#!/usr/bin/env bash
# Training step throughput of `shardwise train` against the PyTorch eager peer
# (bench/torch_gpt_peer.py, same model, batch, context and threads), taken in turns, and data
# parallel scaling on this machine. Needs build/release and build/peer-venv
# (scripts/install_bench_peers.sh). Prints a markdown table; rows in bench/results/train.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/release/bin/shardwise
py=build/peer-venv/bin/python
out=bench/results/train.jsonl
: > "$out"
median_tokens() {  # the median tokens/s of the steps after the third
  python3 -c 'import json,sys,statistics; r=[json.loads(l) for l in sys.stdin]; s=[x["tokens_per_s"] for x in r if "step" in x][3:]; print(statistics.median(s))'
}
echo "| model | batch | threads | shardwise tok/s | PyTorch eager tok/s | shardwise / PyTorch |"
echo "|---|---|---|---|---|---|"
for config in "tiny 12" "small 16"; do
  set -- $config
  for round in 1 2 3; do
    ours=$("$bin" train --model "$1" --batch "$2" --steps 10 --threads 2 --json | median_tokens)
    theirs=$("$py" bench/torch_gpt_peer.py --model "$1" --batch "$2" --threads 2 --steps 10 2>/dev/null |
             python3 -c 'import json,sys; print(json.load(sys.stdin)["tokens_per_s"])')
    echo "{\"model\": \"$1\", \"batch\": $2, \"round\": $round, \"shardwise\": $ours, \"pytorch\": $theirs}" >> "$out"
  done
  python3 - "$out" "$1" "$2" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["model"] == sys.argv[2]]
ours = statistics.median(r["shardwise"] for r in rows)
theirs = statistics.median(r["pytorch"] for r in rows)
print(f"| {sys.argv[2]} | {sys.argv[3]} | 2 | {ours:.0f} | {theirs:.0f} | {ours / theirs:.2f} |")
PY
done
# Data parallel on 2 ranks of one thread each against one rank of two threads.
one=$("$bin" train --model tiny --batch 12 --steps 10 --threads 2 --json | median_tokens)
two=$("$bin" train --model tiny --batch 12 --steps 10 --mesh data=2 --threads 1 --json | median_tokens)
python3 -c "print(f'\ntiny, batch 12: data=2 (1 thread each) {float(\"$two\"):.0f} tok/s, one rank with 2 threads {float(\"$one\"):.0f} tok/s: ratio {float(\"$two\") / float(\"$one\"):.2f}')"
