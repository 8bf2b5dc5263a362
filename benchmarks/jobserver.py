"""What the job server (``featlearn.pipeline.jobserver``, ``job_server: true``) saves per job: CPU seconds of the same
smoke-scale compute jobs run as fresh ``python -m featlearn`` processes and through a server's workers.

Starts one server, then runs each job ``--repeats`` times each way, alternating. A fresh job's CPU is its
process's own (``wait4``); a served job's is the client's plus the worker's (the usage record the client
writes). Prints the median of each and the server's own start-up CPU, which a run pays once.

    python benchmarks/jobserver.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")
sys.path.insert(0, SRC)

from featlearn import jobserver  # noqa: E402

# (label, --run, settings) of compute jobs that need no input files, at the smoke overlay's settings
TRANSFORMER = {"d_emb": 16, "d_head": 8, "d_mlp": 32, "depth": 1, "heads": 2, "kq_mult": 30, "vo_mult": 100}
JOBS = (
    ("templates sweep (Fig. 22 grid)", "featlearn.templates.sweeps.experiments:sweep",
     {"grid": "22", "sweeps": {"batch": 1024, "epochs": 5, "fig22": {"lrs": [0.001], "n": [8, 32]}, "max_group": 64,
                               "mlp": {"depth": 3, "hidden": 32}, "rnn": {"hidden": 16}, "seeds": 1,
                               "transformer": TRANSFORMER}}),
    ("scan_snap generator check", "featlearn.scan_snap.experiments:generator_check",
     {"batch": 512, "batches": 4, "seed": 0, "seq_len": 128}),
)


def run(run_fn: str, settings: dict, tmp: str, socket: str | None) -> float:
    """CPU seconds of one job: the process's own, plus its worker's when it went through the server."""
    usage = os.path.join(tmp, "job.tsv.server.json")
    if os.path.exists(usage):
        os.remove(usage)
    env = dict(os.environ, PYTHONPATH=SRC)
    env.pop(jobserver.SOCKET_ENV, None)
    if socket:
        env.update({jobserver.SOCKET_ENV: socket, jobserver.USAGE_ENV: usage})
    outputs = {"out": os.path.join(tmp, "out.csv"), "runs": os.path.join(tmp, "runs.csv"), "freq": os.path.join(tmp, "freq.csv")}
    cmd = [sys.executable, "-m", "featlearn", "compute", "--run", run_fn, "--settings", json.dumps(settings),
           "--outputs", json.dumps(outputs), "--threads", "1", "--device", "cpu"]
    proc = subprocess.Popen(cmd, env=env, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status):
        raise subprocess.CalledProcessError(os.waitstatus_to_exitcode(status), cmd)
    cpu = ru.ru_utime + ru.ru_stime
    if socket:
        with open(usage) as f:
            cpu += sum(json.loads(line)["cpu_s"] for line in f)
    return cpu


def _cpu_of(pid: int) -> float | None:
    """User + system CPU seconds of a live process (Linux /proc), without its children."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        handle = jobserver.start(os.path.join(tmp, "server.log"), SRC, os.getpid())
        if handle is None:
            sys.exit("the job server did not start")
        socket = os.environ[jobserver.SOCKET_ENV]
        try:
            times = {label: {"fresh": [], "served": []} for label, _, _ in JOBS}
            for _ in range(args.repeats):
                for label, run_fn, settings in JOBS:
                    times[label]["fresh"].append(run(run_fn, settings, tmp, None))
                    times[label]["served"].append(run(run_fn, settings, tmp, socket))
            server_cpu = _cpu_of(handle[0].pid)  # before it is stopped and reaped
        finally:
            jobserver.stop(handle)
    print(f"CPU seconds per job, median of {args.repeats} (fresh process vs job server worker + client):")
    for label, t in times.items():
        fresh, served = statistics.median(t["fresh"]), statistics.median(t["served"])
        print(f"  {label}: fresh {fresh:.2f} s, served {served:.2f} s ({fresh / served:.1f}x)")
    if server_cpu is not None:
        print(f"  the server's own start-up and bookkeeping: {server_cpu:.2f} s (once per run)")


if __name__ == "__main__":
    main()
