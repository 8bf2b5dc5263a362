"""Registry records: what a paper computes, draws and checks, declared once and read by Snakemake and Python.

Each paper has one registry module, ``featlearn/<paper>/registry.py``, with a function
``registry(cfg, paths, dataset_on) -> PaperRegistry``. Snakemake turns every :class:`Job` into a compute rule
and every :class:`Figure` into a figure (or table, or claims-only) rule through the two base rules written
once in ``workflow/rules/base_rules.smk``; ``python -m featlearn compute`` and ``python -m featlearn figure`` run
the functions the records name. This module is stdlib only, so that the DAG builds without importing torch.

Paths in records are relative to the repository root (built with :class:`Paths`); inputs and outputs are
always named, never positional.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

# A named input or output: one path, a list of paths, or (inputs only) a function of the wildcards.
PathSpec = Any


@dataclass(frozen=True)
class Paths:
    """Where things go: ``results/<paper>/...`` for tables, ``results/figures/<paper>/...`` for figures."""

    results: str = "results"

    def paper(self, paper: str, *parts: str) -> str:
        return "/".join((self.results, paper, *parts))

    def raw(self, dataset: str, filename: str) -> str:
        return f"{self.results}/data/raw/{dataset}/{filename}"

    def prepared(self, name: str, filename: str) -> str:
        return f"{self.results}/data/prepared/{name}/{filename}"

    def figure(self, paper: str, stem: str, ext: str) -> str:
        return f"{self.results}/figures/{paper}/{stem}.{ext}"

    def log(self, paper: str, stem: str) -> str:
        return f"{self.results}/logs/{paper}/{stem}.log"

    def benchmark(self, paper: str, stem: str) -> str:
        return f"{self.results}/benchmarks/{paper}/{stem}.tsv"


@dataclass(frozen=True)
class Resources:
    """What a compute job asks of the scheduler. ``mem_mb`` and ``runtime`` (minutes) are numbers, or functions
    of the wildcards where a job's size depends on them. ``gpu``: the job can use an accelerator (it then
    runs on the configured ``device`` and asks for a GPU unless that device is ``cpu``); otherwise it runs
    on the CPU whatever the configured device."""

    mem_mb: int | Callable[[Any], int] = 2000
    runtime: int | Callable[[Any], int] = 10
    gpu: bool = False


@dataclass(frozen=True)
class Job:
    """One compute rule: ``python -m featlearn compute --run <run>`` with named inputs and outputs.

    ``run`` names ``module:function``; the function is called as ``function(settings, inputs, outputs, ctx)``
    with the settings parsed from JSON, the named paths, and a :class:`featlearn.pipeline.compute.Context` (device,
    threads, work folder). ``settings`` is a JSON-able dict, or a function of the wildcards returning one.
    ``stem`` names the log and benchmark files (``results/logs/<paper>/<stem>.log``). ``code`` lists package
    files or folders hashed into the rule's code hash on top of the import closure of ``run``
    (:mod:`featlearn.pipeline.imports`), which already covers every module the job may import.

    ``cost`` names the job's cost model as ``module:function`` (the paper's ``cost`` module), which
    ``python -m featlearn estimate`` calls as ``function(node, results)`` to get a
    :class:`featlearn.pipeline.estimate.Cost`; None: the estimate does not model the job.

    ``precision`` is the job's own arithmetic (``fp32``, ``tf32``, ``bf16`` or ``auto``: its config section's ``precision``);
    None: the run's (top-level config key ``precision``). Either counts only for a job that can use a GPU
    (``resources.gpu``); every other job computes in fp32.
    """

    name: str
    paper: str
    run: str
    outputs: Mapping[str, str]
    settings: Any
    stem: str
    code: tuple[str, ...]
    inputs: Mapping[str, PathSpec] | Callable[[Any], Mapping[str, PathSpec]] = field(default_factory=dict)
    threads: int = 1
    resources: Resources = Resources()
    wildcards: Mapping[str, str] = field(default_factory=dict)
    work_dir: str | Callable[[Any], str] | None = None
    cost: str | None = None
    precision: str | None = None

    def settings_json(self, wildcards=None) -> str:
        value = self.settings(wildcards) if callable(self.settings) else self.settings
        return json.dumps(value, sort_keys=True)


FIGURE, TABLE, CHECK = "figure", "table", "check"
TABLE_FORMATS = ("csv", "md")  # what a table is written as; a record may add "tex" (its Table then has LaTeX)


@dataclass(frozen=True)
class Drawing:
    """A further drawing or table that a figure's rule writes beside the record's own, from the same inputs
    and in the same job: Fig. 6 of JoMA is two figures, templates Fig. 6 is a figure and a table.

    ``draw`` names ``module:function`` as :attr:`Figure.draw` does; ``stem`` names its files (``fig6_stable_rank``
    gives ``figures/<paper>/fig6_stable_rank.png``; a table ``fig6`` gives ``<paper>/fig6.csv`` and ``.md``);
    ``label`` is its name in the report (``Fig. 6 (stable rank)``), where it is listed right after the record's
    own drawing, with the record's caption."""

    draw: str
    stem: str
    kind: str = FIGURE
    label: str = ""
    caption: str = ""  # caption file under workflow/report/ (default: the record's)

    def __post_init__(self):
        if self.kind not in (FIGURE, TABLE):
            raise ValueError(f"drawing {self.stem}: a further drawing is a figure or a table, not {self.kind!r}")

    def suffix(self, fig: "Figure") -> str:
        """What tells it from the record's own drawing: ``stable_rank`` (``fig6_stable_rank`` of ``fig6``), or
        its kind when it shares the record's stem (templates Fig. 6's table)."""
        return self.stem[len(fig.stem):].lstrip("_") if self.stem.startswith(fig.stem) and self.stem != fig.stem else self.kind


@dataclass(frozen=True)
class Figure:
    """One figure, table or claims-only check of a paper, and the claims it checks.

    ``draw`` names ``module:function`` with ``function(inputs, cfg)`` returning a matplotlib figure (kind
    ``figure``) or a :class:`featlearn.pipeline.figure.Table` (kind ``table``); ``claims`` names
    ``function(inputs, cfg) -> list[Claim]``. ``cfg`` is ``settings`` plus ``scale``. A ``check`` has claims
    and no drawing. The rule is ``fig_<paper>_<id>``, ``table_<paper>_<id>`` or ``check_<paper>_<id>``.

    One rule writes any number of drawings and tables: the record's own (``draw``) and each :class:`Drawing`
    of ``also``. A table is written in ``table_formats`` (CSV and Markdown; ``tex`` adds a LaTeX file).
    """

    paper: str
    id: str
    inputs: Mapping[str, PathSpec]
    code: tuple[str, ...]
    draw: str | None = None
    claims: str | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)
    kind: str = FIGURE
    # The claim ids the claims function may write (shell-style patterns, e.g. "wiki_freeze_*"); each has a
    # planted-negative and a planted-positive test. Empty: not declared yet.
    claim_ids: tuple[str, ...] = ()
    also: tuple[Drawing, ...] = ()
    table_formats: tuple[str, ...] = TABLE_FORMATS

    def __post_init__(self):
        if self.also and self.kind == CHECK:
            raise ValueError(f"{self.paper} {self.id}: a check draws nothing, so it has no further drawings")
        if set(TABLE_FORMATS) - set(self.table_formats) or set(self.table_formats) - {*TABLE_FORMATS, "tex"}:
            raise ValueError(f"{self.paper} {self.id}: table formats {self.table_formats} (csv and md, and tex if wanted)")
        if self.claim_ids and self.claims is None:
            raise ValueError(f"{self.paper} {self.id}: claim ids declared without a claims function")
        if self.kind not in (FIGURE, TABLE, CHECK):
            raise ValueError(f"{self.paper} {self.id}: unknown kind {self.kind!r}")
        if (self.draw is None) != (self.kind == CHECK):
            raise ValueError(f"{self.paper} {self.id}: a {self.kind} "
                             f"{'has no' if self.kind == CHECK else 'needs a'} draw function")
        if self.kind == CHECK and self.claims is None:
            raise ValueError(f"{self.paper} {self.id}: a check without claims checks nothing")

    @property
    def stem(self) -> str:
        """``fig3``, ``table5`` or the check's id: the name of its files."""
        return {FIGURE: f"fig{self.id}", TABLE: f"table{self.id}", CHECK: self.id}[self.kind]

    @property
    def log_stem(self) -> str:
        """Name of its log file: ``fig3``, ``table5``, ``check_<id>``."""
        return f"check_{self.id}" if self.kind == CHECK else self.stem

    @property
    def rule(self) -> str:
        return {FIGURE: "fig", TABLE: "table", CHECK: "check"}[self.kind] + f"_{self.paper}_{self.id}"

    @property
    def caption(self) -> str:
        """Caption file under workflow/report/."""
        return f"{self.paper}_{self.stem}.rst"

    @property
    def label(self) -> str:
        """How the paper names it: ``Fig. 4``, ``Table 1``; an item without a number (a check, a figure of this
        project such as ``calibration``) by its id."""
        if not self.id[:1].isdigit():
            return f"check {self.id}" if self.kind == CHECK else self.id
        return {FIGURE: f"Fig. {self.id}", TABLE: f"Table {self.id}", CHECK: f"check {self.id}"}[self.kind]

    @property
    def order(self) -> str:
        """Sort key in the paper's own order (see :func:`report_order`)."""
        return report_order(self.kind, self.id)

    def drawings(self) -> list[tuple[str, str, str, str, str]]:
        """Every drawing and table the rule writes, the record's own first: (draw function, kind, file stem,
        report order, report label, caption file)."""
        own = [(self.draw, self.kind, self.stem, self.order, self.label, self.caption)] if self.kind != CHECK else []
        return own + [(d.draw, d.kind, d.stem, f"{self.order}_{d.suffix(self)}",
                       d.label or f"{self.label} ({d.suffix(self).replace('_', ' ')})", d.caption or self.caption)
                      for d in self.also]

    def claims_file(self, paths: Paths) -> str | None:
        return paths.paper(self.paper, "claims", f"{self.stem if self.kind == TABLE else self.id}.csv") if self.claims else None

    def settings_json(self) -> str:
        return json.dumps(dict(self.settings), sort_keys=True)

    def claim_ids_json(self) -> str:
        return json.dumps(list(self.claim_ids))

    @classmethod
    def of(cls, paper: str, fig_id: str, module: str, inputs: Mapping[str, PathSpec], code: tuple[str, ...], *,
           claims: bool = True, settings: Mapping[str, Any] | None = None, kind: str = FIGURE, name: str | None = None,
           **kw) -> "Figure":
        """The record whose functions follow the naming convention: ``draw_<name>`` and ``claims_<name>`` of
        ``module`` (``name`` defaults to the id)."""
        name = name or fig_id
        return cls(
            paper=paper,
            id=fig_id,
            inputs=inputs,
            code=code,
            draw=None if kind == CHECK else f"{module}:draw_{name}",
            claims=f"{module}:claims_{name}" if claims else None,
            settings=settings or {},
            kind=kind,
            **kw,
        )


def report_order(kind: str, fig_id: str) -> str:
    """A key that sorts a paper's items as the paper numbers them, also as plain text (the report sorts its
    labels lexicographically): figures by number (``002c`` < ``006`` < ``006_stable_rank`` < ``010``), then
    tables (``T001``), then items without a number (``X`` + id: extensions, checks)."""
    digits = len(fig_id) - len(fig_id.lstrip("0123456789"))
    if digits == 0:
        return f"X{fig_id}"
    key = f"{int(fig_id[:digits]):03d}{fig_id[digits:]}"
    return {FIGURE: key, TABLE: f"T{key}"}.get(kind, f"X{fig_id}")


@dataclass(frozen=True)
class PaperRegistry:
    """Everything one paper schedules in this run, and what it leaves out (``skipped``: what -> why)."""

    paper: str
    jobs: tuple[Job, ...] = ()
    figures: tuple[Figure, ...] = ()
    skipped: Mapping[str, str] = field(default_factory=dict)
    # Claims tables written by compute jobs themselves (e.g. a job that checks and tabulates at once).
    job_claims: tuple[str, ...] = ()
    # Claims of skipped figures, listed as unchecked with the reason: claim id -> (figure, statement, why).
    unchecked: Mapping[str, tuple[str, str, str]] = field(default_factory=dict)
    # Prerequisites: claim id pattern -> the ids of the sanity checks those claims rest on; a failed one makes
    # the claims unchecked (claims.gate), e.g. IMDB's claims rest on its vocabulary matching the paper's.
    gates: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Why claims rest on fewer than 3 seeds at this scale: claim id pattern -> why (the cost of more, the paper's own
    # single run); the scorecard lists the claims on fewer seeds with it.
    few_seeds: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self):
        names = [j.name for j in self.jobs] + [f.rule for f in self.figures]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"{self.paper}: rule names declared twice: {sorted(dup)}")
        for rec in (*self.jobs, *self.figures):
            if rec.paper != self.paper:
                raise ValueError(f"{rec} belongs to {rec.paper}, not {self.paper}")

    def figure(self, fig_id: str) -> Figure:
        for f in self.figures:
            if f.id == fig_id:
                return f
        raise KeyError(f"{self.paper} has no figure {fig_id!r}; it has {[f.id for f in self.figures]}")

    def claim_tables(self, paths: Paths) -> list[str]:
        return [f.claims_file(paths) for f in self.figures if f.claims] + list(self.job_claims)


def dataset_unchecked(label: str, claim_ids: tuple[str, ...], datasets: tuple[str, ...], used: list[str],
                      listed: list[str], dataset_on: Callable[[str], bool],
                      sanity: tuple[str, ...] = ()) -> dict[str, tuple[str, str, str]]:
    """The per-dataset claims of figure ``label`` (ids ending in ``_*``, the dataset's name) on each dataset the
    paper's figure has (``datasets``) that this run's figure does not use (``used``), as unchecked rows: claim id ->
    (figure, statement, why). Why: the dataset is not available, or this scale's config does not list it
    (``listed``), e.g. WikiText-103 at the default scale, which runs only with config/paper.yaml. The ``sanity``
    checks among ``claim_ids`` are left out: a check of a run that did not happen is not a claim left untested."""
    rows = {}
    for d in datasets:
        if d in used:
            continue
        why = (f"dataset {d} is not available" if d in listed and not dataset_on(d) else
               f"this scale's {label} runs on {', '.join(listed) or 'no dataset'}; {d} is run at paper scale "
               "(config/paper.yaml)")
        for cid in claim_ids:
            if cid.endswith("_*") and cid not in sanity:
                own = f"{cid[:-1]}{d}"
                what = f"the claims {own}" if "*" in own else f"claim {own}"
                rows[own] = (label, f"{what} of {label} ({d})", why)
    return rows


def load(dotted: str) -> Callable:
    """The function named by ``module:function`` (imported only when a job runs)."""
    import importlib

    module, _, name = dotted.partition(":")
    if not name:
        raise ValueError(f"{dotted!r} is not of the form module:function")
    return getattr(importlib.import_module(module), name)
