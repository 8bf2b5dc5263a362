"""Sweep figures of the templates paper (Figs. 2c, 22, 25) and the checks of claims 1-2."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from featlearn.registry import load
from featlearn.templates.registry import CLAIMED
from featlearn.templates.sweeps.experiments import data_and_identity_checks, figure_curves, run_figure
from featlearn.templates.sweeps.figures import check_claims, claims_2c, claims_22, claims_25, curve_means, draw

TINY = dict(
    epochs=2,
    batch=1024,
    seeds=1,
    max_group=64,
    transformer=dict(d_emb=8, depth=1, heads=2, d_head=4, d_mlp=16),
    mlp=dict(hidden=16, depth=3),
    rnn=dict(hidden=8),
    fig2c=dict(n=[4, 8], lrs=[1e-3, 1e-2]),
    fig22=dict(n=[4, 8], lrs=[1e-3]),
    fig25=dict(n=[4, 8], lrs=[1e-3]),
)


def test_variants_of_one_architecture_train_in_one_group():
    curves = figure_curves("22", TINY)
    transformer = [s for labels, s in curves if s["arch"] == "transformer"]
    assert len(transformer) == 1 and transformer[0]["variants"] == ["vanilla", "kq", "vo", "kq_vo"]
    assert [s["arch"] for _, s in curves] == ["transformer", "mlp", "rnn", "lstm"]
    assert all(s["n"] == [4, 8] and s["epochs"] == 2 for _, s in curves)
    with pytest.raises(ValueError, match="unknown sweep figure"):
        figure_curves("99", TINY)


def test_run_figure_writes_every_curve_and_is_deterministic(tmp_path, one_thread):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    run_figure("25", TINY, str(a))
    run_figure("25", TINY, str(b))
    assert a.read_bytes() == b.read_bytes()
    runs = pd.read_csv(a)
    assert set(runs["curve"]) == {"MLP", "MLP + vec(XX^T)"}
    assert sorted(runs["n"].unique()) == [4, 8]
    assert runs["test_metric"].notna().all()


def _claims(fn, runs: pd.DataFrame, tmp_path, name: str = "runs.csv", **settings) -> list:
    """A registry claims function on a planted runs table (written to ``tmp_path``), at scale "test"."""
    path = tmp_path / name
    runs.to_csv(path, index=False)
    return fn({"runs": str(path)}, {**settings, "scale": "test"})


def _figure(fig: str, table, png) -> list:
    """What the figure rule does for sweep figure ``fig``: draw it to ``png`` and return its claims."""
    from featlearn.figure import write_outputs

    inputs, cfg = {"runs": str(table)}, {"figure": fig, "scale": "test"}
    write_outputs(draw(inputs, cfg), [str(png)], 60)
    return load(f"featlearn.templates.sweeps.figures:claims_{fig}")(inputs, cfg) if fig in CLAIMED else []


def _planted(curves: dict[str, dict[int, float]], lrs=(1e-3,), train_loss=0.01, val_for=None) -> pd.DataFrame:
    rows = []
    for curve, by_n in curves.items():
        for lr in lrs:
            for n, metric in by_n.items():
                for seed in (1, 2):
                    val = (val_for or {}).get((curve, lr), 0.5)
                    rows.append(dict(curve=curve, n=n, lr=lr, seed=seed, test_metric=metric, val_loss=val, final_train_loss=train_loss))
    return pd.DataFrame(rows)


def test_fig22_claims_pass_and_fail_on_planted_tables(tmp_path):
    ns = (32, 128, 512, 2048, 8192)
    good = _planted(
        {
            "Transformer": dict(zip(ns, (1.0, 0.9, 0.6, 0.05, 0.01))),
            "Transformer +KQ": dict(zip(ns, (0.8, 0.05, 0.01, 0.0, 0.0))),
            "FCNet (depth 3)": dict(zip(ns, (1.0, 1.0, 0.95, 0.98, 1.0))),
            "RNN": dict(zip(ns, (1.0, 1.0, 0.9, 0.7, 0.5))),
            "LSTM": dict(zip(ns, (1.0, 1.0, 0.9, 0.6, 0.4))),
        }
    )
    assert all(c.passed for c in _claims(claims_22, good, tmp_path))
    bad = good.copy()
    bad.loc[bad["curve"] == "Transformer +KQ", "test_metric"] = 0.5  # never reaches 0.1
    bad.loc[bad["curve"] == "FCNet (depth 3)", "final_train_loss"] = 0.3
    result = {c.claim_id: c for c in _claims(claims_22, bad, tmp_path)}
    assert not result["6-kq-nstar"].passed and math.isinf(result["6-kq-nstar"].measured)
    # vanilla not reached on a grid that stops at 512: n* > 512 does not show n* >= 1024
    short = {c.claim_id: c for c in _claims(claims_22, good[good["n"] <= 512], tmp_path)}
    assert short["6-vanilla-nstar"].measured == 512 and not short["6-vanilla-nstar"].passed
    assert not result["6-fcnet-train"].passed
    assert result["6-fcnet-test"].passed


def test_fig2c_selects_the_learning_rate_by_validation_loss(tmp_path):
    ns = (16, 64, 256, 1024)
    # lr 1e-2 of +KQ has the better validation loss and reaches 0.1 at n = 64; lr 1e-3 would never.
    runs = pd.concat(
        [
            _planted({"Transformer": dict(zip(ns, (1.0, 0.9, 0.8, 0.5)))}, lrs=(1e-3, 1e-2)),
            _planted({"Transformer +KQ": dict(zip(ns, (0.9, 0.05, 0.0, 0.0)))}, lrs=(1e-2,), val_for={("Transformer +KQ", 1e-2): 0.1}),
            _planted({"Transformer +KQ": dict(zip(ns, (1.0, 1.0, 1.0, 1.0)))}, lrs=(1e-3,), val_for={("Transformer +KQ", 1e-3): 0.9}),
        ]
    )
    means = curve_means(runs)
    assert set(means.loc[means["curve"] == "Transformer +KQ", "lr"]) == {1e-2}
    result = {c.claim_id: c for c in _claims(claims_2c, runs, tmp_path)}
    # vanilla never reaches 0.1 within n <= 1024: the ratio is measured by its lower bound 1024 / 64
    assert result["3-nstar-ratio"].measured == 16 and result["3-nstar-ratio"].passed
    short = runs[runs["n"] <= 256]  # the same curves on a grid that stops at 256: bound 256 / 64 = 4 < 8
    result = {c.claim_id: c for c in _claims(claims_2c, short, tmp_path)}
    assert result["3-nstar-ratio"].measured == 4 and not result["3-nstar-ratio"].passed
    assert result["3-vanilla-small-n"].measured == pytest.approx(0.8) and result["3-vanilla-small-n"].passed
    both_fail = runs.assign(test_metric=1.0)
    result = {c.claim_id: c for c in _claims(claims_2c, both_fail, tmp_path)}
    assert math.isnan(result["3-nstar-ratio"].measured) and not result["3-nstar-ratio"].passed


def test_fig25_claims(tmp_path):
    runs = _planted({"MLP": {32: 1.0, 128: 0.95}, "MLP + vec(XX^T)": {32: 0.2, 128: 0.05}})
    assert all(c.passed for c in _claims(claims_25, runs, tmp_path))
    runs.loc[runs["curve"] == "MLP + vec(XX^T)", "test_metric"] = 0.5
    assert [c.passed for c in _claims(claims_25, runs, tmp_path)] == [True, False]


def test_missing_curve_is_a_clear_error(tmp_path):
    runs = _planted({"MLP": {32: 1.0}})
    with pytest.raises(ValueError, match="MLP \\+ vec"):
        _claims(claims_25, runs, tmp_path)


def test_data_and_identity_checks_pass(one_thread):
    rows = pd.DataFrame(data_and_identity_checks(n=16, seeds=1))
    claims = {c.claim_id: c for c in check_claims(rows, "test")}
    assert all(c.passed for c in claims.values()), [c for c in claims.values() if not c.passed]
    ident = rows[rows["check"] == "identity"]
    assert set(ident["kind"]) == {"regression", "next_token"}
    assert (ident["scalings_loaded_from_vanilla"] > 0).all()  # a_h, b_h are the only new parameters


def test_check_claims_fail_on_a_broken_dataset(one_thread):
    rows = pd.DataFrame(data_and_identity_checks(n=16, seeds=1))
    rows.loc[rows.index[0], "match_fraction"] = 0.99
    rows.loc[rows.index[1], "train_heldout_tokens"] = 3
    claims = {c.claim_id: c for c in check_claims(rows, "test")}
    assert not claims["1-match"].passed and not claims["1-heldout"].passed


def test_figure_writes_png_and_claims(tmp_path, one_thread):
    table = tmp_path / "runs.csv"
    run_figure("2c", TINY, str(table))
    claims = _figure("2c", table, tmp_path / "fig.png")
    assert (tmp_path / "fig.png").stat().st_size > 1000
    assert {c.claim_id for c in claims} == {"3-nstar-ratio", "3-vanilla-small-n"}


# ------------------------------------------------------------------ grids of Figs. 3c, 5, 8-21, 23

from featlearn.templates.sweeps.experiments import FIGURE_GRID, GRID_AXIS, GRIDS  # noqa: E402
from featlearn.templates.sweeps.figures import (  # noqa: E402
    SPECS,
    claims_3c,
    claims_5,
    claims_8,
    claims_17,
    claims_23,
    figure_rows,
    nstar_ratio,
)

AXIS_VALUES = {"d_emb": [8, 16], "depth": [1, 2], "heads": [1, 2], "batch": [2, 1024], "attn_mult": [1, 8], "k": [2, 4],
               "length": [3, 4], "n_wildcards": [2, 3], "n_regular": [0, 1], "r": [2, 3]}


def _tiny_all() -> dict:
    cfg = {k: v for k, v in TINY.items() if not k.startswith("fig")}
    for grid, axis in GRID_AXIS.items():
        cfg[f"fig{grid}"] = dict(n=[4, 8], lrs=[1e-3], **({axis: AXIS_VALUES[axis]} if axis else {}))
    return cfg


def test_every_figure_has_a_grid_and_a_plot_spec():
    assert set(FIGURE_GRID) == set(SPECS)
    assert all(hasattr(load(f"featlearn.templates.sweeps.figures:claims_{fig}"), "__call__") for fig in CLAIMED)
    assert FIGURE_GRID["23"] == "17" and set(FIGURE_GRID.values()) == set(GRIDS)


def test_swept_quantities_reach_the_settings():
    cfg = _tiny_all()
    depth = figure_curves("9", cfg)
    assert [s["model"]["depth"] for _, s in depth] == [1, 2] and [m["value"] for m, _ in depth] == [1, 2]
    assert [s["batch"] for _, s in figure_curves("14", cfg)] == [2, 1024]
    readout = figure_curves("15", cfg)
    assert all(s["trainable"] == ["head."] for _, s in readout) and [s["model"]["attn_mult"] for _, s in readout] == [1, 8]
    copy = figure_curves("5", cfg)
    assert [(s["variants"], s["model"]["d_emb"]) for _, s in copy] == [(["vanilla"], 8), (["vanilla"], 16), (["vo"], 8), (["vo"], 16)]
    tasks = figure_curves("17", cfg)
    assert [s["task"]["name"] for _, s in tasks] == ["aba_abb", "abab_aabb", "majority", "majority"]
    assert tasks[2][1]["variants"] == ["vanilla", "kq_vo"] and tasks[3][1]["task"]["k"] == 4
    assert figure_curves("23", cfg) == tasks  # one grid serves both figures
    for grid, key in (("18", "length"), ("19", "n_wildcards"), ("20", "n_regular"), ("21", "r")):
        curves = figure_curves(grid, cfg)
        assert [s["task"][key] for _, s in curves] == AXIS_VALUES[key]
        assert all(s["task"]["name"] == "random" and s["task"]["seed"] == 0 for _, s in curves)
    # a grid's own schedule and transformer sizes override the shared ones
    cfg["fig3c"].update(epochs=7, seeds=3, transformer={"depth": 4})
    (_, s), = figure_curves("3c", cfg)
    assert (s["epochs"], s["seeds"], s["model"]["depth"], s["model"]["d_emb"]) == (7, 3, 4, 8)


def test_grid_config_errors_are_clear():
    cfg = _tiny_all()
    del cfg["fig9"]["depth"]
    with pytest.raises(ValueError, match="fig9 needs the list 'depth'"):
        figure_curves("9", cfg)
    cfg = _tiny_all()
    cfg["fig8"]["depth"] = [1, 2]
    with pytest.raises(ValueError, match="unknown keys \\['depth'\\]"):
        figure_curves("8", cfg)


@pytest.mark.parametrize("fig", ["5", "9", "15", "21", "23"])
def test_new_figures_train_and_draw(tmp_path, one_thread, fig):
    table = tmp_path / "runs.csv"
    run_figure(fig, _tiny_all(), str(table))
    runs = pd.read_csv(table)
    assert runs["test_metric"].notna().all() and (runs["figure"].astype(str) == FIGURE_GRID[fig]).all()
    claims = _figure(fig, table, tmp_path / "fig.png")
    assert (tmp_path / "fig.png").stat().st_size > 1000
    assert bool(claims) == (fig in ("5", "23"))


def test_nstar_ratio_is_conservative():
    assert nstar_ratio(512, 32, 8192) == 16
    assert nstar_ratio(math.inf, 32, 256) == 8  # vanilla not reached: lower bound n_max / n*(fast)
    assert math.isnan(nstar_ratio(512, math.inf, 8192))


def _rows(spec: list, **const) -> pd.DataFrame:
    """One row per (curve, n, seed) from [(curve, variant, extra columns, {n: metric})]."""
    rows = []
    for curve, variant, extra, by_n in spec:
        for n, metric in by_n.items():
            for seed in (1, 2):
                rows.append(dict(curve=curve, variant=variant, n=n, seed=seed, test_metric=metric, val_loss=0.5,
                                 final_train_loss=0.0, lr=1e-3, panel="", **extra, **const))
    return pd.DataFrame(rows)


def test_fig3c_claims(tmp_path):
    ns = (256, 4096, 16384)
    runs = _rows([("Transformer", "vanilla", {}, dict(zip(ns, (0.9, 0.7, 0.5)))),
                  ("Transformer +KQ,VO", "kq_vo", {}, dict(zip(ns, (0.6, 0.2, 0.01))))])
    assert [c.passed for c in _claims(claims_3c, runs, tmp_path)] == [True, True]
    runs.loc[runs["variant"] == "vanilla", "test_metric"] = 0.2
    runs.loc[runs["variant"] == "kq_vo", "test_metric"] = 0.2
    assert [c.passed for c in _claims(claims_3c, runs, tmp_path)] == [False, False]
    # a grid that stops below n = 16384 without +KQ,VO reaching 0.05 cannot decide claim 4: unchecked, not failed
    short = runs[runs["n"] <= 4096]
    kqvo = _claims(claims_3c, short, tmp_path)[0]
    assert kqvo.verdict == "unchecked" and "stops at 4096" in kqvo.note and not kqvo.counts
    # reached within the short grid: decided
    short.loc[short["variant"] == "kq_vo", "test_metric"] = 0.01
    assert _claims(claims_3c, short, tmp_path)[0].verdict == "reproduced"


def test_fig5_claims_inverse_scaling(tmp_path):
    ns = (4, 8, 16, 32, 64, 128)
    van = {64: (1, 1, 0.4, 0.1, 0, 0), 256: (1, 1, 1, 0.4, 0.1, 0), 1024: (1, 1, 1, 1, 1, 0.9)}
    spec = [(f"d_emb {d}", "vanilla", {"d_emb": d}, dict(zip(ns, v))) for d, v in van.items()]
    spec += [(f"d_emb {d}", "vo", {"d_emb": d}, dict(zip(ns, (0.5, 0.05, 0, 0, 0, 0)))) for d in van]
    runs = _rows(spec)
    result = {c.claim_id: c for c in _claims(claims_5, runs, tmp_path)}
    assert result["5-inverse-scaling"].passed and result["5-vo"].measured == 8 and result["5-vo"].passed
    # the largest embedding learning faster breaks inverse scaling
    runs.loc[(runs["variant"] == "vanilla") & (runs["d_emb"] == 1024), "test_metric"] = 0.0
    result = {c.claim_id: c for c in _claims(claims_5, runs, tmp_path)}
    assert result["5-inverse-scaling"].measured == 1 and not result["5-inverse-scaling"].passed


def test_fig8_claims_pick_the_lr_by_validation_loss(tmp_path):
    rows = []
    for lr, mse, val in ((1e-3, 0.05, 0.1), (1e-2, 0.02, 0.3), (3e-2, 0.9, 1.0), (1e-1, 1.0, 1.1)):
        for n in (512, 2048):
            rows.append(dict(lr=lr, n=n, seed=1, test_metric=mse, val_loss=val, final_train_loss=0.0))
    runs = pd.DataFrame(rows)
    grid = {"lrs": [1e-3, 1e-2, 3e-2, 1e-1], "n": [512, 2048]}  # the figure's settings: its grid's lrs and n
    result = {c.claim_id: c for c in _claims(claims_8, runs, tmp_path, **grid)}
    assert result["10-large-lr"].measured == pytest.approx(0.9) and result["10-large-lr"].passed
    assert result["10-best-lr"].measured == pytest.approx(0.05) and "lr 0.001" in result["10-best-lr"].statement
    assert "3e-2 and 1e-1" in result["10-large-lr"].statement and "n = 2048" in result["10-best-lr"].statement
    no_2048 = {c.claim_id: c for c in _claims(claims_8, runs[runs["n"] == 512], tmp_path, **grid)}
    assert math.isnan(no_2048["10-best-lr"].measured) and not no_2048["10-best-lr"].passed
    # a grid of two learning rates: only its largest counts as large, the claim reads the grid's largest n
    two = runs[runs["lr"].isin([1e-3, 1e-1])]
    small = {c.claim_id: c for c in _claims(claims_8, two, tmp_path, lrs=[1e-1, 1e-3], n=[2048, 512])}
    assert small["10-large-lr"].measured == pytest.approx(1.0) and "learning rate 1e-1 does not" in small["10-large-lr"].statement
    assert small["10-best-lr"].measured == pytest.approx(0.05)


def _majority_table(kq_fast: bool) -> pd.DataFrame:
    ns = (32, 128, 512, 2048)
    spec = [("αβα vs αββ", "vanilla", {"task": "aba_abb"}, dict(zip(ns, (1, 0.5, 0.1, 0.01)))),
            ("αβαβ vs ααββ", "vanilla", {"task": "abab_aabb"}, dict(zip(ns, (1, 0.6, 0.2, 0.05))))]
    van = {2: (1, 0.5, 0.05, 0.0), 4: (1, 1, 0.8, 0.6), 6: (1, 1, 1, 0.95), 8: (1, 1, 1, 1)}
    for k, v in van.items():
        spec.append((f"majority k={k}", "vanilla", {"task": f"majority_{k}"}, dict(zip(ns, v))))
        fast = (0.05, 0.0, 0.0, 0.0) if kq_fast else v
        spec.append((f"majority k={k} +KQ,VO", "kq_vo", {"task": f"majority_{k}"}, dict(zip(ns, fast))))
    return _rows(spec)


def test_fig17_and_fig23_claims(tmp_path):
    runs = _majority_table(kq_fast=True)
    assert all(c.passed for c in _claims(claims_17, runs, tmp_path))
    rows = figure_rows(runs, "17")
    assert set(rows["variant"]) == {"vanilla"} and len(set(rows["curve"])) == 6
    panels = figure_rows(runs, "23")
    assert set(panels["panel"]) == {"Transformer", "Transformer +KQ,VO"} and panels["task"].str.startswith("majority").all()
    result = {c.claim_id: c for c in _claims(claims_23, runs, tmp_path)}
    # k=2: vanilla n* = 512, +KQ,VO n* = 32 -> 16; k=4: vanilla never (n_max 2048) -> lower bound 2048 / 32
    assert result["7-k2"].measured == 16 and result["7-k4"].measured == 64 and all(c.passed for c in result.values())
    slow = {c.claim_id: c for c in _claims(claims_23, _majority_table(kq_fast=False), tmp_path)}
    assert slow["7-k2"].measured == 1 and not slow["7-k2"].passed
    assert math.isnan(slow["7-k4"].measured)  # +KQ,VO never reaches 0.1 either


def test_fig17_claims_fail_when_majority_4_is_learned(tmp_path):
    runs = _majority_table(kq_fast=True)
    runs.loc[(runs["task"] == "majority_4") & (runs["variant"] == "vanilla"), "test_metric"] = 0.01
    result = {c.claim_id: c for c in _claims(claims_17, runs, tmp_path)}
    assert not result["9-maj4"].passed and result["9-easy"].passed
