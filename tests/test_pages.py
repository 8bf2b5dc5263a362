"""What a run writes about itself: the DAG walk from figures to jobs, benchmark files, the run record, the
per-paper results pages, the compute table and the report's order."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from featlearn.pipeline.claims import check, write_claims
from featlearn.pipeline.dag import JobIndex, figure_jobs, pattern_regex
from featlearn.pipeline.pages import (
    caption_markdown,
    job_costs,
    read_benchmark,
    render_compute,
    render_page,
)
from featlearn.pipeline.markdown_html import markdown_to_html
from featlearn.pipeline.registry import CHECK, FIGURE, TABLE, Figure, Job, Paths, report_order
from featlearn.devices import cpu_model
from featlearn.pipeline.runrecord import run_record
from featlearn.pipeline.workflow import config_differences, config_sha256

BENCH_HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def _bench(path, wall, cpu, rss):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(BENCH_HEADER + f"{wall}\t0:00:0{int(wall)}\t{rss}\t1\t1\t1\t0\t0\t50\t{cpu}\n")


def test_pattern_regex_follows_snakemake_wildcards():
    rx = pattern_regex("r/{dataset}/L{n}_s{seed}.csv", {"n": r"\d+"})
    m = rx.fullmatch("r/wiki/L2_s1.csv")
    assert m.groupdict() == {"dataset": "wiki", "n": "2", "seed": "1"}
    assert rx.fullmatch("r/wiki/Lx_s1.csv") is None  # the constraint holds
    assert pattern_regex("{a}/{a}.csv", {}).fullmatch("x/y.csv") is None  # a repeated wildcard repeats
    assert pattern_regex("a.{ext,png|pdf}", {}).fullmatch("a.svg") is None  # an inline constraint too


def _planted_registry():
    paths = Paths("results")
    train = Job("p_train", "joma", "m:train", {"model": "results/joma/train/{run}.pt"}, {}, "train_{run}", (),
                wildcards={"run": "a|b"})
    analyse = Job("p_analyse", "joma", "m:analyse", {"table": "results/joma/analysis_{run}.csv"}, {}, "analyse_{run}", (),
                  inputs=lambda wc: {"model": f"results/joma/train/{wc.run}.pt", "data": "results/data/prepared/x/train.pt"})
    fig = Figure("joma", "4", {"tables": ["results/joma/analysis_a.csv", "results/joma/analysis_b.csv"]}, (), draw="m:d")
    lone = Figure("joma", "5", {"table": "results/joma/other.csv"}, (), draw="m:d")
    return paths, (train, analyse), (fig, lone)


def test_figure_jobs_follow_inputs_to_the_training_jobs():
    paths, jobs, figs = _planted_registry()
    found = figure_jobs(jobs, figs, paths)
    labels = [j.label for j in found["fig_joma_4"]]
    assert labels == ["p_analyse[run=a]", "p_analyse[run=b]", "p_train[run=a]", "p_train[run=b]"]
    assert found["fig_joma_4"][2].benchmark == "results/benchmarks/joma/train_a.tsv"
    assert found["fig_joma_5"] == []  # a file no job writes (e.g. prepared data) names no job


def test_a_shared_job_is_listed_once():
    paths, jobs, _ = _planted_registry()
    index = JobIndex(jobs, paths)
    up = index.upstream(["results/joma/analysis_a.csv", "results/joma/analysis_a.csv", "results/joma/train/a.pt"])
    assert [j.label for j in up] == ["p_analyse[run=a]", "p_train[run=a]"]


def test_report_order_sorts_as_the_paper_numbers():
    items = [(FIGURE, "10"), (TABLE, "1"), (FIGURE, "6_stable_rank"), (FIGURE, "2c"), (FIGURE, "6"), (FIGURE, "hblt"),
             (CHECK, "theorem2"), (FIGURE, "3")]
    ordered = [fid for _, fid in sorted(items, key=lambda kv: report_order(*kv))]
    assert ordered == ["2c", "3", "6", "6_stable_rank", "10", "1", "hblt", "theorem2"]
    assert Figure("joma", "4", {}, (), draw="m:d").label == "Fig. 4"
    assert Figure("joma", "1", {}, (), draw="m:d", kind=TABLE).label == "Table 1"
    assert Figure("joma", "hblt", {}, (), draw="m:d").label == "hblt"


def test_benchmark_files_are_read_and_summed(tmp_path):
    _bench(tmp_path / "a.tsv", 2.0, 1.5, 300)
    _bench(tmp_path / "b.tsv", 4.0, 3.5, 500)
    assert read_benchmark(tmp_path / "a.tsv") == {"wall_s": 2.0, "cpu_s": 1.5, "max_rss_mb": 300.0, "served": False}
    assert read_benchmark(tmp_path / "missing.tsv") is None
    cost = job_costs([{"label": "a", "benchmark": str(tmp_path / "a.tsv")},
                      {"label": "b", "benchmark": str(tmp_path / "b.tsv")},
                      {"label": "c", "benchmark": str(tmp_path / "missing.tsv")}])
    assert cost == {"jobs": 3, "measured": 2, "wall_s": 6.0, "cpu_s": 5.0, "max_rss_mb": 500.0}
    assert math.isnan(job_costs([])["wall_s"])


def test_config_differences_list_what_differs_from_paper_scale():
    ours = {"joma": {"lr": 0.01, "steps": 100, "grid": {"d": [8, 16]}, "extra": 1}, "other": {"x": 1}}
    paper = {"joma": {"lr": 0.01, "steps": 5000, "grid": {"d": [8, 16, 32]}}, "other": {"x": 2}}
    assert config_differences(ours, paper, "joma") == [
        ("joma.extra", 1, "(absent)"), ("joma.grid.d", [8, 16], [8, 16, 32]), ("joma.steps", 100, 5000)]
    assert config_differences(paper, paper, "joma") == []
    assert config_sha256({"a": 1, "b": 2}) == config_sha256({"b": 2, "a": 1}) != config_sha256({"a": 1, "b": 3})


def test_run_record_names_scale_code_and_versions(tmp_path):
    record = run_record("smoke", "c" * 64, "d" * 12, "cpu", repo=tmp_path)
    assert record["scale"] == "smoke" and record["device"] == "cpu"
    assert record["commit"].startswith("unknown")  # not a git checkout
    assert record["versions"]["torch"] and record["versions"]["python"]
    assert record["host_cpus"] >= 1 and record["host_cpu"] == cpu_model()  # the host's CPU model, not only its size
    json.dumps(record)  # JSON-able


def test_a_copy_without_git_records_the_commit_its_copier_names_and_says_so(tmp_path, monkeypatch):
    """A lent GPU machine gets the working tree without .git: FEATLEARN_COMMIT names the commit there, marked as
    given; in a git checkout git's own answer wins."""
    import subprocess

    from featlearn.pipeline.runrecord import COMMIT_ENV

    monkeypatch.delenv(COMMIT_ENV, raising=False)
    assert "commit_source" not in run_record("smoke", "c" * 64, "d" * 12, "cpu", repo=tmp_path)
    monkeypatch.setenv(COMMIT_ENV, "e" * 40)
    record = run_record("smoke", "c" * 64, "d" * 12, "cpu", repo=tmp_path)
    assert record["commit"] == "e" * 40 and COMMIT_ENV in record["commit_source"]
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    record = run_record("smoke", "c" * 64, "d" * 12, "cpu", repo=repo)
    assert record["commit"] == head and "commit_source" not in record


def test_caption_markdown_drops_the_rst_markup(tmp_path):
    rst = tmp_path / "c.rst"
    rst.write_text("Fig. 19: size \\|W\\| of\n:math:`v_j` in ``results/x.csv``.\n")
    assert caption_markdown(rst) == "Fig. 19: size |W| of $v_j$ in `results/x.csv`."


def _page_inputs(tmp_path):
    claims = tmp_path / "results" / "joma" / "claims" / "4.csv"
    claims.parent.mkdir(parents=True)
    write_claims(claims, [
        check("joma", "fig4_drop", "Fig. 4", "entropy drops", "drop", 0.3, ">", 0.1, "smoke", reason="the paper's figure",
              paper_value="0.5", baseline=("no attention", 0.0)),
        check("joma", "fig4_loss", "Fig. 4", "loss falls", "ratio", 0.5, "<", 0.9, "smoke", kind="sanity", reason="a loss falls"),
    ])
    merged = tmp_path / "results" / "joma" / "claims.csv"
    merged.write_text(claims.read_text())
    _bench(tmp_path / "results" / "benchmarks" / "joma" / "eq6.tsv", 3.0, 2.5, 250)
    (tmp_path / "cap.rst").write_text("JoMA, Fig. 4: components :math:`v_j`.\n")
    job = {"label": "joma_eq6", "benchmark": str(tmp_path / "results" / "benchmarks" / "joma" / "eq6.tsv")}
    manifest = {
        "paper": "joma", "out_dir": str(tmp_path / "results" / "joma"),
        "figures": [{"rule": "fig_joma_4", "label": "Fig. 4", "order": "004", "caption": str(tmp_path / "cap.rst"),
                     "pngs": [str(tmp_path / "results" / "figures" / "joma" / "fig4.png")], "tables": [],
                     "claims": str(claims), "jobs": [job]}],
        "differences": [["joma.steps", 100, 5000]],
        "skipped": {"joma Fig. 7": "no checkpoint"},
    }
    record = {"scale": "smoke", "commit": "a" * 40, "uncommitted_changes": False, "config_sha256": "b" * 64,
              "code_sha256": "c" * 12, "device": "cpu", "date_utc": "2026-01-01 00:00:00", "host_cpus": 2,
              "host_cpu": "Intel(R) Xeon(R) Processor",
              "versions": {"torch": "2.13.0"}}
    return manifest, merged, record


def test_results_page_shows_figures_claims_differences_and_provenance(tmp_path):
    manifest, claims, record = _page_inputs(tmp_path)
    page = render_page(manifest, claims, record)
    assert "Scale `smoke`; commit `aaaaaaaaaa`" in page
    assert "**Reproduced 1 of 1 empirical paper claims" in page
    assert "![Fig. 4](../figures/joma/fig4.png)" in page  # relative to results/joma/README.md
    assert "JoMA, Fig. 4: components $v_j$." in page
    assert "- compute and drawing: 1 job, 0.1 min wall, 0.0 CPU-min; claims `fig4_drop`, `fig4_loss`" in page
    assert "| `joma.steps` | 100 | 5000 |" in page
    assert "- joma Fig. 7: no checkpoint" in page
    assert "| host_cpus | 2 |" in page and "| host_cpu | Intel(R) Xeon(R) Processor |" in page
    assert "| fig4_drop | Fig. 4 | entropy drops | paper | 0.5 | drop: 0.3 | no attention: 0 (fails) |" in page
    assert "Sanity checks (this project's setup; not counted)" in page
    html_page = markdown_to_html(page, "joma")
    assert "<table>" in html_page and "<img" not in html_page and "$v_j$" in html_page


def test_a_page_at_paper_scale_says_nothing_differs(tmp_path):
    manifest, claims, record = _page_inputs(tmp_path)
    manifest["differences"] = []
    assert "None: every setting of `joma` is the paper-scale value" in render_page(manifest, claims, record)


def test_compute_table_counts_a_shared_job_once(tmp_path):
    manifest, _, record = _page_inputs(tmp_path)
    fig = manifest["figures"][0]
    compute = {"papers": {"joma": [fig, {**fig, "rule": "fig_joma_5", "label": "Fig. 5"}]},
               "data": [{"label": "prepare sst", "benchmark": str(tmp_path / "none.tsv")}]}
    text, rows = render_compute(compute, record)
    assert [r["item"] for r in rows] == ["prepare sst", "Fig. 4 (fig_joma_4)", "Fig. 5 (fig_joma_5)", "total (each job once)"]
    assert rows[-1]["jobs"] == 2 and rows[-1]["cpu_s"] == pytest.approx(2.5)  # the shared job once, prepare unmeasured
    assert "| joma | Fig. 4 (fig_joma_4) | 1 | 3.0 | 2.5 | 250 |" in text
    assert "| data | prepare sst | 1 | — | — | — |" in text
    assert "job server" not in text
    # the same job run by the job server: its worker's record is added, and the table says so
    bench = fig["jobs"][0]["benchmark"]
    record_line = {"cpu_s": 4.0, "max_rss_mb": 900.0, "finished": os.stat(bench).st_mtime - 1}
    with open(f"{bench}.server.json", "w") as f:
        f.write(json.dumps(record_line) + "\n")
    text, rows = render_compute(compute, record)
    assert rows[-1]["cpu_s"] == pytest.approx(6.5) and rows[-1]["max_rss_mb"] == 900.0
    assert "1 of the jobs ran in the job server" in text
    assert "resumed" not in text
    # the job resumed from an earlier, killed run of itself: its file timed its last run only
    log = Path(str(bench).replace("/benchmarks/", "/logs/", 1)).with_suffix(".log")
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("[lm x] resuming at step 40 from w/resume.pt\n")
    text, _ = render_compute(compute, record)
    assert "1 of the jobs resumed from an earlier run of themselves" in text and "lower bounds" in text
    # its log gives the earlier runs' wall time (the compute command's job clock): said, and no longer a lower bound
    log.write_text("featlearn: earlier runs of this job: 600.0 s of wall time in 1 run, killed (their kept work is in w)\n"
                   "[lm x] resuming at step 40 from w/resume.pt\n")
    text, _ = render_compute(compute, record)
    assert "the logs of 1 of them give those runs' wall time, 10.0 min in all." in text and "lower bounds" not in text


def test_compute_table_says_where_each_compute_job_ran(tmp_path):
    """Issue 35: the device line every compute job writes first in its log is gathered into the compute table."""
    from featlearn.pipeline.pages import devices_line, job_device

    bench = tmp_path / "results" / "benchmarks" / "joma"
    logs = tmp_path / "results" / "logs" / "joma"
    bench.mkdir(parents=True)
    logs.mkdir(parents=True)
    lines = {"a": "featlearn: device cpu (asked: cpu); torch threads 1; precision fp32\n",
             "b": "featlearn: this job uses GPU 1 (CUDA_VISIBLE_DEVICES=1)\n"
                  "featlearn: device cuda (NVIDIA H100 80GB HBM3, CUDA_VISIBLE_DEVICES=1) (asked: auto); torch threads 1; "
                  "precision bf16\n",
             "c": "featlearn: device cpu (asked: auto); torch threads 1; precision fp32\n",
             "d": "an old log without the line\n"}
    jobs = []
    for name, text in lines.items():
        (logs / f"{name}.log").write_text(text)
        jobs.append({"label": name, "benchmark": str(bench / f"{name}.tsv")})
    assert job_device(jobs[1]["benchmark"]) == {"device": "cuda (NVIDIA H100 80GB HBM3, CUDA_VISIBLE_DEVICES=1)", "asked": "auto",
                                                "threads": "1", "precision": "bf16"}
    assert job_device(jobs[3]["benchmark"]) is None
    line = devices_line(jobs)
    assert ("cpu, 1 thread, fp32: 2 jobs" in line
            and "NVIDIA H100 80GB HBM3, CUDA_VISIBLE_DEVICES=1), 1 thread, bf16: 1 job" in line)
    assert devices_line(jobs[3:]) == "No compute job's log names its device."
