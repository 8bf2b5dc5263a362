"""The training grids behind the sweep figures (Figs. 2c, 3c, 5, 8-23, 25) and the cheap checks of claims 1-2.

A grid is a list of curves; each curve is one ``sweep.expand_groups`` settings dict (task, architecture,
model sizes, variants, n grid, learning rates, seeds), so every n of a curve trains all its variants x
learning rates x seeds as one vectorised group. ``figure_curves`` builds them from the config section
``templates.sweeps`` (shared keys, then the grid's own ``fig<id>`` keys: n, lrs and optionally epochs,
seeds, transformer sizes and the swept quantity); ``run_figure`` trains them and writes one row per run
with its curve label, panel, swept quantity (``axis``) and its ``value``.

Each figure's curves are its record in sweeps/grids.py [P]; the paper's figure is named first:
- 2c: T1 (program regression), transformer vanilla vs +KQ, lr per curve chosen by validation loss.
- 3c: T2 (program next-token), vanilla vs +KQ,VO (the paper: 4 layers, d_emb 512; ``transformer`` key).
- 5: T3 (copy), one curve per d_emb, panels (a) vanilla, (b) +VO.
- 8: T5 (αβα vs αββ), learning rate x n. 9, 10: lr x depth at one n each (512, 1024); 11, 12: lr x heads
  (n = 512, 1024); 13: lr x d_emb (n = 1024); 14: lr x batch size (n = 512). 16: batch size x n.
- 15: T5, only the final readout trained, attention logits at init scaled by 1, 8, 64 [D: the paper's
  "1, 8, 64 times the standard initialization" of the attention weights; with frozen attention weights
  a multiplier c of W_Q W_K^T's init is the logit multiplier ``attn_mult`` = c].
- 17 (and 23): T5, T6 (αβαβ vs ααββ) and T7 majority of length k, vanilla; T7 also +KQ,VO, which is
  Fig. 23 (one job serves both figures).
- 18-21: T8 random templates, two templates labelled ±1 unless r > 2: 18 template length L (|W| = 2,
  |X| = 0); 19 wildcard alphabet |W| (L = 5, |X| = 0); 20 regular-token alphabet |X| (L = 5, |W| = 2);
  21 number of templates r with centred Gaussian labels [D: L = 5, |W| = 3, |X| = 0; the paper's caption
  of Fig. 21 repeats Fig. 20's]. Each seed draws its own templates (template seed = run seed), so a curve
  averages over draws [D: the paper does not say; one draw for every seed made a curve one draw's luck];
  the runs table names each run's templates.
- 22: T5, transformer, +KQ, +VO, +KQ,VO, depth-3 FCNet, RNN and LSTM. 25: T5, MLP vs MLP + vec(XX^T).
"""

from __future__ import annotations

import math

import torch

from featlearn.templates.models import build_model, count_parameters
from featlearn.io import write_csv
from featlearn.templates.sweeps.engine import collect_frames, group_pool, sweep_parts
from featlearn.templates.sweeps.grids import GRIDS, sweep_figure
from featlearn.templates.tasks import TASKS, check_data, make_datasets, make_task

# the evaluation of every run (config templates.sweeps): every eval_every epochs, on n_val and n_test samples
EVAL_KEYS = ("eval_every", "n_val", "n_test")


def figure_curves(fig: str, cfg: dict, device: str = "cpu") -> list[tuple[dict, dict]]:
    """(meta, expand_groups settings) of every curve of the grid behind figure ``fig``; meta holds the
    curve labels per variant, the panel, the swept quantity (axis) and its value. ``cfg`` is
    ``templates.sweeps``: shared keys epochs, batch, eval_every, n_val, n_test, seeds, transformer, mlp, rnn,
    max_group, cuda_graphs (required), and
    the grid's own ``fig<grid>`` keys n, lrs (required), epochs, seeds, transformer (optional overrides of
    the shared keys) and the swept quantity (e.g. ``depth: [1, 2, 4]``)."""
    grid = sweep_figure(fig).grid
    rec = GRIDS[grid]
    own = cfg[f"fig{grid}"]
    axis = rec.axis
    if axis is not None and axis not in own:
        raise ValueError(f"templates.sweeps.fig{grid} needs the list {axis!r} (the quantity Fig. {grid} sweeps)")
    stray = set(own) - {"n", "lrs", "epochs", "seeds", "transformer", axis}
    if stray:
        raise ValueError(f"templates.sweeps.fig{grid}: unknown keys {sorted(stray)} (Fig. {grid} sweeps {axis or 'n only'})")
    transformer = {**cfg["transformer"], **own.get("transformer", {})}
    sizes = {"transformer": transformer, "mlp": cfg["mlp"], "mlp_xxt": cfg["mlp"], "rnn": cfg["rnn"], "lstm": cfg["rnn"]}
    curves = []
    for entry in rec.curves(list(own.get(axis, [])) if axis else []):
        settings = {
            "task": entry["task"],
            "arch": entry["arch"],
            "model": {**sizes[entry["arch"]], **entry.get("model", {})},
            "variants": list(entry["labels"]),
            "n": list(own["n"]),
            "lrs": list(own["lrs"]),
            "seeds": own.get("seeds", cfg["seeds"]),
            "epochs": own.get("epochs", cfg["epochs"]),
            "batch": entry.get("batch", cfg["batch"]),
            **{k: cfg[k] for k in EVAL_KEYS},
            "trainable": entry.get("trainable"),
            "device": device,
            "max_group": cfg["max_group"],
            **_optional_keys(cfg),
            "cuda_graphs": cfg["cuda_graphs"],
            "progress": True,
        }
        meta = {"labels": entry["labels"], "panel": entry["panel"], "axis": axis or "", "value": entry["value"]}
        curves.append((meta, settings))
    return curves


def _optional_keys(cfg: dict) -> dict:
    """``max_group_gb`` where the config sets one and ``flush_denormal`` where it is on (each absent otherwise, so the
    settings of a run without them, and with them its cached results, are those of before the keys existed)."""
    return {**({"max_group_gb": float(cfg["max_group_gb"])} if cfg.get("max_group_gb") else {}),
            **({"flush_denormal": True} if cfg.get("flush_denormal") else {})}


def run_figure(fig: str, cfg: dict, out: str, device: str = "cpu", work_dir: str | None = None,
               workers: int = 1) -> None:
    """Train every curve of the grid behind figure ``fig`` and write one row per run to ``out`` (``work_dir``: where
    finished groups are kept for a killed job's rerun, ``engine.sweep_frames``; ``workers``: groups trained at once
    on a CPU, ``engine.group_pool``)."""
    grid = sweep_figure(fig).grid
    runs = _train_curves(figure_curves(fig, cfg, device), f"grid {grid}", work_dir, workers, device)
    runs["figure"] = grid
    write_csv(runs.drop(columns=["group_seconds"]), out)  # no wall time: the table is byte-identical across runs


# ------------------------------------------------------------------------------------ identity multipliers
# The calibration of kq_mult and vo_mult (see models.py): the copy task (T3, Fig. 5b's +VO) over vo_mult and
# αβα vs αββ (T5, the +KQ of Figs. 2c and 22) over kq_mult, each at its own n, every other setting the shared
# sweep one. The value of each multiplier is chosen by the lowest seed-mean validation loss (own alphabet,
# disjoint from the test alphabet [P App. A]), as a learning rate is.
CALIBRATED = {"vo_mult": ("copy", "vo", "(a) copy (T3), Transformer +VO"),
              "kq_mult": ("aba_abb", "kq", "(b) αβα vs αββ (T5), Transformer +KQ")}


def calibration_curves(cfg: dict, device: str = "cpu") -> list[tuple[dict, dict]]:
    """(meta, expand_groups settings) of the calibration runs: per calibrated multiplier, the vanilla
    transformer once and the scaled variant at every value of ``mult``. ``cfg`` is ``templates.sweeps``
    (its ``calibration`` key: n per task, lrs, mult, optionally epochs and seeds)."""
    own = cfg["calibration"]
    base = dict(cfg["transformer"])
    curves = []
    for key, (task, variant, panel) in CALIBRATED.items():
        entries = [({"vanilla": "Transformer"}, math.nan, {})]
        entries += [({variant: f"{key} {m:g}"}, float(m), {key: float(m)}) for m in own["mult"]]
        for labels, value, model in entries:
            settings = {
                "task": {"name": task},
                "arch": "transformer",
                "model": {**base, **model},
                "variants": list(labels),
                "n": [int(own["n"][task])],
                "lrs": list(own["lrs"]),
                "seeds": own.get("seeds", cfg["seeds"]),
                "epochs": own.get("epochs", cfg["epochs"]),
                "batch": cfg["batch"],
                **{k: cfg[k] for k in EVAL_KEYS},
                "trainable": None,
                "device": device,
                "max_group": cfg["max_group"],
                **_optional_keys(cfg),
                "cuda_graphs": cfg["cuda_graphs"],
                "progress": True,
            }
            curves.append(({"labels": labels, "panel": panel, "axis": key, "value": value}, settings))
    return curves


def _train_curves(curves: list[tuple[dict, dict]], title: str, work_dir: str | None = None, workers: int = 1,
                  device: str = "cpu"):
    """Train every curve; one row per run with its curve label, panel, swept quantity and value. With ``workers`` > 1
    on a CPU the groups of every curve are started before any is waited for, so that no core waits at a curve's end."""
    import pandas as pd

    with group_pool(workers, device) as pool:
        started = []
        for meta, settings in curves:
            labels = meta["labels"]
            print(f"templates {title}: {settings['task']['name']} {', '.join(dict.fromkeys(labels.values()))}",
                  flush=True)
            started.append((meta, sweep_parts(settings, work_dir, pool)))
        frames = []
        for meta, parts in started:
            runs, _ = collect_frames(parts)
            runs.insert(0, "curve", runs["variant"].map(meta["labels"]))
            runs.insert(1, "panel", meta["panel"])
            runs.insert(2, "axis", meta["axis"])
            runs.insert(3, "value", meta["value"])
            frames.append(runs)
    return pd.concat(frames, ignore_index=True)


def calibrate(settings: dict, inputs: dict, outputs: dict, ctx) -> None:
    """Compute job ``templates_calibration``: the runs of ``calibration_curves`` (settings: ``sweeps``, the
    shared keys of ``templates.sweeps`` with its ``calibration``) to ``outputs["runs"]``."""
    runs = _train_curves(calibration_curves(settings["sweeps"], ctx.device), "calibration", ctx.work_dir, ctx.threads,
                         ctx.device)
    runs["figure"] = "calibration"
    write_csv(runs.drop(columns=["group_seconds"]), outputs["runs"])


def sweep(settings: dict, inputs: dict, outputs: dict, ctx) -> None:
    """Compute job ``templates_sweep``: every run of grid ``settings["grid"]`` (settings: ``grid`` and
    ``sweeps``, the shared keys of ``templates.sweeps`` plus the grid's own) to ``outputs["runs"]``."""
    run_figure(settings["grid"], settings["sweeps"], outputs["runs"], device=ctx.device, work_dir=ctx.work_dir,
               workers=ctx.threads)


def data_and_identity_checks(n: int = 64, seeds: int = 3) -> list[dict]:
    """Claims 1-2 measurements: data checks of every task (T8 with r = 2 and r = 4) for a few seeds, and
    the identity scalings at a = b = 0 against the vanilla transformer of the same initialisation."""
    rows = []
    tasks = {name: {} for name in TASKS if name not in ("majority", "random")}
    tasks.update({
        "majority_k4": {"name": "majority", "k": 4},
        "random_r2": {"name": "random", "length": 5, "n_wildcards": 3, "n_regular": 1, "r": 2, "seed": 0},
        "random_r4": {"name": "random", "length": 5, "n_wildcards": 3, "n_regular": 1, "r": 4, "seed": 0},
    })
    for key, params in tasks.items():
        task = make_task(**(params or {"name": key}))
        for seed in range(1, seeds + 1):
            out = check_data(make_datasets(task, n, seed))
            out.update(check="data", task=key, kind=task.kind, seed=seed)
            rows.append(out)
    for kind, task_name in (("regression", "aba_abb"), ("next_token", "program_next_token")):
        task = make_task(task_name)
        data = make_datasets(task, n, 1)
        vocab_size = data.vocab.size
        sizes = dict(d_emb=32, depth=2, heads=4, d_head=8, d_mlp=64)
        torch.manual_seed(0)
        vanilla = build_model("transformer", vocab_size, task.length, kind, **sizes)
        torch.manual_seed(0)
        scaled = build_model("transformer", vocab_size, task.length, kind, kq=True, vo=True, **sizes)
        missing = scaled.load_state_dict(vanilla.state_dict(), strict=False).missing_keys
        with torch.no_grad():
            diff = (vanilla(data.test.tokens) - scaled(data.test.tokens)).abs().max().item()
        rows.append(
            dict(
                check="identity",
                task=task_name,
                kind=kind,
                max_abs_diff=diff,
                extra_parameters=count_parameters(scaled) - count_parameters(vanilla),
                expected_extra=2 * sizes["depth"] * sizes["heads"],
                scalings_loaded_from_vanilla=len(missing),
            )
        )
    return rows
