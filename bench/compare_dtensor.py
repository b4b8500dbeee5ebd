#!/usr/bin/env python3
"""Markdown table of shardwise `bench reshard` against the DTensor peer, pair by pair.

    python3 bench/compare_dtensor.py --dtensor dtensor.jsonl --shardwise local.jsonl mpi.jsonl

Ratio = DTensor time / shardwise time, so > 1 means shardwise is faster. Plain python3, no
third-party modules, so it runs outside the peer venv too.
"""

import argparse
import json
import statistics
import sys


def read_rows(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def array_bytes(row):
    # shardwise writes the global array size as "bytes"; the peer as "array_bytes".
    return row.get("array_bytes", row.get("bytes"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtensor", required=True, help="JSON lines from bench/dtensor_peer.py")
    parser.add_argument("--shardwise", required=True, nargs="+",
                        help="JSON lines from `shardwise bench reshard --json` (one or more backends)")
    args = parser.parse_args()

    dtensor = {(r["from"], r["to"]): r for r in read_rows(args.dtensor)}
    shardwise = [r for path in args.shardwise for r in read_rows(path)
                 if r.get("op", "reshard") == "reshard"]
    if not shardwise:
        sys.exit("no reshard rows in " + ", ".join(args.shardwise))

    # A ratio between different sizes or rank counts means nothing: refuse rather than mislead.
    for r in shardwise:
        peer = dtensor.get((r["from"], r["to"]))
        if peer and (peer["ranks"], array_bytes(peer)) != (r["ranks"], array_bytes(r)):
            sys.exit(f"{r['from']} -> {r['to']} ({r['backend']}): shardwise ran {r['ranks']} ranks, "
                     f"{array_bytes(r)} bytes; DTensor ran {peer['ranks']} ranks, "
                     f"{array_bytes(peer)} bytes")

    # Pairs in the peer's order (every from, then every to), one row per shardwise backend.
    order = {pair: i for i, pair in enumerate(dtensor)}
    shardwise.sort(key=lambda r: order.get((r["from"], r["to"]), len(order)))

    print("| from | to | shardwise backend | shardwise ms | DTensor ms | DTensor / shardwise |")
    print("| --- | --- | --- | ---: | ---: | ---: |")
    ratios = {}
    for r in shardwise:
        peer = dtensor.get((r["from"], r["to"]))
        peer_ms = f"{peer['seconds'] * 1e3:.3f}" if peer else "-"
        ratio = "-"
        if peer and r["seconds"] > 0:
            value = peer["seconds"] / r["seconds"]
            ratios.setdefault(r["backend"], []).append(value)
            ratio = f"{value:.2f}"
        print(f"| {r['from']} | {r['to']} | {r['backend']} | {r['seconds'] * 1e3:.3f} | "
              f"{peer_ms} | {ratio} |")

    print()
    for backend, values in ratios.items():
        print(f"DTensor / shardwise over {len(values)} pairs ({backend}): "
              f"min {min(values):.2f}, median {statistics.median(values):.2f}")
    missing = sum(1 for r in shardwise if (r["from"], r["to"]) not in dtensor)
    if missing:
        print(f"warning: {missing} shardwise rows have no DTensor row", file=sys.stderr)


if __name__ == "__main__":
    main()
