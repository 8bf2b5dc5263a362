"""The templates sweep grids with ``templates.sweeps.flush_denormal`` off and on: wall time of each job and whether
its table is byte-identical, as Markdown.

    python benchmarks/flush_denormal.py --grids 5 8 17 calibration --jobs 2 [--configfile config/smoke.yaml] [--out DIR]
    python benchmarks/flush_denormal.py --grids 5 --against results   # "off": that results folder's tables and
                                                                      # benchmark files (a `make run` of this config)
    python benchmarks/flush_denormal.py --grids 3c --against results --against-switch on   # that run had it on

A grid is a templates sweep grid (``5``, ``3c``, ...) or ``calibration`` (job ``templates_calibration``). Each runs
as its compute job does (``python -m featlearn compute`` with the job's settings from the templates registry; 1
thread), ``--jobs`` at a time, the two switches of a grid one after the other. With ``--against``, only the other
switch's jobs run, and the side named by ``--against-switch`` (default ``off``) is read from that results folder (the
job's table, e.g. ``templates/sweeps/fig<grid>_runs.csv``, and its benchmark file, e.g.
``benchmarks/templates/sweep_fig<grid>.tsv``); run them with as many jobs beside them as that run had (``--jobs 2``
for a 2-core `make run`). Tables and logs go to ``--out``.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def compute_job(cfg: dict, grid: str, flush: bool, results: str = "results"):
    """The templates registry's compute job of ``grid`` under ``cfg`` with the switch set to ``flush``: (job,
    wildcards, its table's path and its benchmark file's path under ``results``)."""
    from types import SimpleNamespace

    from featlearn.pipeline.registry import Paths
    from featlearn.templates.registry import registry

    templates = {**cfg["templates"], "sweeps": {**cfg["templates"]["sweeps"], "flush_denormal": flush}}
    paths = Paths(results)
    jobs = {j.name: j for j in registry({**cfg, "templates": templates}, paths, lambda name: False).jobs}
    job, wc = ((jobs["templates_calibration"], SimpleNamespace()) if grid == "calibration"
               else (jobs["templates_sweep"], SimpleNamespace(grid=grid)))
    table = job.outputs["runs"].format(grid=grid)
    return job, wc, Path(table), Path(paths.benchmark(job.paper, job.stem.format(grid=grid)))


def job_command(cfg: dict, grid: str, flush: bool, out: Path) -> list[str]:
    job, wc, _, _ = compute_job(cfg, grid, flush)
    return [sys.executable, "-m", "featlearn", "compute", "--run", job.run, "--settings", job.settings_json(wc),
            "--outputs", json.dumps({"runs": str(out)}), "--threads", "1", "--device", "cpu"]


def run(cmd: list[str], log: Path) -> tuple[int, float]:
    start = time.perf_counter()
    with open(log, "w") as f:
        rc = subprocess.run(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT).returncode
    return rc, time.perf_counter() - start


def main(argv=None) -> None:
    from featlearn.pipeline.estimate import merged_config

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--grids", nargs="+", required=True)
    ap.add_argument("--configfile", nargs="*", default=[], help="overlays merged onto config/config.yaml")
    ap.add_argument("--jobs", type=int, default=2, help="jobs at a time")
    ap.add_argument("--against", default=None, help="a results folder whose tables and benchmark files are one side")
    ap.add_argument("--against-switch", choices=("off", "on"), default="off",
                    help="which side the --against folder holds (the other side runs here)")
    ap.add_argument("--out", default="flush_denormal_out")
    a = ap.parse_args(argv)
    cfg = merged_config(a.configfile, ROOT / "config")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)

    def grid_row(grid: str) -> str:
        sides = {}  # switch -> (exit code, seconds, table)
        for switch in ("off", "on"):
            if a.against and switch == a.against_switch:
                _, _, table, bench = compute_job(cfg, grid, switch == "on", a.against)
                sides[switch] = 0, float(bench.read_text().splitlines()[-1].split("\t")[0]), table
            else:
                name = grid if grid == "calibration" else f"fig{grid}"
                table = out / f"{name}_{switch}.csv"
                sides[switch] = (*run(job_command(cfg, grid, switch == "on", table), out / f"{name}_{switch}.log"), table)
        (off_rc, off_s, off_csv), (on_rc, on_s, on_csv) = sides["off"], sides["on"]
        same = off_rc == on_rc == 0 and filecmp.cmp(off_csv, on_csv, shallow=False)
        row = f"| {grid} | {off_s:.1f} | {on_s:.1f} | {off_s / on_s:.2f} | {'yes' if same else 'NO'} |"
        print(row, flush=True)
        return row if off_rc == on_rc == 0 else row + f" (exit {off_rc}, {on_rc}: see {out})"

    print("| grid | off, s | on, s | speed-up | table byte-identical |\n|---|---|---|---|---|", flush=True)
    with ThreadPoolExecutor(max(1, a.jobs)) as pool:
        rows = list(pool.map(grid_row, a.grids))
    (out / "summary.md").write_text("| grid | off, s | on, s | speed-up | table byte-identical |\n|---|---|---|---|---|\n"
                                    + "\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
