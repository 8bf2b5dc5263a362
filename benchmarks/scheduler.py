"""Snakemake's own CPU with its two schedulers: the ILP (the default, PuLP with CBC) against the greedy one.

Runs the same DAG from an empty results folder once per scheduler, each in a fresh copy of the workflow,
with the data mirror, and reports the wall time, the CPU of the whole run (Snakemake and every job, from
``wait4`` on the Snakemake process) and Snakemake's own CPU (its main process: the scheduler, the benchmark
threads that sample each job's memory, the bookkeeping). The CBC solver runs in child processes, so the
whole run's CPU is what tells the schedulers apart; the jobs are the same.

    python benchmarks/scheduler.py                            # the smoke DAG, 2 cores
    python benchmarks/scheduler.py --configfile config/config.yaml --target fig_joma_4

Run it with nothing else on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COPIED = ("Snakefile", "workflow", "config", "src", "envs", "profiles")

# Snakemake in this process, so that its own CPU can be read at its end (children: the jobs and the solver)
CHILD = r"""
import json, os, resource, sys, time
import snakemake.cli
t0 = time.time()
code = 0
try:
    snakemake.cli.main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code or 0
me = resource.getrusage(resource.RUSAGE_SELF)
print("SCHEDULER-RESULT " + json.dumps({"status": code, "wall_s": time.time() - t0,
      "self_cpu_s": me.ru_utime + me.ru_stime}), flush=True)
sys.exit(0)
"""


def run_once(scheduler: str, configfiles: list[str], targets: list[str], cores: int) -> dict:
    work = Path(tempfile.mkdtemp(prefix=f"featlearn-sched-{scheduler}-"))
    try:
        for name in COPIED:
            src = ROOT / name
            (shutil.copytree if src.is_dir() else shutil.copy2)(src, work / name)
        argv = ["--cores", str(cores), "--workflow-profile", "profiles/default", "--scheduler", scheduler,
                "--configfile", *configfiles, "--", *targets]
        pid = os.fork()
        if pid == 0:  # the child: Snakemake, with its output thrown away but for the result line
            os.chdir(work)
            log = os.open(str(work / "snakemake.log"), os.O_WRONLY | os.O_CREAT)
            os.dup2(log, 1)
            os.dup2(log, 2)
            os.execv(sys.executable, [sys.executable, "-c", CHILD, *argv])
        _, status, usage = os.wait4(pid, 0)
        text = (work / "snakemake.log").read_text()
        total = usage.ru_utime + usage.ru_stime  # Snakemake and all it waited for
        result = json.loads(text.split("SCHEDULER-RESULT ", 1)[1].splitlines()[0])
        return {"scheduler": scheduler, "exit": os.waitstatus_to_exitcode(status), "snakemake_status": result["status"],
                "total_cpu_s": round(total, 1), "snakemake_self_cpu_s": round(result["self_cpu_s"], 1),
                "jobs_done": text.count("Finished jobid")}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--configfile", nargs="*", default=["config/smoke.yaml"])
    ap.add_argument("--target", nargs="*", default=[], help="targets (default: the whole DAG)")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1, help="runs per scheduler, alternating")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    rows = []
    for _ in range(args.repeat):
        for scheduler in ("ilp", "greedy"):
            t0 = time.time()
            row = run_once(scheduler, args.configfile, args.target, args.cores)
            row["wall_s"] = round(time.time() - t0, 1)
            print(json.dumps(row), flush=True)
            rows.append(row)
    if args.out:
        record = {"cores": args.cores, "configfiles": args.configfile, "rows": rows}
        Path(args.out).write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
