#!/usr/bin/env bash
# Mixtures of Experts against transformers, in turns on the same threads (float32):
# 1. the layer's forward and backward at Mixtral's proportions (8 experts, top 2, experts 3.5 x
#    hidden wide): shardwise's part (bench/moe_layer.cpp) against transformers' eager
#    MixtralSparseMoeBlock (bench/moe_peer.py, its loop over the experts), and against a dense
#    gated MLP doing the same products per token in shardwise's kernels;
# 2. a training step of the `mixtral-tiny` preset against transformers' MixtralForCausalLM
#    (bench/llama_peer.py on the config.json `ckpt export` writes), tokens/s the median after the
#    third step.
# Needs build/release and a Python with torch and transformers (PY, default
# build/peer-venv/bin/python). ROUNDS (default 3), THREADS (default 2). Rows in
# bench/results/moe.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/release/bin/shardwise
py=${PY:-build/peer-venv/bin/python}
rounds=${ROUNDS:-3}
threads=${THREADS:-2}
out=bench/results/moe.jsonl
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
layer=${MOE_LAYER:-build/bench/bench/moe_layer}
[ -x "$layer" ] || { cmake --preset bench >/dev/null && cmake --build --preset bench --target moe_layer >/dev/null; }
: > "$out"
flags=$(grep -o -w -E 'avx2|avx512f|avx512_bf16|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), flags: ${flags}${threads} threads"
shape="512 512 1792 8 2 $threads"  # tokens hidden expert_width experts k threads
"$bin" train --model mixtral-tiny --batch 1 --seq 8 --steps 1 --save "$work/mixtral" >/dev/null
"$bin" ckpt export "$work/mixtral" --format hf-mixtral --out "$work/mixtral-hf" >/dev/null
for round in $(seq "$rounds"); do
  ours=$("$layer" $shape)
  theirs=$("$py" bench/moe_peer.py $shape 2>/dev/null)
  train=$("$bin" train --model mixtral-tiny --batch 8 --seq 64 --steps 10 --threads "$threads" \
    --json | python3 -c 'import json,sys,statistics
r=[json.loads(l) for l in sys.stdin]
print(statistics.median([x["tokens_per_s"] for x in r if "step" in x][3:]))')
  peer=$("$py" bench/llama_peer.py --config "$work/mixtral-hf/config.json" --batch 8 --seq 64 \
    --threads "$threads" --steps 8 2>/dev/null |
    python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["tokens_per_s"])')
  python3 - "$ours" "$theirs" "$train" "$peer" <<'PY' | tee -a "$out"
import json, sys
ours, theirs = json.loads(sys.argv[1]), json.loads(sys.argv[2])
train, peer = float(sys.argv[3]), float(sys.argv[4])
print(json.dumps({**ours, "transformers_ms": theirs["transformers_ms"],
                  "layer_speedup": round(theirs["transformers_ms"] / ours["moe_ms"], 3),
                  "train_tokens_per_s": round(train), "transformers_train_tokens_per_s": round(peer),
                  "train_speedup": round(train / peer, 3)}))
PY
done
