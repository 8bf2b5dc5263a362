"""Faults at smoke scale: two clean runs give byte-identical tables, and a run killed (SIGKILL to
Snakemake and every job it started) at random moments leaves nothing half-written that looks
finished; rerun with --rerun-incomplete, it ends with every output complete and equal to a clean run.
A training killed after a checkpoint, then rerun after a code edit, starts afresh (never mixes two code
versions); a job's tables are the same whether Snakemake was given one core or two.

Target: the Scan and Snap synthetic figures (``snakemake scan_snap`` with every dataset switched off):
five training or simulation jobs and eleven figure and claim jobs.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from wfutil import copy_workflow, overlay, snakemake

pytestmark = pytest.mark.workflow
TARGET = ("scan_snap", "--cores", "2", "--configfile", "config/smoke.yaml", "off.yaml")
KILL_SEED = 20231107
KILL_TRIES = 3
PNG_END = b"IEND\xaeB`\x82"  # the last chunk of every complete PNG file


def _ok(result):
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    return result


def _clean_run(tmp_path_factory, name):
    work = copy_workflow(tmp_path_factory.mktemp(name) / "wf")
    overlay(work, "off.yaml")
    start = time.time()
    _ok(snakemake(work, *TARGET))
    return work, time.time() - start


def _tables(work: Path) -> dict[str, bytes]:
    """Every CSV table the run wrote (benchmarks and logs hold timings, not results)."""
    return {str(p.relative_to(work)): p.read_bytes() for p in sorted((work / "results" / "scan_snap").rglob("*.csv"))}


def _figures(work: Path) -> list[Path]:
    return sorted((work / "results" / "figures").rglob("*.png"))


@pytest.fixture(scope="module")
def clean_runs(tmp_path_factory):
    first, seconds = _clean_run(tmp_path_factory, "clean1")
    second, _ = _clean_run(tmp_path_factory, "clean2")
    print(f"clean smoke run of scan_snap: {seconds:.0f} s", file=sys.stderr)
    return first, second, seconds


def _figure_bytes(work: Path) -> dict[str, bytes]:
    return {str(p.relative_to(work)): p.read_bytes() for p in _figures(work)}


def test_two_clean_runs_give_identical_tables(clean_runs):
    first, second, _ = clean_runs
    a, b = _tables(first), _tables(second)
    assert len(a) >= 15 and set(a) == set(b)
    different = [name for name in a if a[name] != b[name]]
    assert not different, f"tables differ between two clean runs: {different}"
    # figures too: save_figure writes no date or software version into them
    fa, fb = _figure_bytes(first), _figure_bytes(second)
    assert len(fa) == 8 and set(fa) == set(fb)
    assert [name for name in fa if fa[name] != fb[name]] == []


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (from /proc), children first found first."""
    parent_of = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent_of[int(stat.parent.name)] = int(fields[1])
    found, frontier = [], [pid]
    while frontier:
        children = [p for p, ppid in parent_of.items() if ppid in frontier]
        found += children
        frontier = children
    return found


def _start(work: Path, log: Path, args: tuple[str, ...] = TARGET, env: dict | None = None) -> subprocess.Popen:
    """Snakemake (as wfutil.snakemake runs it) in a process group of its own, output to ``log``."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("FEATLEARN_")}
    full_env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + full_env.get("PATH", "")
    full_env.update(env or {})
    with open(log, "w") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "snakemake", "--rerun-incomplete", *args],
            cwd=work,
            env=full_env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _kill_all(proc: subprocess.Popen) -> None:
    """SIGKILL Snakemake's process group and anything below it that left the group."""
    below = _descendants(proc.pid)
    os.killpg(proc.pid, signal.SIGKILL)
    for pid in below:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(timeout=30)


def _assert_nothing_half_written(work: Path, clean: dict[str, bytes], when: str) -> None:
    for name, data in _tables(work).items():
        assert data == clean[name], f"{when}: {name} exists but differs from a clean run's"
    for png in _figures(work):
        assert png.read_bytes().endswith(PNG_END), f"{when}: {png} is truncated"


def test_random_kills_then_rerun_give_clean_outputs(clean_runs, tmp_path):
    reference, _, seconds = clean_runs
    clean = _tables(reference)
    work = copy_workflow(tmp_path / "wf")
    overlay(work, "off.yaml")
    # Kill points spread over a clean run's duration (start-up, training, figures, claims): each
    # attempt resumes the last one's work, so it runs for Snakemake's start-up plus the gap between
    # consecutive points.
    start = time.time()
    _ok(snakemake(work, *TARGET, "-n"))
    startup = time.time() - start
    rng = random.Random(KILL_SEED)
    points = [0.0] + sorted(rng.uniform(0.05, 0.95) for _ in range(KILL_TRIES))
    killed_mid_run = 0
    for attempt in range(KILL_TRIES):
        delay = startup + (points[attempt + 1] - points[attempt]) * seconds
        proc = _start(work, tmp_path / f"attempt{attempt}.log")
        try:
            proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            _kill_all(proc)
            killed_mid_run += 1
        assert proc.returncode in (0, -signal.SIGKILL), (tmp_path / f"attempt{attempt}.log").read_text()[-3000:]
        print(f"attempt {attempt}: " + (f"killed after {delay:.1f} s" if proc.returncode else "finished"), file=sys.stderr)
        _assert_nothing_half_written(work, clean, f"after kill {attempt} at {delay:.1f} s")
        # the next attempt needs the lock the killed Snakemake left
        _ok(snakemake(work, *TARGET, "--unlock"))
    assert killed_mid_run >= 1, "no attempt was killed before the run ended"
    _ok(snakemake(work, *TARGET, "--rerun-incomplete"))
    assert _tables(work) == clean
    assert _figure_bytes(work) == _figure_bytes(reference)
    _assert_nothing_half_written(work, clean, "after the final rerun")
    result = _ok(snakemake(work, *TARGET, "-n"))
    assert "Nothing to be done" in result.stdout + result.stderr


# --- kill, edit the code, rerun: the checkpoint of the old code is discarded --------------------------------

LM_TARGET = "results/features/lm/tinyshakespeare/log.csv"
LM_RESUME = "results/features/lm/tinyshakespeare/resume/resume.pt"
# long enough to be killed after its first checkpoint, short enough for a test
LM_OVERLAY = {"features": {"lm": {"char": {"iterations": 1500, "lr_decay_iters": 1500, "eval_every": 500,
                                            "checkpoint_every": 5}}}}


def _lm_run(work: Path, env: dict, *extra: str):
    return _ok(snakemake(work, "--cores", "1", "--configfile", "config/smoke.yaml", "lm.yaml", *extra, "--", LM_TARGET, env=env))


@pytest.mark.shared_data
def test_kill_then_code_edit_then_rerun_starts_afresh(tmp_path, shared_data):
    import yaml

    env = {"FEATLEARN_DATA_MIRROR": str(shared_data), "FEATLEARN_OFFLINE": "1"}
    work = copy_workflow(tmp_path / "wf")
    overlay(work, "off.yaml", {"tinyshakespeare": True})
    (work / "lm.yaml").write_text(yaml.safe_dump(LM_OVERLAY))
    # the prepared data first, so that the kill below lands in the training
    _lm_run(work, env, "off.yaml", "--until", "data_prepare_chars")
    args = ("--cores", "1", "--configfile", "config/smoke.yaml", "off.yaml", "lm.yaml", "--", LM_TARGET)
    proc = _start(work, tmp_path / "killed.log", args, env)
    deadline = time.time() + 300
    while not (work / LM_RESUME).exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert (work / LM_RESUME).exists(), (tmp_path / "killed.log").read_text()[-3000:]
    _kill_all(proc)
    assert not (work / LM_TARGET).exists()
    # a bug fix in the model's code: the checkpoint written by the old code must not be resumed
    gpt = work / "src" / "featlearn" / "features" / "gpt.py"
    gpt.write_text(gpt.read_text() + "\n# edited after the kill\n")
    _ok(snakemake(work, *args[:-2], "--unlock", env=env))
    _lm_run(work, env, "off.yaml", "--rerun-incomplete")
    log = (work / "results" / "logs" / "features" / "lm" / "tinyshakespeare.log").read_text()
    assert "discarding" in log and "written under other code" in log, log[-2000:]
    assert "resuming at step" not in log
    # and its table is a clean run's of the new code
    clean = copy_workflow(tmp_path / "clean")
    overlay(clean, "off.yaml", {"tinyshakespeare": True})
    (clean / "lm.yaml").write_text(yaml.safe_dump(LM_OVERLAY))
    (clean / "src" / "featlearn" / "features" / "gpt.py").write_text(gpt.read_text())
    _lm_run(clean, env, "off.yaml")
    assert (work / LM_TARGET).read_bytes() == (clean / LM_TARGET).read_bytes()


# --- results independent of the cores Snakemake grants -------------------------------------------------------

def test_one_core_and_two_cores_give_identical_tables(tmp_path):
    """scan_snap's synthetic jobs ask for 2 threads; with --cores 1 Snakemake scales {threads} down, but the
    numeric thread count is the rule's own, so the tables match byte for byte."""
    target = ("--configfile", "config/smoke.yaml", "off.yaml", "--", "results/scan_snap/syn_small_steps.csv",
              "results/scan_snap/adam_steps.csv")
    tables = {}
    for cores in ("1", "2"):
        work = copy_workflow(tmp_path / f"cores{cores}")
        overlay(work, "off.yaml")
        _ok(snakemake(work, "--cores", cores, *target))
        tables[cores] = {p.name: p.read_bytes() for p in sorted((work / "results" / "scan_snap").glob("*.csv"))}
        log = (work / "results" / "logs" / "scan_snap" / "syn_small.log")
        assert log.is_file()
    assert len(tables["1"]) >= 4 and tables["1"] == tables["2"]
