#!/usr/bin/env bash
# Peak resident memory of each rank (getrusage's maximum RSS, through /usr/bin/time) against the
# bytes `shardwise train --json` reports for it (parameters, gradients, optimizer state,
# activations, gathered ZeRO-3 units), for the gpt2 preset (context 256 here, to keep the run
# short): one rank, fsdp=2 at ZeRO 3 and model=2, the latter two under mpirun. The difference is
# what a process holds besides the training state (the program, oneDNN, MPI). Needs build/release.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$PWD/build/release/bin/shardwise
out=bench/results/memory.jsonl
: > "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
args=(train --model gpt2 --seq 256 --steps 2 --json)
run() {  # name, then the command; each rank's "rss KB" line comes from /usr/bin/time
  local name=$1
  shift
  "$@" > /tmp/memory_run.out 2> /tmp/memory_run.err
  python3 - "$name" /tmp/memory_run.out /tmp/memory_run.err "$out" <<'PY'
import json, re, sys
name, stdout, stderr, out = sys.argv[1:]
summary = [json.loads(l) for l in open(stdout) if '"summary"' in l][-1]["summary"]
rss = [int(x) * 1024 for x in re.findall(r"rss (\d+) KB", open(stderr).read())]
state = [sum(r[k] for k in ("params_bytes", "grads_bytes", "optimizer_bytes",
                            "activations_peak_bytes", "gathered_peak_bytes"))
         for r in summary["ranks"]]
for rank, (have, said) in enumerate(zip(sorted(rss), state)):
    open(out, "a").write(json.dumps({"layout": name, "rank": rank, "rss": have, "state": said}) + "\n")
    print(f"| {name} | {rank} | {said / 1e6:.0f} | {have / 1e6:.0f} | {(have - said) / 1e6:.0f} |")
PY
}
echo "| gpt2, context 256 | rank | training state, MB | peak RSS, MB | RSS - state, MB |"
echo "|---|---|---|---|---|"
run "one rank, batch 1" /usr/bin/time -f "rss %M KB" "$bin" "${args[@]}" --batch 1 --threads 1
run "fsdp=2, ZeRO 3, batch 2" mpirun --quiet -np 2 --oversubscribe /usr/bin/time -f "rss %M KB" \
  "$bin" "${args[@]}" --mesh fsdp=2 --zero 3 --batch 2
run "model=2, batch 1" mpirun --quiet -np 2 --oversubscribe /usr/bin/time -f "rss %M KB" \
  "$bin" "${args[@]}" --mesh model=2 --batch 1
