#!/usr/bin/env python3
"""`shardwise train --log-dir` read back by TensorBoard itself: its event loader finds every scalar
of every step, and each equals the value metrics.jsonl holds for it.

Usage: tensorboard_read_test.py SHARDWISE_BINARY
Exits 77 (skipped) where the `tensorboard` package is not installed.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

SKIP = 77


def main():
    try:
        from tensorboard.backend.event_processing import event_accumulator
    except ImportError:
        print("skipped: the tensorboard package is not installed (pip install tensorboard)")
        return SKIP
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory() as folder:
        logs = os.path.join(folder, "run")
        command = [binary, "train", "--model", "tiny", "--mesh", "data=2", "--zero", "1",
                   "--steps", "6", "--batch", "4", "--eval-every", "3", "--log-dir", logs]
        run = subprocess.run(command, capture_output=True, text=True, timeout=600)
        if run.returncode != 0:
            print(f"{' '.join(command)} exited {run.returncode}:\n{run.stderr}")
            return 1
        with open(os.path.join(logs, "metrics.jsonl")) as f:
            lines = [json.loads(line) for line in f]
        with open(os.path.join(logs, "config.json")) as f:
            config = json.load(f)
        accumulator = event_accumulator.EventAccumulator(logs, size_guidance={"scalars": 0})
        accumulator.Reload()
        tags = set(accumulator.Tags()["scalars"])
        expected = {"train/loss", "train/learning_rate", "train/grad_norm", "perf/tokens_per_s",
                    "perf/step_seconds", "val/loss", "memory/rank_0/held_bytes",
                    "memory/rank_1/held_bytes", "memory/rank_0/resident_bytes",
                    "memory/rank_1/resident_bytes"}
        failures = []
        if tags != expected:
            failures.append(f"TensorBoard's tags {sorted(tags)}, expected {sorted(expected)}")
        if [line["step"] for line in lines] != list(range(1, 7)):
            failures.append(f"metrics.jsonl steps {[line['step'] for line in lines]}")
        for tag in sorted(tags & expected):
            events = accumulator.Scalars(tag)
            from_json = [(line["step"], line["wall_time"], line[tag]) for line in lines if tag in line]
            from_events = [(e.step, e.wall_time, e.value) for e in events]
            # TensorBoard keeps 32-bit floats; the JSON number is the same float's shortest decimal.
            as_float = [(s, w, struct.unpack("f", struct.pack("f", v))[0]) for s, w, v in from_json]
            if from_events != as_float:
                failures.append(f"{tag}: events {from_events} but metrics.jsonl {from_json}")
        if [e.step for e in accumulator.Scalars("val/loss")] != [3, 6]:
            failures.append("val/loss is not at steps 3 and 6")
        if config["settings"]["zero"] != 1 or config["mesh"]["ranks"] != 2:
            failures.append(f"config.json does not describe the run: {config}")
        for failure in failures:
            print(failure)
        if failures:
            return 1
        print(f"TensorBoard read {len(tags)} scalars over {len(lines)} steps, equal to metrics.jsonl")
    return 0


if __name__ == "__main__":
    sys.exit(main())
