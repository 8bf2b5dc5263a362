"""Figures, tables and claims of the classification experiments, from the tidy tables only.

Every figure has ``draw_<n>(inputs, cfg)`` (a matplotlib figure) and ``claims_<n>(inputs, cfg)``; every table
``draw_table<n>(inputs, cfg)`` (a :class:`featlearn.pipeline.figure.Table`) and ``claims_table<n>(inputs, cfg)``, as
declared in :mod:`featlearn.features.registry`. ``cfg`` holds the figure's settings and ``scale``. Inputs are
named: ``<job>_{scores,metrics,summary}`` (a training job's tables), ``extracted_<dataset>`` (extracted
units), ``theory_{curves,scores}`` (linear NTK flow), ``stats_<dataset>`` (prepared dataset statistics).

Token label scores are read at the last epoch; a claim's measured value is the mean over the job's seeds
of the per-seed quantity, with its standard deviation over seeds. Bias index beta = (mean_pos + mean_neg) /
(mean_pos - mean_neg) over the extracted tokens' scores.

Every claim about a trained network is measured a second time on the untrained network (the same tables at
epoch 0, :meth:`Inputs.untrained`): that is its baseline. A threshold's reason is marked [P] where the paper
prints the number and [project] where this project reads a qualitative statement of the paper as a number.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from featlearn.pipeline.claims import NAN, UNTRAINED, Claim, check, unchecked
from featlearn.features.theory import bias_index, loss_matched_index
from featlearn.pipeline.figure import Table
from featlearn.plotting import set_style

PAPER = "features"
POS, NEG = "tab:blue", "tab:red"

# Table 3 [P]: MLP accuracy (%), order relu I, relu II, tanh I, tanh II, gelu I, gelu II, silu I, silu II
# (I: sigma_v = 0.1, II: sigma_v = 0.001); mean of 3 trials.
PAPER_TABLE3 = {
    ("sst", "dev"): [78.4, 68.0, 77.2, 77.3, 78.0, 78.3, 77.8, 77.8],
    ("sst", "test"): [80.0, 67.3, 78.9, 78.9, 79.9, 79.8, 79.7, 79.9],
    ("ag_news", "dev"): [91.1, 90.4, 91.1, 90.7, 90.8, 90.0, 90.7, 90.1],
    ("ag_news", "test"): [91.0, 90.2, 90.6, 90.1, 90.6, 89.6, 90.6, 89.6],
    ("imdb", "dev"): [89.5, 89.6, 89.8, 89.7, 91.5, 91.7, 91.5, 91.8],
    ("imdb", "test"): [89.9, 89.5, 89.9, 90.2, 91.2, 91.4, 91.2, 91.4],
}
TABLE3_COLUMNS = [(a, s) for a in ("relu", "tanh", "gelu", "silu") for s in ("I", "II")]
# Table 5 [P]: accuracy (%) of MLP, CNN, SA, MV, L-RNN with Adagrad; None where the paper reports "-".
PAPER_TABLE5 = {
    ("sst", "dev"): [79.4, 79.7, 80.4, 77.3, 79.4],
    ("sst", "test"): [81.5, 81.0, 80.7, 77.8, 80.7],
    ("sstwsub", "dev"): [79.6, 78.7, 79.9, 80.5, 76.9],
    ("sstwsub", "test"): [79.0, 79.2, 80.3, 81.3, 77.5],
    ("imdb", "dev"): [91.5, 91.8, 91.7, None, None],
    ("imdb", "test"): [91.8, 91.4, 91.6, None, None],
    ("ag_news", "dev"): [91.5, 91.4, 91.7, None, None],
    ("ag_news", "test"): [91.3, 91.1, 91.5, None, None],
}
TABLE5_MODELS = ["mlp", "cnn", "sa", "mv", "lrnn"]
# Table 6 [P]: numbers of extracted units per class.
PAPER_TABLE6 = {
    ("sst", "token"): {1: 412, 0: 265},
    ("sstwsub", "adjective"): {1: 73, 0: 47},
    ("sstwsub", "bigram"): {1: 779, 0: 542},
    ("imdb", "token"): {1: 414, 0: 363},
    ("ag_news", "token"): {0: 441, 1: 540, 2: 297, 3: 334},
}
# Table 2 [P]: split sizes checked by claim 1.
PAPER_SPLITS = {("sst", "train"): 6920, ("sst", "dev"): 872, ("sst", "test"): 1821, ("sstwsub", "train"): 98794}
# Table 2 [P]: vocabulary sizes (the prepared vocabulary holds 3 specials: pad, unk, and the sentence marker).
PAPER_VOCAB = {"sst": 16174, "sstwsub": 17404, "imdb": 146582, "ag_news": 85568}
# Counts whose definition the paper leaves open get this relative slack [project]; SST's tokens keep 5 tokens.
COUNT_SLACK = 0.05
COUNT_REASON = ("[P] the paper prints the count; [project] within 5%: tokenisation and thresholds the paper does not "
                "fully state (docs/features_counts.md gives the definitions tried)")
DATASET_LABELS = {"sst": "SST", "sstwsub": "SSTwsub", "imdb": "IMDB", "ag_news": "Agnews", "synthetic": "synthetic"}
MODEL_LABELS = {"mlp": "MLP", "cnn": "CNN", "sa": "SA", "sa_mlp": "SA+MLP", "mv": "MV", "lrnn": "L-RNN", "tr": "TR"}
AG_CLASSES = ["World", "Sports", "Business", "Sci/Tech"]


# ------------------------------------------------------------------------------------------- inputs
def read_table(path: str) -> pd.DataFrame:
    """A tidy table; words such as "null" or "nan" stay strings."""
    return pd.read_csv(path, keep_default_na=False, na_values=[""])


class Inputs:
    """The figure's input tables, by their names (see the module docstring). :meth:`untrained` gives the same
    tables as the untrained network would: the baseline of every claim about a trained network."""

    PREFIXES = ("extracted", "theory", "stats")
    TABLES = ("scores", "metrics", "summary")

    def __init__(self, paths: Mapping[str, str]):
        self.jobs: dict[str, dict[str, str]] = {}
        self.extracted: dict[str, str] = {}
        self.theory: dict[str, str] = {}
        self.stats: dict[str, str] = {}
        for name, p in paths.items():
            prefix, _, rest = name.partition("_")
            job, _, table = name.rpartition("_")
            if prefix in self.PREFIXES and rest:
                getattr(self, prefix)[rest] = p
            elif job and table in self.TABLES:
                self.jobs.setdefault(job, {})[table] = p
            else:
                raise ValueError(f"unrecognised input table {name}: {p}")
        self._cache: dict[tuple[str, str], pd.DataFrame] = {}
        self.trained = self  # the trained network's tables, also from the untrained view

    def untrained(self) -> Inputs:
        """The tables at initialisation: every training job's scores and metrics at its first logged epoch (0,
        before any update) only, and its summary accuracies read at that epoch. Units, theory and dataset
        statistics are unchanged."""
        view = copy.copy(self)
        view._cache = {}
        view._at_init = True
        return view

    _at_init = False

    def job(self, name: str, table: str = "scores") -> pd.DataFrame:
        key = (name, table)
        if key not in self._cache:
            if name not in self.jobs or table not in self.jobs[name]:
                raise ValueError(f"missing input: the {table} table of training job {name}")
            if not self._at_init:
                df = read_table(self.jobs[name][table])
            elif table == "summary":
                df = summary_at_init(self.trained.job(name, "summary"), self.job(name, "metrics"))
            else:
                df = read_table(self.jobs[name][table])
                df = df[df["epoch"] == df["epoch"].min()]
            self._cache[key] = df
        return self._cache[key]

    def units(self, dataset: str, kind: str | None = None) -> pd.DataFrame:
        if dataset not in self.extracted:
            raise ValueError(f"missing input: the extracted units of {dataset}")
        df = read_table(self.extracted[dataset])
        return df if kind is None else df[df["kind"] == kind]


def final(scores: pd.DataFrame, probe: str = "token") -> pd.DataFrame:
    """Rows of the last logged epoch for one probe kind."""
    df = scores[scores["probe"] == probe]
    return df[df["epoch"] == df["epoch"].max()]


def select(df: pd.DataFrame, activation: str | None = None, sigma_v: float | None = None) -> pd.DataFrame:
    if activation is not None:
        df = df[df["activation"] == activation]
    if sigma_v is not None:
        df = df[np.isclose(df["sigma_v"], sigma_v)]
    return df


def summary_at_init(summary: pd.DataFrame, metrics: pd.DataFrame) -> pd.DataFrame:
    """A summary table (one row per run) whose accuracies are those of the first logged epoch in ``metrics``."""
    acc = metrics[metrics["metric"] == "accuracy"].pivot_table(index="run", columns="split", values="value", aggfunc="first")
    out = summary.copy()
    out["best_epoch"] = int(metrics["epoch"].min())
    for split in ("dev", "test"):
        out[f"{split}_accuracy"] = out["run"].map(acc[split]) if split in acc else NAN
    return out


def with_polarity(df: pd.DataFrame, units: pd.DataFrame) -> pd.DataFrame:
    cols = [c for c in ("unit", "polarity", "log_odds", "cls") if c in units.columns]
    return df.merge(units[cols].drop_duplicates("unit"), on="unit", how="inner")


# ------------------------------------------------------------------------------------------ metrics
def seed_stats(df: pd.DataFrame) -> pd.DataFrame:
    """Per seed (the index), statistics of final token scores (``score``, ``polarity``, ``log_odds``)."""
    rows = {}
    for seed, g in df.groupby("seed"):
        s, p = g["score"].to_numpy(), g["polarity"].to_numpy()
        pos, neg = s[p > 0], s[p < 0]
        rec = {
            "mean_pos": pos.mean(), "mean_neg": neg.mean(),
            "frac_pos": (pos > 0).mean(), "frac_neg": (neg < 0).mean(),
            "beta": bias_index(s, p),
        }
        if "log_odds" in g:
            rec["spearman"] = spearmanr(s, g["log_odds"].to_numpy()).statistic
        rows[seed] = rec
    return pd.DataFrame.from_dict(rows, orient="index")


def token_stats(df: pd.DataFrame) -> dict[str, float]:
    """:func:`seed_stats` averaged over seeds."""
    return seed_stats(df).mean().to_dict() if len(df) else {}


def over_seeds(values) -> dict:
    """A claim's measurement from its per-seed values: their mean (``value``), standard deviation (``spread``),
    number (``seeds``) and the values themselves (``draws``: on the untrained network, one null draw per seed's
    initialisation)."""
    v = np.asarray(values, dtype=float).ravel()
    return {"value": float(v.mean()) if len(v) else NAN, "spread": float(v.std(ddof=1)) if len(v) > 1 else NAN,
            "seeds": len(v), "draws": tuple(float(x) for x in v)}


@dataclass(frozen=True)
class Measured:
    """A claim as a figure measures it, before its verdict: the paper's statement, the measurement (mean over
    seeds, spread, seeds), the comparison and the reason for its threshold. ``baseline``: measure it again on
    the untrained network (claims about a trained network); a claim the theory or the data decide has none."""

    claim_id: str
    statement: str
    metric: str
    value: float
    op: str
    threshold: float
    reason: str
    spread: float = NAN
    seeds: int = 1
    kind: str = "paper"
    within: float | None = None
    paper_value: str = ""
    baseline: bool = True
    unchecked: str = ""  # why this run cannot decide the claim (nothing measured)
    note: str = ""
    draws: tuple[float, ...] = ()  # the per-seed values of a mean over seeds (see over_seeds)
    no_baseline: str = ""  # why a claim about a trained network has no baseline that could pass

    def null(self) -> float | tuple[float, ...]:
        """This measurement as a baseline: one draw per seed where it is a mean over several, else its value."""
        return self.draws if len(self.draws) > 1 else self.value


def verdicts(tables: Mapping[str, str], cfg: dict, figure: str, measure: Callable[[Inputs, dict], list[Measured]]) -> list[Claim]:
    """The figure's claims: ``measure`` on the trained tables, and again on the untrained network's as the
    baseline of each claim that has one (a null of one draw per seed's initialisation where the claim is a mean
    over seeds)."""
    inputs = Inputs(tables)
    ours = measure(inputs, cfg)
    base = {}
    if any(m.baseline and not m.unchecked for m in ours):
        base = {m.claim_id: m.null() for m in measure(inputs.untrained(), cfg)}
    claims = []
    for m in ours:
        if m.unchecked:
            claims.append(unchecked(PAPER, m.claim_id, figure, m.statement, m.unchecked, cfg["scale"], kind=m.kind,
                                    paper_value=m.paper_value))
            continue
        claims.append(check(PAPER, m.claim_id, figure, m.statement, m.metric, m.value, m.op, m.threshold, cfg["scale"],
                            within=m.within, kind=m.kind, reason=m.reason, paper_value=m.paper_value, spread=m.spread,
                            seeds=m.seeds, baseline=(UNTRAINED, base[m.claim_id]) if m.baseline else None,
                            no_baseline=m.no_baseline, note=m.note))
    return claims


# Reasons of thresholds shared by several claims
SIGN_REASON = "[project] the sign of a mean over the extracted units, no margin"
MOST_REASON = ("[project] the paper: the tokens' label scores become 'significantly positive or negative' with their label "
               "(Sec. 4.1); read as at least 80% of each group, the paper prints no number")
RHO_REASON = ("[project] the paper: label scores follow the tokens' co-occurrence with the label; read as a rank correlation "
              "above 0.5 with the training log-odds, the paper prints no number")
SHIFT_REASON = ("[project] the paper: a smaller final-layer variance 'can lead to a large feature bias' (Sec. 5, Figs. 2d, e); "
                "read as beta rising by at least 0.2 (beta lies in [-1, 1])")


def polarity_claims(df: pd.DataFrame, cid: str, label: str) -> list[Measured]:
    """Claim 2 for one model: mean_pos > 0 > mean_neg, >= 80% of each group with its sign, Spearman > 0.5."""
    st = seed_stats(df)
    return [
        Measured(f"{cid}-means", f"{label}: mean positive-token score > 0 > mean negative-token score",
                 "min(mean_pos, -mean_neg)", **over_seeds(np.minimum(st["mean_pos"], -st["mean_neg"])), op=">",
                 threshold=0, reason=SIGN_REASON),
        Measured(f"{cid}-signs", f"{label}: at least 80% of positive and of negative tokens have their sign",
                 "min(frac_pos > 0, frac_neg < 0)", **over_seeds(np.minimum(st["frac_pos"], st["frac_neg"])), op=">=",
                 threshold=0.8, reason=MOST_REASON),
        Measured(f"{cid}-spearman", f"{label}: Spearman(final score, log-odds) > 0.5",
                 "Spearman rho", **over_seeds(st["spearman"]), op=">", threshold=0.5, reason=RHO_REASON),
    ]


def betas(inputs: Inputs, job: str, dataset: str, activation: str, sigma_v: float) -> pd.Series:
    """Per seed, the bias index of the final token scores."""
    df = with_polarity(select(final(inputs.job(job)), activation, sigma_v), inputs.units(dataset, "token"))
    return seed_stats(df)["beta"]


# ------------------------------------------------------------------------------------------ drawing
def draw_token_curves(ax, df: pd.DataFrame, title: str, max_lines: int = 400) -> None:
    """One line per extracted token (first seed): positive blue, negative red."""
    from matplotlib.collections import LineCollection
    from matplotlib.ticker import MaxNLocator

    df = df[df["seed"] == df["seed"].min()]
    wide = df.pivot_table(index="epoch", columns="unit", values="score", aggfunc="first")
    pol = df.drop_duplicates("unit").set_index("unit")["polarity"]
    for sign, colour in ((1, POS), (-1, NEG)):
        cols = [u for u in wide.columns if pol.get(u) == sign]
        if cols:
            # one collection instead of hundreds of Line2D artists: the same lines, drawn many times faster
            x = wide.index.to_numpy(dtype=float)
            ys = wide[cols[:max_lines]].to_numpy(dtype=float).T
            ax.add_collection(LineCollection([np.column_stack([x, y]) for y in ys], colors=colour, alpha=0.15, lw=0.6))
            ax.plot([], [], color=colour, label=f"{'pos' if sign > 0 else 'neg'} tokens ({len(cols)})")
    ax.autoscale_view()
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # epochs
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_title(title)
    ax.set_xlabel("epoch")
    ax.set_ylabel("label score")


def _grid(n: int, ncols: int = 3, size: float = 3.4):
    import matplotlib.pyplot as plt

    nrows = (n + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(size * ncols, 2.9 * nrows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, axes.flat


def _title(fig, text: str, scale: str) -> None:
    fig.suptitle(f"{text} (scale: {scale})")
    fig.tight_layout()


# ------------------------------------------------------------------------------- theory alongside
def flow_at_epochs(inputs: Inputs, model: str, sigma_v: float, train_loss: pd.Series) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The flow's logged steps matched to the trained epochs by training loss (epoch 0 = initialisation):
    ([epoch, step, bias], predicted token scores at those steps [epoch, unit, score])."""
    curves = select(read_table(inputs.theory["curves"]), sigma_v=sigma_v)
    curves = curves[curves["model"] == model].sort_values("step")
    steps = curves["step"].to_numpy()
    flow_loss = curves["loss"].to_numpy()
    rows = [{"epoch": 0, "step": int(steps[0]), "reached": True, "network_loss": np.nan}]
    for epoch, loss in train_loss.items():
        rows.append({"epoch": int(epoch), "step": int(steps[loss_matched_index(flow_loss, loss)]),
                     "reached": bool(flow_loss.min() <= loss), "network_loss": float(loss)})
    matched = pd.DataFrame(rows).merge(curves[["step", "bias", "loss"]].rename(columns={"loss": "flow_loss"}), on="step")
    scores = select(read_table(inputs.theory["scores"]), sigma_v=sigma_v)
    scores = scores[scores["model"] == model]
    return matched, matched[["epoch", "step"]].merge(scores[["step", "unit", "score"]], on="step")


def flow_shortfall(matched: pd.DataFrame) -> str:
    """'' when the flow reached the trained network's training loss at every epoch; else a sentence saying that
    it did not and at which flow loss the comparison is made instead (the flow's last logged step)."""
    missed = matched[~matched["reached"]]
    if missed.empty:
        return ""
    last = matched.sort_values("epoch").iloc[-1]
    return (f"the NTK flow never reaches the network's training loss from epoch {int(missed['epoch'].min())} on "
            f"(network {last['network_loss']:.3f} at epoch {int(last['epoch'])}, flow {last['flow_loss']:.3f} at its last "
            f"step {int(last['step'])}): those epochs are compared with the flow's last step")


def train_loss_of(metrics: pd.DataFrame, activation: str, sigma_v: float) -> pd.Series:
    """Mean over seeds of the training loss per epoch (epochs >= 1)."""
    m = select(metrics, activation, sigma_v)
    m = m[(m["split"] == "train") & (m["metric"] == "loss")]
    return m.groupby("epoch")["value"].mean()


def draw_flow(ax, matched: pd.DataFrame, predicted: pd.DataFrame, units: pd.DataFrame) -> None:
    pred = with_polarity(predicted, units)
    for sign, colour, name in ((1, "navy", "theory pos mean"), (-1, "darkred", "theory neg mean")):
        curve = pred[pred["polarity"] == sign].groupby("epoch")["score"].mean()
        ax.plot(curve.index, curve.to_numpy(), color=colour, lw=2, ls="--", label=name)
    ax.plot(matched["epoch"], matched["bias"], color="black", lw=1.5, ls=":", label="theory bias $\\mu b$")


# ---------------------------------------------------------------------------------------- figures
FIG2_PANELS = [
    # (panel, job, activation, sigma_v index, flow model)
    ("(a) MLP, ReLU", "sst_mlp", "relu", 0, "mlp-relu"),
    ("(b) CNN", "sst_cnn", "relu", 0, None),
    ("(c) SA", "sst_sa", "relu", 0, "sa"),
    ("(d) MLP, ReLU", "sst_mlp", "relu", 1, "mlp-relu"),
    ("(e) CNN", "sst_cnn", "relu", 1, None),
    ("(f) SA", "sst_sa", "relu", 1, "sa"),
    ("(g) MLP, tanh", "sst_mlp", "tanh", 1, "mlp-tanh"),
    ("(h) MLP, GeLU", "sst_mlp", "gelu", 1, "mlp-gelu"),
    ("(i) SA+MLP, ReLU", "sst_sa_mlp", "relu", 1, None),
]


def draw_2(tables: Mapping[str, str], cfg: dict):
    """Fig. 2: SST token label scores per epoch; setting I (a-c), setting II (d-i); the linear NTK flow's
    mean predicted scores and shared bias (loss-matched to the epochs) where the theory has the kernel."""
    inputs, sv = Inputs(tables), cfg["sigma_v"]
    units = inputs.units("sst", "token")
    set_style()
    fig, axes = _grid(len(FIG2_PANELS))
    for ax, (panel, job, act, i, flow) in zip(axes, FIG2_PANELS):
        df = with_polarity(select(inputs.job(job), act, sv[i]), units)
        draw_token_curves(ax, df[df["probe"] == "token"], f"{panel}, $\\sigma_v$={sv[i]:g}")
        if flow and flow in set(read_table(inputs.theory["curves"])["model"]):
            loss = train_loss_of(inputs.job(job, "metrics"), act, sv[i])
            matched, predicted = flow_at_epochs(inputs, flow, sv[i], loss)
            draw_flow(ax, matched, predicted, units)
            if flow_shortfall(matched):
                last = matched.sort_values("epoch").iloc[-1]
                ax.text(0.02, 0.02, f"flow stops short: loss {last['flow_loss']:.3f} > network {last['network_loss']:.3f}",
                        transform=ax.transAxes, fontsize=6, color="black")
    axes[0].legend(fontsize=7, loc="upper left")
    axes[2].legend(fontsize=7, loc="upper left")
    _title(fig, "Fig. 2: label scores of extracted SST tokens (Adagrad)", cfg["scale"])
    return fig


def claims_2(tables: Mapping[str, str], cfg: dict) -> list[Claim]:
    """Claims 2, 3 and 10 on SST."""
    return verdicts(tables, cfg, "2", measure_2)


def measure_2(inputs: Inputs, cfg: dict) -> list[Measured]:
    sv = cfg["sigma_v"]
    units = inputs.units("sst", "token")
    out = []
    for job, model in (("sst_mlp", "MLP (ReLU)"), ("sst_cnn", "CNN"), ("sst_sa", "SA")):
        df = with_polarity(select(final(inputs.job(job)), "relu", sv[0]), units)
        out += polarity_claims(df, f"2-sst-{job[4:]}", f"SST, {model}, sigma_v={sv[0]:g}")
    lo, hi = sv[0], sv[1]
    for job, name in (("sst_mlp", "MLP-ReLU"), ("sst_cnn", "CNN")):
        out += relu_bias_claims(inputs, job, "sst", f"3-{job[4:]}", name, lo, hi)
    balanced_reason = ("[project] the paper: these are 'more robust than ReLU' (Figs. 2f-h); read as |beta| <= 0.15, the two "
                       "groups' mean scores within a factor 1.35 in size")
    for job, act, name in (("sst_sa", "relu", "SA"), ("sst_mlp", "tanh", "MLP-tanh"), ("sst_mlp", "gelu", "MLP-GeLU")):
        out.append(Measured(f"3-{name.lower()}-balanced", f"{name}: |beta(sigma_v={hi:g})| <= 0.15", "|beta(II)|",
                            **over_seeds(betas(inputs, job, "sst", act, hi).abs()), op="<=", threshold=0.15,
                            reason=balanced_reason))
    b_samlp, b_sa = betas(inputs, "sst_sa_mlp", "sst", "relu", hi), betas(inputs, "sst_sa", "sst", "relu", hi)
    out.append(Measured("3-sa-mlp-bias", f"SA+MLP(ReLU): beta >= beta(SA) + 0.2 at sigma_v={hi:g}",
                        "beta(SA+MLP) - beta(SA), same seed", **over_seeds((b_samlp - b_sa).dropna()), op=">=", threshold=0.2,
                        reason="[project] the paper: an MLP with ReLU after SA 'reintroduces bias' (Fig. 2i); read as beta at "
                               "least 0.2 above SA's"))
    return out + theory_claims(inputs, units, lo, hi)


BIAS_REASON = ("[project] the paper: the bias renders 'negative tokens less significant than positive ones' (Sec. 5); "
               "read as beta >= 0.3, positive scores about 1.9x the negative ones in size")


def relu_bias_claims(inputs: Inputs, job: str, dataset: str, cid: str, name: str, lo: float, hi: float) -> list[Measured]:
    """Claim 3 for one ReLU model: beta moves up by 0.2 from sigma_v ``lo`` (setting I) to ``hi`` (II), and reaches 0.3."""
    b_hi, b_lo = betas(inputs, job, dataset, "relu", hi), betas(inputs, job, dataset, "relu", lo)
    return [
        Measured(f"{cid}-shift", f"{name}: beta(sigma_v={hi:g}) >= beta(sigma_v={lo:g}) + 0.2",
                 "beta(II) - beta(I)", **over_seeds(b_hi - b_lo), op=">=", threshold=0.2, reason=SHIFT_REASON),
        Measured(f"{cid}-bias", f"{name}: beta(sigma_v={hi:g}) >= 0.3 (positive tokens dominate)",
                 "beta(II)", **over_seeds(b_hi), op=">=", threshold=0.3, reason=BIAS_REASON),
    ]


def theory_claims(inputs: Inputs, units: pd.DataFrame, lo: float, hi: float) -> list[Measured]:
    """Claim 10: the flow's predicted token scores (at the flow time whose training loss matches the trained
    network's last epoch) agree in sign with the network's; the flow's beta grows as sigma_v shrinks. The flow
    is always matched to the trained network (``inputs.trained``); on the untrained view the signs are compared
    with the untrained network's scores."""
    trained = inputs.trained
    out = []
    for job, act, flow, name in (("sst_mlp", "relu", "mlp-relu", "MLP-ReLU"), ("sst_sa", "relu", "sa", "SA")):
        loss = train_loss_of(trained.job(job, "metrics"), act, lo)
        matched, predicted = flow_at_epochs(trained, flow, lo, loss)
        predicted = predicted[predicted["epoch"] == predicted["epoch"].max()]
        net = select(final(inputs.job(job)), act, lo).groupby("unit")["score"].mean().rename("network")
        both = predicted.set_index("unit")["score"].to_frame("flow").join(net, how="inner")
        agree = float((np.sign(both["flow"]) == np.sign(both["network"])).mean())
        out.append(Measured(f"10-{flow}-signs", f"{name}, sigma_v={lo:g}: the NTK flow's token scores agree in sign with "
                            "the trained network's on >= 90% of extracted tokens", "sign agreement", agree, ">=", 0.9,
                            "[project] the paper compares the flow's and the network's curves by eye (Sec. 5); read as 90% "
                            "of tokens with the same sign", kind="paper-theory", note=flow_shortfall(matched)))
    flow_betas, notes = {}, []
    for sv in (lo, hi):
        loss = train_loss_of(trained.job("sst_mlp", "metrics"), "relu", sv)
        matched, predicted = flow_at_epochs(trained, "mlp-relu", sv, loss)
        pred = with_polarity(predicted[predicted["epoch"] == predicted["epoch"].max()], units)
        flow_betas[sv] = bias_index(pred["score"], pred["polarity"])
        net = with_polarity(select(final(trained.job("sst_mlp")), "relu", sv), units)
        net_beta = bias_index(net["score"], net["polarity"])
        notes.append(f"sigma_v={sv:g}: flow beta {flow_betas[sv]:+.3f}, trained network beta {net_beta:+.3f}"
                     + (f" ({flow_shortfall(matched)})" if flow_shortfall(matched) else ""))
    out.append(Measured("10-flow-bias", f"MLP-ReLU NTK flow: beta(sigma_v={hi:g}) > beta(sigma_v={lo:g})",
                        "flow beta(II) - beta(I)", flow_betas[hi] - flow_betas[lo], ">", 0,
                        "[project] the sign of the difference: the theory says a large sigma_v reduces the bias (App. "
                        "A.1.3)", kind="paper-theory", baseline=False, note="; ".join(notes)))
    return out


# Figs. 10 (SiLU) and 11 (Adam): (job, activation, label)
PAIRS = {"10": ("sst_mlp", "silu", "MLP, SiLU, Adagrad"), "11": ("sst_mlp_adam", "relu", "MLP, ReLU, Adam")}


def _draw_pairs(tables: Mapping[str, str], cfg: dict, figure: str):
    """Figs. 10 (SiLU) and 11 (Adam): MLP token scores at both sigma_v settings."""
    inputs, sv = Inputs(tables), cfg["sigma_v"]
    units = inputs.units("sst", "token")
    job, act, what = PAIRS[figure]
    set_style()
    fig, axes = _grid(2, 2)
    for ax, s, panel in zip(axes, sv, "ab"):
        df = with_polarity(select(inputs.job(job), act, s), units)
        draw_token_curves(ax, df[df["probe"] == "token"], f"({panel}) {what}, $\\sigma_v$={s:g}")
    axes[0].legend(fontsize=7)
    _title(fig, f"Fig. {figure}: label scores of extracted SST tokens", cfg["scale"])
    return fig


def _pairs_claims(tables: Mapping[str, str], cfg: dict, figure: str) -> list[Claim]:
    return verdicts(tables, cfg, figure, lambda inputs, cfg: _measure_pairs(inputs, cfg, figure))


def _measure_pairs(inputs: Inputs, cfg: dict, figure: str) -> list[Measured]:
    sv = cfg["sigma_v"]
    units = inputs.units("sst", "token")
    job, act, what = PAIRS[figure]
    lo, hi = sv[0], sv[1]
    df = with_polarity(select(final(inputs.job(job)), act, lo), units)
    # ids start with the reference's claim number (2: polarity, 3: the bias index), not the figure's
    out = polarity_claims(df, f"2-sst-{'silu' if figure == '10' else 'adam'}", f"SST, {what}, sigma_v={lo:g}")
    b_hi, b_lo = betas(inputs, job, "sst", act, hi), betas(inputs, job, "sst", act, lo)
    if figure == "10":
        out.append(Measured("3-mlp-silu-balanced", f"MLP-SiLU: |beta(sigma_v={hi:g})| <= 0.15", "|beta(II)|",
                            **over_seeds(b_hi.abs()), op="<=", threshold=0.15,
                            reason="[project] the paper: 'SiLU can also prevent an induced bias' (App. C, Fig. 10); read "
                                   "as |beta| <= 0.15"))
    else:
        out.append(Measured("3-adam-shift", f"Adam, MLP-ReLU: beta(sigma_v={hi:g}) >= beta(sigma_v={lo:g}) + 0.2",
                            "beta(II) - beta(I)", **over_seeds(b_hi - b_lo), op=">=", threshold=0.2, reason=SHIFT_REASON))
    return out


def draw_10(tables: Mapping[str, str], cfg: dict):
    return _draw_pairs(tables, cfg, "10")


def claims_10(tables: Mapping[str, str], cfg: dict) -> list[Claim]:
    """Claim 2 for MLP-SiLU and claim 3 (SiLU balanced at setting II)."""
    return _pairs_claims(tables, cfg, "10")


def draw_11(tables: Mapping[str, str], cfg: dict):
    return _draw_pairs(tables, cfg, "11")


def claims_11(tables: Mapping[str, str], cfg: dict) -> list[Claim]:
    """Claim 2 for MLP-ReLU with Adam and the shift of beta from setting I to II."""
    return _pairs_claims(tables, cfg, "11")


def draw_13(tables: Mapping[str, str], cfg: dict):
    """Fig. 13: IMDB token scores, MLP-ReLU and CNN at setting I, MLP-ReLU at setting II."""
    inputs, sv = Inputs(tables), cfg["sigma_v"]
    units = inputs.units("imdb", "token")
    panels = [("(a) MLP, ReLU", "imdb_mlp", sv[0]), ("(b) CNN", "imdb_cnn", sv[0]), ("(c) MLP, ReLU", "imdb_mlp", sv[1])]
    set_style()
    fig, axes = _grid(3)
    for ax, (panel, job, s) in zip(axes, panels):
        df = with_polarity(select(inputs.job(job), "relu", s), units)
        draw_token_curves(ax, df[df["probe"] == "token"], f"{panel}, $\\sigma_v$={s:g}")
    axes[0].legend(fontsize=7)
    _title(fig, "Fig. 13: label scores of extracted IMDB tokens", cfg["scale"])
    return fig


def claims_13(tables: Mapping[str, str], cfg: dict) -> list[Claim]:
    """Claim 2 on IMDB (MLP-ReLU, CNN, SA at setting I) and claim 3 on IMDB's MLP-ReLU (Fig. 13c)."""
    def measure(inputs: Inputs, cfg: dict) -> list[Measured]:
        units, out = inputs.units("imdb", "token"), []
        for job, model in (("imdb_mlp", "MLP (ReLU)"), ("imdb_cnn", "CNN"), ("imdb_sa", "SA")):
            df = with_polarity(select(final(inputs.job(job)), "relu", cfg["sigma_v"][0]), units)
            out += polarity_claims(df, f"2-imdb-{job[5:]}", f"IMDB, {model}, sigma_v={cfg['sigma_v'][0]:g}")
        # Fig. 13c: the ReLU bias on IMDB (claim 3)
        return out + relu_bias_claims(inputs, "imdb_mlp", "imdb", "3-imdb-mlp", "IMDB MLP-ReLU", *cfg["sigma_v"][:2])

    return verdicts(tables, cfg, "13", measure)


def _mv_bigrams(inputs: Inputs) -> pd.DataFrame:
    return with_polarity(final(inputs.job("sstwsub_mv"), "bigram"), inputs.units("sstwsub", "bigram"))


def draw_3(tables: Mapping[str, str], cfg: dict):
    """Fig. 3: distribution of the MV model's final bigram scores (SSTwsub), positive vs negative bigrams."""
    import matplotlib.pyplot as plt

    df = _mv_bigrams(Inputs(tables))
    first = df[df["seed"] == df["seed"].min()]
    set_style()
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    bins = np.linspace(first["score"].min(), first["score"].max(), 40)
    for sign, colour, name in ((1, POS, "positive bigrams"), (-1, NEG, "negative bigrams")):
        ax.hist(first.loc[first["polarity"] == sign, "score"], bins=bins, color=colour, alpha=0.6,
                label=f"{name} ({int((first['polarity'] == sign).sum())})")
    ax.axvline(0, color="grey", lw=0.8)
    ax.set_xlabel("bigram label score $s^{ab}$")
    ax.set_ylabel("number of bigrams")
    ax.legend(fontsize=8)
    _title(fig, "Fig. 3: MV bigram scores, SSTwsub", cfg["scale"])
    return fig


def claims_3(tables: Mapping[str, str], cfg: dict) -> list[Claim]:
    """Claim 5: MV bigram scores have the bigrams' signs; MV is more accurate on SSTwsub than on SST."""
    return verdicts(tables, cfg, "3", measure_3)


def measure_3(inputs: Inputs, cfg: dict) -> list[Measured]:
    st = seed_stats(_mv_bigrams(inputs).drop(columns="log_odds", errors="ignore"))
    acc_sub = inputs.job("sstwsub_mv", "summary")["test_accuracy"]
    acc_sst = inputs.job("sst_mv", "summary")["test_accuracy"]
    most = ("[project] the paper: MV captures the bigrams' polarity (Sec. 5, Fig. 3); read as at least 75% of each "
            "group with its sign")
    return [
        Measured("5-mv-pos-bigrams", "MV, SSTwsub: at least 75% of positive bigrams score > 0", "frac_pos > 0",
                 **over_seeds(st["frac_pos"]), op=">=", threshold=0.75, reason=most),
        Measured("5-mv-neg-bigrams", "MV, SSTwsub: at least 75% of negative bigrams score < 0", "frac_neg < 0",
                 **over_seeds(st["frac_neg"]), op=">=", threshold=0.75, reason=most),
        Measured("5-mv-sstwsub-accuracy", "MV: test accuracy on SSTwsub exceeds that on SST",
                 "test acc(SSTwsub) - test acc(SST), seed means", acc_sub.mean() - acc_sst.mean(), ">", 0,
                 "[P] Table 5: MV test accuracy 81.3 on SSTwsub, 77.8 on SST; the sign of the difference",
                 seeds=min(len(acc_sub), len(acc_sst)), paper_value="+0.035"),
    ]


def _agnews_scores(inputs: Inputs) -> tuple[pd.DataFrame, int]:
    units = inputs.units("ag_news", "token")
    df = final(inputs.job("ag_news_sa")).merge(units[["unit", "cls"]], on="unit")
    return df, int(df["out"].max()) + 1


def draw_4(tables: Mapping[str, str], cfg: dict):
    """Fig. 4: SA on AG News; for the tokens of each class, the score of each output dimension."""
    df, n_classes = _agnews_scores(Inputs(tables))
    names = AG_CLASSES if n_classes == len(AG_CLASSES) else [f"class {c + 1}" for c in range(n_classes)]
    first = df[df["seed"] == df["seed"].min()]
    set_style()
    fig, axes = _grid(n_classes, 2)
    for c, ax in zip(range(n_classes), axes):
        g = first[first["cls"] == c]
        data = [g.loc[g["out"] == o, "score"].to_numpy() for o in range(n_classes)]
        ax.boxplot(data, showfliers=False)
        ax.set_xticks(range(1, n_classes + 1), names, fontsize=8)
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_title(f"tokens of {names[c]} ({g['unit'].nunique()})")
        ax.set_ylabel("label score per output")
    _title(fig, "Fig. 4: SA label scores of extracted Agnews tokens", cfg["scale"])
    return fig


def claims_4(tables: Mapping[str, str], cfg: dict) -> list[Claim]:
    """Claim 6: for every AG News class, the class's own output scores its tokens highest."""
    def measure(inputs: Inputs, cfg: dict) -> list[Measured]:
        df, n_classes = _agnews_scores(inputs)
        means = df.groupby(["cls", "out"])["score"].mean().unstack()
        hits = int(sum(int(means.loc[c].idxmax()) == c for c in means.index))
        return [Measured("6-agnews-sa", "SA, Agnews: for every class c, output c has the highest mean score over "
                         "class-c tokens", "classes whose own output is highest", hits, ">=", n_classes,
                         "[project] Fig. 4 shows each class's own output highest: every class must hold",
                         seeds=df["seed"].nunique())]

    return verdicts(tables, cfg, "4", measure)


def _negation(inputs: Inputs, job: str, seed: int | None = None) -> tuple[pd.DataFrame, pd.Series, float]:
    """(adjectives with their final scores s(adj), s(not adj), phrase scores, s("not")): one seed's, or (None)
    the mean over seeds."""
    scores = final(inputs.job(job), "phrase")
    if seed is not None:
        scores = scores[scores["seed"] == seed]
    scores = scores.groupby("unit")["score"].mean()
    adj = inputs.units("sstwsub", "adjective")
    adj = adj[adj["unit"].isin(scores.index) & adj["unit"].map(lambda u: f"not {u}" in scores.index)]
    adj = adj.assign(s_adj=adj["unit"].map(scores), s_not=adj["unit"].map(lambda u: scores[f"not {u}"]))
    return adj, scores, float(scores.get("not", np.nan))


def draw_negation(ax, adj: pd.DataFrame, s_not: float, sign: int, title: str) -> None:
    g = adj[adj["polarity"] == sign].sort_values("s_adj")
    x = np.arange(len(g))
    colour = POS if sign > 0 else NEG
    ax.scatter(x, g["s_adj"], color=colour, s=10, label=f"{'pos' if sign > 0 else 'neg'} adj")
    ax.scatter(x, g["s_not"], color="black", marker="x", s=10, label="[-] not + adj")
    ax.axhline(s_not, color="purple", ls="--", lw=1, label='"not" alone')
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_title(title)
    ax.set_xlabel("adjective (sorted by its score)")
    ax.set_ylabel("label score")
    ax.legend(fontsize=7)


# Fig. 6 (SA a, b; MV c) and Fig. 8 (CNN, TR): (job, model label)
NEGATION_JOBS = {"6": [("sstwsub_sa", "SA"), ("sstwsub_mv", "MV")], "8": [("sstwsub_cnn", "CNN"), ("sstwsub_tr", "TR")]}


def _draw_negation_figure(tables: Mapping[str, str], cfg: dict, figure: str):
    """Fig. 6 (SA a, b; MV c) and Fig. 8 (CNN, TR): adjectives vs "not" + adjective on SSTwsub."""
    inputs = Inputs(tables)
    results = {name: _negation(inputs, job) for job, name in NEGATION_JOBS[figure]}
    set_style()
    fig, axes = _grid(4, 2, 4.2)
    k = 0
    for name, (adj, _, s_not) in results.items():
        for sign in (1, -1):
            draw_negation(axes[k], adj, s_not, sign, f"({'abcd'[k]}) {name}, {'pos' if sign > 0 else 'neg'} adj")
            k += 1
    _title(fig, f"Fig. {figure}: adjectives and their negations, SSTwsub", cfg["scale"])
    return fig


def _negation_claims(tables: Mapping[str, str], cfg: dict, figure: str) -> list[Claim]:
    """Claim 7: "not" lowers positive adjectives' scores; it raises negative ones' only in MV."""
    return verdicts(tables, cfg, figure, lambda inputs, cfg: _measure_negation(inputs, figure))


def _measure_negation(inputs: Inputs, figure: str) -> list[Measured]:
    out = []
    for job, name in NEGATION_JOBS[figure]:
        per_seed = []
        for seed in sorted(final(inputs.job(job), "phrase")["seed"].unique()):
            adj, _, s_not = _negation(inputs, job, seed)
            pos, neg = adj[adj["polarity"] > 0], adj[adj["polarity"] < 0]
            per_seed.append(((pos["s_not"] - pos["s_adj"]).mean(), (neg["s_not"] - neg["s_adj"]).mean(), s_not))
        d_pos, d_neg, s_not = (np.array(v, dtype=float) for v in zip(*per_seed))
        key = name.lower()
        out.append(Measured(f"7-{key}-not-pos", f"{name}: mean s(not + pos adj) < mean s(pos adj)",
                            "mean s(not adj) - s(adj), pos", **over_seeds(d_pos), op="<", threshold=0, reason=SIGN_REASON))
        if name == "MV":
            out.append(Measured("7-mv-not-neg", "MV: mean s(not + neg adj) > mean s(neg adj) (negation reversed)",
                                "mean s(not adj) - s(adj), neg", **over_seeds(d_neg), op=">", threshold=0,
                                reason=SIGN_REASON))
        else:
            out.append(Measured(f"7-{key}-not-neg", f"{name}: mean s(not + neg adj) <= mean s(neg adj) (negation not "
                                "reversed)", "mean s(not adj) - s(adj), neg", **over_seeds(d_neg), op="<=", threshold=0,
                                reason=SIGN_REASON))
        if name == "SA":
            out.append(Measured("7-sa-not", 'SA: s("not") < 0', 's("not")', **over_seeds(s_not), op="<", threshold=0,
                                reason='[project] the sign of one score (the paper: "not" gets a negative score, Sec. 5)'))
    return out


def draw_6(tables: Mapping[str, str], cfg: dict):
    return _draw_negation_figure(tables, cfg, "6")


def claims_6(tables: Mapping[str, str], cfg: dict) -> list[Claim]:
    return _negation_claims(tables, cfg, "6")


def draw_8(tables: Mapping[str, str], cfg: dict):
    return _draw_negation_figure(tables, cfg, "8")


def claims_8(tables: Mapping[str, str], cfg: dict) -> list[Claim]:
    return _negation_claims(tables, cfg, "8")


def _phrase_differences(inputs: Inputs) -> tuple[np.ndarray, np.ndarray]:
    """SA: s(sub-phrase without the negation word) - s(phrase) for every negation phrase, and its polarity."""
    _, scores, _ = _negation(inputs, "sstwsub_sa")
    phrases = inputs.units("sstwsub", "phrase")
    phrases = phrases[phrases["unit"].isin(scores.index)]
    sub = phrases["unit"].map(lambda p: " ".join(p.split()[1:]))
    ok = sub.isin(scores.index)
    diff = (sub[ok].map(scores).to_numpy() - phrases.loc[ok, "unit"].map(scores).to_numpy())
    return diff, phrases.loc[ok, "polarity"].to_numpy()


def draw_9(tables: Mapping[str, str], cfg: dict):
    """Fig. 9: SA, s(sub-phrase without the negation word) - s(phrase) for every negation phrase."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    diff, pol = _phrase_differences(Inputs(tables))
    order = np.argsort(diff)
    set_style()
    fig, ax = plt.subplots(figsize=(7, 3.4))
    ax.bar(np.arange(len(diff)), diff[order], color=[POS if p > 0 else NEG for p in pol[order]], width=1.0)
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xlabel("negation phrase (not / never / hardly + sub-phrase; sorted)")
    ax.set_ylabel("s(sub-phrase) - s(phrase)")
    ax.legend(handles=[Patch(color=POS, label=f"positive phrases ({int((pol > 0).sum())})"),
                       Patch(color=NEG, label=f"negative phrases ({int((pol < 0).sum())})")], fontsize=8)
    _title(fig, "Fig. 9: SA score differences, SSTwsub", cfg["scale"])
    return fig


def claims_9(tables: Mapping[str, str], cfg: dict) -> list[Claim]:
    """Claim 7 on the negation phrases (scores averaged over seeds: the measurement rests on every seed trained)."""
    def measure(inputs: Inputs, cfg: dict) -> list[Measured]:
        diff, _ = _phrase_differences(inputs)
        seeds = int(final(inputs.job("sstwsub_sa"), "phrase")["seed"].nunique())
        return [Measured("7-fig9-differences", "SA: s(sub-phrase) - s(phrase) > 0 for every negation phrase",
                         "fraction > 0", float((diff > 0).mean()) if len(diff) else NAN, ">=", 1.0,
                         "[P] App. C.2: the differences 'are all positive' (65 phrases): every phrase, the paper's own "
                         "number", paper_value="65 of 65", seeds=seeds)]

    return verdicts(tables, cfg, "9", measure)


def _position_scores(inputs: Inputs) -> pd.DataFrame:
    scores = inputs.job("synthetic_lrnn")
    scores = scores[scores["probe"] == "position"]
    return scores.assign(polarity=np.where(scores["unit"].str.startswith("pos"), 1, -1))


def draw_12(tables: Mapping[str, str], cfg: dict):
    """Fig. 12: L-RNN position scores s^e_[k] of the synthetic class markers at every logged k."""
    scores = _position_scores(Inputs(tables))
    ks = sorted(scores["k"].unique())
    set_style()
    fig, axes = _grid(len(ks))
    for ax, k in zip(axes, ks):
        draw_token_curves(ax, scores[scores["k"] == k], f"k = {k}")
    axes[0].legend(fontsize=7)
    _title(fig, "Fig. 12: L-RNN position scores, synthetic data", cfg["scale"])
    return fig


def claims_12(tables: Mapping[str, str], cfg: dict) -> list[Claim]:
    """Claim 8: the markers' scores separate by class at k = the markers' distance from the end
    (``cfg["distance"]``), at least 3x more than at the other ``cfg["ks"]``."""
    return verdicts(tables, cfg, "12", measure_12)


def measure_12(inputs: Inputs, cfg: dict) -> list[Measured]:
    scores, d = _position_scores(inputs), cfg["distance"]
    last = scores[scores["epoch"] == scores["epoch"].max()]
    seeds = last["seed"].nunique()
    sep, per_seed = {}, {}
    for k in sorted(scores["k"].unique()):
        st = token_stats(last[last["k"] == k])
        sep[k] = (st["mean_pos"] - st["mean_neg"], min(st["mean_pos"], -st["mean_neg"]))
        ss = seed_stats(last[last["k"] == k])  # the same per seed: on the untrained network, one draw per seed
        per_seed[k] = (ss["mean_pos"] - ss["mean_neg"], np.minimum(ss["mean_pos"], -ss["mean_neg"]))

    def ratio(a, b):
        return a / abs(b) if b != 0 else float("inf")

    out = []
    if d in sep:
        out.append(Measured(f"8-lrnn-k{d}-signs", f"L-RNN: at k={d} mean pos marker score > 0 > mean neg",
                            f"min(mean_pos, -mean_neg) at k={d}, seed means", sep[d][1], ">", 0, SIGN_REASON, seeds=seeds,
                            draws=tuple(float(v) for v in per_seed[d][1])))
        for k in cfg["ks"]:
            if k != d and k in sep:
                draws = tuple(ratio(a, b) for a, b in zip(per_seed[d][0], per_seed[k][0].reindex(per_seed[d][0].index)))
                out.append(Measured(f"8-lrnn-k{d}-vs-k{k}", f"L-RNN: separation (mean_pos - mean_neg) at k={d} is at least "
                                    f"3x that at k={k}", f"sep({d}) / |sep({k})|, seed means", ratio(sep[d][0], sep[k][0]),
                                    ">=", 3, f"[project] the paper: the markers' scores separate at their own distance "
                                    f"k = {d} (App. C, Fig. 12); read as 3x the separation at other k", seeds=seeds,
                                    draws=draws))
    return out


# ------------------------------------------------------------------------------------------ tables
def _markdown(df: pd.DataFrame) -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, r in df.iterrows():
        lines.append("| " + " | ".join("" if pd.isna(v) else (f"{v:.1f}" if isinstance(v, float) else str(v)) for v in r) + " |")
    return "\n".join(lines) + "\n"


def _csv_frame(df: pd.DataFrame) -> pd.DataFrame:
    """The tidy table as written to CSV: floats with 4 decimals, missing values empty."""
    return df.assign(**{c: df[c].map(lambda v: "" if pd.isna(v) else f"{v:.4f}")
                        for c in df.columns if pd.api.types.is_float_dtype(df[c])})


def _table(df: pd.DataFrame, title: str, columns: list[str] | None = None, order: list[str] | None = None) -> Table:
    """The tidy table (CSV) and its markdown: either as is or (``columns`` given) one row per dataset and
    split with a "measured (paper)" cell per column value."""
    if columns:
        cell = df.apply(lambda r: f"{r['measured']:.1f} ({'-' if pd.isna(r['paper']) else format(r['paper'], '.1f')})", axis=1)
        wide = df.assign(column=df[columns].astype(str).agg(" ".join, axis=1), cell=cell)
        present = set(wide["column"])
        order = [c for c in (order or list(dict.fromkeys(wide["column"]))) if c in present]
        rows = list(dict.fromkeys(zip(wide["dataset"], wide["split"])))
        wide = wide.pivot_table(index=["dataset", "split"], columns="column", values="cell", aggfunc="first")
        wide = wide.reindex(index=pd.MultiIndex.from_tuples(rows), columns=order).reset_index()
        wide.columns = ["dataset", "split"] + order
        body = _markdown(wide.fillna(""))
        note = "\nCells: measured (paper), %.\n"
    else:
        body, note = _markdown(df), ""
    return Table(_csv_frame(df), f"# {title}\n\n" + body + note)


def _table6_frame(inputs: Inputs) -> pd.DataFrame:
    rows = []
    for (dataset, kind), paper in PAPER_TABLE6.items():
        if dataset not in inputs.extracted:
            continue
        units = inputs.units(dataset, kind)
        for cls, n_paper in sorted(paper.items()):
            label = (AG_CLASSES[cls] if dataset == "ag_news" else ("+" if cls == 1 else "-"))
            rows.append({"dataset": DATASET_LABELS[dataset], "unit": kind, "class": label,
                         "measured": int((units["cls"] == cls).sum()), "paper": n_paper})
    if "sstwsub" in inputs.extracted:
        ph = inputs.units("sstwsub", "phrase")
        for cls, n_paper in ((1, 17), (0, 48)):  # Fig. 9 [P]: 65 negation phrases
            rows.append({"dataset": "SSTwsub", "unit": "negation phrase", "class": "+" if cls else "-",
                         "measured": int((ph["cls"] == cls).sum()), "paper": n_paper})
    return pd.DataFrame(rows)


def draw_table6(tables: Mapping[str, str], cfg: dict) -> Table:
    """Table 6: extracted units per class next to the paper's."""
    return _table(_table6_frame(Inputs(tables)), f"Table 6: extracted units (scale: {cfg['scale']}; adjectives by "
                  "lemminflect, the paper used textblob)")


def claims_table6(tables: Mapping[str, str], cfg: dict) -> list[Claim]:
    """Claim 1: split sizes (Table 2) and the SST token counts of Table 6: checks that this project's data and
    extraction are the paper's (sanity: nothing is trained)."""
    def measure(inputs: Inputs, cfg: dict) -> list[Measured]:
        out = []
        for (dataset, split), n in PAPER_SPLITS.items():
            if dataset in inputs.stats:
                stats = json.loads(Path(inputs.stats[dataset]).read_text())
                out.append(Measured(f"1-{dataset}-{split}-size", f"{DATASET_LABELS[dataset]} {split} split has {n:,} "
                                    "instances (Table 2)", "instances", stats["splits"][split]["n"], "==", n,
                                    "[P] Table 2 prints the count", kind="sanity", paper_value=str(n), baseline=False))
        for dataset, n in PAPER_VOCAB.items():
            if dataset in inputs.stats:
                stats = json.loads(Path(inputs.stats[dataset]).read_text())
                if "vocab_size" in stats:
                    out.append(Measured(f"1-{dataset}-vocab", f"{DATASET_LABELS[dataset]} vocabulary has {n:,} words (Table 2)",
                                        "relative difference |ours - paper| / paper", abs(stats["vocab_size"] - n) / n, "<=",
                                        COUNT_SLACK, COUNT_REASON, kind="sanity", paper_value=str(n), baseline=False,
                                        note=f"ours {stats['vocab_size']:,}"))
        for (dataset, kind), paper in PAPER_TABLE6.items():
            if dataset == "sst" or dataset not in inputs.extracted:
                continue
            units = inputs.units(dataset, kind)
            for cls, n in paper.items():
                label = AG_CLASSES[cls] if dataset == "ag_news" else ("pos" if cls == 1 else "neg")
                got = int((units["cls"] == cls).sum())
                out.append(Measured(f"1-{dataset}-{kind}-{label.lower().replace('/', '')}",
                                    f"{DATASET_LABELS[dataset]}: {n} extracted {label} {kind}s (Table 6)",
                                    "relative difference |ours - paper| / paper", abs(got - n) / n, "<=", COUNT_SLACK,
                                    COUNT_REASON,
                                    kind="sanity", paper_value=str(n), baseline=False, note=f"ours {got}"))
        if "sstwsub" in inputs.extracted:
            got = len(inputs.units("sstwsub", "phrase"))
            out.append(Measured("1-sstwsub-negation-phrases", "SSTwsub: 65 negation phrases (Fig. 9, App. C.2)",
                                "relative difference |ours - paper| / paper", abs(got - 65) / 65, "<=", COUNT_SLACK, COUNT_REASON,
                                kind="sanity", paper_value="65", baseline=False, note=f"ours {got}"))
        if "sst" in inputs.extracted:
            units = inputs.units("sst", "token")
            for cls, n in PAPER_TABLE6[("sst", "token")].items():
                sign = "pos" if cls == 1 else "neg"
                out.append(Measured(f"1-sst-{sign}-tokens", f"SST: extracted {sign} tokens within 5 of {n}",
                                    "extracted tokens", int((units["cls"] == cls).sum()), "==", n,
                                    "[P] Table 6 prints the count; [project] 5 tokens of slack for tokenisation",
                                    within=5, kind="sanity", paper_value=str(n), baseline=False))
        return out

    return verdicts(tables, cfg, "table6", measure)


def _table3_frame(inputs: Inputs, sv: list[float]) -> pd.DataFrame:
    """MLP accuracy per dataset, split, activation and sigma_v setting (I: ``sv[0]``, II: ``sv[1]``), mean
    over seeds, next to the paper's."""
    setting = {sv[0]: "I", sv[1]: "II"}
    rows = []
    order = {a: i for i, a in enumerate(("relu", "tanh", "gelu", "silu"))}
    mlp_jobs = [j for j in inputs.jobs if j.endswith("_mlp") and j[:-4] in DATASET_LABELS]
    for job in sorted(mlp_jobs, key=lambda j: list(DATASET_LABELS).index(j[:-4])):
        dataset = job.rsplit("_mlp", 1)[0]
        s = inputs.job(job, "summary")
        groups = sorted(s.groupby(["activation", "sigma_v"]), key=lambda kv: (order.get(kv[0][0], 9), -kv[0][1]))
        for split in ("dev", "test"):
            for (act, s_v), g in groups:
                name = setting.get(min(setting, key=lambda x: abs(x - s_v)))
                paper = PAPER_TABLE3.get((dataset, split))
                p = paper[TABLE3_COLUMNS.index((act, name))] if paper else None
                rows.append({"dataset": DATASET_LABELS[dataset], "split": "valid" if split == "dev" else "test",
                             "activation": act, "setting": name, "sigma_v": s_v,
                             "measured": 100 * g[f"{split}_accuracy"].mean(), "paper": p, "trials": len(g)})
    return pd.DataFrame(rows)


def draw_table3(tables: Mapping[str, str], cfg: dict) -> Table:
    """Table 3: MLP accuracy per activation and sigma_v setting, mean over seeds, next to the paper's."""
    sv = cfg["sigma_v"]
    df = _table3_frame(Inputs(tables), sv)
    trials = ", ".join(f"{d} {n}" for d, n in df.groupby("dataset", sort=False)["trials"].min().items())
    return _table(df, f"Table 3: MLP accuracy (%), mean of trials ({trials}); I: sigma_v={sv[0]:g}, "
                  f"II: sigma_v={sv[1]:g} (scale: {cfg['scale']})", columns=["activation", "setting"],
                  order=[f"{a} {s}" for a, s in TABLE3_COLUMNS])


def sst_mlp_test_accuracy(inputs: Inputs) -> pd.DataFrame:
    """SST MLP test accuracy (%) per seed (index) and (activation, sigma_v) (columns)."""
    s = inputs.job("sst_mlp", "summary")
    return 100 * s.pivot_table(index="seed", columns=["activation", "sigma_v"], values="test_accuracy", aggfunc="first")


# Paper-scale comparisons: below the paper's settings (fewer epochs, subsampled data) the values are not comparable.
PAPER_SCALE = "paper"
VALUES_REASON = ("[project] 3 points: about 3 binomial standard deviations of one run's accuracy on SST's 1,821 test "
                 "sentences at 80%; the paper reports means of 3 trials without a spread")


def _paper_values(cid: str, statement: str, table: str, df: pd.DataFrame, scale: str) -> Measured:
    """A 'within 3 points of the paper's table' claim, checked at the paper's settings only."""
    both = df.dropna(subset=["paper"])
    gap = float((both["measured"] - both["paper"]).abs().max())
    metric = "max |measured - paper|, points"
    if scale != PAPER_SCALE:
        return Measured(cid, statement, metric, NAN, "<=", 3, VALUES_REASON, paper_value=f"Table {table}",
                        unchecked=f"compared at the paper's settings only (config/paper.yaml); at this scale's shorter "
                                  f"training and subsampled data the largest gap is {gap:.1f} points")
    return Measured(cid, statement, metric, gap, "<=", 3, VALUES_REASON, seeds=int(both["trials"].min()),
                    paper_value=f"Table {table}")


def claims_table3(tables: Mapping[str, str], cfg: dict) -> list[Claim]:
    """Claim 4: the shape of Table 3 on SST, and closeness to the paper's values."""
    return verdicts(tables, cfg, "table3", measure_table3)


def measure_table3(inputs: Inputs, cfg: dict) -> list[Measured]:
    lo, hi = cfg["sigma_v"]
    out = []
    if "sst_mlp" in inputs.jobs:
        acc = sst_mlp_test_accuracy(inputs)

        def at(act, sv):
            return acc[(act, min(acc[act].columns, key=lambda x: abs(x - sv)))]

        paper = dict(zip(TABLE3_COLUMNS, PAPER_TABLE3[("sst", "test")]))
        out.append(Measured("4-sst-relu-drop", "SST, MLP-ReLU: test accuracy drops by >= 5 points from setting I to II",
                            "acc(I) - acc(II), points", **over_seeds(at("relu", lo) - at("relu", hi)), op=">=", threshold=5,
                            reason="[P] Table 3: 80.0 (I) vs 67.3 (II), a 12.7-point drop; loosened to 5 points "
                                   "because the claim is that ReLU drops where tanh, GeLU and SiLU move by at most 0.2: 5 "
                                   "points separates the two with room for this scale's seed spread (about 4 points over 3 "
                                   "seeds), and the printed 12.7 itself is compared at paper scale (4-table3-values)",
                            paper_value=f"{paper[('relu', 'I')] - paper[('relu', 'II')]:.1f}"))
        for act in ("tanh", "gelu", "silu"):
            if act in acc.columns.get_level_values(0):
                # the change of the seed-mean accuracy, as the paper's table compares means of trials
                change = over_seeds(at(act, lo) - at(act, hi))
                out.append(Measured(f"4-sst-{act}-stable", f"SST, MLP-{act}: test accuracy changes by <= 1.5 points from "
                                    "setting I to II", "|mean acc(I) - mean acc(II)|, points",
                                    **{**change, "value": abs(change["value"])}, op="<=", threshold=1.5,
                                    reason="[P] Table 3: changes of 0.0 (tanh), 0.1 (GeLU), 0.2 (SiLU) points; loosened "
                                           "to 1.5 points because 0.2 is below the test set's own noise: 1.5 points is "
                                           "about 1.1 binomial standard deviations of the difference of two runs on 1,821 "
                                           "test sentences at 80%",
                                    paper_value=f"{abs(paper[(act, 'I')] - paper[(act, 'II')]):.1f}"))
    df = _table3_frame(inputs, cfg["sigma_v"])
    if not df.dropna(subset=["paper"]).empty:
        out.append(_paper_values("4-table3-values", "Table 3 accuracies within 3 points of the paper's", "3", df, cfg["scale"]))
    return out


def _table5_frame(inputs: Inputs, sv0: float) -> pd.DataFrame:
    """Accuracy of MLP (ReLU), CNN, SA, MV, L-RNN at sigma_v = ``sv0``, next to the paper's."""
    rows = []
    jobs = [j for j in inputs.jobs if j.rsplit("_", 1)[1] in TABLE5_MODELS and j.rsplit("_", 1)[0] in DATASET_LABELS]
    jobs.sort(key=lambda j: (list(DATASET_LABELS).index(j.rsplit("_", 1)[0]), TABLE5_MODELS.index(j.rsplit("_", 1)[1])))
    for job in jobs:
        dataset, model = job.rsplit("_", 1)
        s = select(inputs.job(job, "summary"), "relu", sv0)
        for split in ("dev", "test"):
            paper = PAPER_TABLE5.get((dataset, split))
            rows.append({"dataset": DATASET_LABELS[dataset], "split": "valid" if split == "dev" else "test",
                         "model": MODEL_LABELS[model], "measured": 100 * s[f"{split}_accuracy"].mean(),
                         "paper": paper[TABLE5_MODELS.index(model)] if paper else None, "trials": len(s)})
    df = pd.DataFrame(rows)
    df = df.sort_values("split", key=lambda c: c.map({"valid": 0, "test": 1}), kind="mergesort")
    return df.sort_values("dataset", key=lambda c: c.map({v: i for i, v in enumerate(DATASET_LABELS.values())}),
                          kind="mergesort").reset_index(drop=True)


def draw_table5(tables: Mapping[str, str], cfg: dict) -> Table:
    """Table 5: accuracy of MLP (ReLU), CNN, SA, MV, L-RNN at setting I, next to the paper's."""
    sv0 = cfg["sigma_v"][0]
    return _table(_table5_frame(Inputs(tables), sv0), f"Table 5: accuracy (%), Adagrad, sigma_v={sv0:g}, mean of "
                  f"trials (scale: {cfg['scale']}; paper '-' = unstable in the paper)", columns=["model"],
                  order=[MODEL_LABELS[m] for m in TABLE5_MODELS])


def claims_table5(tables: Mapping[str, str], cfg: dict) -> list[Claim]:
    """Claim 4: Table 5 accuracies close to the paper's (at the paper's settings)."""
    def measure(inputs: Inputs, cfg: dict) -> list[Measured]:
        df = _table5_frame(inputs, cfg["sigma_v"][0])
        if df.empty or df.dropna(subset=["paper"]).empty:
            return []
        return [_paper_values("4-table5-values", "Table 5 accuracies within 3 points of the paper's", "5", df, cfg["scale"])]

    return verdicts(tables, cfg, "table5", measure)
