"""``python -m featlearn status``: the training jobs with kept work under a results folder, read from their resume
folders (clock, checkpoint, finished pieces, log copy) whether they run now or were killed."""

from __future__ import annotations

import json
import os
import time

from featlearn.keptwork import CLOCK_FILE, FINISHED_FILE, LOG_FILE, PARTS_DIR, RESUME_FILE
from featlearn.pipeline import status as S
from featlearn.pipeline.cli import main


def _folder(root, name, clock=None, age_s=0.0, log=None, resume=False, parts=0, finished=False):
    folder = root / name
    folder.mkdir(parents=True)
    if resume:
        (folder / RESUME_FILE).write_bytes(b"ckpt")
    for i in range(parts):
        (folder / PARTS_DIR).mkdir(exist_ok=True)
        (folder / PARTS_DIR / f"{i:04d}.pt").write_bytes(b"part")
    if log is not None:
        (folder / LOG_FILE).write_text(log)
    if finished:
        (folder / FINISHED_FILE).write_text("{}")
    if clock is not None:
        (folder / CLOCK_FILE).write_text(clock if isinstance(clock, str) else json.dumps(clock))
        stamp = time.time() - age_s
        os.utime(folder / CLOCK_FILE, (stamp, stamp))
    return folder


def test_each_folder_is_running_stopped_or_finished_with_its_time_memory_pieces_and_last_progress_line(tmp_path):
    root = tmp_path / "results"
    clock = {"seconds": 7200.0, "runs": 3, "identity": {}, "rss_mb": 2048.0}
    log = ("featlearn: device cpu\n[lm] progress: 100 steps in 60s, 1.67 steps/s, about 2 h left\n"
           "[lm] checkpoint at step 120, 10.0 min after the last one\n")
    _folder(root, "scan_snap/lm/a.resume", clock, age_s=5, log=log, resume=True)
    _folder(root, "templates/sweeps/b.resume", clock, age_s=3 * 3600, parts=3,
            log="templates grid 2c: a | b\nresuming: [templates] ...\n")
    _folder(root, "joma/c.resume", {"seconds": 4.0, "runs": 1, "identity": {}}, age_s=600)
    _folder(root, "features/d.resume", clock, age_s=10, resume=True, finished=True)
    _folder(root, "features/e.resume", '{"seconds": 3', age_s=600, parts=1)  # torn clock
    _folder(root, "features/f.resume", parts=2)  # a run of before the job clock: no clock, no log
    (root / "figures").mkdir()  # no kept work: not listed

    jobs = {j.folder.name: j for j in S.kept_jobs(root)}
    assert sorted(jobs) == ["a.resume", "b.resume", "c.resume", "d.resume", "e.resume", "f.resume"]
    a, b, c, d, e, f = (jobs[f"{x}.resume"] for x in "abcdef")
    assert (a.state, a.seconds, a.runs, a.rss_mb, a.checkpoint, a.parts) == ("running", 7200.0, 3, 2048.0, True, 0)
    assert a.last_line == "[lm] progress: 100 steps in 60s, 1.67 steps/s, about 2 h left"  # the last progress line
    assert (b.state, b.parts, b.checkpoint) == ("stopped", 3, False) and b.since_s > 3 * 3600 - 60
    assert b.last_line == "resuming: [templates] ..."  # no progress line: the last line
    assert c.state == "stopped" and c.last_line is None
    assert d.state == "outputs written"
    assert (e.seconds, e.runs, e.state) == (None, None, "stopped")
    assert (f.seconds, f.state, f.parts) == (None, "stopped", 2)

    text = S.report(list(jobs.values()), root)
    assert text.startswith(f"6 training jobs with kept work under {root}: 1 running, 4 stopped.")
    rows = {line.split("`")[1].rsplit("/", 1)[-1]: line for line in text.splitlines() if line.startswith("| `")}
    assert "running (clock" in rows["a.resume"] and "| 2 h | 3 | 2.0 GiB | checkpoint |" in rows["a.resume"]
    assert "stopped 3 h ago: the next run resumes" in rows["b.resume"] and "3 pieces" in rows["b.resume"]
    assert "a \\| b" not in rows["b.resume"]  # its last line, not this one; a line's own bars are escaped
    assert "before its first checkpoint: the next run starts over" in rows["c.resume"]
    assert "outputs written" in rows["d.resume"]
    assert "| ? | ? | ? |" in rows["e.resume"]


def test_the_command_prints_the_table_or_says_that_nothing_is_kept(tmp_path, capsys):
    root = tmp_path / "results"
    root.mkdir()
    main(["status", "--results", str(root)])
    assert capsys.readouterr().out.strip() == (f"No training job has kept work under {root}: nothing runs, and nothing "
                                               "waits to resume.")
    _folder(root, "joma/x.resume", {"seconds": 100.0, "runs": 1, "identity": {}}, log="a | b progress: 1 step\n",
            resume=True)
    main(["status", "--results", str(root)])
    out = capsys.readouterr().out
    assert out.startswith(f"1 training job with kept work under {root}: 1 running, 0 stopped.")
    assert "a \\| b progress: 1 step" in out
