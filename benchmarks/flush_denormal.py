"""The templates sweep grids with ``templates.sweeps.flush_denormal`` off and on: wall time of each job and whether
its table is byte-identical, as Markdown.

    python benchmarks/flush_denormal.py --grids 5 8 17 --jobs 2 [--configfile config/smoke.yaml] [--out DIR]
    python benchmarks/flush_denormal.py --grids 5 --against results   # "off": that results folder's tables and
                                                                      # benchmark files (a `make run` of this config)

Each grid runs as its compute job does (``python -m featlearn compute`` with the settings the workflow gives it,
``featlearn.templates.registry.sweep_settings``; 1 thread), ``--jobs`` at a time, the two switches of a grid one after
the other. With ``--against``, only the "on" jobs run and the "off" side is read from that results folder
(``templates/sweeps/fig<grid>_runs.csv`` and ``benchmarks/templates/sweep_fig<grid>.tsv``); run them with as many
jobs beside them as that run had (``--jobs 2`` for a 2-core `make run`). Tables and logs go to ``--out``.
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


def job_command(cfg: dict, grid: str, flush: bool, out: Path) -> list[str]:
    from featlearn.templates.registry import sweep_settings

    templates = {**cfg["templates"], "sweeps": {**cfg["templates"]["sweeps"], "flush_denormal": flush}}
    return [sys.executable, "-m", "featlearn", "compute", "--run", "featlearn.templates.sweeps.experiments:sweep",
            "--settings", json.dumps(sweep_settings(templates, grid)), "--outputs", json.dumps({"runs": str(out)}),
            "--threads", "1", "--device", "cpu"]


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
    ap.add_argument("--against", default=None, help="a results folder whose tables and benchmark files are the 'off' side")
    ap.add_argument("--out", default="flush_denormal_out")
    a = ap.parse_args(argv)
    cfg = merged_config(a.configfile, ROOT / "config")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)

    def grid_row(grid: str) -> str:
        on_csv = out / f"fig{grid}_on.csv"
        if a.against:
            off_csv = Path(a.against) / "templates" / "sweeps" / f"fig{grid}_runs.csv"
            bench = Path(a.against) / "benchmarks" / "templates" / f"sweep_fig{grid}.tsv"
            off_rc, off_s = 0, float(bench.read_text().splitlines()[-1].split("\t")[0])
        else:
            off_csv = out / f"fig{grid}_off.csv"
            off_rc, off_s = run(job_command(cfg, grid, False, off_csv), out / f"fig{grid}_off.log")
        on_rc, on_s = run(job_command(cfg, grid, True, on_csv), out / f"fig{grid}_on.log")
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
