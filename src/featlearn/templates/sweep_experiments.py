"""The training grids behind the sweep figures (Figs. 2c, 22, 25) and the cheap checks of claims 1-2.

A figure's grid is a list of curves; each curve is one ``sweep.expand_groups`` settings dict (task,
architecture, model sizes, variants, n grid, learning rates, seeds), so every n of a curve trains all its
variants x learning rates x seeds as one vectorised group. ``figure_curves`` builds these settings from
the config section ``templates.sweeps``; ``run_figure`` trains them and writes one row per run.

Curves [P]: Fig. 2c: T1 (program regression), transformer vanilla vs +KQ, lr per curve chosen from a
grid by validation loss. Fig. 22: T5 (αβα vs αββ), transformer, +KQ, +VO, +KQ,VO, a depth-3 FCNet,
RNN and LSTM. Fig. 25: T5, MLP vs MLP + vec(XX^T).
"""

from __future__ import annotations

import torch

from featlearn.templates.models import build_model, count_parameters
from featlearn.templates.sweep import sweep_frames, write_csv
from featlearn.templates.tasks import TASKS, check_data, make_datasets, make_task

FIGURES = ("2c", "22", "25")

# Curves [P Figs. 2c, 22, 25]: (task, arch, {variant: curve label}). The variants of one entry train
# together, in one vectorised group per n.
CURVES = {
    "2c": [("program", "transformer", {"vanilla": "Transformer", "kq": "Transformer +KQ"})],
    "22": [
        (
            "aba_abb",
            "transformer",
            {"vanilla": "Transformer", "kq": "Transformer +KQ", "vo": "Transformer +VO", "kq_vo": "Transformer +KQ,VO"},
        ),
        ("aba_abb", "mlp", {"vanilla": "FCNet (depth 3)"}),
        ("aba_abb", "rnn", {"vanilla": "RNN"}),
        ("aba_abb", "lstm", {"vanilla": "LSTM"}),
    ],
    "25": [("aba_abb", "mlp", {"vanilla": "MLP"}), ("aba_abb", "mlp_xxt", {"vanilla": "MLP + vec(XX^T)"})],
}


def figure_curves(fig: str, cfg: dict, device: str = "cpu") -> list[tuple[dict, dict]]:
    """({variant: label}, expand_groups settings) of every curve group of figure ``fig``; ``cfg`` is
    ``templates.sweeps`` (shared keys epochs, batch, seeds, transformer, mlp, rnn, plus the figure's own
    n and lrs under ``fig<id>``)."""
    if fig not in CURVES:
        raise ValueError(f"unknown sweep figure {fig!r}; expected one of {FIGURES}")
    own = cfg[f"fig{fig}"]
    sizes = {"transformer": cfg["transformer"], "mlp": cfg["mlp"], "mlp_xxt": cfg["mlp"], "rnn": cfg["rnn"], "lstm": cfg["rnn"]}
    curves = []
    for task, arch, labels in CURVES[fig]:
        settings = {
            "task": {"name": task},
            "arch": arch,
            "model": dict(sizes[arch]),
            "variants": list(labels),
            "n": list(own["n"]),
            "lrs": list(own["lrs"]),
            "seeds": cfg["seeds"],
            "epochs": cfg["epochs"],
            "batch": cfg["batch"],
            "device": device,
            "max_group": cfg.get("max_group", 64),
            "progress": True,
        }
        curves.append((labels, settings))
    return curves


def run_figure(fig: str, cfg: dict, out: str, device: str = "cpu") -> None:
    """Train every curve of figure ``fig`` and write one row per run (with its curve label) to ``out``."""
    import pandas as pd

    frames = []
    for labels, settings in figure_curves(fig, cfg, device):
        print(f"templates Fig. {fig}: {', '.join(labels.values())}", flush=True)
        runs, _ = sweep_frames(settings)
        runs.insert(0, "curve", runs["variant"].map(labels))
        frames.append(runs)
    runs = pd.concat(frames, ignore_index=True)
    runs["figure"] = fig
    write_csv(runs.drop(columns=["group_seconds"]), out)  # no wall time: the table is byte-identical across runs


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
