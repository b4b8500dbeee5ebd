#!/usr/bin/env python3
"""PyTorch DTensor peer of `shardwise bench reshard`: the same array, mesh and six shardings.

Runs DTensor.redistribute for all 36 (from, to) pairs on the gloo backend, one CPU process per
rank, and prints one JSON object per pair from rank 0. Needs build/peer-venv
(scripts/install_bench_peers.sh); it is a benchmark peer, not a test.

    build/peer-venv/bin/python bench/dtensor_peer.py --ranks 8 --bytes 64M > dtensor.jsonl
"""

import argparse
import json
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor
from torch.distributed.tensor.debug import CommDebugMode

# Spec strings exactly as shardwise prints them, so compare_dtensor.py can join on them.
SHARDINGS = [
    ("P()", [Replicate(), Replicate()]),
    ("P('data')", [Shard(0), Replicate()]),
    ("P('model')", [Replicate(), Shard(0)]),
    ("P('data', 'model')", [Shard(0), Shard(1)]),
    ("P('model', 'data')", [Shard(1), Shard(0)]),
    # Both mesh dims on tensor dim 1; DTensor applies them left to right, so data is major.
    ("P(None, ('data', 'model'))", [Shard(1), Shard(1)]),
]
ROUNDS = 3
CALLS_PER_ROUND = 2  # as shardwise: seconds per call = median round / 2


def parse_size(text):
    units = {"": 1, "K": 1 << 10, "KiB": 1 << 10, "M": 1 << 20, "MiB": 1 << 20,
             "G": 1 << 30, "GiB": 1 << 30}
    digits = len(text) - len(text.lstrip("0123456789"))
    if digits == 0 or text[digits:] not in units:
        raise argparse.ArgumentTypeError(f"size '{text}' is not a number of bytes (4096, 64K, 16M)")
    return int(text[:digits]) * units[text[digits:]]


def finish(dtensor):
    # redistribute may hand back an AsyncCollectiveTensor whose collective is still in flight;
    # the time must include the data movement, so wait for it.
    local = dtensor.to_local()
    wait = getattr(local, "wait", None)
    return wait() if callable(wait) else local


def expected_local(full, mesh, placements):
    """This rank's block of `full`, worked out independently of DTensor (even split only)."""
    coord = mesh.get_coordinate()
    index = []
    for dim, size in enumerate(full.shape):
        start, length = 0, size
        for mesh_dim, p in enumerate(placements):  # major to minor, as in the spec tuple
            if isinstance(p, Shard) and p.dim == dim:
                length //= mesh.size(mesh_dim)
                start += coord[mesh_dim] * length
        index.append(slice(start, start + length))
    return full[tuple(index)]


def check(name, got, want):
    if got.shape != want.shape or not torch.equal(got, want):
        raise AssertionError(f"rank {dist.get_rank()}: {name}: local shard is wrong "
                             f"(shape {tuple(got.shape)}, expected {tuple(want.shape)})")


def worker(rank, ranks, nbytes, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)  # one core's worth per rank, like shardwise's one thread per rank
    dist.init_process_group("gloo", rank=rank, world_size=ranks)
    try:
        mesh = init_device_mesh("cpu", (2, ranks // 2), mesh_dim_names=("data", "model"))
        columns = 64 * ranks
        shape = (nbytes // 4 // columns, columns)
        ones = torch.ones(shape, dtype=torch.float32)
        # Distinct values per element (exact in float32 below 2**24), so a block landing on the
        # wrong rank or in the wrong place is caught, not only a wrong shape.
        pattern = (torch.arange(ones.numel()) % (1 << 24)).to(torch.float32).reshape(shape)
        for from_name, from_p in SHARDINGS:
            src = distribute_tensor(ones, mesh, from_p)
            src_pattern = distribute_tensor(pattern, mesh, from_p)
            for to_name, to_p in SHARDINGS:
                name = f"{from_name} -> {to_name}"
                with CommDebugMode() as comm:
                    moved = finish(src_pattern.redistribute(mesh, to_p))
                check(name, moved, expected_local(pattern, mesh, to_p))
                collectives = {str(op).split(".")[-1]: n
                               for op, n in comm.get_comm_counts().items() if n}

                out = finish(src.redistribute(mesh, to_p))  # warm-up
                seconds = []
                for _ in range(ROUNDS):
                    dist.barrier()
                    start = time.perf_counter()
                    for _ in range(CALLS_PER_ROUND):
                        out = finish(src.redistribute(mesh, to_p))
                    dist.barrier()
                    seconds.append((time.perf_counter() - start) / CALLS_PER_ROUND)
                check(name, out, expected_local(ones, mesh, to_p))
                if rank == 0:
                    print(json.dumps({"peer": "dtensor", "from": from_name, "to": to_name,
                                      "ranks": ranks, "array_bytes": ones.numel() * 4,
                                      "seconds": statistics.median(seconds),
                                      "collectives": collectives}), flush=True)
    finally:
        dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=8, help="even number of processes (2 x n/2 mesh)")
    parser.add_argument("--bytes", type=parse_size, default=parse_size("64M"),
                        help="global array size, e.g. 256K, 64M (default 64M)")
    args = parser.parse_args()
    if args.ranks < 2 or args.ranks % 2:
        parser.error(f"--ranks is {args.ranks}; the 2 x n/2 mesh needs an even number >= 2")
    rows = args.bytes // 4 // (64 * args.ranks)
    # The expected blocks above assume even splits; shardwise's array has them for power-of-two sizes.
    if rows == 0 or rows % args.ranks:
        parser.error(f"--bytes {args.bytes} gives {rows} rows, not a positive multiple of {args.ranks}")
    mp.spawn(worker, args=(args.ranks, args.bytes, free_port()), nprocs=args.ranks, join=True)


if __name__ == "__main__":
    sys.exit(main())
