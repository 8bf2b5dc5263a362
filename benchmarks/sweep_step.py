"""Steady-state time of one templates sweep step, with the CUDA-graph switch off and on (issue 34's goal: a
default-size sweep step in 3 ms or less on an H100 or H200).

The estimate's probe (``featlearn.templates.cost.sweep_probe``) times ``steps`` epochs of one engine group at
n = its minibatch, so an epoch is one step; with CUDA graphs that time includes the capture. Here each group is
trained for E1 and for E2 epochs and the step time is the difference, (t(E2) - t(E1)) / (E2 - E1), which leaves
out what a group pays once (set-up, the three eager steps, the capture; reported as ``fixed_s``). Two numbers
per group and mode:

- ``train_ms``: the training step alone (evaluation only at the last epoch, which the difference cancels);
- ``step_ms``: the step as the job runs it at n = batch, with its evaluation every ``eval_every`` epochs.

The groups are the sweep jobs' own (the estimate's cost model of each ``templates_sweep`` job of the config):
the ``--groups`` parts with the most steps, over all jobs, one per distinct shape.

    python benchmarks/sweep_step.py --device cuda --out sweep_step.json
    python benchmarks/sweep_step.py --device cpu --groups 1 --epochs 2 4        # a check of the script on a CPU
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def representative_parts(config: dict, count: int) -> list:
    """The ``count`` sweep parts with the most steps over the config's ``templates_sweep`` jobs, one per shape."""
    from featlearn.pipeline import estimate as E

    parts = {}
    for node in E.build_dag(config, str(ROOT / "results"), online=True):
        if node.rule != "templates_sweep":
            continue
        for part in E.cost_model(node)(node, str(ROOT / "results")).parts:
            if part.probe is not None:
                key = part.probe.shape_json
                if key not in parts or parts[key][1].steps < part.steps:
                    parts[key] = (node.label, part)
    return sorted(parts.values(), key=lambda lp: -lp[1].steps)[:count]


def time_group(shape: dict, runs: int, device: str, epochs: int, graphs: bool, eval_every: int | None) -> float:
    """Seconds of ``epochs`` one-step epochs of the group (the probe's own group, its timer: its steps and its
    evaluations, which it times apart)."""
    from featlearn.templates.cost import sweep_probe

    s = dict(shape, cuda_graphs=graphs)
    if eval_every is not None:
        s["eval_every"] = eval_every
    rec = sweep_probe(s, runs, device, epochs, 0)
    return rec["seconds_per_step"] * epochs + rec.get("seconds_per_eval", 0.0) * rec["evaluations_timed"]


def main(argv=None) -> None:
    import torch

    from featlearn.pipeline.estimate import merged_config

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--configfile", nargs="*", default=[])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--groups", type=int, default=4)
    ap.add_argument("--epochs", type=int, nargs=2, default=[20, 120], metavar=("E1", "E2"))
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    e1, e2 = args.epochs
    config = merged_config(args.configfile, ROOT / "config")
    rows = []
    for label, part in representative_parts(config, args.groups):
        shape, runs = part.probe.shape, int(part.probe.shape[part.probe.dim])
        row = {"job": label, "runs": runs, "job_steps": part.steps, "flops_per_step": part.flops_per_step,
               "model": shape["model"], "task": shape["task"]["name"], "batch": shape["batch"],
               "eval_every": shape["eval_every"]}
        for graphs in (False, True):
            mode = "graphs" if graphs else "eager"
            time_group(shape, runs, args.device, 4, graphs, None)  # warm-up: kernels, allocator, first capture
            for name, every in (("train", 10**9), ("step", None)):
                t1 = time_group(shape, runs, args.device, e1, graphs, every)
                t2 = time_group(shape, runs, args.device, e2, graphs, every)
                per_step = (t2 - t1) / (e2 - e1)
                row[f"{mode}_{name}_ms"] = round(1e3 * per_step, 3)
                row[f"{mode}_{name}_fixed_s"] = round(t1 - e1 * per_step, 4)
        row["speedup_train"] = round(row["eager_train_ms"] / row["graphs_train_ms"], 2) if row["graphs_train_ms"] > 0 else None
        print(json.dumps(row), flush=True)
        rows.append(row)
    record = {"device": torch.cuda.get_device_name() if args.device == "cuda" else args.device, "torch": torch.__version__,
              "configfiles": args.configfile, "epochs": [e1, e2], "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
              "rows": rows}
    if args.out:
        Path(args.out).write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
