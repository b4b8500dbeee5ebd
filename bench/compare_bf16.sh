#!/usr/bin/env bash
# bf16 mixed precision's training step against shardwise's float32 step and PyTorch's CPU
# autocast(dtype=torch.bfloat16), eager and under torch.compile, on the same model, batch,
# context and threads, taken in turns: tokens/s (the median after the third step) and the
# activations one sequence keeps. GPT shapes: `small` and `gpt2` (bench/torch_gpt_peer.py);
# Llama: `smollm2-135m` at context 512 (bench/llama_peer.py, the config.json `ckpt export`
# writes). Needs build/release and a Python with torch and transformers (PY, default
# build/peer-venv/bin/python; scripts/install_bench_peers.sh). Prints a markdown table; rows in
# bench/results/bf16.jsonl. ROUNDS (default 2) rounds per shape.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/release/bin/shardwise
py=${PY:-build/peer-venv/bin/python}
out=bench/results/bf16.jsonl
rounds=${ROUNDS:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
: > "$out"
ours() {  # model, batch, seq, precision: median tokens/s after the third step, activations/seq
  "$bin" train --model "$1" --batch "$2" --seq "$3" --steps "${STEPS:-8}" --threads 2 --json \
    --precision "$4" |
    python3 -c 'import json,sys,statistics
r=[json.loads(l) for l in sys.stdin]
s=[x["tokens_per_s"] for x in r if "step" in x][3:]
print(statistics.median(s), r[-1]["summary"]["ranks"][0]["activations_peak_bytes"] // int(sys.argv[1]))' "$2"
}
peer() {  # model, batch, seq, extra peer flags: tokens/s
  case "$1" in
    smollm2-135m) "$py" bench/llama_peer.py --config "$work/$1-hf/config.json" --batch "$2" \
                    --seq "$3" --threads 2 --steps 6 "${@:4}" 2>/dev/null ;;
    *) "$py" bench/torch_gpt_peer.py --model "$1" --batch "$2" --threads 2 --steps 6 \
         "${@:4}" 2>/dev/null ;;
  esac | python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["tokens_per_s"])'
}
flags=$(grep -o -w -E 'avx512_bf16|amx_bf16|avx512f' /proc/cpuinfo | sort -u | tr '\n' ' ')
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), flags: ${flags}2 threads"
echo
echo "| model | batch x seq | ours fp32 | ours bf16 | bf16 / fp32 | autocast eager | autocast compiled | / eager | / compiled | activations per sequence bf16 / fp32 |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for config in "small 8 256" "gpt2 4 1024" "smollm2-135m 4 512"; do
  set -- $config
  if [ "$1" = smollm2-135m ]; then
    "$bin" train --model "$1" --batch 1 --seq 8 --steps 1 --save "$work/$1" >/dev/null
    "$bin" ckpt export "$work/$1" --format hf-llama --out "$work/$1-hf" >/dev/null
  fi
  for round in $(seq "$rounds"); do
    read -r fp32 act32 < <(ours "$1" "$2" "$3" fp32)
    read -r bf16 act16 < <(ours "$1" "$2" "$3" bf16)
    eager=$(peer "$1" "$2" "$3" --bf16 || echo nan)
    compiled=$(peer "$1" "$2" "$3" --bf16 --compile || echo nan)
    python3 - "$1" "$2" "$3" "$fp32" "$bf16" "$eager" "$compiled" "$act32" "$act16" >>"$out" <<'PY'
import json, sys
m, b, s, fp32, bf16, eager, compiled, a32, a16 = sys.argv[1:]
print(json.dumps({"model": m, "batch": int(b), "seq": int(s), "fp32": float(fp32),
                  "bf16": float(bf16), "autocast_eager": float(eager),
                  "autocast_compiled": float(compiled),
                  "activations_fp32": int(a32), "activations_bf16": int(a16)}))
PY
    python3 - "$1" "$2" "$3" "$fp32" "$bf16" "$eager" "$compiled" "$act32" "$act16" <<'PY'
import sys
m, b, s, fp32, bf16, eager, compiled, a32, a16 = sys.argv[1:]
f = lambda x: float(x)
print(f"| {m} | {b} x {s} | {f(fp32):.0f} | {f(bf16):.0f} | {f(bf16)/f(fp32):.2f} | "
      f"{f(eager):.0f} | {f(compiled):.0f} | {f(bf16)/f(eager):.2f} | {f(bf16)/f(compiled):.2f} | "
      f"{int(a16)/int(a32):.2f} |")
PY
  done
done
