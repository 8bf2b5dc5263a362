"""Workflow checks of the features paper's language-model figures (Figs. 5, 7) on the shared smoke run,
and dry runs: what a code edit reruns, and what is skipped when a dataset is absent."""

from __future__ import annotations

import csv
import re

import pytest

from featlearn.pipeline.claims import COLUMNS
from wfutil import SMOKE, check_ok, overlay, snakemake, would_run, would_run_after_edit

pytestmark = pytest.mark.workflow

LM_CLAIMS = {f"{c}_{d}" for c in ("9", "9f") for d in ("ptb", "wikitext2", "tinyshakespeare")}  # 9f: beyond frequency


def test_lm_smoke_outputs(smoke_run):
    work, _, _ = smoke_run
    res = work / "results"
    for n in (5, 7):
        assert (res / "figures" / "features" / f"fig{n}.png").stat().st_size > 1000
    rows = {}
    for n in (5, 7):
        with open(res / "features" / "claims" / f"{n}.csv", newline="") as fh:
            reader = csv.DictReader(fh)
            assert tuple(reader.fieldnames) == COLUMNS
            rows.update({r["claim_id"]: r for r in reader})
    assert set(rows) == LM_CLAIMS
    for r in rows.values():
        assert r["scale"] == "smoke" and r["target"] == ">= 18"
        assert (float(r["measured"]) >= 18) == (r["passed"] == "True")
    merged = {r["claim_id"] for r in csv.DictReader(open(res / "features" / "claims.csv", newline=""))}
    assert LM_CLAIMS <= merged
    for ds, k in (("ptb", 30), ("wikitext2", 30), ("tinyshakespeare", 5)):
        with open(res / "features" / "lm" / ds / "logits.csv", newline="", encoding="utf-8") as fh:
            logits = list(csv.DictReader(fh))
        assert len({r["token_rank"] for r in logits}) == 20
        assert sum(r["group"] == "top" and r["token_rank"] == "0" for r in logits) == k
        assert (res / "benchmarks" / "features" / "lm" / f"{ds}.tsv").is_file()
        assert not (res / "features" / "lm" / ds / "resume" / "resume.pt").exists()  # finished runs leave none


def scheduled(out: str) -> set[str]:
    """Rule names in the job-stats table of a dry run."""
    return {m.group(1) for m in re.finditer(r"^(\w+)\s+\d+$", out, re.M)} - {"total"}


def test_lm_figure_code_edit_reruns_only_the_figures(smoke_run):
    work, env, _ = smoke_run
    before = scheduled(would_run(work, env))  # empty after a complete smoke run
    added = scheduled(would_run_after_edit(work, env, "features/lm_figures.py")) - before
    assert {"fig_features_5", "fig_features_7"} <= added
    assert not added & {"features_lm_word", "features_lm_char"}


def test_gpt_code_edit_reruns_the_char_model_only(smoke_run):
    work, env, _ = smoke_run
    before = scheduled(would_run(work, env))
    added = scheduled(would_run_after_edit(work, env, "features/gpt.py")) - before
    # the GPT is imported by features/lm.py (for the character model, which shares the module with the word
    # LM), so both features LMs rerun; the shared featlearn.lm does not import it: no other paper's LM reruns
    added -= {"paper_claims", "scorecard", "paper_page", "compute_table", "run_record", "all"}
    assert {"features_lm_char", "fig_features_5"} <= added
    assert not {r for r in added if r.startswith(("scan_snap", "joma", "templates"))}, added


def test_absent_dataset_skips_its_figure_with_a_message(smoke_run):
    work, env, _ = smoke_run
    name = overlay(work, "lm_only_ptb.yaml", {"ptb": "auto"})
    try:
        result = check_ok(snakemake(work, "fig_features_7", *SMOKE, name, "-n", "--quiet", "rules", env=env))
    finally:
        (work / name).unlink()
    assert "skipping features Fig. 5" in result.stderr
    assert "skipping features Fig. 7 panel wikitext2" in result.stderr
    # Fig. 7 is redrawn from the PTB table alone; no model is retrained
    assert "fig_features_7" in result.stdout
    assert "features_lm_word" not in result.stdout and "features_lm_char" not in result.stdout
