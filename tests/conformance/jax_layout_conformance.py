#!/usr/bin/env python3
"""Compares `shardwise layout --json` with JAX on random meshes, specs and divisible shapes.

For each case, every device's index ranges must equal jax.sharding.NamedSharding's
devices_indices_map, every replica id must equal the one jax.Array reports for the device's
shard, and the shard shape must equal NamedSharding.shard_shape. Device ids are sometimes a
reordering of 0..n-1 and sometimes a subset of a larger set of devices. Exits 77 (a skip for CTest) when JAX is not installed: install it with
`pip install jax` to run this check.

usage: jax_layout_conformance.py PATH_TO_SHARDWISE [--cases N] [--seed S]
"""
import argparse
import json
import os
import random
import subprocess
import sys

MAX_DEVICES = 16
os.environ.setdefault("XLA_FLAGS", f"--xla_force_host_platform_device_count={MAX_DEVICES}")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

try:
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec
except ImportError:
    print("JAX is not installed; skipping the conformance check (pip install jax)")
    sys.exit(1 if os.environ.get("SHARDWISE_REQUIRE_COMPARISONS") else 77)


def random_case(rng):
    while True:
        sizes = [rng.randint(1, 4) for _ in range(rng.randint(1, 4))]
        count = int(np.prod(sizes))
        if count <= MAX_DEVICES:
            break
    names = [f"a{i}" for i in range(len(sizes))]
    ids = list(range(count))
    choice = rng.random()
    if choice < 0.3:
        rng.shuffle(ids)
    elif choice < 0.6:
        # Some of a larger set of devices, in any order (a sub-mesh of a bigger machine).
        ids = rng.sample(range(MAX_DEVICES), count)
    rank = rng.randint(0, 3)
    entries = [[] for _ in range(rank)]
    unused = names[:]
    rng.shuffle(unused)
    for name in unused:
        slot = rng.randint(0, rank)
        if slot < rank:
            entries[slot].append(name)
    spec = [None if not e else (e[0] if len(e) == 1 and rng.random() < 0.5 else tuple(e))
            for e in entries]
    length = rng.randint(0, rank)
    while len(spec) > length and spec and spec[-1] is None:
        spec.pop()
    size_of = dict(zip(names, sizes))
    shape = []
    for d in range(rank):
        axes = () if d >= len(spec) or spec[d] is None else (
            (spec[d],) if isinstance(spec[d], str) else spec[d])
        shards = int(np.prod([size_of[a] for a in axes])) if axes else 1
        shape.append(shards * rng.randint(0, 3))
    return names, sizes, ids, spec, shape


def spec_text(spec):
    def entry(e):
        if e is None:
            return "None"
        if isinstance(e, str):
            return repr(e)
        return "(" + ", ".join(repr(a) for a in e) + ("," if len(e) == 1 else "") + ")"
    return "P(" + ", ".join(entry(e) for e in spec) + ")"


def jax_layout(names, sizes, ids, spec, shape):
    devices = jax.devices()
    mesh = Mesh(np.array([devices[i] for i in ids]).reshape(sizes), tuple(names))
    sharding = NamedSharding(mesh, PartitionSpec(*spec))
    index_map = sharding.devices_indices_map(tuple(shape))
    array = jax.device_put(np.zeros(shape, dtype=np.float32), sharding)
    replica = {s.device.id: s.replica_id for s in array.addressable_shards}
    out = []
    for device in mesh.devices.flat:
        index = [[*slice_.indices(size)[:2]] for slice_, size in zip(index_map[device], shape)]
        out.append({"device": device.id, "index": index, "replica_id": replica[device.id]})
    return out, list(sharding.shard_shape(tuple(shape)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("shardwise")
    parser.add_argument("--cases", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    failures = 0
    for case in range(args.cases):
        names, sizes, ids, spec, shape = random_case(rng)
        command = [args.shardwise, "layout", "--json",
                   "--mesh", ",".join(f"{n}={s}" for n, s in zip(names, sizes)),
                   "--spec", spec_text(spec), "--shape", ",".join(map(str, shape)),
                   "--devices", ",".join(map(str, ids))]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            print(f"case {case}: shardwise failed: {result.stderr.strip()}\n  {command}")
            failures += 1
            continue
        printed = json.loads(result.stdout)
        ours = printed["shards"]
        theirs, shard_shape = jax_layout(names, sizes, ids, spec, shape)
        if ours != theirs:
            print(f"case {case}: layouts differ\n  {command}\n  shardwise: {ours}\n  jax: {theirs}")
            failures += 1
        elif printed["shard_shape"] != shard_shape:
            print(f"case {case}: shard shapes differ\n  {command}\n"
                  f"  shardwise: {printed['shard_shape']}\n  jax: {shard_shape}")
            failures += 1
    print(f"{args.cases - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
