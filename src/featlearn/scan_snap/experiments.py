"""Compute side of the Scan-and-Snap figures: train or simulate, then write tidy tables (CSV).

Each function takes a plain dict of settings (the ``scan_snap`` section of the config) and output
paths; figures read only these tables.
"""

from __future__ import annotations

import itertools
import sys

import numpy as np
import pandas as pd
import torch

from featlearn.io import write_csv
from featlearn.scan_snap import metrics, theory
from featlearn.scan_snap.constants import LAYOUTS
from featlearn.scan_snap.data import SequenceClasses, sample_counts
from featlearn.scan_snap.train import History, RunSet, train


def _step_table(hist: History, spec: SequenceClasses, runs: pd.DataFrame) -> pd.DataFrame:
    comp = torch.stack(hist.composition)  # [S, R, K, M]
    frames = []
    for s, step in enumerate(hist.steps):
        frames.append(
            runs.assign(
                step=step,
                loss=hist.loss[s].numpy(),
                distinct_entropy=metrics.distinct_entropy(comp[s], spec).numpy(),
                common_mass=metrics.common_mass(comp[s]).numpy(),
            )
        )
    return pd.concat(frames, ignore_index=True)


def _composition_table(hist: History, runs: pd.DataFrame, steps: list[int] | None = None) -> pd.DataFrame:
    comp = torch.stack(hist.composition).numpy()  # [S, R, K, M]
    z = torch.stack(hist.z_query).numpy()
    S, R, K, M = comp.shape
    keep = [i for i, st in enumerate(hist.steps) if steps is None or st in steps]
    idx = np.array(list(itertools.product(keep, range(R), range(K), range(M))))
    df = pd.DataFrame(
        {
            "step": np.array(hist.steps)[idx[:, 0]],
            "run": runs["run"].to_numpy()[idx[:, 1]],
            "class": idx[:, 2],
            "token": idx[:, 3],
            "c": comp[idx[:, 0], idx[:, 1], idx[:, 2], idx[:, 3]],
            "z": z[idx[:, 0], idx[:, 1], idx[:, 2], idx[:, 3]],
        }
    )
    return df


def syn_small(cfg: dict, inputs: dict, outputs: dict, ctx) -> None:
    """Fig. 4: SGD with momentum, zero init, eta_Z fixed, ratios eta_Y/eta_Z, both query layouts, seeds."""
    steps_frames, comp_frames = [], []
    for layout, (num_last, per_last) in LAYOUTS.items():
        spec = SequenceClasses(num_last, per_last, cfg["seq_len"])
        grid = list(itertools.product(cfg["ratios"], range(1, cfg["seeds"] + 1)))
        runs = pd.DataFrame(
            {"run": [f"{layout}_r{r:g}_s{s}" for r, s in grid], "layout": layout, "ratio": [r for r, _ in grid],
             "seed": [s for _, s in grid]}
        )
        hist = train(
            RunSet(
                spec,
                seeds=[s for _, s in grid],
                eta_z=[cfg["eta_z"]] * len(grid),
                eta_y=[cfg["eta_z"] * r for r, _ in grid],
                optimizer="sgd",
                init="zero",
                batch=cfg["batch"],
                iterations=cfg["iterations"],
                log_every=cfg["log_every"],
                momentum=cfg["momentum"],
                device=ctx.device,
                cuda_graphs=cfg["cuda_graphs"],
            )
        )
        print(f"[scan_snap] syn_small {layout}: {len(grid)} runs in {hist.seconds:.1f}s", file=sys.stderr)
        steps_frames.append(_step_table(hist, spec, runs))
        comp_frames.append(_composition_table(hist, runs).merge(runs, on="run"))
    write_csv(pd.concat(steps_frames, ignore_index=True), outputs["steps"])
    write_csv(pd.concat(comp_frames, ignore_index=True), outputs["composition"])


def adam(cfg: dict, inputs: dict, outputs: dict, ctx) -> None:
    """Fig. 5: Adam with one learning rate for Y and Z, several learning rates, zero init."""
    spec = SequenceClasses(*LAYOUTS["separate"], cfg["seq_len"])
    grid = list(itertools.product(cfg["lrs"], range(1, cfg["seeds"] + 1)))
    runs = pd.DataFrame({"run": [f"lr{lr:g}_s{s}" for lr, s in grid], "lr": [lr for lr, _ in grid], "seed": [s for _, s in grid]})
    lrs = [lr for lr, _ in grid]
    hist = train(
        RunSet(spec, seeds=list(runs["seed"]), eta_z=lrs, eta_y=lrs, optimizer="adam", init="zero", batch=cfg["batch"],
               iterations=cfg["iterations"], log_every=cfg["log_every"], momentum=None, device=ctx.device,
               cuda_graphs=cfg["cuda_graphs"])
    )
    print(f"[scan_snap] adam: {len(grid)} runs in {hist.seconds:.1f}s", file=sys.stderr)
    write_csv(_step_table(hist, spec, runs), outputs["steps"])
    # iteration 0 too: the untrained network, the baseline of Fig. 5's claim
    write_csv(_composition_table(hist, runs, steps=[0, hist.steps[-1]]).merge(runs, on="run"), outputs["composition"])


def syn_medium(cfg: dict, inputs: dict, outputs: dict, ctx) -> None:
    """Fig. 6 / 11 / 12: the Syn-Medium sweep, one vectorised job per query count (same shapes)."""
    t = cfg["recall_thresholds"]
    thresholds = np.linspace(t["start"], t["stop"], t["num"])
    finals, recalls = [], []
    for num_last in cfg["num_last"]:
        spec = SequenceClasses(num_last, cfg["num_next_per_last"], cfg["seq_len"])
        grid = list(itertools.product(cfg["eta_z"], cfg["ratios"], range(1, cfg["seeds"] + 1)))
        runs = pd.DataFrame(
            {
                "run": [f"L{num_last}_z{ez:g}_r{r:g}_s{s}" for ez, r, s in grid],
                "num_last": num_last,
                "K": spec.K,
                "eta_z": [ez for ez, _, _ in grid],
                "ratio": [r for _, r, _ in grid],
                "seed": [s for _, _, s in grid],
            }
        )
        hist = train(
            RunSet(
                spec,
                seeds=list(runs["seed"]),
                eta_z=list(runs["eta_z"]),
                eta_y=list(runs["eta_z"] * runs["ratio"]),
                optimizer="sgd",
                init=cfg["init"],
                batch=cfg["batch"],
                iterations=cfg["iterations"],
                log_every=cfg["iterations"],
                momentum=cfg["momentum"],
                device=ctx.device,
                cuda_graphs=cfg["cuda_graphs"],
            ),
            progress=True,
        )
        print(f"[scan_snap] syn_medium num_last={num_last}: {len(grid)} runs in {hist.seconds:.1f}s", file=sys.stderr)
        comp = hist.composition[-1]
        finals.append(
            runs.assign(
                final_loss=hist.final_loss.numpy(),
                distinct_entropy=metrics.distinct_entropy(comp, spec).numpy(),
                common_mass=metrics.common_mass(comp).numpy(),
                # the untrained network (iteration 0), the baseline of Fig. 6's claims
                init_distinct_entropy=metrics.distinct_entropy(hist.composition[0], spec).numpy(),
            )
        )
        rec = metrics.recall(comp, spec, torch.as_tensor(thresholds)).numpy()  # [R, S]
        recalls.append(
            pd.DataFrame(
                {
                    "run": np.repeat(runs["run"].to_numpy(), len(thresholds)),
                    "threshold": np.tile(thresholds, len(runs)),
                    "recall": rec.reshape(-1),
                }
            ).merge(runs, on="run")
        )
    write_csv(pd.concat(finals, ignore_index=True), outputs["final"])
    write_csv(pd.concat(recalls, ignore_index=True), outputs["recall"])


def generator_check(cfg: dict, inputs: dict, outputs: dict, ctx) -> None:
    """Empirical token frequencies per class against P(l|n), from many fresh batches."""
    spec = SequenceClasses(*LAYOUTS["separate"], cfg["seq_len"])
    gen = torch.Generator().manual_seed(cfg["seed"])
    counts = torch.zeros(spec.K, spec.M, dtype=torch.float64)
    n_seq = torch.zeros(spec.K, dtype=torch.float64)
    for _ in range(cfg["batches"]):
        classes, c = sample_counts(spec, cfg["batch"], gen)
        counts.index_add_(0, classes, c.to(torch.float64))
        n_seq += torch.bincount(classes, minlength=spec.K).to(torch.float64)
    P = spec.probabilities()
    draws = n_seq.unsqueeze(1) * (spec.seq_len - 1)
    freq = counts / draws
    se = torch.sqrt(P * (1 - P) / draws)
    K, M = P.shape
    df = pd.DataFrame(
        {
            "class": np.repeat(np.arange(K), M),
            "token": np.tile(np.arange(M), K),
            "p": P.reshape(-1).numpy(),
            "freq": freq.reshape(-1).numpy(),
            "se": se.reshape(-1).numpy(),
            "draws": draws.expand(K, M).reshape(-1).numpy(),
        }
    )
    write_csv(df, outputs["freq"])


def theory_tables(cfg: dict, inputs: dict, outputs: dict, ctx) -> None:
    """Figs. 3, 8, 9: B_n(t) and gamma(t) per eta_Y; discrete h_t against continuous h*(t); B_n at the
    transition time t0 (the peak of gamma) over a grid of (eta_Z, eta_Y)."""
    t = theory.time_grid(cfg["t_max"], cfg["grid_points"])
    rows = []
    for eta_y in cfg["eta_y"]:
        g = theory.gamma(t, eta_y, cfg["M"], cfg["K"])
        B = theory.snapping_curve(t, eta_y, cfg["eta_z"], cfg["M"], cfg["K"], cfg["C0"])
        rows.append(pd.DataFrame({"eta_y": eta_y, "eta_z": cfg["eta_z"], "t": t, "gamma": g, "B": B}))
    write_csv(pd.concat(rows, ignore_index=True), outputs["snapping"])

    rows = []
    steps = np.arange(cfg["discrete_steps"] + 1)
    for eta_y in cfg["eta_y"]:
        rows.append(
            pd.DataFrame(
                {
                    "eta_y": eta_y,
                    "M": cfg["M"],
                    "t": steps,
                    "h_discrete": theory.h_discrete(eta_y, cfg["M"], cfg["discrete_steps"]),
                    "h_continuous": theory.h_continuous(steps, eta_y, cfg["M"]),
                }
            )
        )
    write_csv(pd.concat(rows, ignore_index=True), outputs["decoder"])

    rows = []
    for eta_z in cfg["t0_eta_z"]:
        for ratio in cfg["t0_ratios"]:
            eta_y = eta_z * ratio
            # t0 scales as K / eta_Y: find the peak of gamma on a grid in units of K / eta_Y
            grid = np.concatenate([[0.0], np.logspace(-3, 3, 6001)]) * cfg["K"] / eta_y
            g = theory.gamma(grid, eta_y, cfg["M"], cfg["K"])
            t0 = grid[int(np.argmax(g))]
            B = theory.snapping_curve(grid[grid <= t0], eta_y, eta_z, cfg["M"], cfg["K"], cfg["C0"])[-1]
            rows.append({"eta_z": eta_z, "eta_y": eta_y, "ratio_z_over_y": eta_z / eta_y, "t0": t0, "B_t0": B})
    write_csv(pd.DataFrame(rows), outputs["t0"])
