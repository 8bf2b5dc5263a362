"""The templates sweep figures (Figs. 2c, 22, 25) and claims 1-3, 6, 8 in the shared smoke run."""

from __future__ import annotations

import csv
import re

import pytest

from wfutil import would_run_after_edit

pytestmark = pytest.mark.workflow


def test_sweep_figures_and_claims_exist(smoke_run):
    work, _, _ = smoke_run
    results = work / "results"
    for fig in ("2c", "22", "25"):
        assert (results / "figures" / "templates" / f"fig{fig}.png").stat().st_size > 1000
        assert (results / "benchmarks" / "templates" / f"sweep_fig{fig}.tsv").is_file()
    rows = {r["claim_id"]: r for r in csv.DictReader(open(results / "templates" / "claims.csv"))}
    for cid in ("1-match", "1-alphabets", "1-heldout", "1-trivial", "2-identity", "2-parameters"):
        assert rows[cid]["passed"] == "True", rows[cid]
    for cid in ("3-nstar-ratio", "6-fcnet-test", "6-kq-nstar", "8-mlp", "8-mlp-xxt"):
        assert rows[cid]["scale"] == "smoke"


def test_sweep_figure_code_edit_reruns_only_its_figures(smoke_run):
    work, env, _ = smoke_run
    out = would_run_after_edit(work, env, "templates/sweep_figures.py")
    for rule in ("fig_templates_2c", "fig_templates_22", "fig_templates_25", "templates_checks"):
        assert rule in out
    assert not re.search(r"^templates_sweep\s", out, re.M), out
    assert "templates_kernels" not in out and "fig_joma" not in out


def test_model_code_edit_retrains_the_sweeps(smoke_run):
    work, env, _ = smoke_run
    out = would_run_after_edit(work, env, "templates/models.py")
    assert re.search(r"^templates_sweep\s+3\s*$", out, re.M), out
    assert "scan_snap" not in out and "features_train" not in out
