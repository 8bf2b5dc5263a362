"""A templates sweep job on a CPU with one worker against several (``featlearn.templates.sweeps.engine.group_pool``):
the wall time of each figure's sweep trained by ``run_figure`` with ``workers`` 1 and N, each group on one torch
thread either way, and whether the two tables are byte-identical.

    python benchmarks/group_pool.py                          # the default config's Figs. 25 and 9, 1 and 2 workers
    python benchmarks/group_pool.py --scale smoke --figures 25 --workers 2 4
    python benchmarks/group_pool.py --epochs 50              # every sweep cut to 50 epochs (a shorter measurement)

Prints one JSON line per figure and worker count; results are in docs/performance.md ("Several sweep groups at once
on a CPU").
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import torch

from featlearn.lm_bench import load_config
from featlearn.templates.sweeps.experiments import run_figure


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", default="default", help="config of that scale (default, paper, smoke)")
    p.add_argument("--figures", nargs="+", default=["25", "9"], help="sweep figures (their numbers)")
    p.add_argument("--workers", nargs="+", type=int, default=[1, 2], help="worker counts; the first is the reference")
    p.add_argument("--epochs", type=int, default=None, help="cut every sweep to this many epochs")
    args = p.parse_args()

    torch.set_num_threads(1)
    cfg = load_config(args.scale)["templates"]["sweeps"]
    if args.epochs:
        cfg = {**cfg, "epochs": args.epochs}
    with tempfile.TemporaryDirectory() as tmp:
        for fig in args.figures:
            reference = None
            for workers in args.workers:
                out = os.path.join(tmp, f"fig{fig}_{workers}.csv")
                start = time.perf_counter()
                run_figure(fig, cfg, out, workers=workers)
                seconds = time.perf_counter() - start
                table = open(out, "rb").read()
                reference = table if reference is None else reference
                print(json.dumps({"figure": fig, "scale": args.scale, "epochs": cfg["epochs"], "workers": workers,
                                  "seconds": round(seconds, 3), "identical_to_first": table == reference,
                                  "cpus": os.cpu_count()}), flush=True)


if __name__ == "__main__":
    main()
