#!/usr/bin/env bash
# GPT-2 (the gpt2 preset: 12 layers, 12 heads, width 768, byte tokens) at its full context of
# 1024 on one rank of 2 threads, against PyTorch 2.15 on the same model, batch, context and
# threads (bench/torch_gpt_peer.py: eager with scaled_dot_product_attention, and torch.compile):
#
# - memory: the peak resident set (getrusage) at batch 1 and batch 2; their difference is what
#   one more sequence costs, its activations. shardwise for each --recompute mode, with the
#   activation bytes its --json summary reports and the planner's prediction beside it.
# - speed: tokens/s at batch 2, the median of the steps after the first, in turns.
#
# Needs build/release and build/peer-venv (scripts/install_bench_peers.sh). Prints markdown;
# rows in bench/results/gpt2.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/release/bin/shardwise
py=build/peer-venv/bin/python
out=bench/results/gpt2.jsonl
rounds=${ROUNDS:-2}
: > "$out"
ours() {  # batch, steps, recompute, more flags: one JSON row with tokens/s, RSS and activations
  /usr/bin/time -f "rss %M KB" "$bin" train --model gpt2 --batch "$1" --steps "$2" --threads 2 \
    --recompute "$3" "${@:4}" --json > /tmp/gpt2_ours.out 2> /tmp/gpt2_ours.err
  python3 - "$1" "$3" /tmp/gpt2_ours.out /tmp/gpt2_ours.err <<'PY'
import json, re, statistics, sys
batch, mode, stdout, stderr = sys.argv[1:]
lines = [json.loads(l) for l in open(stdout)]
steps = [x["tokens_per_s"] for x in lines if "step" in x][1:]
rank = lines[-1]["summary"]["ranks"][0]
rss = int(re.findall(r"rss (\d+) KB", open(stderr).read())[-1]) * 1024
print(json.dumps({"program": "shardwise", "recompute": mode, "batch": int(batch),
                  "blas": lines[-1]["summary"]["blas"],
                  "tokens_per_s": statistics.median(steps), "peak_rss_bytes": rss,
                  "activations_bytes": rank["activations_peak_bytes"]}))
PY
}
planned() {  # batch, recompute: the planner's activation bytes for rank 0
  "$bin" plan --model gpt2 --devices 1 --global-batch "$1" --micro-batch "$1" --seq 1024 \
    --precision fp32 --layout data=1 --recompute "$2" --json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["candidates"][0]["memory_per_device"]["activations"])'
}
theirs() {  # batch, steps, extra flags
  "$py" bench/torch_gpt_peer.py --model gpt2 --batch "$1" --steps "$2" --warmup 1 --threads 2 \
    "${@:3}" 2>/dev/null
}
# Memory: batch 1 and 2, two steps each (the second step holds what the first allocated).
for mode in none selective full; do
  for batch in 1 2; do
    ours "$batch" 2 "$mode" | python3 -c "
import json,sys; r=json.load(sys.stdin); r['kind']='memory'; r['planned_activations_bytes']=$(planned "$batch" "$mode"); print(json.dumps(r))" >> "$out"
  done
done
for flags in "" "--compile"; do
  for batch in 1 2; do
    theirs "$batch" 2 $flags | python3 -c "
import json,sys; r=json.load(sys.stdin); r['kind']='memory'; print(json.dumps(r))" >> "$out"
  done
done
# Speed: batch 2, in turns; shardwise on MKL too where scripts/install_bench_peers.sh left
# libmkl_rt in the venv (PyTorch's wheels run their products on MKL).
mkl=$(ls build/peer-venv/lib/libmkl_rt.so.[23] 2>/dev/null | head -n 1 || true)
for round in $(seq "$rounds"); do
  ours 2 4 none | python3 -c "
import json,sys; r=json.load(sys.stdin); r['kind']='speed'; r['round']=$round; print(json.dumps(r))" >> "$out"
  if [ -n "$mkl" ]; then
    ours 2 4 none --blas "mkl:$mkl" | python3 -c "
import json,sys; r=json.load(sys.stdin); r['kind']='speed'; r['round']=$round; print(json.dumps(r))" >> "$out"
  fi
  for flags in "" "--compile"; do
    theirs 2 4 $flags | python3 -c "
import json,sys; r=json.load(sys.stdin); r['kind']='speed'; r['round']=$round; print(json.dumps(r))" >> "$out"
  done
done
python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def name(r):
    if r.get("program") == "shardwise":
        blas = " --blas mkl" if r["blas"].startswith("MKL") else ""
        return f"shardwise{blas} --recompute {r['recompute']}"
    return {"pytorch": "PyTorch eager (SDPA)", "pytorch-compile": "PyTorch torch.compile"}[r["peer"]]
memory = {}
for r in rows:
    if r["kind"] == "memory":
        memory.setdefault(name(r), {})[r["batch"]] = r
print("| gpt2, context 1024, 2 threads | peak RSS batch 1, MB | batch 2, MB | per sequence, MB |"
      " reported activations per sequence, MB | planned, MB |")
print("|---|---|---|---|---|---|")
eager = None
for program, by_batch in memory.items():
    one, two = by_batch[1], by_batch[2]
    per_seq = (two["peak_rss_bytes"] - one["peak_rss_bytes"]) / 1e6
    if program.startswith("PyTorch eager"):
        eager = per_seq
    reported = planned = ""
    if "activations_bytes" in two:
        reported = f"{two['activations_bytes'] / 2 / 1e6:.0f}"
        if two.get("planned_activations_bytes"):
            planned = f"{two['planned_activations_bytes'] / 2 / 1e6:.0f}"
    print(f"| {program} | {one['peak_rss_bytes'] / 1e6:.0f} | {two['peak_rss_bytes'] / 1e6:.0f} | "
          f"{per_seq:.0f} | {reported} | {planned} |")
if eager:
    for program, by_batch in memory.items():
        per_seq = (by_batch[2]["peak_rss_bytes"] - by_batch[1]["peak_rss_bytes"]) / 1e6
        print(f"\n{program}: {per_seq / eager:.2f} of PyTorch eager's memory per sequence", end="")
    print()
speed = {}
for r in rows:
    if r["kind"] == "speed":
        speed.setdefault(name(r), []).append(r["tokens_per_s"])
print("\n| gpt2, batch 2, context 1024, 2 threads | tok/s (median of rounds) | range |")
print("|---|---|---|")
for program, values in speed.items():
    print(f"| {program} | {statistics.median(values):.0f} | {min(values):.0f}-{max(values):.0f} |")
# By the medians of the columns, and round by round (each round runs the programs one after
# the other, so its ratio sees one state of the host).
by_round = {}
for r in rows:
    if r["kind"] == "speed":
        by_round.setdefault(r["round"], {})[name(r)] = r["tokens_per_s"]
for mine in ("shardwise --recompute none", "shardwise --blas mkl --recompute none"):
    if mine not in speed:
        continue
    ours = statistics.median(speed[mine])
    for program, values in speed.items():
        if program.startswith("PyTorch"):
            ratios = sorted(t[mine] / t[program] for t in by_round.values())
            print(f"\n{mine} / {program}: {ours / statistics.median(values):.2f}; round by round "
                  f"{statistics.median(ratios):.2f} ({ratios[0]:.2f}-{ratios[-1]:.2f})", end="")
print()
PY
# Model FLOP/s (nanoGPT's count: 6 N + 12 L H Q T per token, N without the position embedding)
# against oneDNN's sgemm on gpt2's own shapes at 2 threads, measured now.
g++ -O2 -std=c++20 bench/sgemm_libraries.cpp -ldl -o build/sgemm_libraries
peak=$(OMP_NUM_THREADS=2 build/sgemm_libraries /usr/lib/x86_64-linux-gnu/libdnnl.so.2 2 gpt2 |
       sed -E 's/.*step_gflops=([0-9.]+).*/\1/')
python3 - "$out" "$peak" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
tokens_per_s = statistics.median(r["tokens_per_s"] for r in rows
                                 if r["kind"] == "speed" and r.get("program") == "shardwise"
                                 and r["blas"].startswith("oneDNN"))
L, H, C, T, V = 12, 12, 768, 1024, 256
n = 12 * L * C * C + 13 * L * C + V * C + 2 * C  # blocks, their biases and norms, wte, ln_f
flops = (6 * n + 12 * L * H * (C // H) * T) * tokens_per_s
peak = float(sys.argv[2]) * 1e9
print(f"\ngpt2, batch 2, 2 threads: {tokens_per_s:.0f} tok/s = {flops / 1e9:.1f} model GFLOP/s, "
      f"{flops / peak:.2f} of the sgemm peak measured now, {peak / 1e9:.1f} GFLOP/s")
PY
