"""What a job's own files say of it: Snakemake's ``benchmark:`` file (wall and CPU seconds, peak memory), the first
line of its log (the device, torch threads and precision it computed with) and whether it resumed from an earlier,
killed run of itself (then its benchmark file timed that last run only). Read by the results pages, the compute
table, the paper-scale evidence and the estimate."""

from __future__ import annotations

import csv
import math
import os
import re
from pathlib import Path

from featlearn.pipeline.jobclient import read_logged_usage, read_usage


def read_benchmark(path: str | os.PathLike) -> dict | None:
    """Wall seconds, CPU seconds and peak resident memory (MB) of one Snakemake benchmark file (the mean
    over its rows, as ``benchmark: repeat(...)`` writes one row per repeat), and whether the job ran in the
    job server (``served``); None if it is absent.

    A job run by the job server (:mod:`featlearn.pipeline.jobserver`) left its workers' CPU seconds and peak memory
    beside the benchmark file, which saw only the client processes: their CPU seconds are added and the
    peak is the larger of the two. Any other job whose log ends with its own usage line
    (:func:`featlearn.pipeline.jobclient.own_usage_line`) takes its CPU seconds and peak from there where they are
    larger than the file's, which samples them (every 30 s after the first 15) and so misses the end of the job."""
    path = Path(path)
    if not path.is_file():
        return None
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    if not rows:
        return None

    def mean(key):
        vals = []
        for r in rows:
            try:
                vals.append(float(r.get(key, "nan")))
            except ValueError:
                vals.append(math.nan)
        vals = [v for v in vals if not math.isnan(v)]
        return sum(vals) / len(vals) if vals else math.nan

    result = {"wall_s": mean("s"), "cpu_s": mean("cpu_time"), "max_rss_mb": mean("max_rss"), "served": False}
    wall = 0.0 if math.isnan(result["wall_s"]) else result["wall_s"]
    usage = read_usage(path, path.stat().st_mtime, wall)
    if usage is not None:
        result.update(cpu_s=_sum([result["cpu_s"], usage["cpu_s"]]), max_rss_mb=_max([result["max_rss_mb"], usage["max_rss_mb"]]),
                      served=True)
        return result
    logged = read_logged_usage(_log_path(path), path.stat().st_mtime, wall) if len(rows) == 1 else None
    if logged is not None:  # (a file of repeats times several runs, a log the last one only)
        result.update(cpu_s=_max([result["cpu_s"], logged["cpu_s"]]),
                      max_rss_mb=_max([result["max_rss_mb"], logged["max_rss_mb"]]))
    return result


def _sum(values):
    vals = [v for v in values if not math.isnan(v)]
    return sum(vals) if vals else math.nan


def _max(values):
    vals = [v for v in values if not math.isnan(v)]
    return max(vals) if vals else math.nan


# a job that resumed logs a line whose message starts with "resuming", after its tag if it has one (a language
# model's "[lm fig7_1layer] resuming at step ...", featlearn.training; a templates sweep's finished groups and
# its group in progress, featlearn.templates.sweeps.engine)
RESUMED_LINE = re.compile(r"^(\[[^\]]*\] )?resuming\b")


def _log_path(benchmark: str | os.PathLike) -> Path:
    """The job's log (``results/logs/...``) beside its benchmark file (``results/benchmarks/...``)."""
    return Path(str(benchmark).replace("/benchmarks/", "/logs/", 1)).with_suffix(".log")


def job_resumed(benchmark: str | os.PathLike) -> bool:
    """Whether the job of this benchmark file resumed from an earlier run of itself that was killed (its log says so):
    Snakemake's file then timed the last run only, a lower bound of the job's compute."""
    try:
        with open(_log_path(benchmark), errors="replace") as fh:
            return any(RESUMED_LINE.match(line) for line in fh)
    except OSError:
        return False


# the compute command's line in the log of a rerun after a kill (featlearn.training.JobClock.line)
EARLIER_LINE = re.compile(r"^featlearn: earlier runs of this job: (?P<s>[0-9.]+) s of wall time in (?P<runs>\d+) run")


def job_earlier_wall(benchmark: str | os.PathLike) -> float:
    """Wall seconds of the earlier, killed runs of the job of this benchmark file whose kept work it resumed: 0.0 for
    a job that did not resume (its file timed all of it), NaN for one that resumed without its log giving them (a log
    written before the job clock existed). The job's whole wall time is the file's plus this."""
    try:
        with open(_log_path(benchmark), errors="replace") as fh:
            lines = fh.readlines()
    except OSError:
        return 0.0
    if not any(RESUMED_LINE.match(line) for line in lines):
        return 0.0
    for line in lines:
        m = EARLIER_LINE.match(line.strip())
        if m:
            return float(m["s"])
    return math.nan


JOB_DEVICE_LINE = re.compile(r"^featlearn: device (?P<device>.+?) \(asked: (?P<asked>[^)]*)\); torch threads (?P<threads>\d+)"
                             r"(?:; precision (?P<precision>\w+))?")


def job_device(benchmark: str | os.PathLike) -> dict | None:
    """Where a compute job ran, from the first lines of its log (``results/logs/...`` beside
    ``results/benchmarks/...``, written by ``python -m featlearn compute``); None for a job whose log has no such
    line (figure rules, data jobs, logs of older runs)."""
    try:
        with open(_log_path(benchmark), errors="replace") as fh:
            head = [fh.readline() for _ in range(5)]
    except OSError:
        return None
    for line in head:
        m = JOB_DEVICE_LINE.match(line.strip())
        if m:
            return {k: v for k, v in m.groupdict().items() if v is not None}
    return None
