"""Paper registries: the records Snakemake and Python read, and the two commands that run them."""

from __future__ import annotations

import csv
import os
from types import SimpleNamespace

import pytest
import yaml
from snakemake.utils import update_config

from featlearn.pipeline.cli import main
from featlearn.pipeline.registry import CHECK, TABLE, Figure, Job, PaperRegistry, Paths
from featlearn.scan_snap.registry import registry as scan_snap_registry
from wfutil import REPO


def _config() -> dict:
    return yaml.safe_load((REPO / "config" / "config.yaml").read_text())


def test_figure_records_name_their_rule_and_files():
    paths = Paths("results")
    fig = Figure("scan_snap", "8", {"decoder": "t.csv"}, ("plotting.py",), draw="m:draw_8", claims="m:claims_8")
    assert (fig.rule, fig.stem, fig.log_stem, fig.caption) == ("fig_scan_snap_8", "fig8", "fig8", "scan_snap_fig8.rst")
    assert fig.claims_file(paths) == "results/scan_snap/claims/8.csv"
    table = Figure("features", "5", {}, (), draw="m:draw", claims="m:claims", kind=TABLE)
    assert (table.rule, table.claims_file(paths)) == ("table_features_5", "results/features/claims/table5.csv")
    check = Figure("scan_snap", "generator", {}, (), claims="m:c", kind=CHECK)
    assert (check.rule, check.log_stem, check.claims_file(paths)) == (
        "check_scan_snap_generator", "check_generator", "results/scan_snap/claims/generator.csv")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"kind": "plot", "draw": "m:f"}, "unknown kind"),
        ({}, "needs a draw function"),
        ({"kind": CHECK, "draw": "m:f", "claims": "m:c"}, "has no draw function"),
        ({"kind": CHECK}, "checks nothing"),
    ],
)
def test_malformed_figure_records_are_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Figure("joma", "1", {}, (), **kwargs)


def test_a_rule_declared_twice_is_rejected():
    job = Job("scan_snap_x", "scan_snap", "m:f", {"a": "a.csv"}, {}, "x", ())
    with pytest.raises(ValueError, match="declared twice"):
        PaperRegistry("scan_snap", jobs=(job, job))
    with pytest.raises(ValueError, match="belongs to scan_snap"):
        PaperRegistry("joma", jobs=(job,))


def test_scan_snap_registry_declares_every_rule_once():
    reg = scan_snap_registry(_config(), Paths("results"), dataset_on=lambda name: True)
    assert [j.name for j in reg.jobs] == [
        "scan_snap_generator", "scan_snap_syn_small", "scan_snap_adam", "scan_snap_syn_medium",
        "scan_snap_theory", "scan_snap_wikitext"]
    assert {f.rule for f in reg.figures} == {f"fig_scan_snap_{n}" for n in (3, 4, 5, 6, 7, 8, 9, 10, 11, 12)} | {
        "check_scan_snap_generator"}
    # claims tables in the order claims.csv lists them; Figs. 9 (a formula fact: a unit test), 11 and 12 only draw
    assert [p.rsplit("/", 1)[1] for p in reg.claim_tables(Paths("results"))] == [
        "generator.csv", "3.csv", "4.csv", "5.csv", "6.csv", "8.csv", "7.csv", "10.csv"]
    # every input a figure reads is an output some job writes (wildcards filled)
    written = {p for j in reg.jobs for p in j.outputs.values()}
    variants = reg.jobs[-1].wildcards["variant"].split("|")
    written |= {p.replace("{variant}", v) for p in written for v in variants}
    for fig in reg.figures:
        for name, path in fig.inputs.items():
            for p in [path] if isinstance(path, str) else path:
                assert p in written, (fig.rule, name, p)


def test_scan_snap_registry_leaves_out_the_lm_figures_without_their_dataset():
    reg = scan_snap_registry(_config(), Paths("results"), dataset_on=lambda name: False)
    assert "scan_snap_wikitext" not in {j.name for j in reg.jobs}
    assert not {"7", "10"} & {f.id for f in reg.figures}
    assert "scan_snap Fig. 7" in reg.skipped and "scan_snap Fig. 10 (wikitext2)" in reg.skipped


def test_scan_snap_lm_runs_train_on_their_figures_datasets():
    """Fig. 7 on WikiText-2 at every scale; Fig. 10 on each of its datasets (both of the paper's at paper scale)."""
    config = _config()
    update_config(config, yaml.safe_load((REPO / "config" / "paper.yaml").read_text()))
    reg = scan_snap_registry(config, Paths("results"), dataset_on=lambda name: True)
    job = next(j for j in reg.jobs if j.name == "scan_snap_wikitext")
    variants = job.wildcards["variant"].split("|")
    assert {v for v in variants if v.startswith("fig7_")} == {"fig7_1layer", "fig7_3layer"}
    assert {v.split("_lr")[0] for v in variants if v.startswith("fig10_")} == {"fig10_wikitext2", "fig10_wikitext103"}
    dataset_of = {v: job.inputs(SimpleNamespace(variant=v))["train"].split("/")[-2] for v in variants}
    assert dataset_of["fig7_1layer"] == "wikitext2" and dataset_of["fig10_wikitext103_lr1"] == "wikitext103"
    fig10 = next(f for f in reg.figures if f.id == "10")
    assert (fig10.settings["datasets"] == ["wikitext2", "wikitext103"]
            and len(fig10.inputs["logs"]) == 2 * len(fig10.settings["lrs"]))
    # WikiText-103 off: Fig. 10 keeps its WikiText-2 panel and says what it left out
    reg = scan_snap_registry(config, Paths("results"), dataset_on=lambda name: name != "wikitext103")
    assert next(f for f in reg.figures if f.id == "10").settings["datasets"] == ["wikitext2"]
    assert "scan_snap Fig. 10 (wikitext103)" in reg.skipped


def _decoder_table(path, deviation: float) -> str:
    """A Fig. 8 table whose discrete h_t is off the continuous h*(t) by ``deviation`` x eta_Y at one step."""
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["eta_y", "M", "t", "h_discrete", "h_continuous"])
        for t in range(5):
            w.writerow([0.5, 100, t, 1.0 + (deviation * 0.5 if t == 3 else 0.0), 1.0])
    return str(path)


@pytest.mark.parametrize("deviation, passed", [(0.5, True), (3.0, False)])
def test_figure_command_draws_and_checks_a_planted_table(tmp_path, deviation, passed):
    """`python -m featlearn figure` on Fig. 8: the claim passes on h_t within eta_Y of h*(t), fails beyond."""
    table = _decoder_table(tmp_path / "decoder.csv", deviation)
    png, claims = tmp_path / "fig8.png", tmp_path / "claims.csv"
    rc = main(["figure", "--draw", "featlearn.scan_snap.figures:draw_8", "--claims-fn",
               "featlearn.scan_snap.figures:claims_8", "--inputs", f'{{"decoder": "{table}"}}',
               "--figures", str(png), "--claims", str(claims), "--scale", "test", "--dpi", "40"])
    assert rc == 0 and png.stat().st_size > 1000
    (row,) = list(csv.DictReader(open(claims)))
    assert row["claim_id"] == "th_h" and float(row["measured"]) == pytest.approx(deviation)
    assert row["passed"] == str(passed)


def test_compute_command_runs_a_registry_job(tmp_path):
    """`python -m featlearn compute` runs Scan and Snap's theory job with named outputs."""
    cfg = _config()["scan_snap"]["theory"] | {"t_max": 100, "grid_points": 50, "discrete_steps": 20,
                                               "eta_y": [1], "t0_eta_z": [1], "t0_ratios": [1]}
    outputs = {k: str(tmp_path / f"{k}.csv") for k in ("snapping", "decoder", "t0")}
    import json

    rc = main(["compute", "--run", "featlearn.scan_snap.experiments:theory_tables", "--settings", json.dumps(cfg),
               "--outputs", json.dumps(outputs), "--threads", "1", "--device", "cpu"])
    assert rc == 0
    # the run identity was the job's only: this process is outside a compute job again (it decides whether a
    # training keeps its checkpoint past the last step, featlearn.training)
    from featlearn.training import IDENTITY_ENV

    assert IDENTITY_ENV not in os.environ
    rows = list(csv.DictReader(open(outputs["decoder"])))
    assert len(rows) == 21 and float(rows[0]["h_discrete"]) == pytest.approx(float(rows[0]["h_continuous"]))


# ------------------------------------------------------------------ one figure rule, any number of drawings


def test_a_figure_record_lists_its_further_drawings_with_report_order_and_label():
    """JoMA Fig. 6 (two figures) and templates Fig. 6 (a figure and a table) as records of the base rule."""
    from featlearn.pipeline.registry import TABLE, Drawing, Figure

    joma6 = Figure("joma", "6", {"logs": []}, (), draw="m:draw_6",
                   also=(Drawing("m:draw_6_stable_rank", "fig6_stable_rank", caption="joma_fig6_stable_rank.rst"),))
    assert joma6.drawings() == [
        ("m:draw_6", "figure", "fig6", "006", "Fig. 6", "joma_fig6.rst"),
        ("m:draw_6_stable_rank", "figure", "fig6_stable_rank", "006_stable_rank", "Fig. 6 (stable rank)",
         "joma_fig6_stable_rank.rst"),
    ]
    tg6 = Figure("templates", "6", {"logs": []}, (), draw="m:draw_6", also=(Drawing("m:table_6", "fig6", kind=TABLE),))
    assert tg6.drawings()[1] == ("m:table_6", "table", "fig6", "006_table", "Fig. 6 (table)", "templates_fig6.rst")


def test_a_figure_record_refuses_drawings_on_a_check_and_unknown_table_formats():
    from featlearn.pipeline.registry import CHECK, TABLE, Drawing, Figure

    with pytest.raises(ValueError, match="draws nothing"):
        Figure("joma", "t", {}, (), claims="m:c", kind=CHECK, also=(Drawing("m:d", "x"),))
    with pytest.raises(ValueError, match="table formats"):
        Figure("joma", "1", {}, (), draw="m:d", kind=TABLE, table_formats=("csv",))
    with pytest.raises(ValueError, match="figure or a table"):
        Drawing("m:d", "x", kind=CHECK)


def _draw_two(inputs, cfg):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    return fig


def _table_with_latex(inputs, cfg):
    import pandas as pd

    from featlearn.pipeline.figure import Table

    return Table(pd.DataFrame({"a": [1]}), "| a |\n|---|\n| 1 |\n", "\\begin{tabular}{r} 1 \\end{tabular}\n")


def test_the_figure_command_writes_further_drawings_and_latex(tmp_path, monkeypatch):
    """One command: the record's drawing, a further table (CSV, Markdown, LaTeX); a .tex of a table without LaTeX
    is refused."""
    import json
    import sys
    import types

    from featlearn.pipeline.figure import Table

    mod = types.ModuleType("planted_drawings")
    mod.draw, mod.table = _draw_two, _table_with_latex
    mod.plain = lambda inputs, cfg: Table(_table_with_latex(inputs, cfg).frame, "| a |\n")  # no LaTeX
    monkeypatch.setitem(sys.modules, "planted_drawings", mod)
    files = [str(tmp_path / f"t.{ext}") for ext in ("csv", "md", "tex")]
    rc = main(["figure", "--draw", "planted_drawings:draw", "--figures", str(tmp_path / "f.png"), "--inputs", "{}",
               "--also", json.dumps([{"draw": "planted_drawings:table", "files": files}]), "--scale", "test", "--dpi", "30"])
    assert rc == 0 and (tmp_path / "f.png").stat().st_size > 500
    assert (tmp_path / "t.tex").read_text().startswith("\\begin{tabular}") and (tmp_path / "t.md").read_text().startswith("| a |")
    with pytest.raises(ValueError, match="LaTeX"):
        main(["figure", "--draw", "planted_drawings:plain", "--figures", str(tmp_path / "p.tex"), "--inputs", "{}",
              "--scale", "test", "--dpi", "30"])
