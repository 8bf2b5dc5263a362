"""JoMA Figs. 6 and 8 (attention entropy of WikiText LMs over training) and the claims they check.

Reads only the long logs written by ``featlearn.joma.wikitext.run`` (columns dataset, n_layer, lr, seed,
step, metric, layer, value). A curve "drops and rebounds" when its interior minimum lies ``drop`` nats
below its first value and its last value lies ``rebound`` nats above that minimum.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from featlearn.pipeline.claims import UNTRAINED, Claim, check, frozen_at_init, short_grid
from featlearn.lm.attention import uniform_causal_entropy
from featlearn.plotting import ordered_palette, set_style

PAPER = "joma"
DROP, REBOUND = 0.1, 0.05  # reference, claim 6
DROP_REASON = f"the reference's reading of the paper's curves: a visible drop of {DROP} nats, then a rebound of {REBOUND}"
STEP0_TOL = 0.1  # [D] "step-0 close to the uniform bound"
CURVE = ["dataset", "n_layer", "lr", "layer"]  # one seed-mean curve


def frozen_curves(c: pd.DataFrame) -> pd.DataFrame:
    """The untrained-network baseline of the seed-mean curves: each frozen at its first step."""
    return frozen_at_init(c, CURVE, ["mean"])


def read_logs(paths: list[str]) -> pd.DataFrame:
    return pd.concat([pd.read_csv(p) for p in paths], ignore_index=True)


def curves(df: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Mean and std over seeds of one metric per (dataset, n_layer, lr, layer, step)."""
    sub = df[df["metric"] == metric]
    return sub.groupby(["dataset", "n_layer", "lr", "layer", "step"])["value"].agg(["mean", "std"]).reset_index()


def drop_rebound(values: np.ndarray) -> tuple[float, float]:
    """(start - interior minimum, end - minimum); the drop is 0 when the minimum is the first or last point."""
    i = int(np.argmin(values))
    drop = float(values[0] - values[i]) if 0 < i < len(values) - 1 else 0.0
    return drop, float(values[-1] - values[i])


def _curve(c: pd.DataFrame, dataset: str, n_layer: int, lr: float, layer: int) -> np.ndarray:
    sel = c[(c["dataset"] == dataset) & (c["n_layer"] == n_layer) & np.isclose(c["lr"], lr) & (c["layer"] == layer)]
    return sel.sort_values("step")["mean"].to_numpy()


def _draw_layers(ax, c: pd.DataFrame, bound: float) -> None:
    n = int(c["layer"].max()) + 1
    palette = ordered_palette(n)
    for layer, sub in c.groupby("layer"):
        sub = sub.sort_values("step")
        ax.plot(sub["step"], sub["mean"], color=palette[layer], lw=1.2, label=f"layer {layer}")
        if sub["std"].notna().any():
            ax.fill_between(sub["step"], sub["mean"] - sub["std"], sub["mean"] + sub["std"], color=palette[layer], alpha=0.2,
                            lw=0)
    if bound is not None:
        ax.axhline(bound, color="k", ls="--", lw=0.8)


def best_val_loss(df: pd.DataFrame, dataset: str, n_layer: int, lr: float) -> float:
    v = df[(df["metric"] == "val_loss") & (df["dataset"] == dataset) & (df["n_layer"] == n_layer) & np.isclose(df["lr"], lr)]
    return float(v.groupby("step")["value"].mean().min())


def _fig6_logs(inputs: dict, lr: float) -> pd.DataFrame:
    df = read_logs(inputs["logs"])
    return df[np.isclose(df["lr"], lr)]


def _draw_6(inputs: dict, cfg: dict, metric: str, ylabel: str, what: str):
    """One panel per (dataset, depth) of ``metric`` per layer at Fig. 6's learning rate."""
    lr, scale = cfg["lr"], cfg["scale"]
    df = _fig6_logs(inputs, lr)
    bound = uniform_causal_entropy(cfg["bptt"]) if metric == "attention_entropy" else None
    set_style()
    datasets = sorted(df["dataset"].unique())
    layers = sorted(df["n_layer"].unique())
    c = curves(df, metric)
    fig, axes = plt.subplots(len(datasets), len(layers), figsize=(3.4 * len(layers), 2.9 * len(datasets)), layout="constrained",
                             squeeze=False)
    for r, ds in enumerate(datasets):
        for k, L in enumerate(layers):
            ax = axes[r, k]
            _draw_layers(ax, c[(c["dataset"] == ds) & (c["n_layer"] == L)], bound)
            ax.set_title(f"{ds}, {L} layer{'s' if L > 1 else ''}, best val {best_val_loss(df, ds, L, lr):.2f}", fontsize=9)
            ax.set_xlabel("iteration")
            if k == 0:
                ax.set_ylabel(ylabel)
            if L == max(layers) and r == 0:
                ax.legend(fontsize=6, ncol=2)
    fig.suptitle(f"JoMA Fig. 6: {what}, Adam lr {lr:g}, mean over seeds (scale: {scale})")
    return fig


def draw_6(inputs: dict, cfg: dict):
    return _draw_6(inputs, cfg, "attention_entropy", "attention entropy (nats)",
                   "attention entropy per layer (dashed: uniform causal bound)")


def draw_6_stable_rank(inputs: dict, cfg: dict):
    """Fig. 6's companion: the stable rank of each layer's FFN up-projection over the same runs."""
    return _draw_6(inputs, cfg, "stable_rank", "stable rank of FFN up-projection", "stable rank per layer")


def _fig6_measures(c: pd.DataFrame, ds: str, layers: list[int], lr: float) -> dict[str, float]:
    out = {}
    steps = np.sort(c.loc[c["dataset"] == ds, "step"].unique())
    half = steps >= steps[len(steps) // 2]
    for L in layers:
        top = _curve(c, ds, L, lr, L - 1)
        name = "1layer" if L == 1 else f"{L}layer_top"
        out[f"{name}_drop"], out[f"{name}_rebound"] = drop_rebound(top)
        if L > 1:
            bottom = _curve(c, ds, L, lr, 0)
            out[f"{L}layer_bottom_lower"] = float((bottom[half] - top[half]).max())
    return out


# Why a drop-and-rebound claim has no baseline that could pass: the untrained network's curve is flat (frozen at step
# 0), so its drop and rebound are 0 by construction, and one curve per setting offers no shuffle of conditions.
FLAT_NO_BASELINE = ("the untrained network's curve is flat, so its drop and rebound are 0 by construction; a null for "
                    "the shape of one curve (e.g. a model trained on shuffled tokens) is not run")

def claims_6(inputs: dict, cfg: dict) -> list[Claim]:
    """The baseline of every training claim is the untrained network: each curve frozen at step 0. That the
    entropy stays below the uniform causal bound holds by definition (a unit test, not a claim)."""
    lr, scale = cfg["lr"], cfg["scale"]
    df = _fig6_logs(inputs, lr)
    bound = uniform_causal_entropy(cfg["bptt"])
    datasets = sorted(df["dataset"].unique())
    layers = sorted(df["n_layer"].unique())
    seeds = int(df["seed"].nunique())
    claims: list[Claim] = []
    c = curves(df, "attention_entropy")
    for ds in datasets:
        sub = c[c["dataset"] == ds]
        start = sub[sub["step"] == sub["step"].min()]["mean"]
        claims.append(check(PAPER, f"fig6_step0_{ds}", "Fig. 6",
                            f"at step 0 the entropy is close to the uniform bound (within {STEP0_TOL} nats; {ds})",
                            "max |H(0) - bound| over layers", float((start - bound).abs().max()), "<=", STEP0_TOL, scale,
                            kind="sanity",
                            reason="the initial attention is near uniform (this project's initialisation)"))
        ours, base = _fig6_measures(c, ds, layers, lr), _fig6_measures(frozen_curves(c), ds, layers, lr)

        def claim(key, statement, metric, op, threshold, reason):
            null = {"no_baseline": FLAT_NO_BASELINE} if key.endswith(("_drop", "_rebound")) else \
                {"baseline": (UNTRAINED, base[key])}
            return check(PAPER, f"fig6_{key}_{ds}", "Fig. 6", statement, metric, ours[key], op, threshold, scale, reason=reason,
                         seeds=seeds, **null)

        for L in layers:
            name = "1layer" if L == 1 else f"{L}layer_top"
            which = "the 1-layer curve" if L == 1 else f"the top layer of the {L}-layer model"
            claims.append(claim(f"{name}_drop", f"{which} has an interior minimum at least {DROP} nats below its start ({ds})",
                                "H(0) - interior min (seed means)", ">=", DROP, DROP_REASON))
            claims.append(claim(f"{name}_rebound", f"{which} ends at least {REBOUND} nats above its minimum ({ds})",
                                "H(end) - min (seed means)", ">=", REBOUND, DROP_REASON))
            if L > 1:
                claims.append(claim(f"{L}layer_bottom_lower",
                                    f"in the {L}-layer model the bottom layer stays below the top layer over the second half of "
                                    f"training ({ds})",
                                    "max over second-half steps of H(bottom) - H(top)", "<", 0.0,
                                    "an order the paper's Fig. 6 shows"))
        ranks = curves(df, "stable_rank")
        ranks = ranks[ranks["dataset"] == ds]
        if not ranks.empty:
            ours_rank = rank_rebound(ranks, layers)
            claims.append(check(PAPER, f"fig6_rank_rebound_{ds}", "Sec. 5 / Fig. 6",
                                f"at every depth some layer's FFN stable rank falls to an interior minimum and rebounds by at "
                                f"least "
                                f"{RANK_REBOUND:.0%} (the MLP lower layer's rank first drops, then bounces back; {ds})",
                                "min over depths of the largest rebound sr(end) / interior min - 1 (seed means)", ours_rank, ">=",
                                RANK_REBOUND, scale, seeds=seeds, no_baseline=FLAT_NO_BASELINE,
                                reason="the reference's 5% rebound of the pretrained models' stable rank (Fig. 7), "
                                "on this project's LMs"))
    return claims


# The stable-rank rebound read off the pretrained models' curves (reference, claim 8), used for the project's own LMs.
RANK_REBOUND = 0.05


def rank_rebound(c: pd.DataFrame, depths: list[int]) -> float:
    """Min over depths of the largest rebound over layers: sr(end) / min - 1 where the minimum of the seed-mean
    curve is interior, else 0."""
    per_depth = []
    for L in depths:
        best = 0.0
        for _, curve in c[c["n_layer"] == L].groupby("layer"):
            v = curve.sort_values("step")["mean"].to_numpy()
            i = int(v.argmin())
            if 0 < i < len(v) - 1 and v[i] > 0:
                best = max(best, float(v[-1] / v[i] - 1))
        per_depth.append(best)
    return float(min(per_depth))


def _fig8_logs(inputs: dict, n_layer: int):
    df = read_logs(inputs["logs"])
    df = df[df["n_layer"] == n_layer]
    datasets, lrs = sorted(df["dataset"].unique()), sorted(df["lr"].unique())
    best = {(ds, lr): best_val_loss(df, ds, n_layer, lr) for ds in datasets for lr in lrs}
    return df, curves(df, "attention_entropy"), datasets, lrs, best


# Fig. 8 is a WikiText-2 experiment [C draw_figure_8]; other datasets are drawn and checked as extensions.
FIG8_PAPER_DATASETS = ("wikitext2",)
# The Adam learning rates of the paper's Fig. 8 (config/paper.yaml's joma.wikitext.fig8.lrs, from the figure [P])
FIG8_PAPER_LRS = (1e-6, 5e-6, 1e-5, 5e-5, 1e-4, 1e-3, 1e-2)


def draw_8(inputs: dict, cfg: dict):
    """Attention entropy per layer of the ``n_layer``-layer model, one panel per (dataset, lr)."""
    n_layer, scale = cfg["n_layer"], cfg["scale"]
    bound = uniform_causal_entropy(cfg["bptt"])
    df, c, datasets, lrs, best = _fig8_logs(inputs, n_layer)
    set_style()
    fig, axes = plt.subplots(len(datasets), len(lrs), figsize=(2.9 * len(lrs), 2.8 * len(datasets)), layout="constrained",
                             squeeze=False, sharey=True)
    for r, ds in enumerate(datasets):
        for k, lr in enumerate(lrs):
            ax = axes[r, k]
            _draw_layers(ax, c[(c["dataset"] == ds) & np.isclose(c["lr"], lr)], bound)
            ax.set_title(f"lr {lr:g}: best val loss {best[(ds, lr)]:.2f}", fontsize=9)
            ax.set_xlabel("iteration")
            if k == 0:
                ax.set_ylabel(f"{ds}{'' if ds in FIG8_PAPER_DATASETS else ' (extension)'}\nattention entropy (nats)")
    axes[0, -1].legend(fontsize=6, ncol=2)
    fig.suptitle(f"JoMA Fig. 8: {n_layer}-layer WikiText LM across Adam learning rates (scale: {scale})")
    return fig


def _fig8_measures(df: pd.DataFrame, c: pd.DataFrame, ds: str, n_layer: int, lrs: list, lr_best: float) -> dict[str, float]:
    def layer_curves(lr):
        return [_curve(c, ds, n_layer, lr, layer) for layer in range(n_layer)]

    dr = [drop_rebound(h) for h in layer_curves(lr_best)]
    qualifying = [rb for d, rb in dr if d >= DROP]
    out = {"best_rebound": max(qualifying) if qualifying else 0.0}
    val = df[(df["metric"] == "val_loss") & (df["dataset"] == ds)].groupby(["lr", "step"])["value"].mean().reset_index()
    stable = []
    for lr in lrs:
        v = val[np.isclose(val["lr"], lr)].sort_values("step")["value"].to_numpy()
        if np.all(np.isfinite(v)) and v[-1] < v[0]:
            stable.append(lr)
    if stable:
        out["lr_big"] = max(stable)
        out["large_lr_sparse"] = float(min(h[-1] for h in layer_curves(out["lr_big"])))
    small = lrs[:2] if len(lrs) > 3 else lrs[:1]
    out["small"] = small
    out["small_no_rebound"] = float(max(drop_rebound(h)[1] for lr in small for h in layer_curves(lr)))
    return out


def claims_8(inputs: dict, cfg: dict) -> list[Claim]:
    """The baseline is the untrained network (each curve frozen at step 0): it never rebounds, so the claim that
    small learning rates show no rebound cannot tell it from a trained one (not discriminating)."""
    n_layer, scale = cfg["n_layer"], cfg["scale"]
    df, c, datasets, lrs, best = _fig8_logs(inputs, n_layer)
    seeds = int(df["seed"].nunique())
    claims: list[Claim] = []
    for ds in datasets:
        lr_best = min(lrs, key=lambda lr: best[(ds, lr)])
        ours, base = (_fig8_measures(df, c, ds, n_layer, lrs, lr_best),
                      _fig8_measures(df, frozen_curves(c), ds, n_layer, lrs, lr_best))

        extension = "" if ds in FIG8_PAPER_DATASETS else "; an extension: the paper's Fig. 8 is on WikiText-2 only"

        def claim(key, statement, metric, op, threshold, reason):
            null = {"no_baseline": FLAT_NO_BASELINE} if key == "best_rebound" else {"baseline": (UNTRAINED, base[key])}
            return check(PAPER, f"fig8_{key}_{ds}", "Fig. 8", statement, metric, ours[key], op, threshold, scale, reason=reason,
                         seeds=seeds, note=extension.lstrip("; "), **null)

        claims.append(claim("best_rebound", f"at the learning rate with the best validation loss ({lr_best:g}) some layer drops "
                            f"by {DROP} nats and rebounds by {REBOUND} ({ds})", "largest rebound among layers that drop", ">=",
                            REBOUND, DROP_REASON))
        if "lr_big" in ours:
            # a grid that stops below the paper's largest learning rate cannot show what the largest one does
            short = (f"the grid's learning rates stop at {max(lrs):g}, below the paper's largest {max(FIG8_PAPER_LRS):g}: "
                     "its largest stable learning rate is not the paper's" if max(lrs) < max(FIG8_PAPER_LRS) else "")
            sparse = claim("large_lr_sparse", f"the largest stable learning rate ({ours['lr_big']:g}) ends sparser: "
                           f"below 0.5 nats in some layer ({ds})", "min over layers of the final entropy", "<", 0.5,
                           "the reference's reading of the paper's Fig. 8 (near one-hot attention in some layer)")
            claims.append(short_grid(sparse, short))
        small = ours["small"]
        claims.append(claim("small_no_rebound", f"the smallest learning rates ({', '.join(f'{x:g}' for x in small)}) show no "
                            f"rebound within the budget ({ds})", "max rebound H(end) - min over their layers", "<", REBOUND,
                            DROP_REASON))
    return claims
