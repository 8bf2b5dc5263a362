"""Threads per job kind on a small CPU: one job with 2 threads alone, against two 1-thread jobs side by side.

For each job kind (the word LMs, a templates sweep group, a features classifier, a JoMA Table 1 cell, a Scan
and Snap vectorised set), the largest training step of one real job of the default DAG is timed with the
estimate's own probe (the function its ``Probe.run`` names in the paper's cost module, the job's code on random
data of the job's shape):

- ``alone_2``: one process with 2 torch threads, nothing else running;
- ``alone_1``: one process with 1 thread, nothing else running;
- ``pair_1``: two processes with 1 thread each, started together (the mean of their seconds per step).

Two 1-thread jobs side by side finish 2 steps in ``pair_1`` seconds; one 2-thread job finishes 1 step in
``alone_2``. ``pair_gain = 2 x alone_2 / pair_1`` > 1 means the two cores do more work as two 1-thread jobs.
Each process also reports its CPU seconds, so ``busy`` = CPU / wall says how many cores a 2-thread job keeps.

    python benchmarks/threads.py                 # needs the prepared data of a default run (results/data)
    python benchmarks/threads.py --out results/threads.json --kinds lm sweep

Run it with nothing else on the machine; it takes a few minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

# job kind -> (rule of a representative job, timed steps); the first job of the rule in the DAG is used
KINDS = {
    "lm": ("scan_snap_wikitext", 8),
    "lm_ptb": ("features_lm_word", 12),
    "sweep": ("templates_sweep", 3),
    "classifier": ("features_train", 10),
    "table1": ("joma_table1_cell", 40),
    "scan_snap": ("scan_snap_syn_medium", 10),
}


def representative(rule: str, results: str) -> tuple[str, dict]:
    """(label, probe) of the largest part of the first job of ``rule`` in the default DAG."""
    from featlearn.pipeline import estimate as est

    config = est.merged_config([], ROOT / "config")
    nodes = [n for n in est.build_dag(config, results) if n.rule == rule]
    if not nodes:
        raise SystemExit(f"no job of rule {rule} in the default DAG (is its data prepared under {results}?)")
    for node in nodes:
        cost = est.cost_model(node)(node, results)
        if cost is None or not cost.parts:
            continue
        part = max(cost.parts, key=lambda p: (p.flops_per_step or 0) * p.steps)
        return node.label, {"kind": part.probe.kind, "run": part.probe.run, "shape": part.probe.shape, "dim": part.probe.dim}
    raise SystemExit(f"no cost model for the jobs of {rule}")


CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
import torch
from featlearn.pipeline.registry import load
spec, threads, steps = json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
torch.set_num_threads(threads)
fn = load(spec["run"])
fn(spec["shape"], int(spec["shape"][spec["dim"]]), "cpu", 1, 1)  # warm-up, untimed
ru0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
out = fn(spec["shape"], int(spec["shape"][spec["dim"]]), "cpu", steps, 0)
ru1, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - t0
cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
print(json.dumps({"seconds_per_step": out["seconds_per_step"], "wall": wall, "cpu": cpu}))
"""


def run_together(spec: dict, threads: int, steps: int, copies: int) -> list[dict]:
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(ROOT / "src"), json.dumps(spec), str(threads), str(steps)],
                              stdout=subprocess.PIPE, text=True, env={**os.environ, "OMP_NUM_THREADS": str(threads)})
             for _ in range(copies)]
    out = []
    for p in procs:
        stdout, _ = p.communicate()
        if p.returncode:
            raise SystemExit(f"probe process failed ({p.returncode})")
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


def measure(kind: str, results: str) -> dict:
    rule, steps = KINDS[kind]
    label, spec = representative(rule, results)
    size = f"{spec['dim']}={spec['shape'][spec['dim']]}"
    print(f"[threads] {kind}: {label} ({spec['kind']}, {size}), {steps} steps", file=sys.stderr, flush=True)
    alone_2 = run_together(spec, 2, steps, 1)[0]
    alone_1 = run_together(spec, 1, steps, 1)[0]
    pair_1 = run_together(spec, 1, steps, 2)
    pair_step = sum(r["seconds_per_step"] for r in pair_1) / 2
    row = {
        "kind": kind, "job": label, "probe": spec["kind"],
        "alone_2_s_per_step": round(alone_2["seconds_per_step"], 4),
        "alone_2_cores_busy": round(alone_2["cpu"] / alone_2["wall"], 2),
        "alone_1_s_per_step": round(alone_1["seconds_per_step"], 4),
        "pair_1_s_per_step": round(pair_step, 4),
        "pair_gain": round(2 * alone_2["seconds_per_step"] / pair_step, 2),
    }
    print(f"[threads] {json.dumps(row)}", file=sys.stderr, flush=True)
    return row


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", default=str(ROOT / "results"), help="results folder with the prepared data")
    ap.add_argument("--kinds", nargs="*", default=list(KINDS), choices=list(KINDS))
    ap.add_argument("--out", default=None, help="JSON file of the rows (default: print only)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    write_record([measure(k, args.results) for k in args.kinds], t0, args.out)


def write_record(rows: list[dict], t0: float, out: str | None, **extra) -> None:
    """Print the benchmark's record (the machine, date, rows and seconds since ``t0``) and write it to ``out``."""
    record = {"cpus": os.cpu_count(), **extra, "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "rows": rows,
              "seconds": round(time.perf_counter() - t0, 1)}
    text = json.dumps(record, indent=1)
    if out:
        Path(out).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
