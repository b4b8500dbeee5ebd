#!/usr/bin/env bash
# Decoding at batch 1 against transformers' generate() (bench/generate_peer.py): the same
# Hugging Face folder (random weights, exported by `ckpt export`), prompt, greedy, fp32, 2
# threads, NEW tokens (default 64) after a prompt of 16, with the key/value cache both sides.
# tokens/s counts the whole continuation (prompt included); decode tokens/s the tokens after the
# first, over the time after the prompt's forward. Models: GPT-2 (124M, Hugging Face's config of
# 50257 tokens, examples/models/gpt2.json) and SmolLM2-135M (49152 tokens). Needs
# build/release and a Python with torch and transformers (PY, default build/peer-venv/bin/python;
# scripts/install_bench_peers.sh). Prints a markdown table; rows in bench/results/generate.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/release/bin/shardwise
py=${PY:-build/peer-venv/bin/python}
out=bench/results/generate.jsonl
rounds=${ROUNDS:-3}
new=${NEW:-64}
prompt=464,2068,7586,21831,18045,625,262,16931,3290,13,383,2068,7586,21831,318,257
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
: > "$out"
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), 2 threads"
echo
echo "| model | shardwise tok/s | transformers tok/s | ratio | shardwise decode tok/s | transformers decode tok/s | ratio | same ids |"
echo "|---|---|---|---|---|---|---|---|"
for config in "gpt2 hf-gpt2 examples/models/gpt2.json" "smollm2-135m hf-llama smollm2-135m"; do
  set -- $config
  "$bin" train --model "$3" --batch 1 --seq 8 --steps 1 --save "$work/$1" >/dev/null
  "$bin" ckpt export "$work/$1" --format "$2" --out "$work/$1-hf" >/dev/null
  for round in $(seq "$rounds"); do
    "$bin" generate "$work/$1-hf" --prompt-ids "$prompt" --max-new-tokens "$new" \
      --stop-ids none --threads 2 --json >/dev/null  # warm-up: the page cache, the BLAS
    ours=$("$bin" generate "$work/$1-hf" --prompt-ids "$prompt" --max-new-tokens "$new" \
             --stop-ids none --threads 2 --json)
    theirs=$("$py" bench/generate_peer.py --folder "$work/$1-hf" --prompt-ids "$prompt" \
               --new "$new" --threads 2 2>/dev/null)
    echo "{\"model\": \"$1\", \"round\": $round, \"shardwise\": $ours, \"transformers\": $theirs}" >> "$out"
  done
  python3 - "$out" "$1" "$new" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["model"] == sys.argv[2]]
new = int(sys.argv[3])
median = statistics.median
ours = median([new / (r["shardwise"]["prefill_seconds"] + r["shardwise"]["decode_seconds"]) for r in rows])
ours_decode = median([r["shardwise"]["decode_tokens_per_second"] for r in rows])
theirs = median([r["transformers"]["tokens_per_s"] for r in rows])
theirs_decode = median([r["transformers"]["decode_tokens_per_s"] for r in rows])
same = all(r["shardwise"]["ids"] == r["transformers"]["ids"] for r in rows)
print(f"| {sys.argv[2]} | {ours:.1f} | {theirs:.1f} | {ours / theirs:.2f} | {ours_decode:.1f} "
      f"| {theirs_decode:.1f} | {ours_decode / theirs_decode:.2f} | {'yes' if same else 'no'} |")
PY
done
