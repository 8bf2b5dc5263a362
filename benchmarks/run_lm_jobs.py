"""Run the WikiText LM jobs of JoMA Figs. 6 and 8 and Scan and Snap Fig. 10 at a scale, outside Snakemake (on a
machine without it, e.g. a lent GPU), several at once, each through ``python -m featlearn compute`` with the
settings its registry gives, writing the tables under their pipeline paths in ``--results``.

    python benchmarks/run_lm_jobs.py --scale default --prepared results/data/prepared --device cuda --parallel 6

Only the jobs whose dataset is prepared under ``--prepared`` run. Copy ``--results`` over the pipeline's
``results/`` and Snakemake takes the tables as made (it has no record of their code or parameters, so it
does not rerun them). Needs torch, pandas and pyyaml.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))


def lm_jobs(scale: str, results: Path, prepared: Path) -> list[dict]:
    """(name, run, settings, inputs, outputs) of every LM job of the three figures whose data is prepared."""
    from featlearn.joma.registry import registry as joma_registry
    from featlearn.lm_bench import load_config
    from featlearn.pipeline.registry import Paths
    from featlearn.scan_snap.registry import lm_runs

    config = load_config(scale)
    paths = Paths(str(results))
    jobs = []
    wiki = config["joma"]["wikitext"]
    runs = {(d, L, wiki["fig6"]["lr"], s) for d in wiki["datasets"] for L in wiki["fig6"]["layers"] for s in wiki["seeds"]}
    f8 = wiki["fig8"]
    runs |= {(d, f8["n_layer"], lr, s) for d in f8["datasets"] for lr in f8["lrs"] for s in wiki["seeds"]}
    job = next(j for j in joma_registry(config, paths, lambda d: True).jobs if j.name == "joma_wikitext")
    for d, L, lr, s in sorted(runs):
        wc = SimpleNamespace(dataset=d, n_layer=str(L), lr=f"{lr:g}", seed=str(s))
        jobs.append({"name": f"joma {d} L{L} lr{lr:g} s{s}", "dataset": d, "run": job.run,
                     "settings": json.loads(job.settings_json(wc)),
                     "outputs": {k: v.format(**vars(wc)) for k, v in job.outputs.items()}})
    ss = config["scan_snap"]
    for name, (d, settings) in lm_runs(ss).items():
        if name.startswith("fig10_"):
            jobs.append({"name": f"scan_snap {name}", "dataset": d, "run": "featlearn.scan_snap.wikitext:run_variant",
                         "settings": settings,
                         "outputs": {"log": paths.paper("scan_snap", "lm", f"{name}_log.csv"),
                                     "maps": paths.paper("scan_snap", "lm", f"{name}_maps.csv")}})
    for j in jobs:
        j["inputs"] = {k: str(prepared / j["dataset"] / f)
                       for k, f in (("train", "train.pt"), ("valid", "valid.pt"), ("vocab", "vocab.json"))}
    return [j for j in jobs if Path(j["inputs"]["train"]).is_file()]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", default="default")
    p.add_argument("--prepared", default="results/data/prepared")
    p.add_argument("--results", default="results")
    p.add_argument("--device", default="cuda")
    p.add_argument("--parallel", type=int, default=4)
    p.add_argument("--work", default="/tmp/run_lm_jobs")
    args = p.parse_args(argv)
    jobs = lm_jobs(args.scale, Path(args.results), Path(args.prepared))
    print(f"{len(jobs)} jobs at scale {args.scale}", flush=True)
    pending, running, t0 = list(jobs), [], time.perf_counter()
    while pending or running:
        while pending and len(running) < args.parallel:
            j = pending.pop(0)
            for out in j["outputs"].values():
                Path(out).parent.mkdir(parents=True, exist_ok=True)
            log = Path(j["outputs"]["log"]).with_suffix(".stderr.log")
            cmd = [sys.executable, "-m", "featlearn", "compute", "--run", j["run"], "--settings", json.dumps(j["settings"]),
                   "--inputs", json.dumps(j["inputs"]), "--outputs", json.dumps(j["outputs"]), "--threads", "2",
                   "--device", args.device, f"--work-dir={Path(args.work) / j['name'].replace(' ', '_')}"]
            running.append((j, subprocess.Popen(cmd, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                                                env={**os.environ, "PYTHONPATH": str(REPO / "src")})))
        for j, proc in list(running):
            if proc.poll() is not None:
                running.remove((j, proc))
                print(f"{j['name']}: rc {proc.returncode} at {time.perf_counter() - t0:.0f}s", flush=True)
        time.sleep(0.5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
