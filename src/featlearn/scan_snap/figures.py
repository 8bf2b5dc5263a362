"""Figures of Scan and Snap and the claims each one checks. Figures read only the tidy tables.

Every figure has ``draw_<id>(inputs, cfg) -> matplotlib figure`` and, where it checks claims,
``claims_<id>(inputs, cfg) -> list[Claim]``; ``inputs`` maps the table names of the registry
(``featlearn.scan_snap.registry``) to paths, and ``cfg`` holds the figure's settings and ``scale``.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from scipy.stats import spearmanr

from featlearn.claims import Claim, check
from featlearn.plotting import set_style
from featlearn.scan_snap.data import N_COMMON, N_DISTINCT, SequenceClasses
from featlearn.scan_snap.experiments import LAYOUTS

PAPER = "scan_snap"


def _claim(cid, fig, statement, metric, measured, op, threshold, scale, **kw) -> Claim:
    return check(PAPER, cid, fig, statement, metric, measured, op, threshold, scale, **kw)


# ----------------------------------------------------------------------------------------------- generator
def claims_generator(inputs: dict, cfg: dict) -> list[Claim]:
    scale = cfg["scale"]
    df = pd.read_csv(inputs["freq"])
    z = ((df["freq"] - df["p"]) / df["se"].where(df["se"] > 0)).abs()
    zero_p = df["p"] == 0
    return [
        _claim("gen_freq", "Sec. 3.2", "empirical token frequencies per class match P(l|n) within 3 standard errors",
               "max |freq - P| / se over tokens with P > 0", z[~zero_p].max(), "<=", 3.0, scale),
        _claim("gen_exclusive", "Sec. 3.2", "tokens with P(l|n) = 0 (other classes' distinct tokens, queries, labels) never occur in class n",
               "max empirical frequency where P = 0", df.loc[zero_p, "freq"].max(), "==", 0.0, scale),
    ]


# ----------------------------------------------------------------------------------------------- Fig. 4
def _heatmap_rows(comp: pd.DataFrame, run: str, steps: list[int]) -> np.ndarray:
    sub = comp[(comp["run"] == run) & (comp["class"] == 0) & (comp["token"] < N_COMMON + N_DISTINCT)]
    mat = sub.pivot_table(index="step", columns="token", values="c").loc[steps]
    return mat.to_numpy()


def _fig4_tables(inputs: dict):
    steps_df, comp = pd.read_csv(inputs["steps"]), pd.read_csv(inputs["composition"])
    last = int(steps_df["step"].max())
    return steps_df, comp, last, sorted(steps_df["ratio"].unique())


def draw_4(inputs: dict, cfg: dict):
    scale = cfg["scale"]
    steps_df, comp, last, ratios = _fig4_tables(inputs)
    rows = [s for s in (0, 2, 4, 6, 8, 10) if s in set(comp["step"])] + [last]

    set_style()
    fig, axes = plt.subplots(len(LAYOUTS), len(ratios), figsize=(4.2 * len(ratios), 3.2 * len(LAYOUTS)), squeeze=False, layout="constrained")
    mats = {(layout, ratio): _heatmap_rows(comp, f"{layout}_r{ratio:g}_s1", rows) for layout in LAYOUTS for ratio in ratios}
    vmax = max(m.max() for m in mats.values())
    for i, layout in enumerate(LAYOUTS):
        for j, ratio in enumerate(ratios):
            mat = mats[(layout, ratio)]
            ax = axes[i, j]
            sns.heatmap(mat, ax=ax, cmap="viridis", vmin=0, vmax=vmax, cbar=j == len(ratios) - 1, yticklabels=rows, xticklabels=range(mat.shape[1]))
            ax.axvline(N_COMMON, color="white", lw=1.5)
            ax.set_title(f"{layout} query, $\\eta_Y/\\eta_Z$ = {ratio:g}")
            ax.set_xlabel("token id (0-9 common, 10-19 distinct)" if i == len(LAYOUTS) - 1 else "")
            ax.set_ylabel("iteration" if j == 0 else "")
    fig.suptitle(f"Fig. 4: attention composition $c_{{l|n}}$ of class 1, Syn-Small, SGD (scale: {scale})")
    return fig


def claims_4(inputs: dict, cfg: dict) -> list[Claim]:
    """Claims on the separate-query layout, the paper's main setting."""
    scale = cfg["scale"]
    steps_df, comp, last, ratios = _fig4_tables(inputs)
    half = int(steps_df.loc[steps_df["step"] <= last / 2, "step"].max())
    sep = steps_df[steps_df["layout"] == "separate"]
    mean = sep.groupby(["ratio", "step"])[["loss", "distinct_entropy", "common_mass"]].mean()
    spec = SequenceClasses(*LAYOUTS["separate"])
    r_lo, r_hi = min(ratios), max(ratios)
    claims = [
        _claim("1a", "Fig. 4", "zero init gives initial loss ln M", "loss at iteration 0 (mean over runs)",
               sep.loc[sep["step"] == 0, "loss"].mean(), "", math.log(spec.M), scale, within=1e-3),
        _claim("1b", "Fig. 4", f"loss below 1e-3 at iteration {last} (ratio {r_lo:g})", "final loss, mean over seeds",
               mean.loc[(r_lo, last), "loss"], "<", 1e-3, scale),
    ]

    def first_below(ratio, level=1e-2):
        s = mean.loc[ratio, "loss"]
        hit = s[s < level]
        return float(hit.index.min()) if len(hit) else float("inf")

    claims.append(_claim("2", "Fig. 4", f"ratio {r_hi:g} reaches loss < 1e-2 no later than ratio {r_lo:g}",
                         "first iteration (ratio hi) - first iteration (ratio lo)", first_below(r_hi) - first_below(r_lo), "<=", 0.0, scale))

    fin = comp[(comp["step"] == last) & comp["run"].str.startswith("separate_")]
    init = comp[(comp["step"] == 0) & comp["run"].str.startswith("separate_")]
    lo_runs = fin[fin["ratio"] == r_lo]
    claims.append(_claim("3a", "Fig. 4", "every common-token attention logit Z[psi(n), l] ends below 0",
                         "max final z over common tokens, all runs and classes", fin.loc[fin["token"] < N_COMMON, "z"].max(), "<", 0.0, scale))
    claims.append(_claim("3b", "Fig. 4", f"common-token mass falls from 0.645 to below 0.5 (ratio {r_lo:g})",
                         "final common mass, mean over seeds", mean.loc[(r_lo, last), "common_mass"], "<", 0.5, scale))

    spearman_c, spearman_gain, low_gain, top_share = [], [], [], []
    for (run, n), grp in lo_runs.groupby(["run", "class"]):
        ids = spec.distinct_ids(int(n)).numpy()
        c_end = grp.set_index("token").loc[ids, "c"].to_numpy()
        c_0 = init[(init["run"] == run) & (init["class"] == n)].set_index("token").loc[ids, "c"].to_numpy()
        spearman_c.append(spearmanr(c_end, np.arange(N_DISTINCT)).statistic)
        spearman_gain.append(spearmanr(c_end / c_0, np.arange(N_DISTINCT)).statistic)
        low_gain.append(c_end[0] / c_0[0])
        top_share.append(c_end.max() / c_end.sum())
    claims += [
        _claim("4a", "Fig. 4", "final attention over distinct tokens is strictly increasing in P(l|n)",
               "min Spearman(final c, P) over runs and classes", min(spearman_c), ">=", 0.999, scale),
        _claim("4b", "Fig. 4", "the gain c(T)/c(0) is increasing in P(l|n)", "min Spearman(gain, P)", min(spearman_gain), ">=", 0.999, scale),
        _claim("4c", "Fig. 4", "the least frequent distinct token loses attention mass", "max gain of the lowest-P distinct token",
               max(low_gain), "<", 1.0, scale),
        _claim("5a", "Fig. 4", "no winner-takes-all: distinct entropy ends above 1.0 nats", "final distinct entropy, mean over seeds",
               mean.loc[(r_lo, last), "distinct_entropy"], ">", 1.0, scale),
        _claim("5b", "Fig. 4", "no winner-takes-all: distinct entropy ends below 2.05 nats (sparser than at init)",
               "final distinct entropy, mean over seeds", mean.loc[(r_lo, last), "distinct_entropy"], "<", 2.05, scale),
        _claim("5c", "Fig. 4", "no winner-takes-all: the largest distinct share stays below 0.6", "max final top share",
               max(top_share), "<", 0.6, scale),
        _claim("6a", "Fig. 4", f"ratio {r_hi:g} ends less sparse than ratio {r_lo:g} (entropy higher by > 0.05)",
               "final entropy difference (hi - lo)", mean.loc[(r_hi, last), "distinct_entropy"] - mean.loc[(r_lo, last), "distinct_entropy"], ">", 0.05, scale),
        _claim("6b", "Fig. 4", f"ratio {r_hi:g} ends with more common-token mass than ratio {r_lo:g}",
               "final common mass difference (hi - lo)", mean.loc[(r_hi, last), "common_mass"] - mean.loc[(r_lo, last), "common_mass"], ">", 0.0, scale),
    ]
    H = mean.loc[r_lo, "distinct_entropy"]
    claims.append(_claim("7", "Fig. 4", f"snapping: entropy changes little between iterations {half} and {last}",
                         f"|H({last}) - H({half})| / |H({half}) - H(0)|", abs(H[last] - H[half]) / abs(H[half] - H[0]), "<", 0.1, scale))

    # Theorem 3: relative gain r_{l/l'|n}(t) / r(0) against the growth factor chi_l(t) = exp(2 (z_l(t) - z_l(0))),
    # with l' the least frequent distinct token of the class.
    discrepancy = {}
    sign_agree = {}
    for ratio in (r_lo, r_hi):
        sub = comp[comp["run"].str.startswith("separate_") & (comp["ratio"] == ratio)]
        d, agree = [], []
        for (run, n), grp in sub.groupby(["run", "class"]):
            ids = spec.distinct_ids(int(n)).numpy()
            c = grp.pivot_table(index="step", columns="token", values="c")[ids].to_numpy()
            z = grp.pivot_table(index="step", columns="token", values="z")[ids].to_numpy()
            r = c[:, 1:] ** 2 / c[:, :1] ** 2 - 1
            rel = r[1:] / r[0]
            chi = np.exp(2 * (z[1:, 1:] - z[0, 1:]))
            agree.append(np.mean(np.sign(rel - 1) == np.sign(chi - 1)))
            d.append(np.mean(np.abs(np.log(rel) - np.log(chi))))
        discrepancy[ratio], sign_agree[ratio] = float(np.mean(d)), float(np.mean(agree))
    claims += [
        _claim("8a", "Thm. 3", f"relative gain r(t)/r(0) and growth factor chi(t) agree in sign (ratio {r_lo:g})",
               "fraction of (token, iteration) with sign(r/r0 - 1) = sign(chi - 1)", sign_agree[r_lo], ">=", 0.95, scale),
        _claim("8b", "Thm. 3", f"the agreement is closer at ratio {r_hi:g} than at ratio {r_lo:g}",
               "mean |ln(r/r0) - ln chi| (hi) - (lo)", discrepancy[r_hi] - discrepancy[r_lo], "<", 0.0, scale),
    ]
    return claims


# ----------------------------------------------------------------------------------------------- Fig. 5
def draw_5(inputs: dict, cfg: dict):
    comp = pd.read_csv(inputs["composition"])
    lrs = sorted(comp["lr"].unique())
    spec = SequenceClasses(*LAYOUTS["separate"])
    set_style()
    fig, axes = plt.subplots(1, len(lrs), figsize=(3.6 * len(lrs), 2.6), squeeze=False, layout="constrained")
    for ax, lr in zip(axes[0], lrs):
        sub = comp[(comp["lr"] == lr) & (comp["seed"] == 1)]
        mat = sub.pivot_table(index="class", columns="token", values="c").to_numpy()[:, : N_COMMON + N_DISTINCT * spec.K]
        sns.heatmap(mat, ax=ax, cmap="viridis", cbar=False)
        ax.set_title(f"Adam, lr = {lr:g}")
        ax.set_xlabel("token id")
        ax.set_ylabel("class")
    fig.suptitle(f"Fig. 5: final attention composition with Adam (seed 1, scale: {cfg['scale']})")
    return fig


def claims_5(inputs: dict, cfg: dict) -> list[Claim]:
    scale = cfg["scale"]
    comp = pd.read_csv(inputs["composition"])
    spec = SequenceClasses(*LAYOUTS["separate"])
    tops = []
    for lr in sorted(comp["lr"].unique()):
        sub = comp[(comp["lr"] == lr) & (comp["seed"] == 1)]
        ids = spec.distinct_ids(0).numpy()
        c0 = sub[sub["class"] == 0].set_index("token").loc[ids, "c"].to_numpy()
        tops.append(frozenset(ids[np.argsort(c0)[-3:]].tolist()))
    return [_claim("adam_subsets", "Fig. 5", "with Adam, different learning rates attend to different top-3 distinct tokens",
                   "number of distinct top-3 sets (class 1, seed 1) across learning rates", len(set(tops)), ">=", 2.0, scale)]


# ----------------------------------------------------------------------------------------------- Fig. 6
def draw_6(inputs: dict, cfg: dict):
    scale = cfg["scale"]
    df = pd.read_csv(inputs["final"])
    set_style()
    panels = sorted(df["num_last"].unique())
    fig, axes = plt.subplots(1, len(panels), figsize=(3.6 * len(panels), 3.2), sharey=True, squeeze=False, layout="constrained")
    for ax, nl in zip(axes[0], panels):
        sub = df[df["num_last"] == nl]
        sns.lineplot(data=sub, x="ratio", y="distinct_entropy", hue="eta_z", marker="o", errorbar="sd", ax=ax, palette="viridis")
        ax.set_xscale("log")
        ax.set_title(f"{nl} queries (K = {sub['K'].iloc[0]})")
        ax.set_xlabel("$\\eta_Y / \\eta_Z$")
        ax.set_ylabel("distinct-token entropy (nats)")
        ax.legend(title="$\\eta_Z$", fontsize=8)
    fig.suptitle(f"Fig. 6: Syn-Medium, final attention entropy (mean ± sd over seeds, scale: {scale})")
    return fig


def claims_6(inputs: dict, cfg: dict) -> list[Claim]:
    scale = cfg["scale"]
    df = pd.read_csv(inputs["final"])
    panels = sorted(df["num_last"].unique())
    m = df.groupby(["num_last", "ratio", "eta_z"])["distinct_entropy"].mean()
    ez, ratios = sorted(df["eta_z"].unique()), sorted(df["ratio"].unique())
    cells = [(nl, r) for nl in panels for r in ratios]
    lower = [m[(nl, r, ez[-1])] < m[(nl, r, ez[0])] for nl, r in cells]
    monotone = [all(np.diff([m[(nl, r, e)] for e in ez]) < 0) for nl, r in cells]
    r_lo = 2 if 2 in ratios else ratios[0]
    higher = [m[(nl, ratios[-1], e)] > m[(nl, r_lo, e)] for nl in panels for e in ez]
    need = math.ceil(len(cells) * 14 / 16)
    return [
        _claim("9a", "Fig. 6", f"larger eta_Z gives sparser attention: entropy at eta_Z={ez[-1]:g} below eta_Z={ez[0]:g} in every cell",
               "fraction of (queries, ratio) cells", float(np.mean(lower)), "==", 1.0, scale),
        _claim("9b", "Fig. 6", f"entropy decreases monotonically in eta_Z in at least {need} of {len(cells)} cells (14 of 16 in the paper's grid)",
               "cells with monotone decrease", float(sum(monotone)), ">=", float(need), scale),
        _claim("10", "Fig. 6", f"larger eta_Y/eta_Z gives denser attention: entropy at ratio {ratios[-1]:g} above ratio {r_lo:g} in every cell",
               "fraction of (queries, eta_Z) cells", float(np.mean(higher)), "==", 1.0, scale),
        _claim("11a", "Fig. 6", "all final entropies (seed means) are at least 1.4 nats", "min seed-mean entropy", float(m.min()), ">=", 1.4, scale),
        _claim("11b", "Fig. 6", "all final entropies (seed means) are at most ln 10 = 2.303 nats", "max seed-mean entropy", float(m.max()), "<=", math.log(10), scale),
    ]


# ----------------------------------------------------------------------------------------------- Figs. 11-12
def _draw_recall(recall_csv: str, scale: str, by: str):
    """Fig. 11 (by='ratio', lines = eta_Y/eta_Z at the largest eta_Z) or Fig. 12 (by='eta_z', lines = eta_Z at ratio 1)."""
    df = pd.read_csv(recall_csv)
    fixed_col, fixed = ("eta_z", df["eta_z"].max()) if by == "ratio" else ("ratio", df["ratio"].min())
    sub = df[df[fixed_col] == fixed]
    panels = sorted(sub["num_last"].unique())
    set_style()
    fig, axes = plt.subplots(1, len(panels), figsize=(3.6 * len(panels), 3.2), sharey=True, squeeze=False, layout="constrained")
    for ax, nl in zip(axes[0], panels):
        sns.lineplot(data=sub[sub["num_last"] == nl], x="threshold", y="recall", hue=by, errorbar="sd", ax=ax, palette="viridis")
        ax.set_title(f"{nl} queries")
        ax.set_xlabel("threshold on distinct share")
        ax.set_ylabel("recall (fraction of distinct tokens above)")
    label = "$\\eta_Y/\\eta_Z$" if by == "ratio" else "$\\eta_Z$"
    num = 11 if by == "ratio" else 12
    fig.suptitle(f"Fig. {num}: recall vs threshold, lines = {label}, {fixed_col} = {fixed:g} (scale: {scale})")
    return fig


def draw_11(inputs: dict, cfg: dict):
    return _draw_recall(inputs["recall"], cfg["scale"], by="ratio")


def draw_12(inputs: dict, cfg: dict):
    return _draw_recall(inputs["recall"], cfg["scale"], by="eta_z")


# ----------------------------------------------------------------------------------------------- theory
def _fig3_table(inputs: dict) -> pd.DataFrame:
    df = pd.read_csv(inputs["snapping"])
    return df[df["t"] > 0]


def draw_3(inputs: dict, cfg: dict):
    scale, M, K = cfg["scale"], cfg["M"], cfg["K"]
    df = _fig3_table(inputs)
    set_style()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained")
    sns.lineplot(data=df, x="t", y="B", hue="eta_y", ax=axes[0], palette="viridis")
    axes[0].set_xscale("log")
    axes[0].set_xlabel("iteration t")
    axes[0].set_ylabel("$B_n(t)$")
    axes[0].set_title("snapping: $B_n(t)$")
    sns.lineplot(data=df, x="t", y="gamma", hue="eta_y", ax=axes[1], palette="viridis")
    axes[1].set_xscale("log")
    axes[1].set_xlabel("iteration t")
    axes[1].set_ylabel("$\\gamma(t)$ (proxy)")
    axes[1].set_title("speed control")
    for ax in axes:
        ax.legend(title="$\\eta_Y$", fontsize=8)
    fig.suptitle(f"Fig. 3: theory, M = {M}, K = {K}, $\\eta_Z$ = {df['eta_z'].iloc[0]:g} (scale: {scale})")
    return fig


def claims_3(inputs: dict, cfg: dict) -> list[Claim]:
    scale, M, K = cfg["scale"], cfg["M"], cfg["K"]
    df = _fig3_table(inputs)
    etas = sorted(df["eta_y"].unique())
    t_peak, late_B, slopes, interior = [], [], [], []
    t_max = df["t"].max()
    for e in etas:
        sub = df[df["eta_y"] == e]
        i = int(sub["gamma"].to_numpy().argmax())
        t_peak.append(sub["t"].iloc[i])
        interior.append(0 < i < len(sub) - 1)
        late_B.append(sub["B"].iloc[-1])
        tail = sub[sub["t"] >= t_max / 10]  # the last decade of the horizon
        slopes.append(np.polyfit(np.log(np.log(tail["t"])), tail["B"], 1)[0])
    peak_dev = max(abs(math.log(tp * e / (K * math.log(M)))) for tp, e in zip(t_peak, etas))
    return [
        _claim("th_gamma_peak", "Fig. 3", "gamma rises then falls (interior maximum) for every eta_Y",
               "fraction of eta_Y with an interior maximum", float(np.mean(interior)), "==", 1.0, scale),
        _claim("th_t0", "Fig. 3", "the transition t_peak eta_Y / K is within a factor 2 of ln M",
               "max |ln(t_peak eta_Y / (K ln M))| over eta_Y", peak_dev, "<=", math.log(2), scale),
        _claim("th_late_B", "Fig. 3", "late B_n is strictly decreasing in eta_Y", "number of increases of final B along eta_Y",
               float(np.sum(np.diff(late_B) >= 0)), "==", 0.0, scale),
        _claim("th_t_peak", "Fig. 3", "t_peak is strictly decreasing in eta_Y", "number of increases of t_peak along eta_Y",
               float(np.sum(np.diff(t_peak) >= 0)), "==", 0.0, scale),
        _claim("th_lnln", "Fig. 3", f"snapping phase: dB/d(ln ln t) = 0.5 ± 0.1 over the last decade of the horizon (t up to {t_max:.0e})",
               "mean slope over eta_Y", float(np.mean(slopes)), "", 0.5, scale, within=0.1),
    ]


def draw_8(inputs: dict, cfg: dict):
    scale = cfg["scale"]
    df = pd.read_csv(inputs["decoder"])
    set_style()
    fig, ax = plt.subplots(figsize=(5.5, 3.6), layout="constrained")
    palette = sns.color_palette("viridis", df["eta_y"].nunique())
    for color, (e, sub) in zip(palette, df.groupby("eta_y")):
        ax.plot(sub["t"], sub["h_discrete"], color=color, lw=2, label=f"$h_t$, $\\eta_Y$={e:g}")
        ax.plot(sub["t"], sub["h_continuous"], color="k", lw=0.8, ls="--")
    ax.set_xscale("symlog", linthresh=1)
    ax.set_xlabel("iteration t")
    ax.set_ylabel("h")
    ax.legend(fontsize=7)
    ax.set_title(f"Fig. 8: discrete $h_t$ (colour) vs continuous $h^*(t)$ (dashed), M = {df['M'].iloc[0]} (scale: {scale})")
    return fig


def claims_8(inputs: dict, cfg: dict) -> list[Claim]:
    scale = cfg["scale"]
    df = pd.read_csv(inputs["decoder"])
    dev = (df.assign(d=(df["h_discrete"] - df["h_continuous"]).abs() / df["eta_y"]).groupby("eta_y")["d"].max()).max()
    return [_claim("th_h", "Fig. 8", "discrete h_t stays within eta_Y of the continuous h*(t)", "max |h_t - h*(t)| / eta_Y", float(dev), "<=", 1.0, scale)]


def draw_9(inputs: dict, cfg: dict):
    scale = cfg["scale"]
    df = pd.read_csv(inputs["t0"])
    set_style()
    fig, ax = plt.subplots(figsize=(5, 3.4), layout="constrained")
    sns.scatterplot(data=df, x="ratio_z_over_y", y="B_t0", hue="eta_z", ax=ax, palette="viridis", s=60)
    ax.set_xscale("log")
    ax.set_xlabel("$\\eta_Z / \\eta_Y$")
    ax.set_ylabel("$B_n(t_0)$")
    ax.set_title(f"Fig. 9: $B_n$ at the transition depends only on $\\eta_Z/\\eta_Y$ (scale: {scale})")
    return fig


def claims_9(inputs: dict, cfg: dict) -> list[Claim]:
    scale = cfg["scale"]
    df = pd.read_csv(inputs["t0"])
    spread = df.groupby(df["ratio_z_over_y"].round(12))["B_t0"].agg(lambda b: (b.max() - b.min()) / max(abs(b.mean()), 1e-12)).max()
    return [_claim("th_t0_ratio", "Fig. 9", "B_n(t0) is equal for equal eta_Z / eta_Y", "max relative spread within a ratio", float(spread), "<=", 1e-3, scale)]


# ----------------------------------------------------------------------------------------------- WikiText
def _fig7_maps(inputs: dict, cfg: dict) -> dict[str, dict[int, np.ndarray]]:
    """Per variant and checkpoint, the layer-0 attention matrix of the fixed validation sequence."""
    out = {}
    for v, path in zip(cfg["variants"], inputs["maps"]):
        df = pd.read_csv(path)
        df = df[df["layer"] == 0]
        out[v] = {step: df[df["step"] == step].pivot_table(index="i", columns="j", values="a").to_numpy() for step in cfg["map_steps"]}
    return out


def draw_7(inputs: dict, cfg: dict):
    """Layer-0 attention of one fixed validation sequence at several iterations, per model variant."""
    variants, map_steps = cfg["variants"], cfg["map_steps"]
    maps = _fig7_maps(inputs, cfg)
    set_style()
    fig, axes = plt.subplots(len(variants), len(map_steps), figsize=(2.6 * len(map_steps), 2.6 * len(variants)), squeeze=False, layout="constrained")
    for r, v in enumerate(variants):
        for c, step in enumerate(map_steps):
            ax = axes[r, c]
            ax.imshow(maps[v][step], cmap="viridis", vmin=0, vmax=1)
            ax.set_title(f"{v}, iteration {step}", fontsize=9)
            ax.set_xticks([])
            ax.set_yticks([])
    fig.suptitle(f"Fig. 7: WikiText layer-0 attention (35 x 35, query rows) of a fixed validation sequence (scale: {cfg['scale']})")
    return fig


def claims_7(inputs: dict, cfg: dict) -> list[Claim]:
    map_steps = cfg["map_steps"]
    claims = []
    for v, mats in _fig7_maps(inputs, cfg).items():
        early = np.abs(mats[map_steps[1]] - mats[map_steps[0]]).mean()
        late = np.abs(mats[map_steps[-1]] - mats[map_steps[-2]]).mean()
        claims.append(_claim(f"wiki_freeze_{v}", "Fig. 7", f"{v}: layer-0 attention freezes: the change between the last two checkpoints "
                             f"({map_steps[-2]}, {map_steps[-1]}) is below a quarter of the change between {map_steps[0]} and {map_steps[1]}",
                             "mean |A(last) - A(previous)| / mean |A(1) - A(0)|", float(late / early), "<", 0.25, cfg["scale"]))
    return claims


def _fig10_table(inputs: dict, cfg: dict) -> pd.DataFrame:
    """Mean validation attention entropy at the end of training, per unified learning rate."""
    rows = []
    for lr, path in zip(cfg["lrs"], inputs["logs"]):
        log = pd.read_csv(path)
        ent = log[log["metric"] == "attention_entropy"]
        last = ent["step"].max()
        rows.append({"lr": lr, "entropy": ent.loc[ent["step"] == last, "value"].mean(), "step": last,
                     "val_loss": log[(log["metric"] == "val_loss") & (log["step"] == last)]["value"].iloc[0]})
    return pd.DataFrame(rows)


def draw_10(inputs: dict, cfg: dict):
    df = _fig10_table(inputs, cfg)
    set_style()
    fig, ax = plt.subplots(figsize=(4.6, 3.4), layout="constrained")
    ax.plot(df["lr"], df["entropy"], marker="o")
    for _, r in df.iterrows():
        ax.annotate(f"val {r['val_loss']:.2f}", (r["lr"], r["entropy"]), fontsize=7, textcoords="offset points", xytext=(3, 3))
    ax.set_xlabel("learning rate (SGD, same for all weights)")
    ax.set_ylabel("mean validation attention entropy (nats)")
    ax.set_title(f"Fig. 10: 1-layer LM on WikiText, iteration {int(df['step'].max())} (scale: {cfg['scale']})", fontsize=9)
    return fig


def claims_10(inputs: dict, cfg: dict) -> list[Claim]:
    df = _fig10_table(inputs, cfg)
    rho = spearmanr(df["lr"], df["entropy"]).statistic if len(df) > 2 else float("nan")
    return [_claim("wiki_entropy_lr", "Fig. 10", "validation attention entropy falls as the unified learning rate rises",
                   "Spearman(lr, entropy)", float(rho), "<=", -0.8, cfg["scale"])]
