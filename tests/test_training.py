"""The shared resumable training loop, the seed helper and the CSV writer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from featlearn.io import write_csv
from featlearn.seeding import SEED_STRIDE, derived_seed
from featlearn.pipeline.benchfiles import EARLIER_LINE
from featlearn.training import (CLOCK_FILE, FINISHED_FILE, IDENTITY_ENV, PARTS_DIR, RESUME_FILE, JobClock, has_kept_work,
                                load_part, mark_finished, remove_checkpoint, resumable_training, save_part,
                                sweep_finished)

SRC = Path(__file__).resolve().parents[1] / "src"



@pytest.fixture(autouse=True)
def _outside_a_compute_job(monkeypatch):
    """Each test starts outside a compute job (no run identity), whatever ran before it in this process."""
    monkeypatch.delenv(IDENTITY_ENV, raising=False)

def _run(work, total=12, eval_every=5, checkpoint_every=3, die_at=None, settings=None, log=lambda m: None, as_tensor=False,
         checkpoint_seconds=None):
    """A tiny regression trained with dropout-free SGD on batches drawn from its own generator."""
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    gen = torch.Generator().manual_seed(7)
    rows: list[dict] = []

    def step(i):
        if i == die_at:
            raise KeyboardInterrupt
        x = torch.randn(8, 3, generator=gen)
        y = x.sum(dim=1, keepdim=True) + 0.1 * torch.randn(8, 1)  # global RNG: restored too
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach() if as_tensor else loss.item()

    def record(i, train_loss):
        rows.append({"step": i, "train_loss": train_loss, "w0": model.weight[0, 0].item()})

    def load_log(logged):
        rows[:] = logged["rows"]

    start = resumable_training(model, opt, total=total, step=step, record=record, eval_every=eval_every,
                               checkpoint_every=checkpoint_every, work_dir=work, settings=settings or {"lr": 0.1},
                               generators=[gen], save_log=lambda: {"rows": rows}, load_log=load_log, log=log,
                               checkpoint_seconds=checkpoint_seconds)
    return start, pd.DataFrame(rows)


def test_uninterrupted_run_logs_at_step_zero_every_eval_and_at_the_end(tmp_path):
    start, log = _run(tmp_path)
    assert start == 0
    assert log["step"].tolist() == [0, 5, 10, 12]
    assert log["train_loss"].isna().tolist() == [True, False, False, False]  # no training loss before step 1
    assert not (tmp_path / RESUME_FILE).exists()


def test_resume_mid_interval_equals_an_uninterrupted_run(tmp_path):
    # killed at step 8: the last checkpoint is step 6, between the evaluations at 5 and 10, so the
    # running training loss of step 6 must come back with it
    _, straight = _run(tmp_path / "a")
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path / "b", die_at=8)
    assert torch.load(tmp_path / "b" / RESUME_FILE, weights_only=True)["step"] == 6
    start, resumed = _run(tmp_path / "b")
    assert start == 6
    pd.testing.assert_frame_equal(resumed, straight)


def test_a_checkpoint_is_also_written_once_its_time_has_passed_between_two_of_its_steps(tmp_path, monkeypatch):
    """Steps slower than checkpoint_every allows for (a paper-scale run on a CPU) are kept by time as well: after the
    first step that ends checkpoint_seconds after the last save, said in the log; a run killed after it resumes from
    that step, off the checkpoint_every grid, with the tables of an uninterrupted run."""
    _, straight = _run(tmp_path / "a", checkpoint_every=100)
    logged: list[str] = []
    with pytest.raises(KeyboardInterrupt):  # every step ends at least 0 s after the last save: each one is kept
        _run(tmp_path / "b", checkpoint_every=100, checkpoint_seconds=0.0, die_at=8, log=logged.append)
    assert torch.load(tmp_path / "b" / RESUME_FILE, weights_only=True)["step"] == 7
    assert [m.split(",")[0] for m in logged if m.startswith("checkpoint at")] == [f"checkpoint at step {i}" for i in range(1, 8)]
    start, resumed = _run(tmp_path / "b", checkpoint_every=100)
    assert start == 7
    pd.testing.assert_frame_equal(resumed, straight, check_exact=True)

    # the default, read when the loop starts (featlearn.keptwork.CHECKPOINT_SECONDS): fast steps are kept on the grid only
    import featlearn.training as training

    logged.clear()
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path / "c", checkpoint_every=3, die_at=8, log=logged.append)
    assert torch.load(tmp_path / "c" / RESUME_FILE, weights_only=True)["step"] == 6
    assert not any(m.startswith("checkpoint at") for m in logged)
    monkeypatch.setattr(training, "CHECKPOINT_SECONDS", 0.0)
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path / "d", checkpoint_every=100, die_at=5)
    assert torch.load(tmp_path / "d" / RESUME_FILE, weights_only=True)["step"] == 4


def test_progress_lines_come_with_the_evaluations_and_at_least_every_progress_seconds(tmp_path, monkeypatch):
    """The loop prints a progress line (rate, time left) at each evaluation; between two evaluations further apart than
    PROGRESS_SECONDS of wall time (a paper-scale step on a CPU) one more line after each step that ends that long after
    the last line, which names its step. The lines change nothing that is computed."""
    import featlearn.training as training

    logged: list[str] = []
    _, plain = _run(tmp_path / "a", log=logged.append)
    progress = [m for m in logged if "progress:" in m]
    assert [m.split(" steps in")[0] for m in progress] == ["progress: 5", "progress: 10", "progress: 12"]
    assert all("steps/s, about " in m and m.endswith(" left") for m in progress)

    logged.clear()
    monkeypatch.setattr(training, "PROGRESS_SECONDS", 0.0)
    _, timed = _run(tmp_path / "b", log=logged.append)
    progress = [m for m in logged if "progress:" in m]
    between = [m for m in progress if m.startswith("step ")]
    assert [m.split(":")[0] for m in between] == [f"step {i} of 12" for i in (1, 2, 3, 4, 6, 7, 8, 9, 11)]
    assert len(progress) == 12
    pd.testing.assert_frame_equal(timed, plain, check_exact=True)


def test_a_step_returning_a_tensor_logs_the_same_losses_as_one_returning_floats(tmp_path):
    """Steps may hand back their loss as a tensor (no host sync per step); the logged running means are the
    same numbers, bit for bit, also across a resume from a checkpoint."""
    _, floats = _run(tmp_path / "a")
    _, tensors = _run(tmp_path / "b", as_tensor=True)
    pd.testing.assert_frame_equal(tensors, floats, check_exact=True)
    assert all(isinstance(v, float) for v in tensors["train_loss"].dropna())
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path / "c", die_at=8, as_tensor=True)
    _, resumed = _run(tmp_path / "c", as_tensor=True)
    pd.testing.assert_frame_equal(resumed, floats, check_exact=True)


@pytest.mark.parametrize("content", [b"", b"not a checkpoint", "tensor"])
def test_an_unreadable_checkpoint_is_discarded_with_a_log_line_and_the_run_starts_afresh(tmp_path, content):
    """A resume file that cannot be read (emptied or torn by a full disk, a copy cut short) or that holds no
    checkpoint does not stop every rerun: it is deleted, said so, and the run is trained from step 0, as an
    unreadable kept part is (load_part)."""
    _, straight = _run(tmp_path / "clean")
    work = tmp_path / "torn"
    work.mkdir()
    if content == "tensor":
        torch.save(torch.zeros(3), work / RESUME_FILE)
    else:
        (work / RESUME_FILE).write_bytes(content)
    logged = []
    start, rerun = _run(work, log=logged.append)
    assert start == 0 and any("discarding" in m and "unreadable" in m for m in logged)
    pd.testing.assert_frame_equal(rerun, straight)
    assert not (work / RESUME_FILE).exists()


def test_checkpoint_of_other_settings_or_code_is_discarded(tmp_path, monkeypatch):
    """A checkpoint written under other settings, or under another run identity (code, inputs, threads, device),
    is discarded and the run starts afresh: a resumed table never mixes two versions (issue 19)."""
    from featlearn.training import IDENTITY_ENV

    _, straight = _run(tmp_path / "clean")
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path / "a", die_at=5)
    start, fresh = _run(tmp_path / "a", settings={"lr": 0.2})
    assert start == 0
    # the code changed between the kill and the rerun
    monkeypatch.setenv(IDENTITY_ENV, '{"code": "old", "threads": 1}')
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path / "b", die_at=5)
    assert torch.load(tmp_path / "b" / RESUME_FILE, weights_only=True)["identity"] == {"code": "old", "threads": 1}
    monkeypatch.setenv(IDENTITY_ENV, '{"code": "new", "threads": 1}')
    logged = []
    torch.manual_seed(0)
    start, rerun = _run(tmp_path / "b", log=logged.append)
    assert start == 0 and any("discarding" in m and "code" in m for m in logged)
    pd.testing.assert_frame_equal(rerun, straight)
    # the same identity resumes
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path / "c", die_at=5)
    start, resumed = _run(tmp_path / "c")
    assert start == 3
    pd.testing.assert_frame_equal(resumed, straight)


def test_inside_a_compute_job_the_checkpoint_outlives_the_last_step(tmp_path, monkeypatch):
    """A compute job (run identity set) keeps its checkpoint after the last step, for the compute command to remove
    once the tables are written: a job killed between its last step and its tables resumes from its last
    checkpoint and gives the same log, instead of starting over."""
    _, straight = _run(tmp_path / "clean")
    assert not (tmp_path / "clean" / RESUME_FILE).exists()  # outside a compute job: removed at the end
    monkeypatch.setenv(IDENTITY_ENV, '{"code": "c", "threads": 1}')
    _, done = _run(tmp_path / "a")
    pd.testing.assert_frame_equal(done, straight)
    assert torch.load(tmp_path / "a" / RESUME_FILE, weights_only=True)["step"] == 9  # the last one before step 12
    start, again = _run(tmp_path / "a")  # killed before its tables: rerun
    assert start == 9
    pd.testing.assert_frame_equal(again, straight)
    (tmp_path / "a" / f".{RESUME_FILE}.x1y2.part").write_bytes(b"half")  # a save killed half-way
    remove_checkpoint(tmp_path / "a")
    assert not any((tmp_path / "a").iterdir())


# A compute job that trains a tiny model with the resumable loop, then fails before writing its output when
# its settings say so (as a job the scheduler kills after its last step), else writes its step of departure.
CKPT_JOB = """
import json, torch
from featlearn.training import resumable_training

def job(settings, inputs, outputs, ctx):
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(i):
        x = torch.randn(8, 3)
        loss = ((model(x) - x.sum(dim=1, keepdim=True)) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    start = resumable_training(model, opt, total=10, step=step, record=lambda i, loss: None, eval_every=5,
                               checkpoint_every=4, work_dir=ctx.work_dir, settings={}, log=lambda m: None)
    if settings.get("fail"):
        raise RuntimeError("killed before its tables")
    with open(outputs["out"], "w") as fh:
        json.dump({"start": start, "weight": model.weight.tolist()}, fh)
"""


def test_a_compute_job_that_dies_before_or_after_its_outputs_resumes_until_the_workflow_accepts_them(tmp_path):
    (tmp_path / "ckpt_job.py").write_text(CKPT_JOB)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FEATLEARN_")}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), str(tmp_path)])

    def compute(work, out, settings):
        cmd = [sys.executable, "-m", "featlearn", "compute", "--run", "ckpt_job:job", "--settings", json.dumps(settings),
               "--outputs", json.dumps({"out": str(out)}), "--threads", "1", "--device", "cpu", f"--work-dir={work}"]
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)

    work, out = tmp_path / "work", tmp_path / "out.json"
    failed = compute(work, out, {"fail": True})
    assert failed.returncode != 0 and not out.exists(), failed.stderr
    assert torch.load(work / RESUME_FILE, weights_only=True)["step"] == 8  # kept past the last step (10)
    (work / f".{RESUME_FILE}.x1y2.part").write_bytes(b"half")  # a save killed half-way
    assert json.loads((work / CLOCK_FILE).read_text())["runs"] == 1  # the failed run's wall time is kept with its work
    resumed = compute(work, out, {})
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(out.read_text())["start"] == 8
    m = EARLIER_LINE.match(next(line for line in resumed.stdout.splitlines() if line.startswith("featlearn: earlier")))
    assert m and m["runs"] == "1" and 0 < float(m["s"]) < 300  # the failed run's seconds, in the rerun's log
    # the outputs are written: the work stays, marked finished, until the workflow has accepted them
    assert {p.name for p in work.iterdir()} >= {RESUME_FILE, CLOCK_FILE, FINISHED_FILE}
    # a scheduler kills the job as it wraps up: Snakemake fails it and deletes its outputs, and the workflow's end
    # leaves the work for the rerun, which resumes instead of starting over, counting both earlier runs
    first = out.read_bytes()
    out.unlink()
    assert sweep_finished(tmp_path) == [] and (work / RESUME_FILE).exists()
    again = compute(work, out, {})
    assert again.returncode == 0, again.stderr
    assert json.loads(out.read_text())["start"] == 8 and out.read_bytes() == first
    m = EARLIER_LINE.match(next(line for line in again.stdout.splitlines() if line.startswith("featlearn: earlier")))
    assert m and m["runs"] == "2"
    # accepted: the workflow's end removes the work, the partial save and the folder
    assert sweep_finished(tmp_path) == [work] and not work.exists()
    clean = compute(tmp_path / "clean", tmp_path / "clean.json", {})
    assert clean.returncode == 0, clean.stderr
    assert json.loads((tmp_path / "clean.json").read_text()) == {**json.loads(out.read_text()), "start": 0}


def test_a_finished_part_is_loaded_only_under_its_own_key_and_run_identity(tmp_path, monkeypatch):
    """``save_part``/``load_part``: a piece of a job (a sweep group) kept by a killed run is loaded by a rerun of the
    same job; under another key, another run identity (code, threads, ...) or torn, it is deleted and None returned,
    so the piece is trained again; ``remove_checkpoint`` removes every kept part."""
    frame = pd.DataFrame({"run": [1, 2], "loss": np.array([0.25, 1 / 3], dtype=np.float32), "tag": ["a", "b"]})
    key = {"sweep": {"n": [4, 8], "lrs": (1e-3,)}, "n": 4, "runs": [[1, 1e-3, "vanilla"]]}
    monkeypatch.setenv(IDENTITY_ENV, '{"code": "c1", "threads": 1}')
    assert load_part(tmp_path, key) is None  # nothing kept yet
    path = save_part(tmp_path, key, (frame, frame.iloc[:0]))
    assert path.parent == tmp_path / PARTS_DIR
    loaded = load_part(tmp_path, json.loads(json.dumps(key)))  # the key as JSON reads it back is the same key
    pd.testing.assert_frame_equal(loaded[0], frame)  # exact: dtypes and values
    assert loaded[1].empty
    assert load_part(tmp_path, {**key, "n": 8}) is None  # another piece
    assert path.exists()

    logged = []
    monkeypatch.setenv(IDENTITY_ENV, '{"code": "c2", "threads": 1}')  # the code changed since
    assert load_part(tmp_path, key, log=logged.append) is None
    assert not path.exists() and "run identity" in logged[0]

    save_part(tmp_path, key, frame)
    path.write_bytes(path.read_bytes()[:20])  # torn
    logged.clear()
    assert load_part(tmp_path, key, log=logged.append) is None
    assert not path.exists() and "unreadable" in logged[0]

    save_part(tmp_path, key, frame)
    (tmp_path / RESUME_FILE).write_bytes(b"ckpt")
    remove_checkpoint(tmp_path)
    assert not any(tmp_path.iterdir())


CLOCK_JOB = """
import os, sys, time
from pathlib import Path
from featlearn.training import JobClock, save_part
work = Path(sys.argv[1])
save_part(work, {"piece": 1}, "kept")  # work a rerun would go on from
JobClock(work, interval=0.05, log=sys.argv[3]).start()
Path(sys.argv[2]).write_text("started")
time.sleep(60)
"""


def test_the_job_clock_gives_a_rerun_the_wall_time_of_the_killed_runs_whose_work_it_keeps(tmp_path, monkeypatch):
    """``JobClock``: a run killed with SIGKILL leaves its seconds so far (to within the clock's interval) beside its kept
    work; a rerun under the same run identity counts them and logs them in the line the benchmark reader parses. Without
    kept work, under another identity or with a torn clock file the earlier time is none; ``close`` removes the file."""
    import signal
    import time

    ident = '{"code": "c1", "threads": 1}'
    monkeypatch.setenv(IDENTITY_ENV, ident)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("FEATLEARN_")}, IDENTITY_ENV: ident,
           "PYTHONPATH": str(SRC)}
    work, started, log = tmp_path / "work", tmp_path / "started", tmp_path / "job.log"
    log.write_text("the job's log\n")
    proc = subprocess.Popen([sys.executable, "-c", CLOCK_JOB, str(work), str(started), str(log)], env=env)
    deadline = time.monotonic() + 120
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(1.0)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed = json.loads((work / CLOCK_FILE).read_text())
    assert has_kept_work(work) and killed["runs"] == 1
    assert (work / "log.txt").read_text() == "the job's log\n"  # copied with the clock: Snakemake deletes the log
    if sys.platform.startswith("linux"):  # its resident memory, read at each rewrite: a Python with torch imported
        assert 20 < killed["rss_mb"] < 4000

    clock = JobClock(work)
    assert clock.earlier_runs == 1 and 0.9 <= clock.earlier_s <= 30  # the second it ran, less at most one interval
    m = EARLIER_LINE.match(clock.line())
    assert m and float(m["s"]) == pytest.approx(clock.earlier_s, abs=0.05) and m["runs"] == "1"
    if sys.platform.startswith("linux"):
        assert f"the last one's resident memory reached at least {killed['rss_mb']:,.0f} MiB of this machine's" in clock.line()
        assert "out-of-memory" not in clock.line()
    clock.start()
    time.sleep(0.1)
    clock.stop()  # stopped after a failure: the file stays, now counting both runs
    saved = json.loads((work / CLOCK_FILE).read_text())
    assert saved["runs"] == 2 and saved["seconds"] >= clock.earlier_s + 0.1
    assert JobClock(work).earlier_runs == 2

    monkeypatch.setenv(IDENTITY_ENV, '{"code": "c2", "threads": 1}')  # the code changed: its work is not resumed
    assert JobClock(work).earlier_s == 0.0 and JobClock(work).line() is None
    monkeypatch.setenv(IDENTITY_ENV, ident)
    (work / CLOCK_FILE).write_text('{"seconds": 3')  # torn
    assert JobClock(work).earlier_runs == 0
    (work / CLOCK_FILE).write_text(json.dumps(saved))
    remove_checkpoint(work)  # the kept work is gone: a rerun starts afresh, and so does its clock
    assert not has_kept_work(work) and JobClock(work).earlier_runs == 0
    done = JobClock(work).start()
    done.close()
    assert not (work / CLOCK_FILE).exists()


# A compute job of three sittings: each logs two lines (stdout and stderr) and keeps a piece of work; the first two then
# fail (as a killed one), the third writes its output.
SITTINGS_JOB = """
import sys
from pathlib import Path
from featlearn.training import save_part

def job(settings, inputs, outputs, ctx):
    parts = Path(ctx.work_dir, "parts")
    n = 1 + (len(list(parts.glob("*.pt"))) if parts.is_dir() else 0)
    print(f"sitting {n}: on stdout", flush=True)
    print(f"sitting {n}: on stderr", file=sys.stderr, flush=True)
    save_part(ctx.work_dir, {"sitting": n}, n)
    if n < 3:
        raise RuntimeError(f"sitting {n} stops here")
    Path(outputs["out"]).write_text("done")
"""


def test_a_rerun_writes_the_killed_runs_log_into_its_own_once_each_and_in_order(tmp_path):
    """Snakemake deletes a job's log before it runs the job again, so the job clock keeps a copy of the log with the
    kept work and a rerun writes it into its own log, after its line of the earlier runs: each earlier run's lines
    once, prefixed, in order, however many runs came before. The benchmark reader still reads the rerun's own line of
    the earlier runs, and the copy goes with the kept work once the workflow accepts the outputs."""
    from featlearn.training import EARLIER_LOG_END, EARLIER_LOG_PREFIX, EARLIER_LOG_START, LOG_FILE

    (tmp_path / "sittings_job.py").write_text(SITTINGS_JOB)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FEATLEARN_")}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), str(tmp_path)])
    work, out, log = tmp_path / "work", tmp_path / "out.txt", tmp_path / "job.log"
    cmd = [sys.executable, "-m", "featlearn", "compute", "--run", "sittings_job:job", "--settings", "{}",
           "--outputs", json.dumps({"out": str(out)}), "--threads", "1", "--device", "cpu", f"--work-dir={work}"]
    codes = []
    for _ in range(3):
        log.unlink(missing_ok=True)  # as Snakemake does before it runs the job again
        with open(log, "w") as fh:  # the rule's `> {log} 2>&1`
            codes.append(subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, timeout=300).returncode)
    assert codes[:2] != [0, 0] and codes[2] == 0 and out.read_text() == "done"
    lines = log.read_text().splitlines()
    earlier = [line for line in lines if EARLIER_LINE.match(line)]
    assert len(earlier) == 1 and EARLIER_LINE.match(earlier[0])["runs"] == "2"  # the reader's line: this run's
    assert lines.count(EARLIER_LOG_START) == 1 and lines.count(EARLIER_LOG_END) == 1
    block = lines[lines.index(EARLIER_LOG_START) + 1:lines.index(EARLIER_LOG_END)]
    assert all(line.startswith(EARLIER_LOG_PREFIX) for line in block)
    own = [line.removeprefix(EARLIER_LOG_PREFIX) for line in block if "sitting" in line and ": on " in line]
    assert own == ["sitting 1: on stdout", "sitting 1: on stderr", "sitting 2: on stdout", "sitting 2: on stderr"]
    assert sum("earlier runs of this job" in line and "in 1 run," in line for line in block) == 1  # run 2's own line
    after = lines[lines.index(EARLIER_LOG_END) + 1:]
    assert after[:2] == ["sitting 3: on stdout", "sitting 3: on stderr"]
    assert (work / LOG_FILE).is_file() and "sitting 3: on stderr" in (work / LOG_FILE).read_text()
    assert sweep_finished(tmp_path) == [work] and not work.exists()


def test_the_log_copy_is_cut_to_its_last_lines_and_a_rerun_without_one_writes_no_block(tmp_path, monkeypatch):
    """A log over LOG_KEEP_BYTES is kept from the first whole line of its last LOG_KEEP_BYTES (the clock copies it at
    each rewrite: a SIGKILL loses at most an interval of it, as the killed clock's test shows). A rerun without a copy
    (a clock of before the copy existed) writes no block."""
    import featlearn.training as training

    monkeypatch.setenv(IDENTITY_ENV, '{"code": "c1"}')
    work, log = tmp_path / "work", tmp_path / "job.log"
    save_part(work, {"piece": 1}, "kept")
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    monkeypatch.setattr(training, "LOG_KEEP_BYTES", 64)
    clock = JobClock(work, interval=3600, log=log).start()
    clock.stop()
    kept = (work / training.LOG_FILE).read_text()
    assert len(kept) <= 64 and kept.startswith("line ") and kept.endswith("line 99\n")
    rerun = JobClock(work)
    assert rerun.earlier_log_lines()[0] == training.EARLIER_LOG_START
    assert rerun.earlier_log_lines()[-2:] == ["| line 99", training.EARLIER_LOG_END]
    (work / training.LOG_FILE).unlink()
    assert JobClock(work).earlier_runs == 1 and JobClock(work).earlier_log_lines() == []


def test_a_rerun_after_a_run_that_grew_near_the_machines_memory_names_the_out_of_memory_killer(tmp_path, monkeypatch):
    """A SIGKILL from the kernel's out-of-memory killer leaves no line in the job's log, so the rerun's line says how
    large the killed run had grown, of how much: near the machine's memory (NEAR_MACHINE_MEMORY of it) it names the
    likely cause. A clock file of before this reading (no rss_mb) gives the line as it was."""
    import featlearn.training as training

    monkeypatch.setenv(IDENTITY_ENV, '{"code": "c1"}')
    monkeypatch.setattr(training, "machine_mb", lambda: 24_000.0)
    work = tmp_path / "work"
    save_part(work, {"piece": 1}, "kept")
    base = {"seconds": 600.0, "runs": 1, "identity": {"code": "c1"}}
    lines = {}
    for name, extra in (("near", {"rss_mb": 19_000.0}), ("small", {"rss_mb": 2_000.0}), ("older", {})):
        (work / CLOCK_FILE).write_text(json.dumps({**base, **extra}))
        lines[name] = JobClock(work).line()
        assert EARLIER_LINE.match(lines[name])  # the benchmark reader's seconds, whatever follows
    assert lines["near"].endswith("resident memory reached at least 19,000 MiB of this machine's 24,000 MiB (near all "
                                  "of it: the kernel's out-of-memory killer may have ended it)")
    assert lines["small"].endswith("resident memory reached at least 2,000 MiB of this machine's 24,000 MiB")
    assert lines["older"].endswith("killed (their kept work is in " + str(work) + ")")

    clock = JobClock(work, interval=3600).start()  # this run's largest reading is what the file keeps
    monkeypatch.setattr(training, "resident_mb", lambda: 5_000.0)
    clock._write()
    monkeypatch.setattr(training, "resident_mb", lambda: 3_000.0)
    clock.stop()
    assert json.loads((work / CLOCK_FILE).read_text())["rss_mb"] == 5_000.0


def test_a_job_clock_that_cannot_write_warns_and_lets_the_job_run(tmp_path, capsys):
    blocked = tmp_path / "a_file"
    blocked.write_text("not a folder")
    clock = JobClock(blocked / "resume").start()  # its folder cannot be made: a warning, no exception, no thread
    assert "cannot write the job clock" in capsys.readouterr().err
    assert clock.seconds() >= 0 and clock.line() is None
    clock.close()
    assert blocked.read_text() == "not a folder"


def test_derived_seeds_are_the_stride_formula_and_never_collide():
    assert derived_seed(3, 17) == 3 * 1_000_003 + 17
    seeds = {derived_seed(s, k) for s in range(50) for k in (11, 13, 17, 23, 29, 37, 41)}
    assert len(seeds) == 50 * 7
    assert derived_seed(1, 0) - derived_seed(0, 0) == SEED_STRIDE


def test_write_csv_round_trips_float32_and_keeps_ten_digits(tmp_path):
    x = torch.randn(1000, generator=torch.Generator().manual_seed(0)).numpy().astype(np.float32)
    write_csv(pd.DataFrame({"x": x, "y": [np.pi] * len(x)}), tmp_path / "t.csv")
    back = pd.read_csv(tmp_path / "t.csv")
    assert (back["x"].to_numpy().astype(np.float32) == x).all()
    assert back["y"].iloc[0] == pytest.approx(np.pi, rel=1e-9)



def test_a_checkpoint_is_read_onto_the_cpu_whatever_the_device(tmp_path, monkeypatch):
    """The random-number states in a checkpoint must come back as CPU byte tensors: a GPU run that mapped its
    checkpoint onto its device failed to resume ("RNG state must be a torch.ByteTensor", seen on an H200).
    load_state_dict puts the model's and the optimiser's tensors on their device."""
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path, die_at=8)
    seen = []

    class Loaded(BaseException):  # (not an Exception: an unreadable checkpoint is caught and discarded)
        pass

    def load(*args, **kwargs):  # records where the checkpoint would be mapped, then stops the (CUDA) run
        seen.append(kwargs.get("map_location"))
        raise Loaded

    monkeypatch.setattr(torch, "load", load)
    model = torch.nn.Linear(3, 1)
    with pytest.raises(Loaded):
        resumable_training(model, torch.optim.SGD(model.parameters(), lr=0.1), total=12, step=lambda i: 0.0,
                           record=lambda i, loss: None, eval_every=5, checkpoint_every=3, work_dir=tmp_path,
                           settings={"lr": 0.1}, device="cuda", log=lambda m: None)
    assert [str(m) for m in seen] == ["cpu"]


def test_the_workflow_end_removes_only_work_whose_outputs_are_all_there(tmp_path):
    """``sweep_finished``: a finished job's kept work goes once each output it listed is there at its size; an output
    deleted (the job was failed), changed in size or a torn marker keeps it; a folder with other files stays."""
    def finished(name, outputs):
        work = tmp_path / f"{name}.resume"
        work.mkdir()
        (work / RESUME_FILE).write_bytes(b"state")
        (work / CLOCK_FILE).write_text("{}")
        (work / PARTS_DIR).mkdir()
        (work / PARTS_DIR / "a.pt").write_bytes(b"part")
        mark_finished(work, outputs)
        return work

    tables = tmp_path / "tables"
    tables.mkdir()
    for name in ("a", "b", "c", "d"):
        (tables / f"{name}.csv").write_text("x\n1\n")
    (tmp_path / "figs").mkdir()
    ok = finished("ok", {"t": str(tables / "a.csv"), "more": [str(tables / "b.csv")], "dir": str(tmp_path / "figs")})
    gone = finished("gone", {"t": str(tables / "c.csv")})
    (tables / "c.csv").unlink()
    grown = finished("grown", {"t": str(tables / "d.csv")})
    (tables / "d.csv").write_text("x\n1\n2\n")
    torn = finished("torn", {"t": str(tables / "a.csv")})
    (torn / FINISHED_FILE).write_text('{"outputs": {')
    other = finished("other", {"t": str(tables / "a.csv")})
    (other / "notes.txt").write_text("the user's")
    assert sweep_finished(tmp_path) == [ok, other]
    assert not ok.exists() and {p.name for p in other.iterdir()} == {"notes.txt"}
    for kept in (gone, grown, torn):
        assert (kept / RESUME_FILE).exists() and (kept / PARTS_DIR / "a.pt").exists() and (kept / FINISHED_FILE).exists()
