"""The first minute of real paper-scale LM jobs: the job's own settings (config.yaml + paper.yaml, composed by
the paper's registry exactly as its Snakemake rule does) on prepared WikiText-2 data, run through
``python -m featlearn compute`` for ``--seconds`` and stopped. The job's progress lines (steps/s with its
evaluations on the whole validation split included) give the time per step; the full budget follows from the
job's own step count.

    python benchmarks/paper_first_steps.py --prepared results/data/prepared --device cuda --seconds 60 --out DIR

Writes DIR/<job>.log (the job's own log) and DIR/first_steps.json (one row per job: settings, steps reached,
steps/s, the job's total steps and the projected hours). Needs torch and pyyaml (no snakemake).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

# (paper, job, wildcards) of the runs timed: JoMA Fig. 6's shallowest and deepest model and Scan and Snap's
# Fig. 10 at its largest learning rate, all on WikiText-2 (the data that travels; WikiText-103's step differs
# by its vocabulary: lm-bench times that with random tokens).
RUNS = (
    ("joma", "joma_wikitext", {"dataset": "wikitext2", "n_layer": "1", "lr": "0.0001", "seed": "1"}),
    ("joma", "joma_wikitext", {"dataset": "wikitext2", "n_layer": "10", "lr": "0.0001", "seed": "1"}),
    ("scan_snap", "scan_snap_wikitext", {"variant": "fig10_wikitext2_lr5"}),
)
PROGRESS = re.compile(r"progress: (\d+) steps in (\d+)s, ([0-9.e+-]+) steps/s")


def job_settings(paper: str, name: str, wildcards: dict) -> dict:
    from featlearn.lm_bench import load_config
    from featlearn.pipeline.registry import Paths

    config = load_config("paper")
    module = __import__(f"featlearn.{paper}.registry", fromlist=["registry"])
    reg = module.registry(config, Paths(), lambda dataset: True)
    job = next(j for j in reg.jobs if j.name == name)
    return json.loads(job.settings_json(SimpleNamespace(**wildcards)))


def steps_per_epoch(prepared: Path, dataset: str, batch: int = 20, bptt: int = 35) -> int:
    stats = json.loads((prepared / dataset / "stats.json").read_text())
    return (stats["splits"]["train"]["n_tokens"] // batch - 1) // bptt


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prepared", default="results/data/prepared")
    p.add_argument("--device", default="cuda")
    p.add_argument("--seconds", type=int, default=60)
    p.add_argument("--out", required=True)
    p.add_argument("--fig10", action="store_true",
                   help="instead: run every Scan and Snap Fig. 10 WikiText-2 job to completion, all at once, and tar the tables")
    p.add_argument("--work", default=None, help="resume folders (default: a temporary folder; they are large)")
    args = p.parse_args(argv)
    out, prepared = Path(args.out), Path(args.prepared)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.work or tempfile.mkdtemp(prefix="first_steps_"))
    if args.fig10:
        return whole_fig10(prepared, args.device, args.seconds, out, work)
    rows = []
    for paper, name, wildcards in RUNS:
        settings = job_settings(paper, name, wildcards)
        dataset = wildcards.get("dataset", "wikitext2")
        tag = f"{name}_" + "_".join(wildcards.values())
        inputs = {k: str(prepared / dataset / f)
                  for k, f in (("train", "train.pt"), ("valid", "valid.pt"), ("vocab", "vocab.json"))}
        outputs = {"log": str(out / f"{tag}.csv"), "maps": str(out / f"{tag}_maps.csv")}
        run = {"joma": "featlearn.joma.wikitext:run", "scan_snap": "featlearn.scan_snap.wikitext:run_variant"}[paper]
        cmd = [sys.executable, "-m", "featlearn", "compute", "--run", run, "--settings", json.dumps(settings),
               "--inputs", json.dumps(inputs), "--outputs", json.dumps(outputs), "--threads", "4", "--device", args.device,
               f"--work-dir={work / (tag + '.resume')}"]
        log_path = out / f"{tag}.log"
        print(f"== {tag} ({args.seconds}s): {shlex.join(cmd)[:300]}", flush=True)
        t0 = time.perf_counter()
        with open(log_path, "w") as log:
            try:
                subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=args.seconds,
                               env={**os.environ, "PYTHONPATH": str(REPO / "src")})
            except subprocess.TimeoutExpired:
                pass
        found = PROGRESS.findall(log_path.read_text())
        per_epoch = steps_per_epoch(prepared, dataset)
        total = round(settings["epochs"] * per_epoch) if "epochs" in settings else settings["iterations"]
        row = {"job": name, "wildcards": wildcards, "settings": settings, "seconds": round(time.perf_counter() - t0, 1),
               "steps_per_epoch": per_epoch, "total_steps": total}
        if found:
            steps, secs, rate = found[-1]
            row |= {"steps_reached": int(steps), "steps_per_s": float(rate), "projected_hours": total / float(rate) / 3600}
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "settings"}), flush=True)
    (out / "first_steps.json").write_text(json.dumps(rows, indent=1))
    return 0


def whole_fig10(prepared: Path, device: str, seconds: int, out: Path, work: Path) -> int:
    """Scan and Snap Fig. 10 on WikiText-2 at paper scale: its jobs side by side on one device, tables in one tarball."""
    import tarfile

    from featlearn.lm_bench import load_config

    cfg = load_config("paper")["scan_snap"]["wikitext"]["fig10"]
    inputs = {k: str(prepared / "wikitext2" / f)
              for k, f in (("train", "train.pt"), ("valid", "valid.pt"), ("vocab", "vocab.json"))}
    procs, tables = [], []
    for lr in cfg["lrs"]:
        variant = f"fig10_wikitext2_lr{lr:g}"
        settings = job_settings("scan_snap", "scan_snap_wikitext", {"variant": variant})
        outputs = {"log": str(out / f"{variant}_log.csv"), "maps": str(out / f"{variant}_maps.csv")}
        tables += [outputs["log"], outputs["maps"], str(out / f"{variant}.log")]
        cmd = [sys.executable, "-m", "featlearn", "compute", "--run", "featlearn.scan_snap.wikitext:run_variant", "--settings",
               json.dumps(settings), "--inputs", json.dumps(inputs), "--outputs", json.dumps(outputs), "--threads", "2",
               "--device", device, f"--work-dir={work / variant}"]
        log = open(out / f"{variant}.log", "w")
        procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                      env={**os.environ, "PYTHONPATH": str(REPO / "src")}))
    t0 = time.perf_counter()
    for proc in procs:
        try:
            proc.wait(timeout=max(1, seconds - (time.perf_counter() - t0)))
        except subprocess.TimeoutExpired:
            proc.kill()
    print(f"fig10 wikitext2: {len(procs)} jobs, return codes {[p.returncode for p in procs]}, {time.perf_counter() - t0:.0f}s")
    with tarfile.open(out / "fig10_wikitext2.tar.gz", "w:gz") as tar:
        for path in tables:
            if Path(path).exists():
                tar.add(path, arcname=Path(path).name)
                Path(path).unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
