#!/usr/bin/env python3
"""Costs that must be linear in an input's size, measured on `shardwise` itself.

Reading JSON (safetensors headers, JSON with object-valued keys, manifests) and running one
training step on thousands of in-process ranks, at the sizes the hostile audit used, each
against the same input at half the size (a linear cost doubles; a quadratic one quadruples)
and, with --baseline, against another build of `shardwise` on the same inputs in the same run.
Inputs are generated into a temporary folder. Prints a markdown table; rows go to
bench/results/input_scaling.jsonl.

    bench/compare_input_scaling.py [--baseline OLD/bin/shardwise] [--timeout 120]
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def safetensors(path, tensors, pad=0):
    header = {"transformer.wte.weight": {"dtype": "F32", "shape": [256, 64],
                                         "data_offsets": [0, 65536]}}
    offset = 65536
    for i in range(tensors - 1):
        header[f"transformer.h.{i}.mlp.c_fc.weight{'x' * pad}"] = {
            "dtype": "F32", "shape": [2, 2], "data_offsets": [offset, offset + 16]}
        offset += 16
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        f.truncate(8 + len(text) + offset)
    return len(text)


def object_keys(path, keys):
    text = json.dumps({f"key{i:06d}": {"a": i} for i in range(keys)})
    open(path, "w").write(text)
    return len(text)


def manifest(path, parameters):
    entries = [{"name": "wte.weight", "shape": [256, 64], "dtype": "bf16"}]
    entries += [{"name": f"layers.{i}.mlp.w", "shape": [64, 64], "dtype": "bf16"}
                for i in range(parameters - 1)]
    text = json.dumps({"parameters": entries, "axis_units": {"heads": 16}},
                      separators=(",", ":"))
    open(path, "w").write(text)
    return len(text)


def timed(args, timeout):
    """Seconds the command took (best of two), or None past the timeout."""
    best = None
    for _ in range(2):
        start = time.perf_counter()
        try:
            subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return None
        seconds = time.perf_counter() - start
        best = seconds if best is None else min(best, seconds)
    return best


def step_seconds(binary, ranks, timeout):
    """The second step's time of `train` on `ranks` in-process ranks (the first pays setup)."""
    model = os.path.join(ROOT, "examples/models/gpt_micro.json")
    try:
        run = subprocess.run([binary, "train", "--model", model, "--mesh", f"data={ranks}",
                              "--batch", str(ranks), "--seq", "8", "--steps", "2", "--json"],
                             capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return None
    steps = [json.loads(line) for line in run.stdout.splitlines() if '"step"' in line]
    if len(steps) < 2:
        return None
    return ranks * 8 / steps[1]["tokens_per_s"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default=os.path.join(ROOT, "build/release/bin/shardwise"))
    parser.add_argument("--baseline", help="another build of shardwise to run on the same inputs")
    parser.add_argument("--timeout", type=float, default=120)
    args = parser.parse_args()
    binaries = [("shardwise", args.binary)] + ([("baseline", args.baseline)] if args.baseline else [])
    work = tempfile.mkdtemp(prefix="input_scaling_")
    plan = ["plan", "--devices", "1", "--global-batch", "1", "--seq", "1", "--layout", "data=1"]
    cases = []  # (name, size text, half-size args, full-size args)
    for tensors in (30_000, 100_000, 560_000):
        pad = 60 if tensors > 100_000 else 0
        paths = []
        for n in (tensors // 2, tensors):
            path = os.path.join(work, f"header_{n}.safetensors")
            size = safetensors(path, n, pad)
            paths.append(path)
        cases.append((f"plan, .safetensors header of {tensors:,} tensors", f"{size / 1e6:.1f} MB",
                      ["plan", "--model", paths[0]] + plan[1:], ["plan", "--model", paths[1]] + plan[1:]))
    for keys in (40_000,):
        paths = []
        for n in (keys // 2, keys):
            path = os.path.join(work, f"keys_{n}.json")
            size = object_keys(path, n)
            paths.append(path)
        for command in (["plan"] + plan[1:], ["specs", "--mesh", "data=2"], ["train"]):
            cases.append((f"{command[0]}, JSON of {keys:,} object-valued keys", f"{size / 1e3:.0f} KB",
                          [command[0], "--model", paths[0]] + command[1:],
                          [command[0], "--model", paths[1]] + command[1:]))
    for parameters in (160_000, 1_000_000):
        paths = []
        for n in (parameters // 2, parameters):
            path = os.path.join(work, f"manifest_{n}.json")
            size = manifest(path, n)
            paths.append(path)
        cases.append((f"plan, manifest of {parameters:,} parameters", f"{size / 1e6:.1f} MB",
                      ["plan", "--model", paths[0]] + plan[1:], ["plan", "--model", paths[1]] + plan[1:]))

    rows = []
    print("| input | size | shardwise (s) | at half the size (s) | growth | baseline (s) | baseline / shardwise |")
    print("|---|---|---|---|---|---|---|")
    for name, size, half, full in cases:
        row = {"input": name, "size": size}
        for label, binary in binaries:
            row[label] = timed([binary] + full, args.timeout)
            if label == "shardwise":
                row["shardwise_half"] = timed([binary] + half, args.timeout)
        rows.append(row)
        print(table_row(row), flush=True)
    for ranks in (1024, 2048, 4096):
        row = {"input": f"train, one step on {ranks} in-process ranks", "size": f"data={ranks}"}
        for label, binary in binaries:
            row[label] = step_seconds(binary, ranks, args.timeout)
            if label == "shardwise":
                row["shardwise_half"] = step_seconds(binary, ranks // 2, args.timeout)
        rows.append(row)
        print(table_row(row), flush=True)
    with open(os.path.join(ROOT, "bench/results/input_scaling.jsonl"), "w") as out:
        for row in rows:
            out.write(json.dumps(row) + "\n")


def seconds_text(value, timeout=None):
    return "timed out" if value is None else f"{value:.2f}"


def table_row(row):
    mine, half, base = row.get("shardwise"), row.get("shardwise_half"), row.get("baseline")
    growth = f"{mine / half:.1f}x" if mine and half else "-"
    versus = (f"{base / mine:.0f}x" if base and mine else ("more than the timeout" if "baseline" in row else "-"))
    return (f"| {row['input']} | {row['size']} | {seconds_text(mine)} | {seconds_text(half)} | {growth} | "
            f"{seconds_text(base) if 'baseline' in row else '-'} | {versus} |")


if __name__ == "__main__":
    sys.exit(main())
