#!/usr/bin/env bash
# The planner's step time on the `cpu` preset against `shardwise train`'s measured one, for the
# trainer's presets on one rank (2 threads) and on data=2 (1 thread each); and the time of the
# planner's search for Llama-3.1 405B on 16,384 H100s. Needs build/release. Prints a markdown
# table; rows in bench/results/planner.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/release/bin/shardwise
out=bench/results/planner.jsonl
: > "$out"
echo "| model | batch | ranks | predicted step (s) | measured step (s) | predicted / measured |"
echo "|---|---|---|---|---|---|"
for config in "tiny 12 64" "small 16 256"; do
  set -- $config
  for ranks in 1 2; do
    if [ "$ranks" = 1 ]; then mesh=(); threads=2; layout=data=1; else mesh=(--mesh data=2); threads=1; layout=data=2; fi
    predicted=$("$bin" plan --model "$1" --device cpu --devices "$ranks" --global-batch "$2" \
      --seq "$3" --micro-batch $(($2 / ranks)) --precision fp32 --layout "$layout" --json |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["candidates"][0]["step_time_s"])')
    tokens=$("$bin" train --model "$1" --batch "$2" "${mesh[@]}" --threads "$threads" --steps 10 --json |
      python3 -c 'import json,sys,statistics; r=[json.loads(l) for l in sys.stdin]; print(statistics.median([x["tokens_per_s"] for x in r if "step" in x][3:]))')
    python3 - "$1" "$2" "$3" "$ranks" "$predicted" "$tokens" "$out" <<'PY'
import json, sys
model, batch, seq, ranks, predicted, tokens, out = sys.argv[1:]
measured = int(batch) * int(seq) / float(tokens)
predicted = float(predicted)
open(out, "a").write(json.dumps({"model": model, "batch": int(batch), "ranks": int(ranks),
                                 "predicted_s": predicted, "measured_s": measured}) + "\n")
print(f"| {model} | {batch} | {ranks} | {predicted:.4f} | {measured:.4f} | {predicted / measured:.2f} |")
PY
  done
done
cat > /tmp/llama-3.1-405b.json <<'JSON'
{"model_type": "llama", "vocab_size": 128256, "hidden_size": 16384, "intermediate_size": 53248,
 "num_hidden_layers": 126, "num_attention_heads": 128, "num_key_value_heads": 8}
JSON
python3 - "$bin" <<'PY'
import statistics, subprocess, sys, time
args = [sys.argv[1], "plan", "--model", "/tmp/llama-3.1-405b.json", "--devices", "16384",
        "--global-batch", "2048", "--seq", "8192", "--recompute", "full", "--sequence-parallel",
        "--json"]
times = []
for _ in range(5):
    start = time.perf_counter()
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    times.append(time.perf_counter() - start)
print(f"\nsearch, Llama-3.1 405B on 16,384 h100-80gb, whole command: median {statistics.median(times) * 1000:.1f} ms of 5 runs")
PY
