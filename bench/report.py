#!/usr/bin/env python3
"""Turns bench/results/*.jsonl into the markdown tables of docs/benchmarks.md."""
import json
import pathlib
import sys


def rows(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def size(n):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n // scale} {unit}"
    return f"{n} B"


def main(folder):
    folder = pathlib.Path(folder)
    local = rows(folder / "comm_local.jsonl")
    mpi = {(r["op"], r["ranks"], r["bytes"]): r for r in rows(folder / "comm_mpi.jsonl")}
    print("| op | ranks | size | local busbw GB/s | memcpy GB/s | local / memcpy | mpi backend busbw | raw MPI busbw | local / raw MPI | mpi / raw MPI |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in local:
        m = mpi.get((r["op"], r["ranks"], r["bytes"]))
        raw = m["mpi_raw_busbw_gbps"] if m else None
        cells = [r["op"], str(r["ranks"]), size(r["bytes"]), f"{r['busbw_gbps']:.2f}",
                 f"{r['memcpy_gbps']:.2f}",
                 f"{r['busbw_gbps'] / r['memcpy_gbps']:.2f}" if r["memcpy_gbps"] else "-",
                 f"{m['busbw_gbps']:.2f}" if m else "-",
                 f"{raw:.2f}" if raw else "-",
                 f"{r['busbw_gbps'] / raw:.2f}" if raw else "-",
                 f"{m['busbw_gbps'] / raw:.2f}" if raw else "-"]
        print("| " + " | ".join(cells) + " |")
    print()
    print("| from | to | most bytes one rank receives | time ms | GB/s | memcpy GB/s | ratio "
          "| most bytes one rank writes | memcpy of those ms | memcpy / reshard time |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows(folder / "reshard_local.jsonl"):
        ratio = f"{r['reshard_gbps'] / r['memcpy_gbps']:.2f}" if r["memcpy_gbps"] else "-"
        written = r["written_memcpy_seconds"]
        print(f"| {r['from']} | {r['to']} | {size(r['max_rank_bytes'])} | {r['seconds'] * 1e3:.1f} "
              f"| {r['reshard_gbps']:.2f} | {r['memcpy_gbps']:.2f} | {ratio} "
              f"| {size(r['max_rank_written_bytes'])} | {written * 1e3:.1f} "
              f"| {written / r['seconds']:.2f} |")
    print()
    print("| measure | backend | ranks | bytes | time ms | baseline ms | ratio |")
    print("|---|---|---|---|---|---|---|")
    for name in ("runtime_local.jsonl", "runtime_mpi.jsonl"):
        path = folder / name
        if not path.exists():
            continue
        for r in rows(path):
            print(f"| {r['op']} | {r['backend']} | {r['ranks']} | {size(r['bytes'])} "
                  f"| {r['seconds'] * 1e3:.2f} | {r['baseline_seconds'] * 1e3:.2f} "
                  f"| {r['ratio']:.2f} |")
    comparison = folder / "dtensor_comparison.md"
    if comparison.exists():
        print()
        print(comparison.read_text(), end="")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bench/results")
