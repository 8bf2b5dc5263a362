"""One record per templates sweep figure (Figs. 2c, 3c, 5, 8-23, 25): what its grid trains and how it is drawn.

A :class:`SweepFigure` holds the grid's swept quantity (``axis``: a list in the figure's config section
``templates.sweeps.fig<id>``, besides ``n`` and ``lrs``), its curves (task, architecture, variants and their
labels, panels), the figure's title and plot kind, and its claim ids. The values (n, learning rates, seeds,
sizes) are the config's. The registry (training job, figure rule, claims), the experiments (the curves a job
trains) and the figures (title, kind, rows) all read these records. Adding a sweep figure: a record here, its
grid in config/config.yaml and, when it has claims, ``claims_<id>`` in sweeps/figures.py (docs/CONTRIBUTING.md).

Standard library only: Snakemake reads it while building the DAG. Curves [P] (the paper's figure named first):
see the records' comments and sweeps/experiments.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

PER_RUN = "per_run"  # the template seed of a random task drawn from each run's seed
T5 = {"name": "aba_abb"}
T5_TITLE = "αβα vs αββ (T5)"
ALL4 = {"vanilla": "Transformer", "kq": "Transformer +KQ", "vo": "Transformer +VO", "kq_vo": "Transformer +KQ,VO"}
AXIS_LABEL = {
    "d_emb": "d_emb", "depth": "depth", "heads": "heads", "batch": "batch", "attn_mult": "attention init x",
    "k": "k", "length": "L", "n_wildcards": "|W|", "n_regular": "|X|", "r": "r",
}


def curve(labels: dict, task: dict = T5, arch: str = "transformer", panel: str = "", value: float = math.nan, **extra) -> dict:
    """One curve before sizes and schedules: task, arch, {variant: label}, panel, the swept value, and the
    settings that differ from the shared ones (``model`` sizes, ``batch``, ``trainable``)."""
    return dict(task=task, arch=arch, labels=labels, panel=panel, value=value, **extra)


@dataclass(frozen=True)
class SweepFigure:
    """One sweep figure: its grid's curves (``curves(values of axis) -> [curve, ...]``), title, plot kind
    (``curves``: error against n; ``heatmap``: rows lr, columns ``plot["col"]``) and plot options (``variant``:
    keep these variants' rows; ``task``: keep the tasks that start with it; ``panel_by``: the column that splits
    panels), its claim ids (a figure with claims has ``claims_<id>`` in sweeps/figures.py), the extra settings
    its claims read from its config section (and, with ``reads_calibration``, the calibration's n per task: a
    claim read where a multiplier was tuned says so), and ``runs_from``: the figure whose grid it is drawn from (Fig. 23
    from Fig. 17's runs) instead of a grid of its own."""

    id: str
    title: str
    curves: Callable[[list], list[dict]] | None = None
    axis: str | None = None
    kind: str = "curves"
    plot: dict = field(default_factory=dict)
    claim_ids: tuple[str, ...] = ()
    claim_settings: tuple[str, ...] = ()
    runs_from: str | None = None
    reads_calibration: bool = False  # its claims read where the identity multipliers were calibrated

    @property
    def grid(self) -> str:
        """The grid (training job) its runs come from."""
        return self.runs_from or self.id


def _one_value(label: str, key: str, **extra) -> Callable[[list], list[dict]]:
    """One vanilla T5 curve per value of the axis, set in the model sizes (``key``)."""
    return lambda values: [curve({"vanilla": label.format(v)}, value=v, model={key: v}, **extra) for v in values]


def _random(axis: str, **base) -> Callable[[list], list[dict]]:
    """T8 random templates, one curve per value of ``axis``; each run draws its own templates [D]."""
    return lambda values: [curve({"vanilla": f"{AXIS_LABEL[axis]} = {v}"},
                                 task={"name": "random", **base, axis: v, "seed": PER_RUN}, value=v) for v in values]


def _heatmap(fig_id: str, axis: str, what: str) -> SweepFigure:
    """Learning rate against ``axis`` at one n: T5, vanilla transformer."""
    return SweepFigure(fig_id, f"Fig. {fig_id}: learning rate vs {what}, {T5_TITLE}",
                       _one_value(f"{AXIS_LABEL[axis]} {{:g}}", axis), axis, "heatmap", {"col": "value"})


def _copy_curves(values: list) -> list[dict]:
    return [curve({variant: f"d_emb {d}"}, task={"name": "copy"}, panel=panel, value=d, model={"d_emb": d})
            for variant, panel in (("vanilla", "(a) Transformer"), ("vo", "(b) Transformer +VO")) for d in values]


def _majority_curves(values: list) -> list[dict]:
    return [curve({"vanilla": "αβα vs αββ"}), curve({"vanilla": "αβαβ vs ααββ"}, task={"name": "abab_aabb"}),
            *(curve({"vanilla": f"majority k={k}", "kq_vo": f"majority k={k} +KQ,VO"}, task={"name": "majority", "k": k},
                    value=k) for k in values)]


_RECORDS = (
    # T1 program regression: vanilla vs +KQ, lr per curve chosen by validation loss
    SweepFigure("2c", "Fig. 2c: program regression (T1)",
                lambda v: [curve({"vanilla": "Transformer", "kq": "Transformer +KQ"}, task={"name": "program"})],
                claim_ids=("3-nstar-ratio", "3-vanilla-small-n")),
    # T2 program next-token: vanilla vs +KQ,VO (the paper: 4 layers, d_emb 512; the grid's transformer key)
    SweepFigure("3c", "Fig. 3c: program next-token (T2)",
                lambda v: [curve({"vanilla": "Transformer", "kq_vo": "Transformer +KQ,VO"}, task={"name": "program_next_token"})],
                claim_ids=("4-kqvo-nstar", "4-vanilla")),
    # T3 copy: one curve per d_emb, panels (a) vanilla, (b) +VO
    SweepFigure("5", "Fig. 5: copy (T3) over the embedding dimension", _copy_curves, "d_emb",
                claim_ids=("5-inverse-scaling", "5-vo")),
    # T5, learning rate x n; claim 10 reads the grid's learning rates and n
    SweepFigure("8", f"Fig. 8: learning rate vs n, {T5_TITLE}", lambda v: [curve({"vanilla": "Transformer"})],
                kind="heatmap", plot={"col": "n"}, claim_ids=("10-large-lr", "10-best-lr"), claim_settings=("lrs", "n")),
    # lr x depth at one n each (512, 1024); lr x heads (n = 512, 1024); lr x d_emb (n = 1024)
    _heatmap("9", "depth", "depth"),
    _heatmap("10", "depth", "depth"),
    _heatmap("11", "heads", "heads per layer"),
    _heatmap("12", "heads", "heads per layer"),
    _heatmap("13", "d_emb", "embedding dimension"),
    # lr x batch size (n = 512)
    SweepFigure("14", f"Fig. 14: learning rate vs batch size, {T5_TITLE}",
                lambda values: [curve({"vanilla": f"batch {b}"}, value=b, batch=b) for b in values], "batch", "heatmap",
                {"col": "value"}),
    # T5, only the final readout trained, attention logits at init scaled by 1, 8, 64 [D: the paper's "1, 8, 64
    # times the standard initialization" of the attention weights; with frozen attention weights a multiplier c
    # of W_Q W_K^T's init is the logit multiplier attn_mult = c]
    SweepFigure("15", f"Fig. 15: only the readout trained, attention init scales, {T5_TITLE}",
                _one_value(f"{AXIS_LABEL['attn_mult']} {{:g}}", "attn_mult", trainable=["head."]), "attn_mult"),
    # batch size x n
    SweepFigure("16", f"Fig. 16: batch size vs n, {T5_TITLE}",
                lambda values: [curve({"vanilla": f"batch {b}"}, value=b, batch=b) for b in values], "batch"),
    # T5, T6 (αβαβ vs ααββ) and T7 majority of length k, vanilla; T7 also +KQ,VO, which is Fig. 23
    SweepFigure("17", "Fig. 17: transformer on T5, T6 and majority of length k (T7)", _majority_curves, "k",
                plot={"variant": ["vanilla"]}, claim_ids=("9-easy", "9-maj4", "9-maj68")),
    # T8 random templates, two templates labelled ±1 unless r > 2: template length L (|W| = 2, |X| = 0)
    SweepFigure("18", "Fig. 18: two random templates, template length L (T8)",
                _random("length", n_wildcards=2, n_regular=0, r=2), "length"),
    # wildcard alphabet |W| (L = 5, |X| = 0)
    SweepFigure("19", "Fig. 19: two random templates of length 5, wildcard alphabet |W| (T8)",
                _random("n_wildcards", length=5, n_regular=0, r=2), "n_wildcards"),
    # regular-token alphabet |X| (L = 5, |W| = 2)
    SweepFigure("20", "Fig. 20: two random templates of length 5, |W| = 2, regular tokens |X| (T8)",
                _random("n_regular", length=5, n_wildcards=2, r=2), "n_regular"),
    # number of templates r with centred Gaussian labels [D: L = 5, |W| = 3, |X| = 0; the paper's caption of
    # Fig. 21 repeats Fig. 20's]
    SweepFigure("21", "Fig. 21: r random templates of length 5, |W| = 3 (T8)",
                _random("r", length=5, n_wildcards=3, n_regular=0), "r"),
    # T5: transformer, +KQ, +VO, +KQ,VO, depth-3 FCNet, RNN and LSTM
    SweepFigure("22", f"Fig. 22: {T5_TITLE}, transformers and baselines",
                lambda v: [curve(ALL4), curve({"vanilla": "FCNet (depth 3)"}, arch="mlp"), curve({"vanilla": "RNN"}, arch="rnn"),
                           curve({"vanilla": "LSTM"}, arch="lstm")],
                claim_ids=("6-fcnet-test", "6-fcnet-train", "6-kq-nstar", "6-vanilla-nstar", "6-recurrent"),
                reads_calibration=True),
    # majority of length k (T7), vanilla vs +KQ,VO: drawn from Fig. 17's runs
    SweepFigure("23", "Fig. 23: majority of length k (T7), vanilla vs +KQ,VO", runs_from="17",
                plot={"panel_by": "variant", "task": "majority"}, claim_ids=("7-k2",)),
    # T5: MLP vs MLP + vec(XX^T)
    SweepFigure("25", f"Fig. 25: {T5_TITLE}, MLP with and without vec(XXᵀ)",
                lambda v: [curve({"vanilla": "MLP"}, arch="mlp"), curve({"vanilla": "MLP + vec(XX^T)"}, arch="mlp_xxt")],
                claim_ids=("8-mlp", "8-mlp-xxt")),
)
SWEEP_FIGURES: dict[str, SweepFigure] = {r.id: r for r in _RECORDS}
# the grids (training jobs): every figure that is not drawn from another's runs
GRIDS: dict[str, SweepFigure] = {r.id: r for r in _RECORDS if r.runs_from is None}


def sweep_figure(fig_id: str) -> SweepFigure:
    if fig_id not in SWEEP_FIGURES:
        raise ValueError(f"unknown sweep figure {fig_id!r}; expected one of {tuple(SWEEP_FIGURES)}")
    return SWEEP_FIGURES[fig_id]
