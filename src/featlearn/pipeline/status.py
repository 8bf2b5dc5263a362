"""``python -m featlearn status``: the training jobs that have kept work under a results folder, and how far each has
come: running or stopped, the wall time of all its runs so far, the memory it reached, the pieces it has finished,
and its last progress line.

A paper-scale run goes over several sittings (a scheduler's time limits, a laptop's nights): its trainings keep
their checkpoints and a job clock in their resume folders (:mod:`featlearn.keptwork`), and the clock keeps a copy of
the job's log there, so this reads everything from those folders, whether the job runs now or was killed. No torch,
no Snakemake: it takes a second on a login node.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from featlearn.keptwork import CLOCK_FILE, FINISHED_FILE, LOG_FILE, PART_SUFFIX, PARTS_DIR, RESUME_FILE
from featlearn.pipeline.estimate import duration

# The clock rewrites its file every 30 s (featlearn.training.JobClock): one rewritten within this many seconds belongs
# to a job that runs now.
RUNNING_WITHIN_S = 90.0


@dataclass
class KeptJob:
    """One resume folder and what its files say."""

    folder: Path
    state: str  # "running", "stopped" (killed or failed: its next run resumes) or "outputs written"
    seconds: float | None  # wall time of all its runs (the clock's), None without a clock
    runs: int | None
    rss_mb: float | None  # the largest resident memory its last run's clock read
    parts: int  # finished pieces kept (a sweep's groups, a classifier's runs; a group's checkpoint counts too)
    checkpoint: bool  # a training's resume checkpoint
    since_s: float  # seconds since the folder's clock (else its newest file) was written
    last_line: str | None  # the last progress line of its log copy (else its last line)


def _last_line(text: str) -> str | None:
    lines = [line for line in text.splitlines() if line.strip()]
    progress = [line for line in lines if "progress:" in line]
    return (progress or lines or [None])[-1]


def read_folder(folder: Path, now: float | None = None) -> KeptJob:
    """What the kept work in ``folder`` says (any file may be missing or torn: that field is then unknown)."""
    now = time.time() if now is None else now
    clock_path = folder / CLOCK_FILE
    seconds = runs = rss = None
    try:
        clock = json.loads(clock_path.read_text())
        seconds, runs = float(clock["seconds"]), int(clock["runs"])
        rss = float(clock["rss_mb"]) if isinstance(clock.get("rss_mb"), (int, float)) else None
    except (OSError, ValueError, KeyError, TypeError):
        pass
    files = [p for p in (clock_path, folder / RESUME_FILE, *(folder / PARTS_DIR).glob(f"*{PART_SUFFIX}")) if p.is_file()]
    written = max((p.stat().st_mtime for p in files), default=folder.stat().st_mtime)
    since = max(0.0, now - (clock_path.stat().st_mtime if clock_path.is_file() else written))
    if (folder / FINISHED_FILE).is_file():
        state = "outputs written"
    elif clock_path.is_file() and since <= RUNNING_WITHIN_S:
        state = "running"
    else:
        state = "stopped"
    try:
        last = _last_line((folder / LOG_FILE).read_text(errors="replace"))
    except OSError:
        last = None
    parts = len(list((folder / PARTS_DIR).glob(f"*{PART_SUFFIX}")))
    return KeptJob(folder, state, seconds, runs, rss, parts, (folder / RESUME_FILE).is_file(), since, last)


def kept_jobs(results: str | os.PathLike, now: float | None = None) -> list[KeptJob]:
    """Every resume folder under ``results`` with kept work (a clock, a checkpoint or finished pieces), by path."""
    root = Path(results)
    folders = {p.parent for p in root.glob(f"**/{CLOCK_FILE}")} | {p.parent for p in root.glob(f"**/{RESUME_FILE}")}
    folders |= {p.parent.parent for p in root.glob(f"**/{PARTS_DIR}/*{PART_SUFFIX}")}
    return [read_folder(folder, now) for folder in sorted(folders)]


def report(jobs: list[KeptJob], results: str | os.PathLike) -> str:
    """The table the command prints (Markdown)."""
    if not jobs:
        return f"No training job has kept work under {results}: nothing runs, and nothing waits to resume."
    rows = ["| job (resume folder) | state | wall time, all runs | runs | memory | kept | last progress line |",
            "|---|---|---|---|---|---|---|"]
    for job in jobs:
        if job.state == "running":
            state = f"running (clock {job.since_s:.0f} s ago)"
        elif job.state == "stopped" and (job.checkpoint or job.parts):
            state = f"stopped {duration(job.since_s)} ago: the next run resumes"
        elif job.state == "stopped":
            state = f"stopped {duration(job.since_s)} ago, before its first checkpoint: the next run starts over"
        else:
            state = "outputs written: removed when the workflow ends"
        kept = ", ".join(filter(None, ["checkpoint" if job.checkpoint else "",
                                       f"{job.parts} piece{'s' if job.parts != 1 else ''}" if job.parts else ""]))
        memory = "?" if job.rss_mb is None else f"{job.rss_mb / 1024:.1f} GiB"
        line = (job.last_line or "").replace("|", "\\|")
        wall = "?" if job.seconds is None else duration(job.seconds)
        rows.append(f"| `{job.folder}` | {state} | {wall} | {job.runs or '?'} | {memory} | {kept or '-'} | {line} |")
    running = sum(j.state == "running" for j in jobs)
    stopped = sum(j.state == "stopped" for j in jobs)
    jobs_word = "training job" if len(jobs) == 1 else "training jobs"
    return "\n".join([f"{len(jobs)} {jobs_word} with kept work under {results}: {running} running, {stopped} stopped.",
                      "", *rows])


def _main(args) -> None:
    print(report(kept_jobs(args.results), args.results))


def register(sub) -> None:
    p = sub.add_parser("status", help="the training jobs with kept work (checkpoints) under a results folder: running "
                                      "or stopped, wall time so far, last progress line")
    p.add_argument("--results", default="results", help="the run's results folder (default: results)")
    p.set_defaults(func=_main)
