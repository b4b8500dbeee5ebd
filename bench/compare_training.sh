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
# Each program's speed varies from one process to the next (tiny: shardwise 18k or 25k tokens/s,
# PyTorch 15k or 19.5k on one earlier machine): ROUNDS rounds (default 5), taken in turns, the
# median and the range reported. torch.compile (Inductor's C++ for the CPU) is the third program;
# its compilation falls in the first steps, which the medians leave out.
rounds=${ROUNDS:-5}
peer_tokens() {  # model, batch, extra flags
  "$py" bench/torch_gpt_peer.py --model "$1" --batch "$2" --threads 2 --steps 10 "${@:3}" 2>/dev/null |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["tokens_per_s"])'
}
# shardwise on MKL (--blas mkl), where scripts/install_bench_peers.sh left libmkl_rt in the
# venv: PyTorch's wheels run their products on MKL, so this column compares the two programs on
# the same library of products, and the first on each one's default.
mkl=$(ls build/peer-venv/lib/libmkl_rt.so.[23] 2>/dev/null | head -n 1 || true)
echo "| model | batch | threads | shardwise tok/s (range) |${mkl:+ shardwise --blas mkl tok/s (range) |} PyTorch eager tok/s (range) | torch.compile tok/s (range) | / eager | / compile |${mkl:+ mkl / eager | mkl / compile |}"
echo "|---|---|---|---|${mkl:+---|}---|---|---|---|${mkl:+---|---|}"
for config in "tiny 12" "small 16"; do
  set -- $config
  for round in $(seq "$rounds"); do
    ours=$("$bin" train --model "$1" --batch "$2" --steps 10 --threads 2 --json | median_tokens)
    on_mkl=null
    if [ -n "$mkl" ]; then
      on_mkl=$("$bin" train --model "$1" --batch "$2" --steps 10 --threads 2 --blas "mkl:$mkl" \
               --json | median_tokens)
    fi
    theirs=$(peer_tokens "$1" "$2")
    compiled=$(peer_tokens "$1" "$2" --compile)
    echo "{\"model\": \"$1\", \"batch\": $2, \"round\": $round, \"shardwise\": $ours, \"shardwise_mkl\": $on_mkl, \"pytorch\": $theirs, \"pytorch_compile\": $compiled}" >> "$out"
  done
  python3 - "$out" "$1" "$2" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["model"] == sys.argv[2]]
def column(key):
    values = [r[key] for r in rows]
    return statistics.median(values), min(values), max(values)
ours, eager, compiled = column("shardwise"), column("pytorch"), column("pytorch_compile")
cell = lambda c: f"{c[0]:.0f} ({c[1]:.0f}-{c[2]:.0f})"
mkl = column("shardwise_mkl") if rows[0]["shardwise_mkl"] is not None else None
print(f"| {sys.argv[2]} | {sys.argv[3]} | 2 | {cell(ours)} |" + (f" {cell(mkl)} |" if mkl else "") +
      f" {cell(eager)} | {cell(compiled)} | {ours[0] / eager[0]:.2f} | {ours[0] / compiled[0]:.2f} |" +
      (f" {mkl[0] / eager[0]:.2f} | {mkl[0] / compiled[0]:.2f} |" if mkl else ""))
PY
done
# Each round runs the programs one after the other, so a round's ratio sees one state of the
# host: the median of those ratios, with their spread, is a second reading of the rounds.
python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for model in dict.fromkeys(r["model"] for r in rows):
    mine = [r for r in rows if r["model"] == model]
    def per_round(ours, key):
        ratios = sorted(r[ours] / r[key] for r in mine)
        return f"{statistics.median(ratios):.2f} ({ratios[0]:.2f}-{ratios[-1]:.2f})"
    for ours in ("shardwise", "shardwise_mkl"):
        if mine[0][ours] is None:
            continue
        print(f"\n{model}, {ours}: ratio round by round, median (range): to eager "
              f"{per_round(ours, 'pytorch')}, to torch.compile {per_round(ours, 'pytorch_compile')}",
              end="")
print()
PY
# Data parallel on 2 ranks of one thread each against one rank of two threads.
one=$("$bin" train --model tiny --batch 12 --steps 10 --threads 2 --json | median_tokens)
two=$("$bin" train --model tiny --batch 12 --steps 10 --mesh data=2 --threads 1 --json | median_tokens)
python3 -c "print(f'\ntiny, batch 12: data=2 (1 thread each) {float(\"$two\"):.0f} tok/s, one rank with 2 threads {float(\"$one\"):.0f} tok/s: ratio {float(\"$two\") / float(\"$one\"):.2f}')"
# Model FLOP/s of small (batch 16, 2 threads) against the sgemm peak of the library its products
# ran on (oneDNN, and MKL where present), 2 threads, on small's own shapes
# (bench/sgemm_libraries.cpp), measured here in the same run. Model FLOPs per token as nanoGPT's
# estimate_mfu counts them: 6 N (N: parameters without the position embedding) + 12 L H Q T
# (attention; Q = head size, T = context).
g++ -O2 -std=c++20 bench/sgemm_libraries.cpp -ldl -o build/sgemm_libraries
model_flops() {  # library path, then the flags that select it
  peak=$(OMP_NUM_THREADS=2 MKL_THREADING_LAYER=GNU build/sgemm_libraries "$1" 2 small |
         sed -E 's/.*step_gflops=([0-9.]+).*/\1/')
  small=$("$bin" train --model small --batch 16 --steps 8 --threads 2 "${@:2}" --json)
  python3 - "$small" "$peak" <<'PY'
import json, statistics, sys
lines = [json.loads(l) for l in sys.argv[1].splitlines()]
tokens_per_s = statistics.median(x["tokens_per_s"] for x in lines if "step" in x)
L, H, C, T, V = 6, 6, 384, 256, 256
n = lines[-1]["summary"]["parameters"] - T * C
flops = (6 * n + 12 * L * H * (C // H) * T) * tokens_per_s
peak = float(sys.argv[2]) * 1e9
print(f"\nsmall, batch 16, 2 threads, {lines[-1]['summary']['blas']}: {tokens_per_s:.0f} tok/s = "
      f"{flops / 1e9:.1f} model GFLOP/s, {flops / peak:.2f} of its sgemm peak measured now, "
      f"{peak / 1e9:.1f} GFLOP/s")
PY
}
model_flops /usr/lib/x86_64-linux-gnu/libdnnl.so.2
if [ -n "$mkl" ]; then model_flops "$mkl" --blas "mkl:$mkl"; fi
