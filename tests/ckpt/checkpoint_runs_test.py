#!/usr/bin/env python3
"""Checkpoints of whole runs, as a user makes them.

  checkpoint_runs_test.py resume-mpi MPIEXEC SHARDWISE MODEL
      Under mpirun, a run stopped at step 3 and resumed gives the same losses, bit for bit, as
      one never stopped, for ZeRO 0 to 3 (stage 3 saved with --save-async) and HSDP; the
      checkpoint also continues in one process
      on one rank (another backend, another layout) within the trainer's tolerance.
  checkpoint_runs_test.py concurrent SHARDWISE MODEL
      Two runs started at once on one --save folder: one is refused with one line, and every
      checkpoint reported saved is whole.
  checkpoint_runs_test.py file-size-limit SHARDWISE MODEL [MPIEXEC]
      Under `ulimit -f`, saves, exports, imports and run logs fail with status 2 and one line,
      and leave no temporary file.
  checkpoint_runs_test.py disagree MPIEXEC SHARDWISE MODEL
      Ranks whose working directories hold different checkpoints at the --resume path are
      refused before any step.
  checkpoint_runs_test.py swapped SHARDWISE MODEL
      A run saving with --keep while another process swaps its step folders for symlinks to a
      user's folder: the user's files stay whole.
  checkpoint_runs_test.py import-mpi MPIEXEC SHARDWISE MODEL
      `ckpt import` under mpirun runs on the job's processes and reports once.
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


def save_under_way(folder, seconds):
    """Polls `folder` until a checkpoint is being written in it (a `.partial` name), at most
    `seconds`; whether one was seen."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if any(n.endswith(".partial") for n in os.listdir(folder)):
                return True
        except FileNotFoundError:
            pass
        time.sleep(0.0005)
    return False


def kill(shardwise, mpiexec=None):
    rng = random.Random(20261201)
    with tempfile.TemporaryDirectory() as work:
        folder = os.path.join(work, "ckpt")
        # More steps than the kills leave it time for: every kill finds the run still going.
        train = ["train", "--model", "tiny", "--steps", "100000", "--save", folder,
                 "--save-every", "1", "--keep", "2", "--mesh", "fsdp=2", "--zero", "3"]
        launcher = [mpiexec, "--quiet", "--oversubscribe", "-np", "2"] if mpiexec else []
        # A first checkpoint, so that every kill below has one to leave intact.
        first = list(train)
        first[first.index("100000")] = "2"
        run(*launcher, shardwise, *first)
        partial_seen = 0
        # At least 8 kills, and on until one has landed during a save (at most 24).
        attempt = -1
        while attempt < 7 or (partial_seen == 0 and attempt < 23):
            attempt += 1
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
            # Then the kill waits (up to two seconds) for a save under way, so that it lands
            # during one however fast this machine trains: a kill at a random moment alone
            # missed every save on a fast machine.
            if save_under_way(folder, seconds=2.0):
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
        if partial_seen == 0:
            sys.exit(f"no kill of {attempt + 1} landed during a save: the test showed nothing")
        print(f"resumed and finished; a save was under way at {partial_seen} of "
              f"{attempt + 1} kills")


def concurrent(shardwise, model):
    """Two runs started at once on one --save folder: one saves, the other is refused with one
    line (or, where the first finished before the second began, both save in turn); every
    checkpoint a run reports saved is whole, and nothing else is left in the folder."""
    for trial in range(6):
        with tempfile.TemporaryDirectory() as work:
            folder = os.path.join(work, "conc")
            runs = [subprocess.Popen([shardwise, "train", "--model", model, "--steps", "3",
                                      "--batch", "4", "--save", folder, "--save-every", "1",
                                      "--seed", str(seed)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                    for seed in (1, 2)]
            outcomes = [(p.wait(timeout=300), p.stdout.read(), p.stderr.read()) for p in runs]
            saved = []
            for status, out, err in outcomes:
                if status == 0:
                    saved += [line.split()[1] for line in out.splitlines()
                              if line.startswith("saved ")]
                elif status != 2 or len(err.splitlines()) != 1 or not (
                        "is in use: another run is saving into it" in err
                        or "is another run's checkpoint" in err):
                    sys.exit(f"trial {trial}: status {status}, {err!r}")
            if not saved:
                sys.exit(f"trial {trial}: no run saved: {outcomes}")
            for path in saved:
                check = run(shardwise, "ckpt", "inspect", "--verify", path, check=False)
                if check.returncode != 0:
                    sys.exit(f"trial {trial}: {path} was reported saved and does not verify: "
                             f"{check.stderr}")
            left = sorted(os.listdir(folder))
            if left != ["step-00000001", "step-00000002", "step-00000003"]:
                sys.exit(f"trial {trial}: the folder holds {left}")
            print(f"trial {trial}: statuses {[o[0] for o in outcomes]}, every saved step whole")


def file_size_limit(shardwise, model, mpiexec=None):
    """Under `ulimit -f` (the shell ignoring SIGXFSZ or not) a save, an export, an import and
    the run logs fail with one line and status 2, and leave no temporary file or folder."""
    import resource

    # OpenMPI's shared-memory transport needs files of about a megabyte itself (its MPI_Init
    # fails under 1 MiB): under mpirun the limit is 4 MiB, below each rank's file of tiny.
    limit = 4 << 20 if mpiexec else 16 << 10

    def limited(ignore_signal):
        def apply():
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN if ignore_signal else signal.SIG_DFL)
        return apply

    with tempfile.TemporaryDirectory() as work:
        big = ["--model", "tiny"]  # its checkpoint files are past 16 KiB
        run(shardwise, "train", *big, "--steps", "1", "--batch", "4", "--save",
            os.path.join(work, "ck"))
        run(shardwise, "ckpt", "export", os.path.join(work, "ck"), "--format", "hf-gpt2",
            "--out", os.path.join(work, "hf"))
        launch = [mpiexec, "--quiet", "--oversubscribe", "-np", "2", shardwise] if mpiexec else [
            shardwise]
        mesh = ["--mesh", "data=2"]
        cases = {
            "train": ["train", *big, "--steps", "1", "--batch", "4", *mesh, "--save",
                      os.path.join(work, "t")],
            "train async": ["train", *big, "--steps", "1", "--batch", "4", *mesh, "--save",
                            os.path.join(work, "a"), "--save-async"],
            "train fsdp keep": ["train", *big, "--steps", "2", "--batch", "4", "--mesh", "fsdp=2",
                                "--zero", "3", "--save", os.path.join(work, "k"),
                                "--save-every", "1", "--keep", "1"],
            "import": ["ckpt", "import", os.path.join(work, "hf"), "--format", "hf-gpt2", "--out",
                       os.path.join(work, "i")] + (["--ranks", "2"] if mpiexec else []),
            "log-dir": ["train", "--model", model, "--steps", "400", "--batch", "4", *mesh,
                        "--log-dir", os.path.join(work, "logs")],
        }
        if mpiexec:  # the import's and the logs' files stay below 4 MiB
            del cases["import"]
            del cases["log-dir"]
        else:
            cases["export"] = ["ckpt", "export", os.path.join(work, "ck"), "--format", "hf-gpt2",
                               "--out", os.path.join(work, "e")]
        for name, args in cases.items():
            for ignore in (False, True):
                result = subprocess.run(launch + args, capture_output=True, text=True,
                                        timeout=300, preexec_fn=limited(ignore))
                if result.returncode != 2 or "File too large" not in result.stderr or len(
                        result.stderr.strip().splitlines()) != 1:
                    sys.exit(f"{name} (SIGXFSZ {'ignored' if ignore else 'default'}): status "
                             f"{result.returncode}, {result.stderr!r}")
                for entry in os.listdir(work):
                    where = os.path.join(work, entry)
                    inside = os.listdir(where) if os.path.isdir(where) else []
                    if ".partial" in entry or any(".partial" in n for n in inside):
                        sys.exit(f"{name}: left {entry} {inside}")
                for entry in ("t", "a", "k", "i", "e"):
                    shutil.rmtree(os.path.join(work, entry), ignore_errors=True)
                shutil.rmtree(os.path.join(work, "logs"), ignore_errors=True)
            print(f"{name}: status 2, 'File too large', nothing left behind")


def disagree(mpiexec, shardwise, model):
    """Ranks on two hosts resume from the same path holding different bytes (two working
    directories stand for two hosts): refused before any step, naming both checkpoints."""
    with tempfile.TemporaryDirectory() as work:
        hosts = [os.path.join(work, "hostA"), os.path.join(work, "hostB")]
        for seed, host in zip((1, 2), hosts):
            os.makedirs(host)
            run(shardwise, "train", "--model", model, "--steps", "2", "--batch", "4", "--seed",
                str(seed), "--save", os.path.join(host, "ck"))
        for layout in (["--mesh", "data=2"], ["--mesh", "fsdp=2", "--zero", "3"]):
            train = [shardwise, "train", "--model", model, "--steps", "4", "--batch", "4",
                     "--resume", "ck", *layout]
            result = subprocess.run(
                [mpiexec, "--quiet", "--oversubscribe", "-np", "1", "--wdir", hosts[0], *train,
                 ":", "-np", "1", "--wdir", hosts[1], *train],
                capture_output=True, text=True, timeout=300)
            if (result.returncode != 2 or "the ranks found different checkpoints" not in
                    result.stderr or "step " in result.stdout.replace("at step", "")):
                sys.exit(f"{layout}: status {result.returncode}, {result.stderr!r}, "
                         f"{result.stdout!r}")
            print(f"{' '.join(layout)}: refused: {result.stderr.strip()}")


def import_mpi(mpiexec, shardwise, model):
    """`ckpt import` under mpirun: the job's processes are its ranks (a --ranks that says
    otherwise is refused with one line), and one line reports the import."""
    with tempfile.TemporaryDirectory() as work:
        run(shardwise, "train", "--model", model, "--steps", "1", "--batch", "4", "--save",
            os.path.join(work, "ck"))
        run(shardwise, "ckpt", "export", os.path.join(work, "ck"), "--format", "hf-gpt2",
            "--out", os.path.join(work, "hf"))
        launch = [mpiexec, "--quiet", "--oversubscribe", "-np", "2", shardwise, "ckpt", "import",
                  os.path.join(work, "hf"), "--format", "hf-gpt2", "--out",
                  os.path.join(work, "out")]
        refused = run(*launch, "--ranks", "3", check=False)
        if (refused.returncode != 2 or refused.stdout or refused.stderr.count("\n") != 1 or
                "--ranks is 3, but the job has 2 processes" not in refused.stderr):
            sys.exit(f"--ranks 3 on 2 processes: {refused.returncode} {refused.stderr!r}")
        done = run(*launch)
        lines = done.stdout.splitlines()
        if len(lines) != 1 or "without optimizer state, 2 ranks" not in lines[0]:
            sys.exit(f"the import said {done.stdout!r}")
        files = sorted(os.listdir(os.path.join(work, "out")))
        if files != ["index.json", "rank-00000.safetensors", "rank-00001.safetensors"]:
            sys.exit(f"the import wrote {files}")
        print("import under mpirun: the job's 2 processes, one line")


def swapped(shardwise, model):
    """While a run saves every step with --keep 1, another process keeps swapping each step's
    folder with a symlink to a user's folder (renameat2's RENAME_EXCHANGE, twice, as fast as it
    can): whatever the run does, the user's files stay byte for byte."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    with tempfile.TemporaryDirectory() as work:
        victim = os.path.join(work, "victim")
        os.makedirs(victim)
        files = {"index.json": b"{}", "rank-00000.safetensors": b"weights", "notes.txt": b"mine"}
        for name, data in files.items():
            with open(os.path.join(victim, name), "wb") as f:
                f.write(data)
        folder = os.path.join(work, "ck")
        process = subprocess.Popen([shardwise, "train", "--model", model, "--steps", "300",
                                    "--batch", "4", "--save", folder, "--save-every", "1",
                                    "--keep", "1"], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, text=True)
        swaps = 0
        while process.poll() is None:
            for name in os.listdir(folder) if os.path.isdir(folder) else []:
                if not name.startswith("step-"):
                    continue
                path = os.path.join(folder, name).encode()
                link = os.path.join(folder, ".x" + name)
                if not os.path.lexists(link):
                    os.symlink(victim, link)
                for _ in range(2):
                    libc.renameat2(-100, path, -100, link.encode(), 2)
                swaps += 1
        status = process.wait()
        for name, data in files.items():
            path = os.path.join(victim, name)
            if not os.path.exists(path):
                sys.exit(f"the user's {name} was removed ({swaps} swaps, run status {status})")
            with open(path, "rb") as f:
                if f.read() != data:
                    sys.exit(f"the user's {name} changed ({swaps} swaps, run status {status})")
        if sorted(os.listdir(victim)) != sorted(files):
            sys.exit(f"the user's folder holds {os.listdir(victim)}")
        if status not in (0, 2):
            sys.exit(f"the run ended with status {status}: {process.stderr.read()}")
        print(f"{swaps} swaps, run status {status}: the user's files are whole")


def main():
    if sys.argv[1] == "resume-mpi":
        resume_mpi(*sys.argv[2:5])
    elif sys.argv[1] == "kill":
        kill(*sys.argv[2:4])
    elif sys.argv[1] == "concurrent":
        concurrent(*sys.argv[2:4])
    elif sys.argv[1] == "file-size-limit":
        file_size_limit(*sys.argv[2:5])
    elif sys.argv[1] == "disagree":
        disagree(*sys.argv[2:5])
    elif sys.argv[1] == "swapped":
        swapped(*sys.argv[2:4])
    elif sys.argv[1] == "import-mpi":
        import_mpi(*sys.argv[2:5])
    else:
        sys.exit(f"unknown mode {sys.argv[1]}")
    print("ok")


if __name__ == "__main__":
    main()
