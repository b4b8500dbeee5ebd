#!/usr/bin/env bash
# Pipeline parallelism on this machine against its schedule's prediction:
#  1. small (6 layers, context 256), batch 16, pipeline=2 with one thread per rank and 8
#     micro-batches: the executed schedule's span over one stage's compute for the whole batch
#     (the busiest stage's passes, summed), against the schedule's 1 + (p - 1) / m, for GPipe
#     and 1F1B, from `--timeline` of the last of 6 steps, three rounds taken in turns (median);
#  2. each schedule's peak activation bytes on stage 0 (the summary's), 1F1B over GPipe, against
#     p / m.
# Needs build/release. Prints markdown; rows in bench/results/pipeline.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/release/bin/shardwise
out=bench/results/pipeline.jsonl
timeline=$(mktemp)
trap 'rm -f "$timeline"' EXIT
: > "$out"
for round in 1 2 3; do
  for schedule in gpipe 1f1b; do
    summary=$("$bin" train --model small --batch 16 --steps 6 --mesh pipeline=2 --threads 1 \
              --microbatches 8 --schedule "$schedule" --timeline "$timeline" --json | tail -1)
    python3 - "$timeline" "$round" "$schedule" "$summary" >> "$out" <<'PY'
import json, sys
timeline = json.load(open(sys.argv[1]))
summary = json.loads(sys.argv[4])["summary"]
stages = timeline["timeline"]
busy = [sum(a["end"] - a["start"] for a in stage) for stage in stages]
span = max(a["end"] for stage in stages for a in stage) - min(a["start"] for stage in stages for a in stage)
p, m = timeline["stages"], timeline["microbatches"]
print(json.dumps({"round": int(sys.argv[2]), "schedule": sys.argv[3], "span_s": span,
                  "busiest_stage_s": max(busy), "predicted_factor": 1 + (p - 1) / m,
                  "stage0_peak_activation_bytes": summary["pipeline"]["peak_activation_bytes_per_stage"][0]}))
PY
  done
done
python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| small, batch 16, pipeline=2, 8 micro-batches | span / busiest stage, median (range) | 1 + (p - 1) / m | measured / predicted |")
print("|---|---|---|---|")
peaks = {}
for schedule in ("gpipe", "1f1b"):
    mine = [r for r in rows if r["schedule"] == schedule]
    factors = [r["span_s"] / r["busiest_stage_s"] for r in mine]
    f = statistics.median(factors)
    predicted = mine[0]["predicted_factor"]
    print(f"| {schedule} | {f:.3f} ({min(factors):.3f}-{max(factors):.3f}) | {predicted:.3f} | {f / predicted:.3f} |")
    peaks[schedule] = statistics.median(r["stage0_peak_activation_bytes"] for r in mine)
print()
print("| stage 0 peak activation bytes | GPipe | 1F1B | 1F1B / GPipe | p / m |")
print("|---|---|---|---|---|")
print(f"| small, batch 16, 8 micro-batches | {peaks['gpipe']:.0f} | {peaks['1f1b']:.0f} | "
      f"{peaks['1f1b'] / peaks['gpipe']:.3f} | {2 / 8:.3f} |")
PY
