#!/usr/bin/env bash
# The Llama family's training step against transformers' LlamaForCausalLM (bench/llama_peer.py:
# sdpa attention, the same shape, batch, context and threads, fp32, AdamW), eager and under
# torch.compile, taken in turns: tokens/s, and the activations one sequence keeps for backward
# (shardwise's with and without --recompute full). Shapes: llama-tiny at its context, and
# SmolLM2-135M's (smollm2-135m) at context 512. Needs build/release and a Python with torch and
# transformers (PY, default build/peer-venv/bin/python; scripts/install_bench_peers.sh). Prints a
# markdown table; rows in bench/results/llama.jsonl. ROUNDS (default 3) rounds per shape.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/release/bin/shardwise
py=${PY:-build/peer-venv/bin/python}
out=bench/results/llama.jsonl
rounds=${ROUNDS:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
: > "$out"
ours() {  # model, batch, seq, extra flags: median tokens/s after the third step, activations/seq
  "$bin" train --model "$1" --batch "$2" --seq "$3" --steps "${STEPS:-10}" --threads 2 --json "${@:4}" |
    python3 -c 'import json,sys,statistics
r=[json.loads(l) for l in sys.stdin]
s=[x["tokens_per_s"] for x in r if "step" in x][3:]
print(statistics.median(s), r[-1]["summary"]["ranks"][0]["activations_peak_bytes"] // int(sys.argv[1]))' "$2"
}
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), 2 threads"
echo
echo "| model | batch x seq | shardwise tok/s | transformers eager | torch.compile | / eager | / compile | activations per sequence: shardwise / eager / eager's share (full recompute) |"
echo "|---|---|---|---|---|---|---|---|"
for config in "llama-tiny 8 64" "smollm2-135m 4 512"; do
  set -- $config
  # The peer's config.json: the model's own, as `ckpt export` writes it.
  "$bin" train --model "$1" --batch 1 --seq 8 --steps 1 --save "$work/$1" >/dev/null
  "$bin" ckpt export "$work/$1" --format hf-llama --out "$work/$1-hf" >/dev/null
  for round in $(seq "$rounds"); do
    read -r tokens activations < <(ours "$1" "$2" "$3")
    read -r _ recomputed < <(STEPS=4 ours "$1" "$2" "$3" --recompute full)
    eager=$("$py" bench/llama_peer.py --config "$work/$1-hf/config.json" --batch "$2" --seq "$3" \
              --threads 2 2>/dev/null)
    compiled=$("$py" bench/llama_peer.py --config "$work/$1-hf/config.json" --batch "$2" \
                 --seq "$3" --threads 2 --compile 2>/dev/null)
    echo "{\"model\": \"$1\", \"batch\": $2, \"seq\": $3, \"round\": $round, \"shardwise\": $tokens, \"shardwise_activations_per_sequence\": $activations, \"shardwise_full_recompute_activations_per_sequence\": $recomputed, \"eager\": $eager, \"compiled\": $compiled}" >> "$out"
  done
  python3 - "$out" "$1" "$2" "$3" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["model"] == sys.argv[2]]
median = lambda values: statistics.median(values)
ours = median([r["shardwise"] for r in rows])
eager = median([r["eager"]["tokens_per_s"] for r in rows])
compiled = median([r["compiled"]["tokens_per_s"] for r in rows])
acts = rows[0]["shardwise_activations_per_sequence"]
full = rows[0]["shardwise_full_recompute_activations_per_sequence"]
theirs = rows[0]["eager"]["activation_bytes_per_sequence"]
print(f"| {sys.argv[2]} | {sys.argv[3]} x {sys.argv[4]} | {ours:.0f} | {eager:.0f} | {compiled:.0f} "
      f"| {ours / eager:.2f} | {ours / compiled:.2f} | {acts / 2**20:.2f} MiB / {theirs / 2**20:.2f} MiB "
      f"= {acts / theirs:.2f} ({full / 2**20:.2f} MiB = {full / theirs:.2f}) |")
PY
done
