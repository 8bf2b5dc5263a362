"""Which compute jobs each figure needs, read from the registries (stdlib only; the Snakefile calls it).

A figure's inputs are concrete paths; each path that one of a job's output patterns matches names that job
with its wildcards, and the job's own inputs are followed the same way. The result lets the per-paper pages
and ``results/benchmarks.md`` attribute each job's ``benchmark:`` file to the figures that use it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

from featlearn.pipeline.registry import Figure, Job, Paths

_WILDCARD = re.compile(r"\{(\w+)(?:,([^{}]*))?\}")


class Wildcards(dict):
    """Wildcard values with the attribute access of Snakemake's own object (``wc.dataset``)."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def pattern_regex(pattern: str, constraints: Mapping[str, str]) -> re.Pattern:
    """A compiled full-match regex of a Snakemake file pattern; a wildcard without a constraint matches
    ``.+`` as in Snakemake; a wildcard used twice must match the same text twice."""
    out, pos, seen = [], 0, set()
    for m in _WILDCARD.finditer(pattern):
        out.append(re.escape(pattern[pos:m.start()]))
        name = m.group(1)
        if name in seen:
            out.append(f"(?P={name})")
        else:
            seen.add(name)
            out.append(f"(?P<{name}>{m.group(2) or constraints.get(name, '.+')})")
        pos = m.end()
    out.append(re.escape(pattern[pos:]))
    return re.compile("".join(out))


@dataclass(frozen=True)
class ConcreteJob:
    """One job of the DAG: its rule, its wildcards and where its benchmark file is."""

    rule: str
    paper: str
    wildcards: tuple[tuple[str, str], ...]
    benchmark: str

    @property
    def label(self) -> str:
        wc = ",".join(f"{k}={v}" for k, v in self.wildcards)
        return f"{self.rule}[{wc}]" if wc else self.rule


def _paths(spec) -> list[str]:
    if isinstance(spec, str):
        return [spec]
    return [p for item in spec for p in _paths(item)] if isinstance(spec, (list, tuple)) else []


class JobIndex:
    """Finds the job (and its wildcards) that writes a concrete path."""

    def __init__(self, jobs: Iterable[Job], paths: Paths):
        self.paths = paths
        self._jobs = [
            (job, [pattern_regex(p, job.wildcards) for out in job.outputs.values() for p in _paths(out)])
            for job in jobs
        ]

    def producer(self, path: str) -> tuple[Job, Wildcards] | None:
        for job, regexes in self._jobs:
            for rx in regexes:
                m = rx.fullmatch(path)
                if m:
                    return job, Wildcards(m.groupdict())
        return None

    def inputs(self, job: Job, wildcards: Wildcards) -> list[str]:
        spec = job.inputs(wildcards) if callable(job.inputs) else job.inputs
        out = []
        for value in spec.values():
            value = value(wildcards) if callable(value) else value
            out += [p.format(**wildcards) if "{" in p else p for p in _paths(value)]
        return out

    def concrete(self, job: Job, wildcards: Wildcards) -> ConcreteJob:
        stem = job.stem.format(**wildcards) if "{" in job.stem else job.stem
        return ConcreteJob(job.name, job.paper, tuple(sorted(wildcards.items())), self.paths.benchmark(job.paper, stem))

    def walk(self, files: Iterable[str], inputs_of: Callable[[Job, Wildcards], list[str]] | None = None):
        """Breadth first from ``files``: (job, wildcards, inputs) of the job that makes each file reached (each
        file once, so a job with several outputs may come more than once), its inputs followed in turn.
        ``inputs_of(job, wildcards)`` gives a job's inputs (default :meth:`inputs`)."""
        inputs_of = inputs_of or self.inputs
        todo, seen = list(files), set()
        while todo:
            path = todo.pop(0)
            if path in seen:
                continue
            seen.add(path)
            hit = self.producer(path)
            if hit is None:
                continue
            job, wc = hit
            inputs = inputs_of(job, wc)
            todo += inputs
            yield job, wc, inputs

    def upstream(self, files: Iterable[str]) -> list[ConcreteJob]:
        """Every job the files depend on, transitively, in the order first reached (no duplicates)."""
        found: dict[ConcreteJob, None] = {}
        for job, wc, _ in self.walk(files):
            found.setdefault(self.concrete(job, wc), None)
        return list(found)


def figure_jobs(jobs: Iterable[Job], figures: Iterable[Figure], paths: Paths) -> dict[str, list[ConcreteJob]]:
    """Figure rule -> the compute jobs it needs (its own inputs' producers and theirs)."""
    index = JobIndex(jobs, paths)
    return {fig.rule: index.upstream(p for v in fig.inputs.values() for p in _paths(v)) for fig in figures}


def files_of(spec) -> list[str]:
    """The paths of a named input (one path or a nested list); callables and other values give none."""
    return _paths(spec)
