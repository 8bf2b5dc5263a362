"""Figures 2c, 22, 25 (test metric against the training-set size n) and claims 1, 2, 3, 6, 8.

Each curve is the seed mean ± sd of the test metric at the best-validation epoch (MSE for regression,
where the always-0 predictor scores 1). Where a curve has several learning rates, the one with the lowest
mean validation loss is kept per curve [P App. A] (``sweep.select_lr``). n*_τ is the smallest n whose seed
mean is ≤ τ (``sweep.n_star``); it is inf when no n of the grid reaches τ, and the statement says so.
"""

from __future__ import annotations

import math

import pandas as pd

from featlearn.claims import Claim, check
from featlearn.plotting import save_figure, set_style
from featlearn.templates.sweep import n_star, select_lr

TITLES = {
    "2c": "Fig. 2c: program regression (T1)",
    "22": "Fig. 22: αβα vs αββ (T5), transformers and baselines",
    "25": "Fig. 25: αβα vs αββ (T5), MLP with and without vec(XXᵀ)",
}


def _check(claim_id, figure, statement, metric, measured, op, threshold, scale) -> Claim:
    return check("templates", claim_id, figure, statement, metric, measured, op, threshold, scale)


def selected(runs: pd.DataFrame) -> pd.DataFrame:
    """Rows of the learning rate chosen per curve by mean validation loss."""
    return select_lr(runs, per=("curve",))


def curve_means(runs: pd.DataFrame) -> pd.DataFrame:
    """Seed mean and sd of the test metric and final train loss per (curve, n), at each curve's chosen lr."""
    sel = selected(runs)
    g = sel.groupby(["curve", "n"], sort=True)
    return pd.DataFrame(
        {
            "mean": g["test_metric"].mean(),
            "sd": g["test_metric"].std(ddof=0),
            "train_loss": g["final_train_loss"].mean(),
            "lr": g["lr"].first(),
        }
    ).reset_index()


def plot(runs: pd.DataFrame, fig_id: str, paths: list[str], scale: str, dpi: int) -> None:
    import matplotlib.pyplot as plt

    set_style()
    means = curve_means(runs)
    fig, ax = plt.subplots(figsize=(6.4, 4.2), layout="constrained")
    for curve in dict.fromkeys(runs["curve"]):
        m = means[means["curve"] == curve]
        label = f"{curve} (lr {m['lr'].iloc[0]:g})" if runs.loc[runs["curve"] == curve, "lr"].nunique() > 1 else curve
        ax.errorbar(m["n"], m["mean"], yerr=m["sd"], marker="o", ms=3, capsize=2, label=label)
    ax.axhline(1.0, color="grey", ls="--", lw=1, label="always-0 predictor")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("training samples n (log scale)")
    ax.set_ylabel("test MSE on unseen symbols")
    ax.set_ylim(bottom=0)
    ax.set_title(f"{TITLES[fig_id]} [{scale} scale]")
    ax.legend(fontsize=7)
    save_figure(fig, *paths, dpi=dpi)
    plt.close(fig)


def _at(means: pd.DataFrame, curve: str) -> pd.DataFrame:
    m = means[means["curve"] == curve]
    if m.empty:
        raise ValueError(f"curve {curve!r} is missing from the runs table")
    return m


def claims_2c(runs: pd.DataFrame, scale: str) -> list[Claim]:
    """Claim 3: n*_0.1(vanilla) / n*_0.1(+KQ) >= 8; vanilla MSE >= 0.4 at every n <= 512."""
    sel = selected(runs)
    means = curve_means(runs)
    nv = n_star(sel[sel["curve"] == "Transformer"], 0.1)
    nk = n_star(sel[sel["curve"] == "Transformer +KQ"], 0.1)
    n_max = int(runs["n"].max())
    if math.isinf(nk):
        ratio = math.nan  # +KQ never reaches 0.1: the ratio is not >= 8 (or not measurable)
    else:
        # vanilla not reached within the grid: only n*(vanilla) > n_max is known, so the ratio is measured
        # by its lower bound n_max / n*(+KQ) (conservative: the claim passes only if that bound is >= 8)
        ratio = min(nv, n_max) / nk
    small = _at(means, "Transformer")
    small = small[small["n"] <= 512]
    return [
        _check(
            "3-nstar-ratio",
            "2c",
            f"+KQ needs at least 8x fewer samples than vanilla to reach test MSE 0.1 on T1 (n* = {nk:g} with +KQ, "
            f"{nv:g} vanilla; inf = not reached for n <= {n_max}, then the ratio's lower bound n_max / n*(+KQ) is measured)",
            "n*_0.1(vanilla) / n*_0.1(+KQ)",
            ratio,
            ">=",
            8,
            scale,
        ),
        _check(
            "3-vanilla-small-n",
            "2c",
            "the vanilla transformer stays at test MSE >= 0.4 for every n <= 512 on T1",
            "smallest seed-mean vanilla test MSE over n <= 512",
            small["mean"].min() if len(small) else math.nan,
            ">=",
            0.4,
            scale,
        ),
    ]


def claims_22(runs: pd.DataFrame, scale: str) -> list[Claim]:
    """Claim 6: FCNet MSE >= 0.9 at every n while its train loss <= 0.05; n*_0.1(+KQ) <= 128;
    n*_0.1(vanilla) >= 1024; RNN and LSTM above 0.1 at the largest n (8192 in the paper)."""
    sel = selected(runs)
    means = curve_means(runs)
    fc = _at(means, "FCNet (depth 3)")
    n_max = int(runs["n"].max())
    top = means[means["n"] == n_max]
    rec = top[top["curve"].isin(["RNN", "LSTM"])]["mean"]
    return [
        _check("6-fcnet-test", "22", "the depth-3 FCNet does not generalise to unseen symbols: test MSE >= 0.9 at every n",
               "smallest seed-mean FCNet test MSE over n", fc["mean"].min(), ">=", 0.9, scale),
        _check("6-fcnet-train", "22", "while the FCNet fits its training set: final train loss <= 0.05 at every n",
               "largest seed-mean FCNet final train loss over n", fc["train_loss"].max(), "<=", 0.05, scale),
        _check("6-kq-nstar", "22", f"the transformer with +KQ reaches test MSE 0.1 by n = 128 (inf = not reached for n <= {n_max})",
               "n*_0.1(+KQ)", n_star(sel[sel["curve"] == "Transformer +KQ"], 0.1), "<=", 128, scale),
        _check("6-vanilla-nstar", "22",
               f"the vanilla transformer needs n >= 1024 to reach test MSE 0.1 (when it does not reach it for n <= {n_max}, "
               "n*'s lower bound n_max is measured)",
               "n*_0.1(vanilla), or n_max when not reached", min(n_star(sel[sel["curve"] == "Transformer"], 0.1), n_max),
               ">=", 1024, scale),
        _check("6-recurrent", "22", f"RNN and LSTM stay above test MSE 0.1 at the largest n (n = {n_max}; the paper: 8192)",
               f"smaller of the RNN and LSTM seed-mean test MSE at n = {n_max}", rec.min() if len(rec) == 2 else math.nan,
               ">", 0.1, scale),
    ]


def claims_25(runs: pd.DataFrame, scale: str) -> list[Claim]:
    """Claim 8: MLP >= 0.9 at every n; MLP + vec(XX^T) <= 0.3 at every n."""
    means = curve_means(runs)
    return [
        _check("8-mlp", "25", "the MLP does not generalise to unseen symbols: test MSE >= 0.9 at every n",
               "smallest seed-mean MLP test MSE over n", _at(means, "MLP")["mean"].min(), ">=", 0.9, scale),
        _check("8-mlp-xxt", "25", "with the equality features vec(XX^T) the MLP does: test MSE <= 0.3 at every n",
               "largest seed-mean MLP + vec(XX^T) test MSE over n", _at(means, "MLP + vec(XX^T)")["mean"].max(), "<=", 0.3, scale),
    ]


CLAIMS = {"2c": claims_2c, "22": claims_22, "25": claims_25}


def figure(fig_id: str, table: str, paths: list[str], scale: str, dpi: int) -> list[Claim]:
    runs = pd.read_csv(table)
    if paths:
        plot(runs, fig_id, paths, scale, dpi)
    return CLAIMS[fig_id](runs, scale)


def check_claims(rows: pd.DataFrame, scale: str) -> list[Claim]:
    """Claims 1 and 2 from ``sweep_experiments.data_and_identity_checks``'s table."""
    data = rows[rows["check"] == "data"]
    ident = rows[rows["check"] == "identity"]
    pm1 = data[(data["kind"] == "regression") & (data["task"] != "random_r4")]  # tasks with ±1 labels
    trivial = pd.concat([pm1[f"{s}_trivial_mse"] for s in ("train", "val", "test")])
    disjoint = data["alphabets_disjoint"].astype(bool) & data["used_tokens_disjoint"].astype(bool)
    sizes_ok = (data["val_alphabet_size"] == 100) & (data["test_alphabet_size"] == 100)
    return [
        _check("1-match", "data", "every generated sample matches its template (every task, train/val/test, 3 seeds)",
               "smallest fraction of samples matching their template", data["match_fraction"].min(), "==", 1.0, scale),
        _check("1-alphabets", "data", "train/val/test alphabets are disjoint, val and test have 100 tokens each",
               "fraction of (task, seed) datasets with disjoint alphabets of the stated sizes",
               float((disjoint & sizes_ok).mean()), "==", 1.0, scale),
        _check("1-heldout", "data", "no validation or test token occurs in a training input",
               "validation/test tokens found in training inputs", float(data["train_heldout_tokens"].sum()), "==", 0, scale),
        _check("1-trivial", "data", "the always-0 predictor has MSE 1 on every ±1-labelled task",
               "largest |MSE(always 0) - 1| over ±1 tasks and splits", float((trivial - 1).abs().max()), "<=", 1e-12, scale),
        _check("2-identity", "models", "identity scalings at a = b = 0 give outputs identical to the vanilla transformer",
               "largest |output difference| (regression and next-token heads)", float(ident["max_abs_diff"].max()), "<", 1e-6, scale),
        _check("2-parameters", "models", "+KQ,VO adds exactly 2·L·H parameters",
               "largest |extra parameters - 2·L·H|",
               float((ident["extra_parameters"] - ident["expected_extra"]).abs().max()), "==", 0, scale),
    ]
