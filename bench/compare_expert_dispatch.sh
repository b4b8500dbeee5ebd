#!/usr/bin/env bash
# The expert axis' traffic: bytes each rank sends along 'expert' per training step, measured by
# `train --json` (the runtime's byte counters) against `plan --layout --json`'s prediction, on
# expert=2, expert=4, data=2,expert=2 and fsdp=2,expert=2 (ZeRO 3), and along 'model+expert' on
# model=2,expert=2 (the experts folded over the model axis, each model rank routing its share of
# the rows), for
#  - a "balanced" Mixtral whose every token chooses every expert (k = experts): the routing the
#    planner predicts, where measured and predicted must be equal;
#  - `mixtral-tiny` (8 experts, top 2, random routing): what a real routing moves against the
#    balanced prediction, beside the run's measured expert imbalance.
# The dispatch sends each routed row whose expert is on another rank once each way forward and
# backward, and an all-to-all of E/degree counts per layer (the all-to-all's minimum for
# per-choice rows: nothing moves that stays on its rank, nothing is padded).
# Bytes are counted, not timed: any CPU gives the same numbers. Rows in
# bench/results/expert_dispatch.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/release/bin/shardwise
out=bench/results/expert_dispatch.jsonl
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/balanced.json" <<'JSON'
{"family": "mixtral", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
 "num_key_value_heads": 2, "intermediate_size": 48, "vocab_size": 256,
 "max_position_embeddings": 64, "num_local_experts": 4, "num_experts_per_tok": 4}
JSON
: > "$out"
for model in "$work/balanced.json" mixtral-tiny; do
  for layout in "expert=2 0" "expert=4 0" "data=2,expert=2 1" "fsdp=2,expert=2 3" \
    "model=2,expert=2 0"; do
    set -- $layout
    mesh=$1 zero=$2
    ranks=$(python3 -c "import math; print(math.prod(int(p.split('=')[1]) for p in '$mesh'.split(',')))")
    batch_ranks=$(python3 -c "import math; print(math.prod(int(p.split('=')[1]) for p in '$mesh'.split(',') if not p.startswith('model')))")
    trained=$("$bin" train --model "$model" --mesh "$mesh" --zero "$zero" --batch 8 --seq 64 \
      --steps 2 --json | tail -1)
    planned=$("$bin" plan --model "$model" --devices "$ranks" --global-batch 8 --seq 64 \
      --micro-batch $((8 / batch_ranks)) --precision fp32 --layout "$mesh" --zero "$zero" --json)
    python3 - "$model" "$mesh" "$zero" "$trained" "$planned" <<'PY' | tee -a "$out"
import json, os, sys
model, mesh, zero = sys.argv[1], sys.argv[2], int(sys.argv[3])
summary = json.loads(sys.argv[4])["summary"]
candidate = json.loads(sys.argv[5])["candidates"][0]
axes = "model+expert" if "model" in mesh else "expert"
measured = summary["comm_bytes_per_step"][axes]
predicted = candidate["comm_bytes_per_step"][axes]
dispatch = candidate["comm_bytes_per_kind"]["all_to_all"]
print(json.dumps({"model": "balanced (k = experts)" if model.endswith(".json") else model,
                  "mesh": mesh, "zero": zero, "axes": axes, "expert_bytes_measured": measured,
                  "expert_bytes_planned": predicted, "planned_dispatch_bytes": dispatch,
                  "measured_over_planned": round(measured / predicted, 4),
                  "expert_imbalance": round(summary["expert_imbalance"], 4)}))
PY
  done
done
