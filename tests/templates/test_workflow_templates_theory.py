"""Workflow tests of the templates paper's kernel theory and GPT-2 parts: the smoke outputs (shared smoke run),
what a code edit reruns, the one skip message of Figs. 7 and 24 without checkpoints, and Figs. 7 and 24
through snakemake on tiny GPT-2 models in a local Hugging Face cache."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
import yaml

from wfutil import check_ok, copy_workflow, overlay, snakemake, would_run_after_edit

pytestmark = pytest.mark.workflow


def test_kernel_figure_and_claims_exist(smoke_run):
    work, _, _ = smoke_run
    assert (work / "results/figures/templates/kernels.png").stat().st_size > 1000
    claims = pd.read_csv(work / "results/templates/claims/kernels.csv")
    # smoke runs kernel ridge regression on T5 only: one 11e claim
    assert list(claims["claim_id"]) == [
        "11d_trans_same_different", "11d_trans_aba_abb", "11d_trans_majority_4", "11e_krr_aba_abb"]
    # issue 37: kernel ridge regression on fixed kernels is the theory's numerics too
    assert (claims["kind"] == "paper-theory").all()
    assert (claims["scale"] == "smoke").all() and claims["measured"].notna().all()
    for table in ("kernel_n_matrix", "kernel_beta0", "kernel_krr"):
        assert len(pd.read_csv(work / f"results/templates/{table}.csv")) > 0
    assert (work / "results/benchmarks/templates/kernels.tsv").is_file()


def test_fig6_table_and_claim_exist_at_smoke(smoke_run):
    work, _, _ = smoke_run
    assert (work / "results/figures/templates/fig6.png").stat().st_size > 1000
    assert "| WikiText-2 |" in (work / "results/templates/fig6.md").read_text()
    (claim,) = pd.read_csv(work / "results/templates/claims/6.csv").itertuples()
    assert claim.claim_id == "12_wikitext2" and claim.scale == "smoke"
    for variant in ("vanilla", "identity"):
        log = pd.read_csv(work / f"results/templates/gpt2_wikitext/wikitext2/{variant}.csv")
        assert log["final"].any() and (work / f"results/benchmarks/templates/gpt2_wikitext/wikitext2/{variant}.tsv").is_file()
    merged = pd.read_csv(work / "results/templates/claims.csv")
    assert {"11d_trans_aba_abb", "12_wikitext2"} <= set(merged["claim_id"])


def test_pretrained_gpt2_figures_are_skipped_with_one_message(smoke_run):
    work, _, result = smoke_run
    lines = [line for line in result.stderr.splitlines() if "skipping templates Figs. 7, 24" in line]
    assert len(lines) == 1 and "gpt2@main" in lines[0] and "offline" in lines[0]
    assert not (work / "results/figures/templates/fig7.png").exists()


def test_gpt2_figure_code_change_reruns_only_its_figure(smoke_run):
    work, env, _ = smoke_run
    out = would_run_after_edit(work, env, "templates/gpt2/figures.py")
    assert "fig_templates_6" in out
    assert "templates_gpt2_wikitext" not in out and "templates_kernels" not in out


def test_kernel_code_change_reruns_the_kernel_jobs_only(smoke_run):
    work, env, _ = smoke_run
    out = would_run_after_edit(work, env, "templates/kernels/theory.py")
    assert "templates_kernels" in out and "fig_templates_kernels" in out
    assert "templates_gpt2_wikitext" not in out and "fig_templates_6" not in out
    out = would_run_after_edit(work, env, "templates/gpt2/experiments.py")
    assert "templates_gpt2_wikitext" in out and "templates_kernels" not in out


def test_figs_7_and_24_run_on_a_cached_tiny_gpt2(tmp_path):
    from hubcache import save_in_hub_cache
    from transformers import GPT2LMHeadModel

    from featlearn.templates.gpt2.experiments import small_config

    cache = tmp_path / "hub"
    for name, seed in (("gpt2", 0), ("gpt2-medium", 1)):
        torch.manual_seed(seed)
        src = tmp_path / "src" / name
        GPT2LMHeadModel(small_config(64, 2, 32, 4, 16, 0.1)).save_pretrained(src)
        save_in_hub_cache(cache, name, "main", src)
    work = copy_workflow(tmp_path / "wf")
    name = overlay(work, "off.yaml")  # no dataset needed by these figures
    gpt2 = {"templates": {"gpt2": {"pretrained": {
        "cache_dir": str(cache), "models": {"gpt2": ["main"], "gpt2-medium": ["main"], "gpt2-large": ["main"]},
        "n": [8, 16], "seeds": 1, "epochs": 2, "batch": 8,
        "heads": {"kq": {"layer": 1, "head": 2}, "vo": {"layer": 2, "head": 4}, "size": 8}}}}}
    (work / "gpt2.yaml").write_text(yaml.safe_dump(gpt2))
    env = {"FEATLEARN_OFFLINE": "1"}
    args = ("--cores", "2", "--configfile", "config/smoke.yaml", name, "gpt2.yaml")
    targets = ("fig_templates_7", "fig_templates_24")  # before the options: --configfile takes several values
    result = check_ok(snakemake(work, *targets, *args, env=env))
    assert "skipping templates Fig. 24 checkpoints" in result.stderr and "gpt2-large@main" in result.stderr
    assert "Figs. 7, 24" not in result.stderr
    for fig in ("fig7", "fig24"):
        assert (work / f"results/figures/templates/{fig}.png").stat().st_size > 1000
    ft = pd.read_csv(work / "results/templates/gpt2_t5/gpt2/main_scratch.csv")
    assert list(ft["n"]) == [8, 16] and (ft["init"] == "scratch").all()
    heads = pd.read_csv(work / "results/templates/gpt2_heads/gpt2/main.csv")
    assert len(heads) == 2 * 64 and set(heads["layer"]) == {1, 2}
    assert (work / "results/templates/gpt2_t5/gpt2-medium/main_pretrained.csv").is_file()

