"""End-to-end Snakemake runs on config/smoke.yaml, dry runs at paper scale, and failures on bad data."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest

from featlearn.pipeline.claims import COLUMNS
from wfutil import SMOKE, check_ok, copy_workflow, overlay, snakemake, would_run, would_run_after_edit

pytestmark = pytest.mark.workflow
PAPERS = ("features", "scan_snap", "joma", "templates")


def test_smoke_run_builds_every_output(smoke_run):
    work, _, _ = smoke_run
    results = work / "results"
    for paper in PAPERS:
        header = (results / paper / "claims.csv").read_text().splitlines()[0]
        assert tuple(header.split(",")) == COLUMNS
    assert (results / "scorecard.csv").is_file()
    assert (results / "figures" / "data" / "overview.png").stat().st_size > 1000
    assert not (results / "figures" / "data" / "overview.pdf").exists()  # smoke asks for PNG only
    rows = {(r["dataset"], r["quantity"]): r for r in csv.DictReader(open(results / "data" / "summary.csv"))}
    assert rows[("sst", "train examples")]["measured"] == "6920"
    assert rows[("wikitext2", "vocabulary")]["measured"] == "33278"
    for name in ("sst", "sstwsub", "imdb", "wikitext2", "ptb", "tinyshakespeare"):
        stats = json.loads((results / "data" / "prepared" / name / "stats.json").read_text())
        assert stats["splits"]
    # every prepare job leaves a benchmark file
    assert (results / "benchmarks" / "data" / "prepare_imdb.tsv").is_file()
    # the run ended: no finished job keeps its resume checkpoint, parts or clock (featlearn.keptwork.sweep_finished)
    kept = [p for name in ("finished.json", "resume.pt", "clock.json", "parts") for p in results.glob(f"**/{name}")]
    assert not kept, kept


def test_smoke_run_says_what_it_skipped(smoke_run):
    work, _, result = smoke_run
    assert "featlearn: skipping dataset wikitext103" in result.stderr
    md = (work / "results" / "scorecard.md").read_text()
    assert "Skipped in this run:" in md and "dataset wikitext103" in md
    if not (work / "results" / "data" / "raw" / "ag_news" / "train.csv").exists():
        assert "dataset ag_news" in md  # this mirror lacks AG News train.csv
        assert not (work / "results" / "data" / "prepared" / "ag_news").exists()


def test_rerun_does_nothing(smoke_run):
    work, env, _ = smoke_run
    result = check_ok(snakemake(work, *SMOKE, "-n", env=env))
    assert "Nothing to be done" in result.stdout + result.stderr


def test_paper_target_and_report(smoke_run):
    work, env, _ = smoke_run
    check_ok(snakemake(work, "joma", *SMOKE, env=env))
    check_ok(snakemake(work, *SMOKE, "--report", "results/report.zip", env=env))
    report = work / "results" / "report.zip"
    assert report.stat().st_size > 10_000
    import zipfile

    archive = zipfile.ZipFile(report)
    names = archive.namelist()
    assert any(n.endswith("overview.png") for n in names)
    # the scorecard and each paper's page are HTML, shown in the report, not downloads
    assert any(n.endswith("scorecard.html") for n in names)
    assert all(any(n.endswith(f"{p}_results.html") for n in names) for p in PAPERS)
    # every caption and the description render without a docutils message (a red block in the report)
    page = next(archive.read(n).decode() for n in names if n.endswith("report.html"))
    assert "system-message" not in page and "Unknown target name" not in page
    # a paper's items in the paper's order: the results page first, then Fig. 2 ... Fig. 10, then tables
    assert '"#": "000"' in page or '"#":"000"' in page


def test_results_pages_and_compute_table(smoke_run):
    """Each paper's page (figures, claims, what differs from paper scale, the run's record) and the compute table
    are written from the run's own files."""
    work, _, _ = smoke_run
    results = work / "results"
    record = json.loads((results / "run.json").read_text())
    assert record["scale"] == "smoke" and record["versions"]["torch"]
    for paper in PAPERS:
        page = (results / paper / "README.md").read_text()
        assert "Scale `smoke`; commit `" in page and f"config sha256 `{record['config_sha256'][:12]}`" in page
        assert "## Claims" in page and "## Where this run's settings differ from the paper's" in page
        assert "![Fig." in page and "min wall" in page
    joma = (results / "joma" / "README.md").read_text()
    assert joma.index("### Fig. 2 ") < joma.index("### Fig. 4 ") < joma.index("### Fig. 8 ") < joma.index("### Table 1 ")
    assert "| `joma.hblt.n_samples` | 20000 | 200000 |" in joma  # smoke samples less than the paper; the page says so
    table = (results / "benchmarks.md").read_text()
    assert "| templates | Fig. 15 (fig_templates_15) | 2 |" in table  # the sweep and the figure rule
    assert "**Total: " in table and "CPU-min" in table


def test_smoke_jobs_ran_in_the_job_server_and_are_counted(smoke_run):
    """The smoke overlay turns the job server on: compute and figure jobs ran in its workers, and the compute
    table counts the workers' CPU time, which Snakemake's benchmark files (the client process) do not see."""
    from featlearn.pipeline.pages import read_benchmark

    work, _, _ = smoke_run
    results = work / "results"
    # one log per run (other tests may have run Snakemake again in this folder: each run has its own log)
    logs = list((results / "logs" / "job_server").glob("job_server_*.log"))
    assert logs and all("featlearn job server: pid" in log.read_text() for log in logs)
    log = (results / "logs" / "templates" / "sweep_fig9.log").read_text()
    assert "ran in the job server's worker" in log and "exit status 0" in log
    assert "\nfeatlearn: usage {" in log  # the job's own count, which a job run outside the server is filed with
    bench = results / "benchmarks" / "templates" / "sweep_fig9.tsv"
    client_cpu = float(bench.read_text().splitlines()[1].split("\t")[-1])
    assert (bench.parent / "sweep_fig9.tsv.server.json").is_file()
    assert read_benchmark(bench)["cpu_s"] > client_cpu
    assert not _server_left(work), "the job server outlived its run"


def _server_left(work: Path) -> bool:
    """Whether a job server started in this work folder is still alive (Linux /proc; False elsewhere)."""
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if b"job-server" in (proc / "cmdline").read_bytes() and Path(os.readlink(proc / "cwd")) == Path(work):
                return True
        except OSError:
            continue
    return False


def test_changed_data_code_reruns_data_jobs_only(smoke_run):
    work, env, _ = smoke_run
    out = would_run_after_edit(work, env, "data/parsers.py")
    assert "data_prepare_classification" in out and "data_prepare_lm" in out
    assert "data_fetch" not in out  # raw downloads are never redone for a code change
    # jobs that read no data are not rerun; the WikiText models are (their input changes)
    assert "scan_snap_syn_medium" not in out and "scan_snap_theory" not in out
    assert "scan_snap_wikitext" in out


def test_runs_with_every_dataset_switched_off(tmp_path):
    """Every paper's DAG builds without any dataset (a dry run); one paper then runs to the scorecard for real
    (the others' synthetic parts run in the smoke run and its fault tests)."""
    work = copy_workflow(tmp_path / "wf")
    off = overlay(work, "off.yaml")
    dry = check_ok(snakemake(work, *SMOKE, off, "-n", "--quiet", "rules"))
    assert "featlearn: skipping dataset wikitext2 (set in config" in dry.stderr
    for rule in ("scan_snap_syn_medium", "joma_sim_softmax", "templates_sweep", "fig_features_12", "scorecard"):
        assert rule in dry.stdout
    (work / "one.yaml").write_text("papers: {features: true, scan_snap: false, joma: false, templates: false}\n")
    result = check_ok(snakemake(work, *SMOKE, off, "one.yaml"))
    assert "featlearn: skipping dataset sst (set in config" in result.stderr
    assert (work / "results" / "scorecard.md").is_file()
    assert (work / "results" / "data" / "summary.csv").read_text().strip() == "dataset,quantity,measured,published,matches"
    assert not (work / "results" / "data" / "raw").exists()


def test_paper_scale_dry_run_builds_full_dag(tmp_path):
    work = copy_workflow(tmp_path / "wf")
    result = check_ok(snakemake(work, "-n", "--cores", "4", "--configfile", "config/paper.yaml"))
    out = result.stdout + result.stderr
    assert "wikitext-103-v1.zip" in out  # paper scale needs WikiText-103
    assert "train.csv" in out  # and AG News
    for rule in ("data_fetch", "data_prepare_lm", "data_prepare_classification", "data_prepare_chars", "scorecard"):
        assert rule in out
    assert not (work / "results").exists() or not any((work / "results").rglob("*.csv"))


def test_corrupt_mirror_file_fails_and_leaves_no_raw_file(tmp_path, shared_data):
    work = copy_workflow(tmp_path / "wf")
    mirror = tmp_path / "mirror" / "sst"
    mirror.mkdir(parents=True)
    data = (shared_data / "sst" / "trainDevTestTrees_PTB.zip").read_bytes()
    (mirror / "trainDevTestTrees_PTB.zip").write_bytes(data[:1000] + b"\0" + data[1001:])
    env = {"FEATLEARN_DATA_MIRROR": str(tmp_path / "mirror"), "FEATLEARN_OFFLINE": "1"}
    result = snakemake(work, *SMOKE, overlay(work, "sst.yaml", {"sst": True}, papers=False), env=env)
    assert result.returncode != 0
    log = (work / "results" / "logs" / "data" / "fetch_sst_trainDevTestTrees_PTB.zip.log").read_text()
    assert "checksum mismatch" in log
    assert not (work / "results" / "data" / "raw" / "sst" / "trainDevTestTrees_PTB.zip").exists()


def test_missing_file_offline_gives_clear_error(tmp_path):
    work = copy_workflow(tmp_path / "wf")
    env = {"FEATLEARN_OFFLINE": "1"}
    result = snakemake(work, *SMOKE, overlay(work, "ts.yaml", {"tinyshakespeare": True}, papers=False), env=env)
    assert result.returncode != 0
    log = (work / "results" / "logs" / "data" / "fetch_tinyshakespeare_input.txt.log").read_text()
    assert "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt" in log
    assert "data.mirror" in log and "FEATLEARN_DATA_MIRROR" in log


def test_auto_dataset_offline_without_files_is_skipped(tmp_path):
    work = copy_workflow(tmp_path / "wf")
    ts_auto = overlay(work, "ts.yaml", {"tinyshakespeare": "auto"}, papers=False)
    result = check_ok(snakemake(work, *SMOKE, ts_auto, env={"FEATLEARN_OFFLINE": "1"}))
    assert "skipping dataset tinyshakespeare (offline and input.txt not found" in result.stderr


SCAN_SNAP_FIGURES = ("3", "4", "5", "6", "7", "8", "9", "10", "11", "12")


def test_scan_snap_smoke_outputs(smoke_run):
    work, _, _ = smoke_run
    results = work / "results"
    for n in SCAN_SNAP_FIGURES:
        assert (results / "figures" / "scan_snap" / f"fig{n}.png").stat().st_size > 1000
    rows = list(csv.DictReader(open(results / "scan_snap" / "claims.csv")))
    ids = {r["claim_id"] for r in rows}
    for cid in ("gen_freq", "1b", "2", "4a", "7", "8a", "adam_subsets", "9a", "10", "11a", "th_h", "th_lnln", "th_t0",
                "wiki_freeze_1layer", "wiki_entropy_lr_wikitext2"):
        assert cid in ids
    assert all(r["scale"] == "smoke" and r["passed"] in ("True", "False") for r in rows)
    # audited: every threshold has its reason (a claim unchecked here, e.g. on WikiText-103, has no threshold)
    assert all(r["threshold_reason"] for r in rows if r["verdict"] != "unchecked")
    wt103 = {r["claim_id"]: r for r in rows}["wiki_entropy_lr_wikitext103"]
    assert wt103["verdict"] == "unchecked" and "paper scale" in wt103["note"]
    md = (results / "scorecard.md").read_text()
    # the verdict columns count empirical claims; the theory numerics and the sanity checks have their own
    n = {v: sum(r["verdict"] == v for r in rows if r["kind"] == "paper")
         for v in ("reproduced", "not reproduced", "inconclusive", "not discriminating", "unchecked")}
    theory = [r for r in rows if r["kind"] == "paper-theory" and r["verdict"] != "unchecked"]
    sanity = [r for r in rows if r["kind"] == "sanity"]
    assert (f"| `scan_snap` | {n['reproduced']} | {n['not reproduced']} | {n['inconclusive']} | {n['not discriminating']} | "
            f"{n['unchecked']} | "
            f"{sum(r['passed'] == 'True' for r in theory)}/{len(theory)} | "
            f"{sum(r['verdict'] == 'sanity ok' for r in sanity)}/{len(sanity)} |") in md
    for table in ("syn_small_steps", "syn_small_composition", "adam_composition", "syn_medium_final", "syn_medium_recall",
                  "theory_snapping"):
        assert (results / "scan_snap" / f"{table}.csv").stat().st_size > 100
    assert (results / "benchmarks" / "scan_snap" / "syn_medium.tsv").is_file()


def test_figure_style_change_reruns_only_figures(smoke_run):
    work, env, _ = smoke_run
    (work / "style.yaml").write_text("report:\n  dpi: 61\n")
    out = would_run(work, env, "style.yaml")
    assert "fig_scan_snap_4" in out and "data_summary" in out
    for compute in ("scan_snap_syn_small", "scan_snap_syn_medium", "scan_snap_theory", "data_prepare_classification"):
        assert compute not in out


def test_paper_code_change_reruns_only_that_paper(smoke_run):
    work, env, _ = smoke_run
    out = would_run_after_edit(work, env, "scan_snap/figures.py")
    assert "fig_scan_snap_6" in out and "check_scan_snap_generator" in out
    assert "scan_snap_syn_medium" not in out and "data_prepare" not in out


def test_editing_a_module_a_job_imports_reruns_it(smoke_run):
    """Issue 35: the sweep engine read GRID_AXIS from templates/registry.py, which no hand-written code list
    named; code hashes now follow the imports, so editing the grid records it reads (templates/sweeps/grids.py)
    reruns the sweeps, and another paper's module does not."""
    work, env, _ = smoke_run
    assert "templates_sweep" in would_run_after_edit(work, env, "templates/sweeps/grids.py")
    out = would_run_after_edit(work, env, "features/figures.py")
    assert "templates_sweep" not in out and "scan_snap_syn_medium" not in out


def test_joma_smoke_outputs(smoke_run):
    work, _, _ = smoke_run
    results = work / "results"
    for n in ("2", "3", "4", "6", "6_stable_rank", "8"):
        assert (results / "figures" / "joma" / f"fig{n}.png").stat().st_size > 1000
    ids = {r["claim_id"] for r in csv.DictReader(open(results / "joma" / "claims.csv"))}
    assert {"fig4_drop", "fig4_rebound", "fig4_exact", "thm2_invariant", "thm2_limits"} <= ids
    assert {"fig2_nc_smooth", "thm1_exp_invariant", "fig6_step0_wikitext2", "fig8_best_rebound_wikitext2"} <= ids


def test_training_hyperparameter_change_reruns_only_its_runs(smoke_run):
    """A new learning rate in Fig. 8's grid: one new WikiText run, then Fig. 8 and the claims; Fig. 6's
    runs (which share the 2-layer model at another learning rate) and every other job stay cached."""
    import re

    work, env, _ = smoke_run
    (work / "lr.yaml").write_text("joma:\n  wikitext:\n    fig8: {lrs: [1.0e-4, 2.0e-3]}\n")
    out = would_run(work, env, "lr.yaml")
    assert re.search(r"^joma_wikitext\s+1\s*$", out, re.M), out
    assert "fig_joma_8" in out and "paper_claims" in out
    for cached in ("fig_joma_6", "joma_table1_cell", "joma_sim_softmax", "scan_snap_wikitext", "data_prepare"):
        assert cached not in out


def test_committed_paper_scale_evidence_reruns_and_shows_on_the_pages(smoke_run):
    """A figure's committed paper-scale evidence (evidence/paper/<paper>/<rule>/) is an input of the scorecard and of
    its paper's results page: committing it reruns both (and nothing else), and they show its verdicts beside the
    run's own. Planted here from the smoke run's own Fig. 4 with its record marked paper scale; removed after."""
    import shutil

    from featlearn.pipeline.claims import read_claims, write_claims

    work, env, _ = smoke_run
    results = work / "results"
    folder = work / "evidence" / "paper" / "joma" / "fig_joma_4"
    folder.mkdir(parents=True)
    try:
        shutil.copy2(results / "figures" / "joma" / "fig4.png", folder / "fig4.png")
        ids = {c.claim_id for c in read_claims(results / "joma" / "claims" / "4.csv")}
        rows = [c for c in read_claims(results / "joma" / "claims.csv") if c.claim_id in ids]
        write_claims(folder / "claims.csv", rows)
        run = {**json.loads((results / "run.json").read_text()), "scale": "paper"}
        (folder / "record.json").write_text(json.dumps({"paper": "joma", "rule": "fig_joma_4", "label": "Fig. 4",
                                                        "files": ["fig4.png"], "jobs": [], "run": run}))
        dry = check_ok(snakemake(work, *SMOKE, "-n", "--quiet", "rules", env=env)).stdout
        assert "scorecard" in dry and "paper_page" in dry and "joma_eq6" not in dry and "fig_joma_4" not in dry
        check_ok(snakemake(work, *SMOKE, env=env))
        scorecard = (results / "scorecard.md").read_text()
        assert "Paper-scale evidence (`evidence/paper/`" in scorecard and "1 figure: joma Fig. 4" in scorecard
        assert "| verdict | paper scale |" in scorecard
        page = (results / "joma" / "README.md").read_text()
        assert "![Fig. 4 at paper scale](../../evidence/paper/joma/fig_joma_4/fig4.png)" in page
        assert "Paper-scale evidence: none committed for this paper yet" in (results / "scan_snap" / "README.md").read_text()
    finally:
        shutil.rmtree(work / "evidence")
        check_ok(snakemake(work, *SMOKE, env=env))  # the pages without it again, for the tests that follow
    assert "paper scale |" not in (results / "scorecard.md").read_text()
