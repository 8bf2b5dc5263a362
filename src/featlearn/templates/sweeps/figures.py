"""The sweep figures (Figs. 2c, 3c, 5, 8-23, 25) and claims 1-10.

Curve figures: the seed mean ± sd of the test metric at the best-validation epoch against the training-set
size n (MSE for regression, where the always-0 predictor scores 1; error for next-token tasks), one
column per panel, and below it the final train loss (the authors plot both). Where a curve has several
learning rates, the one with the lowest mean validation loss is kept per curve [P App. A]
(``sweep.select_lr``). Heatmap figures (Figs. 8-14): the seed-mean test MSE (and train loss) of every
(learning rate, swept quantity) cell, no selection. n*_τ is the smallest n whose seed mean is ≤ τ
(``sweep.n_star``); it is inf when no n of the grid reaches τ, and the claim's statement says so.

Registry functions: ``draw(inputs, cfg)`` draws the sweep figure ``cfg["figure"]`` from its grid's runs table
(``inputs["runs"]``); ``claims_<id>(inputs, cfg)`` checks the claims of the figures that have them
(``registry.CLAIMED``). ``check_claims`` (claims 1-2) is called by the ``templates_checks`` job.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from featlearn.claims import Claim, check, unchecked
from featlearn.plotting import set_style
from featlearn.templates.sweeps.engine import n_star, select_lr

T5 = "αβα vs αββ (T5)"
# figure -> (title, kind, options): kind "curves" (x = n) or "heatmap" (rows lr, columns ``col``);
# ``variant``: keep only these variants' rows; ``panel_by``: the column that splits panels
SPECS = {
    "2c": ("Fig. 2c: program regression (T1)", "curves", {}),
    "3c": ("Fig. 3c: program next-token (T2)", "curves", {}),
    "5": ("Fig. 5: copy (T3) over the embedding dimension", "curves", {}),
    "8": (f"Fig. 8: learning rate vs n, {T5}", "heatmap", {"col": "n"}),
    "9": (f"Fig. 9: learning rate vs depth, {T5}", "heatmap", {"col": "value"}),
    "10": (f"Fig. 10: learning rate vs depth, {T5}", "heatmap", {"col": "value"}),
    "11": (f"Fig. 11: learning rate vs heads per layer, {T5}", "heatmap", {"col": "value"}),
    "12": (f"Fig. 12: learning rate vs heads per layer, {T5}", "heatmap", {"col": "value"}),
    "13": (f"Fig. 13: learning rate vs embedding dimension, {T5}", "heatmap", {"col": "value"}),
    "14": (f"Fig. 14: learning rate vs batch size, {T5}", "heatmap", {"col": "value"}),
    "15": (f"Fig. 15: only the readout trained, attention init scales, {T5}", "curves", {}),
    "16": (f"Fig. 16: batch size vs n, {T5}", "curves", {}),
    "17": ("Fig. 17: transformer on T5, T6 and majority of length k (T7)", "curves", {"variant": ["vanilla"]}),
    "18": ("Fig. 18: two random templates, template length L (T8)", "curves", {}),
    "19": ("Fig. 19: two random templates of length 5, wildcard alphabet |W| (T8)", "curves", {}),
    "20": ("Fig. 20: two random templates of length 5, |W| = 2, regular tokens |X| (T8)", "curves", {}),
    "21": ("Fig. 21: r random templates of length 5, |W| = 3 (T8)", "curves", {}),
    "22": (f"Fig. 22: {T5}, transformers and baselines", "curves", {}),
    "23": ("Fig. 23: majority of length k (T7), vanilla vs +KQ,VO", "curves", {"panel_by": "variant", "task": "majority"}),
    "25": (f"Fig. 25: {T5}, MLP with and without vec(XXᵀ)", "curves", {}),
}
PANEL_NAMES = {"vanilla": "Transformer", "kq_vo": "Transformer +KQ,VO"}
TITLES = {fig: spec[0] for fig, spec in SPECS.items()}


def _check(claim_id, figure, statement, metric, measured, op, threshold, scale) -> Claim:
    return check("templates", claim_id, figure, statement, metric, measured, op, threshold, scale)


def _with_panel(runs: pd.DataFrame) -> pd.DataFrame:
    if "panel" not in runs:
        runs = runs.assign(panel="")
    return runs.assign(panel=runs["panel"].map(lambda v: "" if pd.isna(v) else str(v)))


def selected(runs: pd.DataFrame) -> pd.DataFrame:
    """Rows of the learning rate chosen per (panel, curve) by mean validation loss."""
    return select_lr(_with_panel(runs), per=("panel", "curve"))


def curve_means(runs: pd.DataFrame) -> pd.DataFrame:
    """Seed mean and sd of the test metric and final train loss per (curve, n), at each curve's chosen lr."""
    sel = selected(runs)
    g = sel.groupby(["panel", "curve", "n"], sort=True)
    return pd.DataFrame(
        {
            "mean": g["test_metric"].mean(),
            "sd": g["test_metric"].std(ddof=0),
            "train_loss": g["final_train_loss"].mean(),
            "lr": g["lr"].first(),
        }
    ).reset_index()


def figure_rows(runs: pd.DataFrame, fig_id: str) -> pd.DataFrame:
    """The rows of figure ``fig_id`` in its grid's table (Figs. 17 and 23 share one), with its panels."""
    opts = SPECS[fig_id][2]
    runs = _with_panel(runs)
    if "variant" in opts:
        runs = runs[runs["variant"].isin(opts["variant"])]
    if "task" in opts:
        runs = runs[runs["task"].str.startswith(opts["task"])]
    if "panel_by" in opts:
        runs = runs.assign(panel=runs[opts["panel_by"]].map(lambda v: PANEL_NAMES.get(v, v)))
    if runs.empty:
        raise ValueError(f"the runs table has no rows for Fig. {fig_id}")
    return runs.reset_index(drop=True)


def _metric_name(runs: pd.DataFrame) -> str:
    return "test MSE on unseen symbols" if (runs["metric"] == "mse").all() else "test error on unseen symbols"


def plot_curves(runs: pd.DataFrame, fig_id: str, scale: str):
    """Test metric (top row) and final train loss (bottom row) against n, one column per panel."""
    import matplotlib.pyplot as plt

    set_style()
    means = curve_means(runs)
    panels = list(dict.fromkeys(means["panel"]))
    fig, axes = plt.subplots(2, len(panels), figsize=(5.2 * len(panels), 6.4), layout="constrained", squeeze=False, sharex=True)
    regression = bool((runs["metric"] == "mse").all()) if "metric" in runs else True
    for j, panel in enumerate(panels):
        ax, ax_train = axes[0, j], axes[1, j]
        for curve in dict.fromkeys(runs.loc[runs["panel"] == panel, "curve"]):
            m = means[(means["panel"] == panel) & (means["curve"] == curve)]
            several = runs.loc[(runs["panel"] == panel) & (runs["curve"] == curve), "lr"].nunique() > 1
            label = f"{curve} (lr {m['lr'].iloc[0]:g})" if several else curve
            line = ax.errorbar(m["n"], m["mean"], yerr=m["sd"], marker="o", ms=3, capsize=2, label=label)
            # log axis; a loss of exactly 0 is drawn at the floor 1e-8
            ax_train.plot(m["n"], m["train_loss"].clip(lower=1e-8), marker="o", ms=3, color=line[0].get_color())
        if regression:
            ax.axhline(1.0, color="grey", ls="--", lw=1, label="always-0 predictor")
        ax.set_ylim(bottom=0)
        ax.set_ylabel(_metric_name(runs) if j == 0 else "")
        ax.set_title(panel or None, fontsize=9)
        ax.legend(fontsize=7)
        ax_train.set_xscale("log", base=2)
        ax_train.set_yscale("log")
        ax_train.set_xlabel("training samples n (log scale)")
        ax_train.set_ylabel("final train loss" if j == 0 else "")
    fig.suptitle(f"{TITLES[fig_id]} [{scale} scale]", fontsize=10)
    return fig


def cell_means(runs: pd.DataFrame, col: str) -> pd.DataFrame:
    """Seed means of the test metric and final train loss per (n, lr, ``col``) cell (no lr selection)."""
    keys = ["n", "lr"] if col == "n" else ["n", "lr", col]
    g = runs.groupby(keys, sort=True)
    return pd.DataFrame({"mean": g["test_metric"].mean(), "train_loss": g["final_train_loss"].mean()}).reset_index()


def plot_heatmap(runs: pd.DataFrame, fig_id: str, scale: str):
    """Seed-mean test MSE and final train loss per (learning rate, column) cell; one row of maps per n
    when the swept quantity is not n itself."""
    import matplotlib.pyplot as plt

    set_style()
    col = SPECS[fig_id][2]["col"]
    cells = cell_means(runs, col)
    ns = [None] if col == "n" else sorted(cells["n"].unique())
    axis = runs["axis"].iloc[0] if col == "value" and "axis" in runs else col
    fig, axes = plt.subplots(len(ns), 2, figsize=(10, 3.6 * len(ns)), layout="constrained", squeeze=False)
    for i, n in enumerate(ns):
        part = cells if n is None else cells[cells["n"] == n]
        for j, (key, name, vmax) in enumerate((("mean", "test MSE", 1.2), ("train_loss", "final train loss", None))):
            table = part.pivot(index="lr", columns=col, values=key).sort_index(ascending=False)
            ax = axes[i, j]
            ax.grid(False)
            im = ax.imshow(table.to_numpy(dtype=float), aspect="auto", cmap="viridis", vmin=0, vmax=vmax)
            ax.set_xticks(range(table.shape[1]), [f"{c:g}" for c in table.columns])
            ax.set_yticks(range(table.shape[0]), [f"{r:g}" for r in table.index])
            for (r, c), v in np.ndenumerate(table.to_numpy(dtype=float)):
                ax.text(c, r, "nan" if math.isnan(v) else f"{v:.2f}", ha="center", va="center", fontsize=7, color="w")
            ax.set_xlabel(axis if axis != "value" else col)
            ax.set_ylabel("learning rate")
            ax.set_title(name + ("" if n is None else f", n = {n}"), fontsize=9)
            fig.colorbar(im, ax=ax, shrink=0.8)
    fig.suptitle(f"{TITLES[fig_id]} [{scale} scale]", fontsize=10)
    return fig


def plot(runs: pd.DataFrame, fig_id: str, scale: str):
    """The matplotlib figure of sweep figure ``fig_id`` from its grid's runs."""
    rows = figure_rows(runs, fig_id)
    return (plot_heatmap if SPECS[fig_id][1] == "heatmap" else plot_curves)(rows, fig_id, scale)


def read_runs(inputs: dict) -> pd.DataFrame:
    """The runs table of a sweep figure's grid (input ``runs``)."""
    return pd.read_csv(inputs["runs"])


def draw(inputs: dict, cfg: dict):
    """Registry draw function of every sweep figure: ``cfg["figure"]`` names it."""
    return plot(read_runs(inputs), cfg["figure"], cfg["scale"])


def _at(means: pd.DataFrame, curve: str, panel: str | None = None) -> pd.DataFrame:
    m = means[(means["curve"] == curve) & ((means["panel"] == panel) if panel is not None else True)]
    if m.empty:
        raise ValueError(f"curve {curve!r} is missing from the runs table")
    return m


def nstar_ratio(n_slow: float, n_fast: float, n_max: int) -> float:
    """n*(slow) / n*(fast), conservatively: NaN when the fast curve never reaches τ (the ratio is not
    measurable); when the slow curve does not reach τ within the grid only n*(slow) > n_max is known,
    so the ratio is measured by its lower bound n_max / n*(fast) (a claim "ratio >= c" then passes only
    if that bound is >= c)."""
    if math.isinf(n_fast):
        return math.nan
    return min(n_slow, n_max) / n_fast


def claims_2c(inputs: dict, cfg: dict) -> list[Claim]:
    """Claim 3: n*_0.1(vanilla) / n*_0.1(+KQ) >= 8; vanilla MSE >= 0.4 at every n <= 512."""
    runs, scale = read_runs(inputs), cfg["scale"]
    sel = selected(runs)
    means = curve_means(runs)
    nv = n_star(sel[sel["curve"] == "Transformer"], 0.1)
    nk = n_star(sel[sel["curve"] == "Transformer +KQ"], 0.1)
    n_max = int(runs["n"].max())
    ratio = nstar_ratio(nv, nk, n_max)
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


def claims_22(inputs: dict, cfg: dict) -> list[Claim]:
    """Claim 6: FCNet MSE >= 0.9 at every n while its train loss <= 0.05; n*_0.1(+KQ) <= 128;
    n*_0.1(vanilla) >= 1024; RNN and LSTM above 0.1 at the largest n (8192 in the paper)."""
    runs, scale = read_runs(inputs), cfg["scale"]
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


def claims_25(inputs: dict, cfg: dict) -> list[Claim]:
    """Claim 8: MLP >= 0.9 at every n; MLP + vec(XX^T) <= 0.3 at every n."""
    runs, scale = read_runs(inputs), cfg["scale"]
    means = curve_means(runs)
    return [
        _check("8-mlp", "25", "the MLP does not generalise to unseen symbols: test MSE >= 0.9 at every n",
               "smallest seed-mean MLP test MSE over n", _at(means, "MLP")["mean"].min(), ">=", 0.9, scale),
        _check("8-mlp-xxt", "25", "with the equality features vec(XX^T) the MLP does: test MSE <= 0.3 at every n",
               "largest seed-mean MLP + vec(XX^T) test MSE over n", _at(means, "MLP + vec(XX^T)")["mean"].max(), "<=", 0.3, scale),
    ]


def claims_3c(inputs: dict, cfg: dict) -> list[Claim]:
    """Claim 4: +KQ,VO test error <= 0.05 by n <= 16384; vanilla >= 0.3 at every n <= 32768."""
    runs, scale = read_runs(inputs), cfg["scale"]
    sel = selected(runs)
    means = curve_means(runs)
    n_max = int(runs["n"].max())
    van = _at(means, "Transformer")
    van = van[van["n"] <= 32768]
    statement = "with +KQ,VO the transformer reaches test error 0.05 on T2 by n = 16384"
    nq = n_star(sel[sel["curve"] == "Transformer +KQ,VO"], 0.05)
    if math.isinf(nq) and n_max < 16384:
        # not reached on a grid that stops before the paper's n: this run cannot decide the claim
        kqvo = unchecked("templates", "4-kqvo-nstar", "Fig. 3c", statement,
                         f"the n grid stops at {n_max} < 16384 and +KQ,VO has not reached 0.05 by then", scale)
    else:
        kqvo = _check("4-kqvo-nstar", "3c", f"{statement} (inf = not reached for n <= {n_max})", "n*_0.05(+KQ,VO)", nq, "<=",
                      16384, scale)
    return [
        kqvo,
        _check("4-vanilla", "3c", f"the vanilla transformer keeps test error >= 0.3 on T2 at every n <= 32768 (grid: n <= {n_max})",
               "smallest seed-mean vanilla test error over n <= 32768", van["mean"].min() if len(van) else math.nan,
               ">=", 0.3, scale),
    ]


def claims_5(inputs: dict, cfg: dict) -> list[Claim]:
    """Claim 5: vanilla n*_0.5 non-decreasing in d_emb (inverse scaling); +VO error <= 0.1 by n <= 32 at
    every d_emb."""
    runs, scale = read_runs(inputs), cfg["scale"]
    sel = selected(runs)
    n_max = int(runs["n"].max())
    per_d = {}
    for variant in ("vanilla", "vo"):
        part = sel[sel["variant"] == variant]
        per_d[variant] = {d: n_star(g, 0.5 if variant == "vanilla" else 0.1) for d, g in part.groupby("d_emb", sort=True)}
    vanilla = list(per_d["vanilla"].values())  # in increasing d_emb; inf (not reached) counts as the largest
    drops = sum(b < a for a, b in zip(vanilla, vanilla[1:]))
    shown = ", ".join(f"{d:g}: {v:g}" for d, v in per_d["vanilla"].items())
    worst_vo = max(per_d["vo"].values()) if per_d["vo"] else math.nan
    return [
        _check("5-inverse-scaling", "5",
               f"copy (T3): the vanilla transformer needs at least as many samples for error 0.5 as d_emb grows "
               f"(n*_0.5 by d_emb: {shown}; inf = not reached for n <= {n_max})",
               "number of adjacent d_emb pairs where n*_0.5(vanilla) decreases", float(drops) if vanilla else math.nan,
               "==", 0, scale),
        _check("5-vo", "5", f"with +VO the error is <= 0.1 by n = 32 at every d_emb (inf = not reached for n <= {n_max})",
               "largest n*_0.1(+VO) over d_emb", worst_vo, "<=", 32, scale),
    ]


def _lr_text(lrs) -> str:
    """Learning rates as the paper writes them: 3e-2, 1e-1."""
    def one(lr: float) -> str:
        mantissa, exponent = f"{lr:e}".split("e")
        return f"{float(mantissa):g}e{int(exponent)}"

    names = [one(lr) for lr in lrs]
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


# claim 10's large learning rates: the grid's largest ones (the paper: 3e-2 and 1e-1 of 1e-5 ... 1e-1), at
# most all but the grid's smallest
LARGE_LRS = 2


def claims_8(inputs: dict, cfg: dict) -> list[Claim]:
    """Claim 10: the grid's LARGE_LRS largest learning rates (3e-2 and 1e-1 in the default and paper grids)
    give test MSE >= 0.8 at every n; the best lr (by validation loss at the grid's largest n, 2048 in the
    default grid) reaches <= 0.1 there. ``cfg``: the grid's ``lrs`` and ``n``, and ``scale``."""
    runs, scale = read_runs(inputs), cfg["scale"]
    lrs = sorted(cfg["lrs"])
    large = lrs[max(1, len(lrs) - LARGE_LRS):]
    n_at = max(cfg["n"])
    cells = cell_means(runs, "n")
    in_large = np.isclose(cells["lr"].to_numpy(dtype=float)[:, None], large).any(axis=1)
    large_mse = cells[in_large]
    at = runs[runs["n"] == n_at]
    if len(at):
        val = at.groupby("lr")["val_loss"].mean()
        best = val.idxmin()
        best_mse, best_txt = at[at["lr"] == best]["test_metric"].mean(), f"lr {best:g} chosen by validation loss"
    else:
        best_mse, best_txt = math.nan, f"n = {n_at} is not in the runs table"
    many = len(large) > 1
    lr_txt = _lr_text(large)
    return [
        _check("10-large-lr", "8",
               f"learning rate{'s' if many else ''} {lr_txt} {'do' if many else 'does'} not generalise: test MSE >= 0.8 at every n",
               f"smallest seed-mean test MSE over n at lr {lr_txt}", large_mse["mean"].min() if len(large_mse) else math.nan,
               ">=", 0.8, scale),
        _check("10-best-lr", "8", f"the best learning rate reaches test MSE <= 0.1 at n = {n_at} ({best_txt})",
               f"seed-mean test MSE at n = {n_at}, best lr", best_mse, "<=", 0.1, scale),
    ]


def claims_17(inputs: dict, cfg: dict) -> list[Claim]:
    """Claim 9, at n = 2048: majority k=2, αβα/αββ and αβαβ/ααββ <= 0.1; majority k=4 >= 0.5; k=6, 8 >= 0.9."""
    runs, scale = read_runs(inputs), cfg["scale"]
    rows = figure_rows(runs, "17")
    at = rows[rows["n"] == 2048]
    mean = at.groupby("curve")["test_metric"].mean() if len(at) else pd.Series(dtype=float)

    def worst(curves, fn):
        vals = [mean.get(c, math.nan) for c in curves]
        return math.nan if any(math.isnan(v) for v in vals) else fn(vals)

    easy = ["majority k=2", "αβα vs αββ", "αβαβ vs ααββ"]
    note = "" if len(at) else " (n = 2048 is not in the grid)"
    return [
        _check("9-easy", "17", f"at n = 2048 majority k=2, αβα vs αββ and αβαβ vs ααββ reach test MSE <= 0.1{note}",
               "largest seed-mean test MSE of the three at n = 2048", worst(easy, max), "<=", 0.1, scale),
        _check("9-maj4", "17", f"at n = 2048 majority k=4 stays at test MSE >= 0.5{note}",
               "seed-mean test MSE of majority k=4 at n = 2048", worst(["majority k=4"], max), ">=", 0.5, scale),
        _check("9-maj68", "17", f"at n = 2048 majority k=6 and k=8 stay at test MSE >= 0.9{note}",
               "smaller seed-mean test MSE of majority k=6, k=8 at n = 2048", worst(["majority k=6", "majority k=8"], min),
               ">=", 0.9, scale),
    ]


def claims_23(inputs: dict, cfg: dict) -> list[Claim]:
    """Claim 7: for k in {2, 4}, n*_0.1(+KQ,VO) <= n*_0.1(vanilla) / 4."""
    runs, scale = read_runs(inputs), cfg["scale"]
    sel = selected(figure_rows(runs, "23"))
    n_max = int(runs["n"].max())
    out = []
    for k in (2, 4):
        part = sel[sel["task"] == f"majority_{k}"]
        nv = n_star(part[part["variant"] == "vanilla"], 0.1)
        nq = n_star(part[part["variant"] == "kq_vo"], 0.1)
        out.append(_check(
            f"7-k{k}", "23",
            f"majority k={k}: +KQ,VO needs at least 4x fewer samples than vanilla for test MSE 0.1 (n* = {nq:g} with "
            f"+KQ,VO, {nv:g} vanilla; inf = not reached for n <= {n_max}, then the ratio's lower bound is measured)",
            "n*_0.1(vanilla) / n*_0.1(+KQ,VO)", nstar_ratio(nv, nq, n_max) if len(part) else math.nan, ">=", 4, scale,
        ))
    return out


def check_claims(rows: pd.DataFrame, scale: str) -> list[Claim]:
    """Claims 1 and 2 from ``experiments.data_and_identity_checks``'s table."""
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
