"""Committed wall times of the CPU jobs that have no cost model, for an estimate on a machine that has not run them.

The estimate (:mod:`featlearn.pipeline.estimate`) times a job without a cost model (a data preparation, a theory
or simulation job, the templates checks, the GPT-2 tokenisation) by its Snakemake benchmark file, and at the paper
scale by the committed paper-scale evidence. A fresh machine (a lent GPU with an empty results folder) has neither
for the data jobs and a few others, so its estimate left them without a time. This module keeps one measured wall
time per such job in ``benchmarks/reference/cpu_jobs.json``, each with the settings it ran with and where it ran
(date, commit, scale, CPU model and count): the estimate uses an entry only for a CPU job whose settings are the
same (the setting ``scale`` left out, as in ``same_at_scale``), and says where the time comes from.

    python benchmarks/reference_jobs.py targets [--configfile ...]   # the files that make those jobs run
    python benchmarks/reference_jobs.py write --results <folder> [--configfile ...]   # add their times
"""

from __future__ import annotations

import json
import os
from pathlib import Path

REFERENCE_FILE = Path("benchmarks") / "reference" / "cpu_jobs.json"


def settings_key(settings) -> str:
    """Canonical JSON of a job's settings without ``scale`` (which only labels what ``templates_checks`` writes)."""
    if isinstance(settings, dict):
        settings = {k: v for k, v in settings.items() if k != "scale"}
    return json.dumps(settings, sort_keys=True, default=str)


def unmodelled_cpu(nodes: list) -> list:
    """The CPU jobs among ``nodes`` (:class:`featlearn.pipeline.estimate.Node`) whose record names no cost model."""
    return [n for n in nodes if n.cost_model is None and not n.gpu]


def read_reference(path: str | os.PathLike) -> dict[tuple[str, str], dict]:
    """The entries of a reference file by job label and settings (:func:`settings_key`: the same job at two scales
    with different settings has two); empty when the file is absent. A file that is not a reference
    (bad JSON, no ``jobs`` list, an entry without a label or a positive wall time) is an error naming the file."""
    p = Path(path)
    if not p.is_file():
        return {}
    try:
        data = json.loads(p.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{p}: not a reference of job times (bad JSON: {exc})") from exc
    jobs = data.get("jobs") if isinstance(data, dict) else None
    if not isinstance(jobs, list):
        raise ValueError(f"{p}: not a reference of job times (no 'jobs' list)")
    out = {}
    for i, e in enumerate(jobs):
        wall = e.get("wall_s") if isinstance(e, dict) else None
        if not isinstance(e, dict) or not isinstance(e.get("label"), str) or not isinstance(wall, (int, float)) \
                or not wall > 0 or "settings" not in e:
            raise ValueError(f"{p}: entry {i} needs a 'label', its 'settings' and a positive 'wall_s'")
        out[(e["label"], settings_key(e["settings"]))] = e
    return out


def where(entry: dict) -> str:
    """Where an entry was measured, for the estimate's source column."""
    cpu = f" ({entry['host_cpu']})" if entry.get("host_cpu") else ""
    return (f"the committed reference ({REFERENCE_FILE.as_posix()}), a `{entry.get('scale', '?')}`-scale run of "
            f"{str(entry.get('date_utc', '?'))[:10]}, {entry.get('host_cpus', '?')} CPUs{cpu}")


def reference_seconds(node, entries: dict[tuple[str, str], dict]) -> tuple[float, str] | None:
    """(wall seconds, where) of a CPU job without a cost model from the reference, when it holds the job with the
    same settings; None otherwise (a GPU job's time is the device's, a modelled job has its probes)."""
    e = entries.get((node.label, settings_key(node.settings)))
    if e is None or node.gpu or node.cost_model is not None:
        return None
    return float(e["wall_s"]), where(e)


def entries_from_run(nodes: list, results: str | os.PathLike) -> list[dict]:
    """Reference entries of the unmodelled CPU jobs among ``nodes`` that the run in ``results`` timed: the wall,
    CPU seconds and peak memory of each benchmark file, with the run record's date, commit, scale and CPU. A job
    whose log says it resumed is left out (its file timed its last run only), as is a run with uncommitted
    changes or without a run record (where it ran could not be said)."""
    from featlearn.pipeline.benchfiles import job_resumed

    record_path = Path(results) / "run.json"
    if not record_path.is_file():
        raise ValueError(f"{record_path}: no run record; make the run with snakemake (rule run_record)")
    record = json.loads(record_path.read_text())
    if record.get("uncommitted_changes"):
        raise ValueError(f"{record_path}: the run had uncommitted changes; a reference is made from a committed state")
    out = []
    for n in unmodelled_cpu(nodes):
        bench = Path(n.benchmark)
        if not bench.is_file() or job_resumed(n.benchmark):
            continue
        lines = bench.read_text().splitlines()
        try:
            head, row = lines[0].split("\t"), lines[1].split("\t")
            values = dict(zip(head, row))
            wall = float(values["s"])
        except (IndexError, KeyError, ValueError):
            continue
        if not wall > 0:
            continue

        def num(key):
            try:
                return round(float(values[key]), 2)
            except (KeyError, ValueError):
                return None

        out.append({"label": n.label, "rule": n.rule, "settings": json.loads(settings_key(n.settings)),
                    "wall_s": round(wall, 2), "cpu_s": num("cpu_time"), "max_rss_mb": num("max_rss"),
                    "threads": n.threads, "scale": record.get("scale"), "date_utc": record.get("date_utc"),
                    "commit": str(record.get("commit", ""))[:12], "host_cpu": record.get("host_cpu"),
                    "host_cpus": record.get("host_cpus")})
    return out


def write_reference(path: str | os.PathLike, new: list[dict]) -> dict:
    """Merge ``new`` entries into the reference file at ``path`` (an entry replaces the one of the same label and
    settings) and write it, sorted by label; returns what was written."""
    entries = read_reference(path)
    entries.update({(e["label"], settings_key(e["settings"])): e for e in new})
    data = {"about": "wall times of CPU jobs without a cost model, for the estimate on a machine that has not run "
                     "them (featlearn.pipeline.reference; docs/estimate.md)",
            "jobs": [entries[k] for k in sorted(entries)]}
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(data, indent=1) + "\n")
    return data
