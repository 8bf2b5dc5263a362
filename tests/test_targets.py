"""Figure targets (issue 36): a figure that cannot run here stops with one line saying why and what to do, and
`python -m featlearn figures` lists every target with its title and status."""

from __future__ import annotations

import pytest
from wfutil import SMOKE, copy_workflow, snakemake

from featlearn.pipeline.cli import main
from featlearn.pipeline.registry import TABLE, Figure
from featlearn.pipeline.targets import why_missing

SKIPPED = {
    "joma Fig. 7": "18 of 18 checkpoints left out; first: pythia-14m@step0 is not cached; download it first (hf download x)",
    "templates Figs. 7, 24": "no GPT-2 checkpoint is usable: gpt2@main is not cached",
    "scan_snap Fig. 10 (wikitext103)": "dataset wikitext103 is switched off",
    "dataset ag_news": "offline and train.csv not found; figures of features that need it are skipped",
}


def _fig(paper, fig_id, kind="figure"):
    return Figure(paper, fig_id, {}, (), draw="m:d", kind=kind)


@pytest.mark.parametrize("paper, fig_id, says, hint", [
    ("joma", "7", "joma Fig. 7: 18 of 18 checkpoints", "Hugging Face cache"),
    ("templates", "24", "templates Figs. 7, 24: no GPT-2", "Hugging Face cache"),
    ("templates", "7", "templates Figs. 7, 24: no GPT-2", "Hugging Face cache"),
    ("scan_snap", "10", "switched off", "switch the dataset on"),
    ("features", "4", "dataset ag_news: offline", "FEATLEARN_DATA_MIRROR"),
])
def test_why_a_figure_is_missing_names_its_own_skip_line_and_what_to_do(paper, fig_id, says, hint):
    line = why_missing(_fig(paper, fig_id), SKIPPED)
    assert line.startswith(f"fig_{paper}_{fig_id} ({paper} Fig. {fig_id}) cannot run here: ")
    reason, _, todo = line.partition(" To run it: ")
    assert says in reason and hint in todo and "\n" not in line


def test_a_skip_line_of_another_figure_is_not_taken_for_this_one():
    """Fig. 17 is not Fig. 7, and Table 7 is not Fig. 7: no line of its own gives the generic reason."""
    line = why_missing(_fig("joma", "17"), {"joma Fig. 7": "x"})
    assert "joma Fig. 7: x" not in line and "not available in this run" in line
    assert "joma Fig. 7: x" not in why_missing(_fig("joma", "7", TABLE), {"joma Fig. 7": "x"})


def test_asking_for_a_figure_that_cannot_run_stops_with_the_reason(tmp_path):
    """The reviewer's case: `snakemake fig_joma_7` without cached Pythia weights (was: MissingRuleException)."""
    work = copy_workflow(tmp_path / "wf")
    env = {"FEATLEARN_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    out = snakemake(work, *SMOKE, "-n", "fig_joma_7", env=env)
    text = out.stdout + out.stderr
    assert out.returncode != 0
    assert "fig_joma_7 (joma Fig. 7) cannot run here" in text and "To run it:" in text
    assert "MissingRuleException" not in text


def test_the_figure_listing_names_every_target_with_its_status(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FEATLEARN_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("FEATLEARN_DATA_MIRROR", str(tmp_path / "no-mirror"))
    assert main(["figures", "--results", str(tmp_path / "results")]) == 0
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if ln.startswith("| `")]
    rules = [ln.split("`")[1] for ln in rows]
    assert {"fig_joma_6", "table_joma_1", "fig_templates_6", "fig_joma_7", "check_joma_theorem2"} <= set(rules)
    assert len(rules) == len(set(rules))
    joma7 = next(ln for ln in rows if ln.startswith("| `fig_joma_7`"))
    assert "public checkpoints across training" in joma7 and "cannot run:" in joma7
    # no data and no checkpoints here: what needs them cannot run, the synthetic figures can
    assert "cannot run:" in next(ln for ln in rows if ln.startswith("| `fig_features_2`"))
    assert "| ready |" in next(ln for ln in rows if ln.startswith("| `fig_joma_4`"))
    ready = sum(ln.endswith("| ready |") for ln in rows)
    assert 0 < ready < len(rules) and f"{ready} of {len(rules)} targets can run" in out


def test_a_missing_figures_claims_become_unchecked_rows_with_the_reason():
    """Issue 37: a skipped figure's claims leave a row, unless the paper's registry lists them already."""
    from featlearn.pipeline.targets import unchecked_claims

    fig = Figure("joma", "7", {}, (), draw="m:d", claims="m:c", claim_ids=("fig7_top_rebound_*", "fig7_one"))
    rows = unchecked_claims(fig, "fig_joma_7 (joma Fig. 7) cannot run here: no weights. To run it: download", {})
    why = "no weights. To run it: download"
    assert rows == {"fig7_top_rebound_*": ("Fig. 7", "the claims fig7_top_rebound_* of Fig. 7", why),
                    "fig7_one": ("Fig. 7", "claim fig7_one of Fig. 7", why)}
    assert list(unchecked_claims(fig, "x", {"fig7_top_rebound_pythia-70m": ("Fig. 7", "s", "w")})) == ["fig7_one"]


def test_the_claims_table_of_a_paper_lists_its_missing_figures_claims(tmp_path):
    work = copy_workflow(tmp_path / "wf")
    env = {"FEATLEARN_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    out = snakemake(work, "results/joma/claims.csv", *SMOKE, "-n", "-p", env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    merge = next(ln for ln in out.stdout.splitlines() if "claims-merge" in ln and "--paper joma" in ln)
    assert "fig7_top_rebound_*" in merge and "fig7_step0_gaussian_*" in merge and "To run it:" in merge
