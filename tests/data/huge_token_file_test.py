#!/usr/bin/env python3
"""`shardwise train` on a token file larger than the machine's memory: a sparse file (its ids
all 0) of twice the machine's memory and at least 64 GiB trains a few steps while the process
stays small, so nothing read it whole, copied it or mapped it all in.

Usage: huge_token_file_test.py SHARDWISE_BINARY
Exits 77 (skipped) where the file system cannot hold a sparse file of that size.
"""
import json
import os
import resource
import subprocess
import sys
import tempfile

SKIP = 77
# The process's peak resident memory must stay under this: a file of 64 GiB or more read whole,
# or faulted in through a mapping, cannot.
MAX_RESIDENT_BYTES = 2 << 30


def machine_memory_bytes():
    with open("/proc/meminfo") as info:
        for line in info:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no MemTotal in /proc/meminfo")


def main():
    binary = sys.argv[1]
    size = max(64 << 30, 2 * machine_memory_bytes())
    size -= size % 2  # a whole number of uint16 ids
    directory = os.environ.get("SHARDWISE_HUGE_FILE_DIR", tempfile.gettempdir())
    with tempfile.TemporaryDirectory(dir=directory) as folder:
        path = os.path.join(folder, "train.bin")
        try:
            with open(path, "wb") as f:
                f.truncate(size)
        except OSError as e:
            print(f"skipped: cannot make a sparse file of {size} bytes in {folder}: {e}")
            return SKIP
        allocated = os.stat(path).st_blocks * 512
        if allocated > 1 << 20:
            print(f"skipped: {folder} allocates sparse files ({allocated} bytes for {size})")
            return SKIP
        command = [binary, "train", "--model", "tiny", "--data", path, "--data-format",
                   "tokens-u16", "--steps", "3", "--batch", "4", "--eval-every", "3", "--json"]
        run = subprocess.run(command, capture_output=True, text=True, timeout=600)
        if run.returncode != 0:
            print(f"{' '.join(command)} exited {run.returncode}:\n{run.stderr}")
            return 1
        lines = [json.loads(line) for line in run.stdout.splitlines()]
        losses = [line["loss"] for line in lines if "loss" in line]
        if len(losses) != 3 or not all(loss == loss and loss < 1e9 for loss in losses):
            print(f"expected 3 finite losses, got {losses}")
            return 1
        # ru_maxrss is in KiB on Linux: the largest of the children waited for, here the one.
        resident = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
        print(f"trained 3 steps on a {size / 2**30:.0f} GiB token file "
              f"({machine_memory_bytes() / 2**30:.0f} GiB of memory here); peak resident "
              f"{resident / 2**20:.0f} MiB; losses {losses}")
        if resident > MAX_RESIDENT_BYTES:
            print(f"peak resident memory {resident} bytes exceeds {MAX_RESIDENT_BYTES}")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
