#!/usr/bin/env python3
"""Checkpoints of whole runs, as a user makes them.

  checkpoint_runs_test.py resume-mpi MPIEXEC SHARDWISE MODEL
      Under mpirun, a run stopped at step 3 and resumed gives the same losses, bit for bit, as
      one never stopped, for ZeRO 0 to 3 (stage 3 saved with --save-async) and HSDP; the
      checkpoint also continues in one process
      on one rank (another backend, another layout) within the trainer's tolerance.
  checkpoint_runs_test.py kill SHARDWISE [MPIEXEC]
      A run saving every step is killed with SIGKILL at random moments (every rank's process,
      or under mpirun one rank's process); every checkpoint left in the folder is whole (every
      checksum verifies) and the newest resumes.
"""
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time


def run(*args, check=True):
    result = subprocess.run(args, capture_output=True, text=True, timeout=300)
    if check and result.returncode != 0:
        sys.exit(f"{' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
    return result


def losses(output):
    return {line["step"]: line["loss"] for line in map(json.loads, output.splitlines())
            if "step" in line}


def resume_mpi(mpiexec, shardwise, model):
    launch = [mpiexec, "--quiet", "--oversubscribe", "-np", "4", shardwise]
    with tempfile.TemporaryDirectory() as work:
        for layout, saving in ((["--mesh", "data=4"], []),
                               (["--mesh", "fsdp=4", "--zero", "1"], []),
                               (["--mesh", "fsdp=4", "--zero", "2"], []),
                               (["--mesh", "fsdp=4", "--zero", "3"], ["--save-async"]),
                               (["--mesh", "data=2,fsdp=2", "--zero", "3"], [])):
            train = ["train", "--model", model, "--steps", "6", "--batch", "8", "--json"] + layout
            whole = losses(run(*launch, *train).stdout)
            folder = os.path.join(work, "_".join(layout).replace("=", "").replace(",", ""))
            run(*launch, *train, "--save", folder, "--save-every", "3", *saving)
            shutil.rmtree(os.path.join(folder, "step-00000006"))
            resumed = losses(run(*launch, *train, "--resume", folder).stdout)
            if sorted(resumed) != [4, 5, 6] or any(resumed[s] != whole[s] for s in resumed):
                sys.exit(f"{layout}: resumed {resumed}, uninterrupted {whole}")
            print(f"{' '.join(layout + saving)}: steps 4 to 6 resumed bit for bit under mpirun")
            # In one process on one rank: another backend and layout.
            one = losses(run(shardwise, "train", "--model", model, "--steps", "6", "--batch", "8",
                             "--json", "--backend", "local", "--resume", folder).stdout)
            if any(abs(one[s] - whole[s]) > 1e-4 for s in one):
                sys.exit(f"{layout}: on one rank {one}, uninterrupted {whole}")


def descendants(pid):
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(parent, []).append(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill(shardwise, mpiexec=None):
    rng = random.Random(20261201)
    with tempfile.TemporaryDirectory() as work:
        folder = os.path.join(work, "ckpt")
        train = ["train", "--model", "tiny", "--steps", "400", "--save", folder,
                 "--save-every", "1", "--keep", "2", "--mesh", "fsdp=2", "--zero", "3"]
        launcher = [mpiexec, "--quiet", "--oversubscribe", "-np", "2"] if mpiexec else []
        # A first checkpoint, so that every kill below has one to leave intact.
        first = list(train)
        first[first.index("400")] = "2"
        run(*launcher, shardwise, *first)
        partial_seen = 0
        for attempt in range(8):
            if mpiexec:
                command = [mpiexec, "--quiet", "--oversubscribe", "-np", "2", shardwise] + train
            else:
                command = [shardwise] + train + ["--backend", "local"]
            command += ["--resume", folder]
            process = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL, start_new_session=True)
            # mpirun takes a second or two to start its processes.
            time.sleep(rng.uniform(1.5, 4.0) if mpiexec else rng.uniform(0.3, 1.5))
            if mpiexec:  # one rank's process dies; mpirun ends the others
                ranks = [p for p in descendants(process.pid)
                         if "shardwise" in open(f"/proc/{p}/cmdline", "rb").read().decode(errors="replace")]
                victim = rng.choice(ranks) if ranks else process.pid
            else:
                victim = process.pid
            if os.path.isdir(folder) and any(n.endswith(".partial") for n in os.listdir(folder)):
                partial_seen += 1
            os.kill(victim, signal.SIGKILL)
            process.wait(timeout=60)
            if mpiexec:
                os.killpg(process.pid, signal.SIGKILL) if process.poll() is None else None
            names = sorted(os.listdir(folder))
            if not any(n.startswith("step-") for n in names):
                sys.exit(f"after kill {attempt}: no checkpoint left in {names}")
            for name in names:
                if name.startswith("step-"):
                    check = run(shardwise, "ckpt", "inspect", "--verify",
                                os.path.join(folder, name), check=False)
                    if check.returncode != 0:
                        sys.exit(f"after kill {attempt}: {name} does not verify: {check.stderr}")
            print(f"kill {attempt}: left {names}")
        # The newest resumes, and trains on.
        newest = max(int(n[5:]) for n in os.listdir(folder) if n.startswith("step-"))
        result = run(shardwise, "train", "--model", "tiny", "--steps", str(newest + 2), "--resume",
                     folder, "--backend", "local", "--mesh", "fsdp=2", "--zero", "3", "--json")
        if sorted(losses(result.stdout)) != [newest + 1, newest + 2]:
            sys.exit(f"resuming step {newest} ran {result.stdout}")
        print(f"resumed and finished; a save was under way at {partial_seen} of 8 kills")


def main():
    if sys.argv[1] == "resume-mpi":
        resume_mpi(*sys.argv[2:5])
    elif sys.argv[1] == "kill":
        kill(*sys.argv[2:4])
    else:
        sys.exit(f"unknown mode {sys.argv[1]}")
    print("ok")


if __name__ == "__main__":
    main()
