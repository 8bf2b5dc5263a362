"""Paper-scale evidence: adding a figure of a paper-scale run, reading the committed folders, and showing their
verdicts beside a run's own on the scorecard and the results pages."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from featlearn.pipeline import evidence
from featlearn.pipeline.claims import check, read_claims, write_claims
from featlearn.pipeline.evidence import EvidenceError, add_figures, by_claim, read_evidence, read_figure
from featlearn.pipeline.pages import render_page
from featlearn.pipeline.scorecard import render_markdown

REPO = Path(__file__).resolve().parents[1]
BENCH_HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def _run_record(scale: str) -> dict:
    return {"scale": scale, "commit": "0123456789abcdef0123456789abcdef01234567", "uncommitted_changes": False,
            "config_sha256": "c" * 64, "code_sha256": "d" * 64, "device": "auto -> cuda:0 (NVIDIA H200)",
            "job_device": "auto", "precision": "fp32", "date_utc": "2026-11-28 10:00:00", "host_cpus": 16}


def _paper_run(work: Path, scale: str = "paper") -> Path:
    """A run that wrote joma's Fig. 4 (drawing, claims, one compute job with its benchmark file and log) and
    prepared its evidence as rule figure_evidence does; Fig. 6 was not run."""
    res = work / "results"
    (res / "figures" / "joma").mkdir(parents=True)
    (res / "figures" / "joma" / "fig4.png").write_bytes(b"\x89PNG fig4")
    (res / "joma" / "claims").mkdir(parents=True)
    fig4 = [check("joma", "fig4_drop", "Fig. 4", "entropy drops", "drop (nats)", 0.45, ">=", 0.3, scale,
                  baseline=("no attention", 0.0)),
            check("joma", "fig4_rebound", "Fig. 4", "entropy rebounds", "rise (nats)", 0.05, ">=", 0.2, scale,
                  baseline=("no attention", 0.0))]
    write_claims(res / "joma" / "claims" / "4.csv", fig4)
    bench = res / "benchmarks" / "joma" / "eq6.tsv"
    bench.parent.mkdir(parents=True)
    bench.write_text(BENCH_HEADER + "120.5\t0:02:00\t900\t1\t1\t1\t0\t0\t50\t118.0\n")
    log = res / "logs" / "joma" / "eq6.log"
    log.parent.mkdir(parents=True)
    log.write_text("featlearn: device cuda:0 NVIDIA H200 (asked: cuda); torch threads 1; precision fp32\n")
    (res / "run.json").write_text(json.dumps(_run_record(scale)))
    entry = {"label": "Fig. 4", "rule": "fig_joma_4", "order": "004", "caption": "", "claims": "results/joma/claims/4.csv",
             "pngs": ["results/figures/joma/fig4.png"], "tables": [],
             "jobs": [{"label": "joma_eq6", "benchmark": "results/benchmarks/joma/eq6.tsv"}]}
    evidence.prepare("joma", entry, {}, {}, res / "run.json", evidence.prepared_path(res, "joma", "fig_joma_4"), work)
    return work


def _manifest(work: Path) -> dict:
    entry = json.loads(evidence.prepared_path(work / "results", "joma", "fig_joma_4").read_text())["entry"]
    return {"paper": "joma", "out_dir": "results/joma", "skipped": {}, "differences": [], "figures": [entry]}


def test_adding_a_figure_copies_its_drawing_claims_and_run_record(tmp_path):
    work = _paper_run(tmp_path / "work")
    root = tmp_path / "evidence" / "paper"
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{evidence.README_BEGIN}\nold\n{evidence.README_END}\n\nafter\n")
    added = add_figures("joma", None, work, root=root, readme=readme)
    assert [f.rule for f in added] == ["fig_joma_4"]  # every figure the run prepared
    fig = read_figure(root / "joma" / "fig_joma_4")
    assert fig.files == ["fig4.png"] and (fig.folder / "fig4.png").read_bytes() == b"\x89PNG fig4"
    assert [c.claim_id for c in fig.claims] == ["fig4_drop", "fig4_rebound"]
    assert [c.verdict for c in fig.claims] == ["reproduced", "not reproduced"]
    assert fig.run["scale"] == "paper" and fig.run["commit"].startswith("0123456789")
    job = fig.record["jobs"][0]
    assert job["device"] == "cuda:0 NVIDIA H200" and job["threads"] == "1" and job["wall_s"] == pytest.approx(120.5)
    assert fig.provenance() == "2026-11-28, commit `0123456789`, cuda:0 NVIDIA H200 (1 job), fp32"
    assert fig.compute_hours() == pytest.approx(120.5 / 3600)
    # the index and the README's block list it; the README outside the block is untouched
    index = (tmp_path / "evidence" / "README.md").read_text()
    assert "| `joma` | Fig. 4 | [`fig_joma_4`](paper/joma/fig_joma_4/) | 2 | 1 of 2 |" in index
    text = readme.read_text()
    assert "old" not in text and "Fig. 4" in text and text.startswith("# x\n\n") and text.endswith("\n\nafter\n")


def test_a_job_that_resumed_is_recorded_and_its_figure_time_is_a_lower_bound(tmp_path):
    """A compute job whose log says it resumed from an earlier, killed run of itself (a language model's checkpoint, a
    sweep's finished groups) has a benchmark file that timed its last run only: the record says ``resumed`` and the
    index shows the figure's compute hours as a lower bound, with a note; a job that did not resume is not marked."""
    from featlearn.pipeline.benchfiles import job_resumed

    work = _paper_run(tmp_path / "work")
    bench = work / "results" / "benchmarks" / "joma" / "eq6.tsv"
    assert not job_resumed(bench)
    add_figures("joma", None, work, root=tmp_path / "a" / "paper", readme=None)
    assert read_figure(tmp_path / "a" / "paper" / "joma" / "fig_joma_4").record["jobs"][0]["resumed"] is False
    assert "≥" not in (tmp_path / "a" / "README.md").read_text()

    log = work / "results" / "logs" / "joma" / "eq6.log"
    log.write_text(log.read_text() + "[lm eq6] progress: 5 steps\n[lm eq6] resuming at step 300 from w/resume.pt\n")
    assert job_resumed(bench)
    prepared = evidence.prepared_path(work / "results", "joma", "fig_joma_4")  # rule figure_evidence, after that run
    evidence.prepare("joma", json.loads(prepared.read_text())["entry"], {}, {}, work / "results" / "run.json", prepared, work)
    add_figures("joma", None, work, root=tmp_path / "b" / "paper", readme=None)
    fig = read_figure(tmp_path / "b" / "paper" / "joma" / "fig_joma_4")
    assert fig.record["jobs"][0]["resumed"] is True and fig.resumed()
    index = (tmp_path / "b" / "README.md").read_text()
    assert "| ≥ 0.03 |" in index and "≥: a lower bound" in index


def test_a_resumed_job_whose_log_times_its_earlier_runs_counts_them(tmp_path):
    """A job that resumed and whose log gives its killed runs' wall time (the compute command's job clock): the record
    keeps those seconds, the figure's hours add them to the benchmark file's and are no longer a lower bound; a resumed
    job's log without that line keeps the lower bound."""
    from featlearn.pipeline.benchfiles import job_earlier_wall

    work = _paper_run(tmp_path / "work")
    bench = work / "results" / "benchmarks" / "joma" / "eq6.tsv"
    log = work / "results" / "logs" / "joma" / "eq6.log"
    first = log.read_text()
    earlier = "featlearn: earlier runs of this job: 3479.5 s of wall time in 2 runs, killed (their kept work is in w)\n"
    log.write_text(first + earlier)
    assert job_earlier_wall(bench) == 0.0  # the line without a resume: the job started afresh, its file timed it all
    log.write_text(first + earlier + "[lm eq6] resuming at step 300 from w/resume.pt\n")
    assert job_earlier_wall(bench) == pytest.approx(3479.5)
    prepared = evidence.prepared_path(work / "results", "joma", "fig_joma_4")
    evidence.prepare("joma", json.loads(prepared.read_text())["entry"], {}, {}, work / "results" / "run.json", prepared, work)
    add_figures("joma", None, work, root=tmp_path / "a" / "paper", readme=None)
    fig = read_figure(tmp_path / "a" / "paper" / "joma" / "fig_joma_4")
    job = fig.record["jobs"][0]
    assert job["resumed"] is True and job["earlier_runs_s"] == pytest.approx(3479.5)
    assert fig.compute_hours() == pytest.approx((120.5 + 3479.5) / 3600) and not fig.lower_bound()
    index = (tmp_path / "a" / "README.md").read_text()
    assert "| 1.00 * |" in index and "*: a job of that figure resumed" in index and "≥" not in index

    log.write_text(first + "[lm eq6] resuming at step 300 from w/resume.pt\n")  # a log from before the job clock
    assert math.isnan(job_earlier_wall(bench))
    evidence.prepare("joma", json.loads(prepared.read_text())["entry"], {}, {}, work / "results" / "run.json", prepared, work)
    add_figures("joma", None, work, root=tmp_path / "b" / "paper", readme=None)
    fig = read_figure(tmp_path / "b" / "paper" / "joma" / "fig_joma_4")
    assert fig.record["jobs"][0]["earlier_runs_s"] is None and fig.lower_bound()
    assert fig.compute_hours() == pytest.approx(120.5 / 3600)


def test_resumed_lines_are_told_from_others(tmp_path):
    """What counts as a resumed job's log line: a message that starts with "resuming", after its tag if any."""
    from featlearn.pipeline.benchfiles import job_resumed

    bench = tmp_path / "results" / "benchmarks" / "x.tsv"
    log = tmp_path / "results" / "logs" / "x.log"
    log.parent.mkdir(parents=True)
    assert not job_resumed(bench)  # no log at all
    for line, resumed in [("[lm fig7_1layer] resuming at step 40 from a/resume.pt", True),
                          ("[features-lm ptb] resuming at step 3 from r", True),
                          ("resuming: [templates] aba_abb mlp n=4 R=1 was finished by an earlier run of this job; loaded",
                           True),
                          ("resuming: [templates] aba_abb mlp n=8192 R=20 at epoch 412 of 1000 from r", True),
                          ("[lm x] discarding a/resume.pt: written under other code; starting afresh", False),
                          ("[lm x] progress: 40 steps in 3s, about 1 min left", False),
                          ("[lm x] not resuming", False)]:
        log.write_text(f"featlearn: device cpu (asked: cpu); torch threads 1\n{line}\n")
        assert job_resumed(bench) is resumed, line


def test_a_figure_the_run_did_not_prepare_is_an_error(tmp_path):
    work = _paper_run(tmp_path / "work")
    with pytest.raises(EvidenceError, match="fig_joma_6.json is missing: run snakemake results/joma/evidence/fig_joma_6.json"):
        add_figures("joma", ["fig_joma_6"], work, root=tmp_path / "ev", readme=None)
    with pytest.raises(EvidenceError, match="no figure of features is prepared"):
        add_figures("features", None, work, root=tmp_path / "ev", readme=None)
    (work / "results" / "figures" / "joma" / "fig4.png").unlink()  # removed since
    with pytest.raises(EvidenceError, match="fig_joma_4: .*fig4.png absent"):
        add_figures("joma", ["fig_joma_4"], work, root=tmp_path / "ev", readme=None)


def test_only_a_paper_scale_run_gives_evidence(tmp_path):
    work = _paper_run(tmp_path / "work", scale="default")
    with pytest.raises(EvidenceError, match="at scale 'default'; only a paper-scale run"):
        add_figures("joma", None, work, root=tmp_path / "ev", readme=None)
    assert not (tmp_path / "ev").exists()


def test_prepared_claims_are_judged_as_claims_csv_judges_them(tmp_path):
    """Seed reasons are added and a failed prerequisite check makes its claims unchecked, as in rule paper_claims; a
    prerequisite of another figure (absent here) makes the claim unchecked too, saying so."""
    part = tmp_path / "part.csv"
    write_claims(part, [
        check("features", "1-vocab", "Fig. 1", "vocabulary size", "n", 10.0, ">=", 100.0, "paper", kind="sanity"),
        check("features", "2-imdb-a", "Fig. 2", "x", "m", 1.0, ">", 0.0, "paper", seeds=1),
        check("features", "3-imdb-b", "Fig. 3", "y", "m", 1.0, ">", 0.0, "paper", seeds=1),
        check("features", "4-c", "Fig. 4", "z", "m", 1.0, ">", 0.0, "paper", seeds=1),
    ])
    gates = {"2-imdb-*": ["1-vocab"], "3-imdb-*": ["1-elsewhere"]}
    claims = {c.claim_id: c for c in evidence.figure_claims(part, gates, {"4-*": "one model per dataset"})}
    assert claims["2-imdb-a"].verdict == "unchecked" and "prerequisite 1-vocab failed" in claims["2-imdb-a"].note
    assert claims["3-imdb-b"].verdict == "unchecked" and "1-elsewhere belong to another figure" in claims["3-imdb-b"].note
    assert claims["4-c"].verdict == "reproduced" and claims["4-c"].seeds_reason == "one model per dataset"


def test_a_prerequisite_of_another_figure_of_the_same_run_judges_the_claims(tmp_path):
    """The checks a figure's claims rest on are found in the claims tables of the run's other figures that hold them
    (rule figure_evidence reads them): a passed check leaves the claim's verdict, a failed one makes it unchecked, and
    tables that hold no prerequisite are not read."""
    part, table6 = tmp_path / "part.csv", tmp_path / "table6.csv"
    write_claims(part, [check("features", "7-sa-not-pos", "Fig. 6", "x", "m", -1.0, "<", 0.0, "paper", seeds=3),
                        check("features", "7-sa-not", "Fig. 6", "y", "m", -1.0, "<", 0.0, "paper", seeds=3)])
    gates = {"7-*-not-pos": ["1-sstwsub-adjective-pos"], "2-imdb-*": ["1-imdb-vocab"]}
    tables = {"table6.csv": ["1-*-size", "1-*-adjective-*", "1-*-vocab"], "fig8.csv": ["7-cnn-not-pos"]}
    assert evidence.prerequisite_tables(["7-sa-not-pos", "7-sa-not"], gates, tables) == ["table6.csv"]
    assert evidence.prerequisite_tables(["7-sa-not"], gates, tables) == []  # no gate applies
    assert evidence.prerequisite_tables(["2-imdb-*"], gates, tables) == ["table6.csv"]  # patterns on both sides

    def judged(adjectives: float) -> dict:
        write_claims(table6, [check("features", "1-sstwsub-adjective-pos", "Table 6", "n", "n", adjectives, ">=", 70.0,
                                    "paper", kind="sanity")])
        return {c.claim_id: c for c in evidence.figure_claims(part, gates, {}, [table6])}

    passed = judged(73.0)
    assert passed["7-sa-not-pos"].verdict == "reproduced" and passed["7-sa-not"].verdict == "reproduced"
    assert set(passed) == {"7-sa-not-pos", "7-sa-not"}  # the prerequisite is read, not copied
    failed = judged(10.0)
    assert failed["7-sa-not-pos"].verdict == "unchecked" and "prerequisite 1-sstwsub-adjective-pos failed" in \
        failed["7-sa-not-pos"].note
    absent = {c.claim_id: c for c in evidence.figure_claims(part, gates, {})}
    assert absent["7-sa-not-pos"].verdict == "unchecked" and "belong to another figure" in absent["7-sa-not-pos"].note


def test_malformed_evidence_folders_are_named(tmp_path):
    work = _paper_run(tmp_path / "work")
    root = tmp_path / "ev"
    add_figures("joma", None, work, root=root, readme=None)
    folder = root / "joma" / "fig_joma_4"
    record = json.loads((folder / "record.json").read_text())

    (folder / "fig4.png").unlink()
    with pytest.raises(EvidenceError, match="fig4.png is listed in record.json but absent"):
        read_evidence(root)
    (folder / "fig4.png").write_bytes(b"png")

    (folder / "claims.csv").write_text("a,b\n1,2\n")
    with pytest.raises(EvidenceError, match="claims.csv: .*not the claims columns"):
        read_evidence(root)

    (folder / "record.json").write_text(json.dumps({**record, "run": _run_record("smoke")}))
    with pytest.raises(EvidenceError, match="scale is 'smoke'; evidence is paper scale only"):
        read_figure(folder)
    (folder / "record.json").write_text("{not json")
    with pytest.raises(EvidenceError, match="record.json is not valid JSON"):
        read_figure(folder)
    (folder / "record.json").unlink()
    with pytest.raises(EvidenceError, match="no record.json"):
        read_figure(folder)
    assert read_evidence(tmp_path / "absent") == []


def test_the_scorecard_shows_the_paper_scale_verdict_beside_the_run(tmp_path):
    work = _paper_run(tmp_path / "work")
    root = tmp_path / "ev"
    figs = add_figures("joma", None, work, root=root, readme=None)
    # this run (default scale) passes fig4_rebound and fails fig4_drop: the opposite of the paper-scale run
    ours = [check("joma", "fig4_drop", "Fig. 4", "entropy drops", "drop (nats)", 0.2, ">=", 0.3, "default"),
            check("joma", "fig4_rebound", "Fig. 4", "entropy rebounds", "rise (nats)", 0.3, ">=", 0.2, "default"),
            check("joma", "fig6_drop", "Fig. 6", "LM entropy drops", "drop", 0.2, ">=", 0.1, "default")]
    md = render_markdown(ours, evidence=figs)
    header = next(line for line in md.splitlines() if line.startswith("| claim | figure |"))
    assert header.endswith("| verdict | paper scale |")
    row = next(line for line in md.splitlines() if line.startswith("| fig4_drop |"))
    assert row.endswith("| **not reproduced** | reproduced: 0.45 |")
    row = next(line for line in md.splitlines() if line.startswith("| fig4_rebound |"))
    assert row.endswith("| reproduced | **not reproduced**: 0.05 |")
    assert next(line for line in md.splitlines() if line.startswith("| fig6_drop |")).endswith("| reproduced | — |")
    assert "1 figure: joma Fig. 4 (2026-11-28, commit `0123456789`" in md
    assert "Of their 2 empirical claims decided at paper scale, 1 reproduced." in md
    # a paper without evidence keeps its table as it was and says so
    scan = [check("scan_snap", "s1", "Fig. 4", "x", "m", 1.0, ">", 0.0, "default")]
    md = render_markdown(scan, evidence=[])
    assert "Paper-scale evidence: none committed yet" in md and "paper scale |" not in md
    assert "Paper-scale evidence" not in render_markdown(scan)  # no evidence folder given: nothing said


def test_the_results_page_shows_the_paper_scale_figure(tmp_path, monkeypatch):
    work = _paper_run(tmp_path / "work")
    figs = add_figures("joma", None, work, root=work / "evidence" / "paper", readme=None)
    monkeypatch.chdir(work)
    manifest = _manifest(work)
    page = render_page(manifest, "results/joma/claims.csv", _run_record("default"), figs)
    assert "Paper scale (committed evidence: 2026-11-28, commit `0123456789`" in page
    assert "![Fig. 4 at paper scale](../../evidence/paper/joma/fig_joma_4/fig4.png)" in page
    assert "- paper-scale verdicts: `fig4_drop` reproduced, `fig4_rebound` not reproduced" in page
    assert "Paper scale (committed" not in render_page(manifest, "results/joma/claims.csv", _run_record("default"))


def test_a_claim_in_two_figures_evidence_is_an_error(tmp_path):
    import shutil

    work = _paper_run(tmp_path / "work")
    root = tmp_path / "ev"
    add_figures("joma", None, work, root=root, readme=None)
    twin = root / "joma" / "fig_joma_4b"
    shutil.copytree(root / "joma" / "fig_joma_4", twin)
    with pytest.raises(EvidenceError, match="its record names joma/fig_joma_4; the folder must be"):
        read_evidence(root)
    record = json.loads((twin / "record.json").read_text())
    (twin / "record.json").write_text(json.dumps({**record, "rule": "fig_joma_4b"}))
    with pytest.raises(EvidenceError, match="fig4_drop is in the evidence of both fig_joma_4 and fig_joma_4b"):
        by_claim(read_evidence(root))


def test_the_committed_evidence_reads_and_the_readme_lists_it():
    """The repository's own evidence folders are well formed, their claims carry this project's columns, and the
    README's block says which figures have paper-scale evidence (rewritten by ``evidence add``)."""
    figures = read_evidence(REPO / evidence.EVIDENCE_DIR)
    by_claim(figures)
    for fig in figures:
        assert fig.run["scale"] == "paper" and all(c.scale == "paper" for c in fig.claims), fig.folder
        assert not math.isnan(fig.compute_hours()) or not fig.record["jobs"], fig.folder
    readme = (REPO / "README.md").read_text()
    assert evidence.readme_block(figures) in readme
    if figures:
        index = (REPO / "evidence" / "README.md").read_text()
        assert evidence.index_markdown(figures, Path("paper")) in index


def test_the_command_line(tmp_path, capsys):
    from featlearn.pipeline.cli import main

    work = _paper_run(tmp_path / "work")
    root = tmp_path / "ev"
    assert main(["evidence", "add", "--paper", "joma", "--workdir", str(work), "--evidence", str(root),
                 "--readme", str(tmp_path / "none.md")]) in (0, None)
    assert "fig_joma_4 (Fig. 4: 2 claims" in capsys.readouterr().out
    main(["evidence", "list", "--evidence", str(root)])
    assert "| `joma` | Fig. 4 |" in capsys.readouterr().out
    assert read_claims(root / "joma" / "fig_joma_4" / "claims.csv")[0].claim_id == "fig4_drop"


def test_the_evidence_script_moves_its_clone_to_head_unless_told_to_keep_its_commit(tmp_path):
    """benchmarks/paper_evidence.sh runs in a clone: by default at this checkout's HEAD; with KEEP_COMMIT=1 at the
    clone's own commit, so that a killed paper-scale run goes on under the code its trainings kept their state with.
    (An unknown figure rule stops the script after the checkout, before any training.)"""
    import subprocess

    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    parent = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD~1"], capture_output=True, text=True)
    if parent.returncode != 0:
        pytest.skip("a checkout without history")
    run_dir = tmp_path / "run"

    def script(**env):
        return subprocess.run(["bash", str(REPO / "benchmarks" / "paper_evidence.sh"), "not_a_figure"], cwd=REPO,
                              capture_output=True, text=True, timeout=300,
                              env={**os.environ, "RUN_DIR": str(run_dir), **env})

    def clone_head():
        return subprocess.run(["git", "-C", str(run_dir), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()

    first = script()
    assert first.returncode == 2 and "not a figure rule: not_a_figure" in first.stderr
    assert clone_head() == head
    subprocess.run(["git", "-C", str(run_dir), "checkout", "-q", "--detach", parent.stdout.strip()], check=True)
    kept = script(KEEP_COMMIT="1")
    assert kept.returncode == 2 and "at the clone's own commit" in kept.stdout
    assert clone_head() == parent.stdout.strip()
    script()
    assert clone_head() == head


def test_the_evidence_script_keeps_its_targets_when_snakemake_args_take_several_values(tmp_path):
    """An option of SNAKEMAKE_ARGS that takes several values (``--prioritize FILE``) must not swallow the figure
    targets: they come first on the command line (a fake ``snakemake`` on PATH records its arguments; nothing runs,
    so no figure is added and the script says so)."""
    import subprocess

    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    bin_dir, argv = tmp_path / "bin", tmp_path / "argv.txt"
    bin_dir.mkdir()
    fake = bin_dir / "snakemake"
    fake.write_text(f'#!/usr/bin/env bash\nprintf "%s\\n" "$@" > {argv}\n')
    fake.chmod(0o755)
    env = {**os.environ, "RUN_DIR": str(tmp_path / "run"), "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "SNAKEMAKE_ARGS": "--prioritize results/joma/eq6_exact.csv", "EXTRA_CONFIG": str(tmp_path / "cores.yaml")}
    done = subprocess.run(["bash", str(REPO / "benchmarks" / "paper_evidence.sh"), "fig_joma_4", "fig_scan_snap_3"],
                          cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode != 0 and "0 of 2 figures added" in done.stdout
    args = argv.read_text().split("\n")
    targets = ["results/joma/evidence/fig_joma_4.json", "results/scan_snap/evidence/fig_scan_snap_3.json"]
    assert args[:2] == targets
    prioritize = args.index("--prioritize")
    assert args[prioritize + 1] == "results/joma/eq6_exact.csv" and args[prioritize + 2].startswith("--")
    assert args[args.index("--configfile") + 1:args.index("--configfile") + 3] == ["config/paper.yaml",
                                                                                str(tmp_path / "cores.yaml")]
