"""The order in which a CPU sweep job of several workers takes its groups (``featlearn.templates.sweeps.engine.group_work``):
every group of the given grids trained alone on one thread and timed, then each grid's makespan on N workers with the
groups in their listed order, in ``group_work``'s order (what ``engine.GroupQueue`` does) and in the order of the
measured times themselves (longest first, the best a list schedule of known times does here).

    python benchmarks/group_order.py                              # Figs. 25 and 9 of the default config, 40 epochs
    python benchmarks/group_order.py --figures 25 22 9 14 5 17 8 2c 16 13 --workers 2 4
    python benchmarks/group_order.py --scale smoke --epochs 2 --figures 25

Prints one JSON line per group (its measures and seconds), then one per worker count with the makespans summed over
the grids, then (5 groups or more) ``group_work``'s weights refitted to these times. Results are in docs/performance.md
("Costliest group first").
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from featlearn.lm_bench import load_config
from featlearn.pipeline.estimate import list_makespan
from featlearn.templates.sweeps import engine
from featlearn.templates.sweeps.experiments import figure_curves


def time_groups(fig: str, cfg: dict) -> list[dict]:
    """Each group of grid ``fig``: its measures, ``group_work`` and the wall seconds of training it alone."""
    rows = []
    for _, settings in figure_curves(fig, cfg):
        for group in engine.expand_groups({**settings, "progress": False}):
            size = engine.model_size(group, engine.group_vocab(group))
            work = engine.group_work(group)
            start = time.perf_counter()
            engine.train_group(group)
            rows.append({"figure": fig, "arch": group.arch, "n": group.n, "runs": len(group.runs),
                         "steps": group.epochs * group.steps_per_epoch, "flops_per_step": engine.step_flops(group, size),
                         "updates_per_step": len(group.runs) * size.parameters, "work": work,
                         # the forwards of every evaluation: a third of a trained sample's FLOPs per evaluated sample
                         "eval_flops": engine.step_flops(group, size) / min(group.n, group.batch) / 3
                                       * (group.n_val + group.n_test) * group.epochs / group.eval_every,
                         "seconds": round(time.perf_counter() - start, 3)})
    return rows


def makespans(rows: list[dict], workers: int) -> dict:
    """The makespan of ``rows`` on ``workers`` in the listed order, by work and by the measured seconds."""
    orders = {"listed": rows, "by_work": sorted(rows, key=lambda r: -r["work"]),
              "by_measured": sorted(rows, key=lambda r: -r["seconds"])}
    return {name: list_makespan([r["seconds"] for r in order], workers) for name, order in orders.items()}


def fit_weights(rows: list[dict]) -> dict:
    """``group_work``'s weights refitted to ``rows`` (non-negative least squares of the seconds on the terms, FLOPs'
    weight 1): the constants in ``engine`` came from this fit; with the Spearman correlation of fit and measurement."""
    import numpy as np
    from scipy.optimize import nnls
    from scipy.stats import spearmanr

    y = np.array([r["seconds"] for r in rows])
    steps = np.array([r["steps"] for r in rows], float)
    terms = {"step": steps, "flops": steps * np.array([r["flops_per_step"] for r in rows], float),
             "update": steps * np.array([r["updates_per_step"] for r in rows], float),
             "run_step": steps * np.array([r["runs"] for r in rows], float),
             "eval_flops": np.array([r["eval_flops"] for r in rows], float)}
    X = np.stack(list(terms.values()), 1)
    scale = X.max(0)
    scale[scale == 0] = 1.0
    coef = nnls(X / scale, y)[0] / scale
    pred = X @ coef
    flops = coef[1] if coef[1] > 0 else 1.0
    return {"weights_in_flops": {k: float(c / flops) for k, c in zip(terms, coef)},
            "spearman": float(spearmanr(pred, y).statistic), "median_relative_error": float(np.median(abs(pred - y) / y))}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", default="default", help="config of that scale (default, paper, smoke)")
    p.add_argument("--figures", nargs="+", default=["25", "9"], help="sweep figures (their numbers)")
    p.add_argument("--workers", nargs="+", type=int, default=[2, 4], help="worker counts to schedule on")
    p.add_argument("--epochs", type=int, default=40, help="cut every sweep to this many epochs (0: the config's)")
    args = p.parse_args()

    torch.set_num_threads(1)
    cfg = load_config(args.scale)["templates"]["sweeps"]
    if args.epochs:
        cfg = {**cfg, "epochs": args.epochs}
    by_figure = {}
    for fig in args.figures:
        by_figure[fig] = time_groups(fig, cfg)
        for row in by_figure[fig]:
            print(json.dumps(row), flush=True)
    for workers in args.workers:
        total = {"listed": 0.0, "by_work": 0.0, "by_measured": 0.0}
        for rows in by_figure.values():
            for name, seconds in makespans(rows, workers).items():
                total[name] += seconds
        print(json.dumps({"workers": workers, "figures": args.figures, "epochs": cfg["epochs"],
                          **{f"makespan_{k}_s": round(v, 3) for k, v in total.items()}}), flush=True)
    rows = [r for rs in by_figure.values() for r in rs]
    if len(rows) >= 5:
        print(json.dumps({"fit": fit_weights(rows), "groups": len(rows)}), flush=True)


if __name__ == "__main__":
    main()
