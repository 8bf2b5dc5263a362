"""JoMA Fig. 7 from the checkpoint tables: per-layer stable rank of the MLP up-projection and attention
entropy across training steps of Pythia (and at the final checkpoint of OPT), with claim 8.

The x axis is symmetric-log (linear on [0, 1], logarithmic above) so that step 0, the initialisation,
is drawn at the left edge next to step 1. Models with a single (final) revision are drawn per layer.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize

from featlearn.pipeline.claims import Claim, check
from featlearn.plotting import set_style

PAPER = "joma"
PANELS = (
    ("stable_rank", "stable rank of MLP up-projection", "gaussian_stable_rank", "Gaussian $nm/(\\sqrt{n}+\\sqrt{m})^2$"),
    ("attention_entropy", "attention entropy (nats)", "uniform_entropy", "uniform causal attention"),
)


def read_tables(csvs: list[str]) -> pd.DataFrame:
    return pd.concat([pd.read_csv(p) for p in csvs], ignore_index=True)


def quarters(n_layers: int) -> tuple[list[int], list[int]]:
    """(bottom, top): the first and the last ceil(L/4) layers."""
    k = max(1, math.ceil(n_layers / 4))
    return list(range(k)), list(range(n_layers - k, n_layers))


def _curves(df: pd.DataFrame, metric: str) -> pd.DataFrame:
    """step x layer table of one model's metric over the revisions with a known step ("main" of a
    model that also has its final step appears once)."""
    sub = df[(df["metric"] == metric) & df["step"].notna()]
    return sub.groupby(["step", "layer"])["value"].mean().unstack("layer").sort_index()


def draw_7(inputs: dict, cfg: dict):
    """Per model (columns): stable rank and attention entropy per layer across checkpoints, or per layer
    at the final checkpoint of a model with one revision."""
    scale = cfg["scale"]
    df = read_tables(inputs["tables"])
    models = list(pd.unique(df["model"]))
    set_style()
    fig, axes = plt.subplots(2, len(models), figsize=(4.2 * len(models) + 0.8, 7), layout="constrained", squeeze=False)
    for col, model in enumerate(models):
        d = df[df["model"] == model]
        n_layers = int(d["n_layers"].max())
        norm = Normalize(0, max(1, n_layers - 1))
        cmap = plt.get_cmap("viridis")
        over_steps = d["step"].nunique() > 1
        for row, (metric, ylabel, ref_col, ref_label) in enumerate(PANELS):
            ax = axes[row, col]
            m = d[d["metric"] == metric]
            if over_steps:
                curves = _curves(d, metric)
                for layer in curves.columns:
                    ax.plot(curves.index, curves[layer], marker="o", ms=2.5, lw=1.2, color=cmap(norm(layer)))
                ax.set_xscale("symlog", linthresh=1, linscale=0.5)
                ax.set_xlim(left=0)
                ax.set_xlabel("training step (symlog; step 0 at the left edge)")
            else:
                ax.scatter(m["layer"], m["value"], c=[cmap(norm(v)) for v in m["layer"]], s=25, zorder=3)
                ax.set_xlabel("layer (final checkpoint)")
            ref = m[ref_col].dropna().unique()
            if len(ref) == 1:
                ax.axhline(ref[0], color="0.4", ls="--", lw=1, label=ref_label)
                ax.legend(loc="best", fontsize=8)
            ax.set_ylabel(ylabel)
            if row == 0:
                ax.set_title(model.split("/")[-1] + ("" if over_steps else " (final only)"))
        fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=list(axes[:, col]), label="layer (0 = bottom)", shrink=0.6)
    window = df["window"].dropna().unique()
    tokens = f"windows of {int(window[0])} tokens" if len(window) == 1 else "validation windows"
    fig.suptitle(f"JoMA Fig. 7: MLP up-projection stable rank and attention entropy on WikiText {tokens}, "
                 f"across checkpoints (scale: {scale})")
    return fig


def claims_7(inputs: dict, cfg: dict) -> list[Claim]:
    """Claim 8 for every model with checkpoints across training, in the order of the tables."""
    df = read_tables(inputs["tables"])
    claims: list[Claim] = []
    for model in pd.unique(df["model"]):
        d = df[df["model"] == model]
        if d["step"].nunique() > 1:
            claims += model_claims(d, cfg["scale"])
    return claims


def top_rebound(sr: pd.DataFrame, top) -> tuple[int, float]:
    """(layer, rebound) of the top-quarter layer whose stable-rank curve ends furthest above an interior minimum
    (rebound sr(end) / min - 1; 0 when the minimum is the first or last checkpoint)."""
    rebounds = {}
    for layer in top:
        c = sr[layer].to_numpy()
        i = int(np.argmin(c))
        rebounds[layer] = float(c[-1] / c[i] - 1) if 0 < i < len(c) - 1 else 0.0
    best = max(rebounds, key=rebounds.get)
    return best, rebounds[best]


def bottom_ratio(sr: pd.DataFrame, bottom) -> float:
    """max over bottom-quarter layers of sr(last) / sr(step 0)."""
    return float((sr.loc[sr.index[-1], bottom] / sr.loc[0, bottom]).max())


def model_claims(d: pd.DataFrame, scale: str) -> list[Claim]:
    """Claim 8 for one model with checkpoints across training (the claims that its steps allow)."""
    short = d["model"].iloc[0].split("/")[-1]
    sr = _curves(d, "stable_rank")
    n_layers = int(d["n_layers"].max())
    bottom, top = quarters(n_layers)
    first, last = sr.index[0], sr.index[-1]
    claims = []
    if first == 0:
        s0 = d[(d["metric"] == "stable_rank") & (d["step"] == 0)]
        dev = (s0["value"] / s0["gaussian_stable_rank"] - 1).abs()
        claims.append(check(
            PAPER, f"fig7_step0_gaussian_{short}", "Fig. 7",
            f"{short}: at step 0 the up-projection's stable rank is within 10% of nm/(sqrt n + sqrt m)^2 in every layer",
            "max over layers |sr(0) / Gaussian - 1|", float(dev.max()), "<=", 0.10, scale, kind="sanity",
            reason="step 0 is a random initialisation: the stable rank of a Gaussian matrix (the reference's 10%)"))
    # the untrained network: the step-0 stable ranks at every checkpoint (only when step 0 is among them)
    frozen = pd.DataFrame([sr.loc[first].to_numpy()] * len(sr), index=sr.index, columns=sr.columns)
    untrained = "untrained network (step 0 at every checkpoint)"
    if len(sr) >= 3:
        best, rebound = top_rebound(sr, top)
        claims.append(check(
            PAPER, f"fig7_top_rebound_{short}", "Fig. 7",
            f"{short}: a top-quarter layer ({top[0]}-{top[-1]}) has an interior stable-rank minimum and ends "
            f">= 5% above it at step {int(last)} (best: layer {best})",
            "max over top layers (sr(end) / interior min sr - 1)", rebound, ">=", 0.05, scale,
            reason="the reference's reading of the paper's Fig. 7: a visible (5%) rebound",
            baseline=(untrained, top_rebound(frozen, top)[1]) if first == 0 else None))
    if first == 0 and len(sr) >= 2:
        claims.append(check(
            PAPER, f"fig7_bottom_below_{short}", "Fig. 7",
            f"{short}: every bottom-quarter layer ({bottom[0]}-{bottom[-1]}) ends (step {int(last)}) with a stable "
            "rank below its step-0 value",
            "max over bottom layers sr(end) / sr(0)", bottom_ratio(sr, bottom), "<", 1.0, scale,
            reason="a direction the paper's Fig. 7 shows", baseline=(untrained, bottom_ratio(frozen, bottom))))
    return claims
