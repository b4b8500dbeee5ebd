#!/usr/bin/env bash
# Decoding at batch 1 in bf16 against float32, ours both: the same Hugging Face folder (random
# weights, exported by `ckpt export`), prompt of 16 tokens, greedy, NEW tokens (default 64), 2
# threads, the key/value cache; `generate --precision bf16` and `--precision fp32` in turns, each
# after a warm-up run. decode tok/s: the tokens after the first over the time after the prompt's
# forward. Prints a markdown table; rows in bench/results/bf16_decode.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/release/bin/shardwise
out=bench/results/bf16_decode.jsonl
rounds=${ROUNDS:-3}
new=${NEW:-64}
prompt=464,2068,7586,21831,18045,625,262,16931,3290,13,383,2068,7586,21831,318,257
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
: > "$out"
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), 2 threads;" \
  "bf16 flags: $(grep -m1 -o -w -E 'avx512_bf16|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo
echo "| model | fp32 decode tok/s | bf16 decode tok/s | bf16 / fp32 | same ids |"
echo "|---|---|---|---|---|"
for config in "gpt2 hf-gpt2 examples/models/gpt2.json" "smollm2-135m hf-llama smollm2-135m"; do
  set -- $config
  "$bin" train --model "$3" --batch 1 --seq 8 --steps 1 --save "$work/$1" >/dev/null
  "$bin" ckpt export "$work/$1" --format "$2" --out "$work/$1-hf" >/dev/null
  folder="$work/$1-hf"
  for round in $(seq "$rounds"); do
    for precision in fp32 bf16; do
      run() {
        "$bin" generate "$folder" --prompt-ids "$prompt" --max-new-tokens "$new" \
          --stop-ids none --threads 2 --precision "$precision" --json
      }
      run >/dev/null  # warm-up: the page cache, the primitives
      echo "{\"model\": \"$1\", \"round\": $round, \"precision\": \"$precision\", \"run\": $(run)}" >> "$out"
    done
  done
  python3 - "$out" "$1" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["model"] == sys.argv[2]]
def decode(p):
    return statistics.median([r["run"]["decode_tokens_per_second"] for r in rows if r["precision"] == p])
ids = {r["precision"]: r["run"]["ids"] for r in rows}
f, b = decode("fp32"), decode("bf16")
print(f"| {sys.argv[2]} | {f:.1f} | {b:.1f} | {b / f:.2f} | {'yes' if ids['fp32'] == ids['bf16'] else 'no'} |")
PY
done
