"""Paper-scale evidence: what a run at the papers' own settings measured, committed figure by figure.

A run's pages speak of that run only. A paper-scale run (``config/paper.yaml``) is hours to days of GPU time, so
its results are kept in the repository, one folder per figure, and every later run shows them beside its own
verdicts (the scorecard and the results pages):

    evidence/paper/<paper>/<rule>/
        record.json   the figure (paper, rule, label), when it was added, the run record of the run that made it
                      (scale, commit, config and code hashes, precision, versions) and where each compute job ran
                      (device, threads, precision, wall and CPU seconds: the first line of its log, its benchmark file)
        claims.csv    the figure's claims as that run judged them (as its ``results/<paper>/claims.csv`` holds them)
        *.png, *.csv  the figure and its tables, as the run wrote them

A paper-scale run prepares a figure's evidence with rule ``figure_evidence`` (``snakemake
results/joma/evidence/fig_joma_4.json --configfile config/paper.yaml`` runs the figure and writes what is to be
copied: its page entry, its claims as the paper's claims.csv would hold them, where its jobs ran); then ``python -m
featlearn evidence add --paper joma --figure fig_joma_4`` copies it into the repository (it refuses any other scale)
and ``evidence list`` prints the index. ``benchmarks/paper_evidence.sh`` does both. Adding a figure rewrites the
index, ``evidence/README.md``, and the README's list between its ``<!-- paper-scale evidence -->`` markers. Git
keeps the earlier versions of a folder.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from featlearn import PAPERS
from featlearn.io import write_json, write_text
from featlearn.pipeline.claims import REPRODUCED, Claim, read_claims, shown_value, write_claims

EVIDENCE_DIR = Path("evidence") / "paper"
RECORD = "record.json"
CLAIMS = "claims.csv"
README_BEGIN = "<!-- paper-scale evidence: begin (written by python -m featlearn evidence add) -->"
README_END = "<!-- paper-scale evidence: end -->"


class EvidenceError(ValueError):
    """A figure that cannot be added, or an evidence folder that cannot be read."""


@dataclass
class Figure:
    """One figure's committed paper-scale evidence."""

    paper: str
    rule: str
    label: str
    folder: Path
    record: dict
    claims: list[Claim] = field(default_factory=list)

    @property
    def run(self) -> dict:
        return self.record["run"]

    @property
    def files(self) -> list[str]:
        return list(self.record.get("files", []))

    def devices(self) -> str:
        """Where its compute jobs ran: 'NVIDIA H200 (3 jobs)', 'cpu (2 jobs)'; the run record's device when no
        job log named one."""
        counts: dict[str, int] = {}
        for job in self.record.get("jobs", []):
            if job.get("device"):
                counts[job["device"]] = counts.get(job["device"], 0) + 1
        if not counts:
            return str(self.run.get("device", "unknown device"))
        return ", ".join(f"{d} ({n} job{'s' if n != 1 else ''})" for d, n in sorted(counts.items()))

    def provenance(self) -> str:
        """'2026-11-28, commit 1234567890, NVIDIA H200 (3 jobs), fp32'."""
        commit = str(self.run.get("commit", "unknown"))
        dirty = " with uncommitted changes" if self.run.get("uncommitted_changes") else ""
        date = str(self.run.get("date_utc", ""))[:10]
        return f"{date}, commit `{commit[:10]}`{dirty}, {self.devices()}, {self.run.get('precision', 'fp32')}"

    def compute_hours(self) -> float:
        """Wall hours of its compute jobs summed (NaN when no job has a benchmark file). A job that resumed from
        earlier, killed runs of itself counts their wall time too where its log gave it (``earlier_runs_s``); where it
        did not, the sum is a lower bound (:meth:`lower_bound`): the benchmark file timed the last run only."""
        walls = []
        for job in self.record.get("jobs", []):
            wall = _number(job.get("wall_s"))
            earlier = _number(job.get("earlier_runs_s")) if job.get("resumed") else 0.0
            if not math.isnan(wall):
                walls.append(wall + (0.0 if math.isnan(earlier) else earlier))
        return sum(walls) / 3600 if walls else math.nan

    def resumed(self) -> bool:
        """Whether some compute job of it resumed from an earlier run of itself (its record's jobs say so)."""
        return any(j.get("resumed") for j in self.record.get("jobs", []))

    def lower_bound(self) -> bool:
        """Whether :meth:`compute_hours` is a lower bound: a job resumed and its earlier runs' time is unknown."""
        return any(j.get("resumed") and math.isnan(_number(j.get("earlier_runs_s"))) for j in self.record.get("jobs", []))


def _number(value) -> float:
    """A record's number, NaN where it holds none (absent, null, text)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


# ------------------------------------------------------------------------------------------- reading


def read_figure(folder: str | os.PathLike) -> Figure:
    """One evidence folder; an error naming the folder when its record or claims are missing or malformed."""
    folder = Path(folder)
    try:
        record = json.loads((folder / RECORD).read_text())
    except FileNotFoundError:
        raise EvidenceError(f"{folder}: no {RECORD}; every evidence folder has one (python -m featlearn evidence add)") from None
    except json.JSONDecodeError as exc:
        raise EvidenceError(f"{folder}/{RECORD} is not valid JSON: {exc}") from None
    missing = [k for k in ("paper", "rule", "label", "run") if k not in record]
    if missing:
        raise EvidenceError(f"{folder}/{RECORD}: missing {', '.join(missing)}")
    if record["run"].get("scale") != "paper":
        raise EvidenceError(f"{folder}: its run's scale is {record['run'].get('scale')!r}; evidence is paper scale only")
    if record["paper"] not in PAPERS or folder.parent.name != record["paper"] or folder.name != record["rule"]:
        raise EvidenceError(f"{folder}: its record names {record['paper']}/{record['rule']}; the folder must be "
                            f"<evidence>/<paper>/<rule>")
    claims: list[Claim] = []
    if (folder / CLAIMS).is_file():
        try:
            claims = read_claims(folder / CLAIMS)
        except (ValueError, KeyError) as exc:
            raise EvidenceError(f"{folder}/{CLAIMS}: {exc}") from None
    for name in record.get("files", []):
        if not (folder / name).is_file():
            raise EvidenceError(f"{folder}: {name} is listed in {RECORD} but absent")
    return Figure(record["paper"], record["rule"], record["label"], folder, record, claims)


def read_evidence(root: str | os.PathLike = EVIDENCE_DIR, paper: str | None = None) -> list[Figure]:
    """Every committed figure under ``root`` (of one paper, or all), in paper then rule order; none when ``root``
    does not exist."""
    root = Path(root)
    papers = [paper] if paper else list(PAPERS)
    out = []
    for p in papers:
        if (root / p).is_dir():
            figs = [read_figure(d) for d in (root / p).iterdir() if d.is_dir()]
            out += sorted(figs, key=lambda f: (str(f.record.get("order", "")), f.rule))  # the paper's order
    return out


def evidence_inputs(root: str | os.PathLike = EVIDENCE_DIR, paper: str | None = None) -> list[str]:
    """The files a page depends on (its rule reruns when one changes): each folder's record and claims."""
    root = Path(root)
    papers = [paper] if paper else list(PAPERS)
    return sorted(str(f) for p in papers if (root / p).is_dir() for f in (root / p).glob(f"*/{RECORD}")) + sorted(
        str(f) for p in papers if (root / p).is_dir() for f in (root / p).glob(f"*/{CLAIMS}"))


def by_claim(figures: list[Figure]) -> dict[tuple[str, str], tuple[Claim, Figure]]:
    """(paper, claim id) -> its paper-scale row and the figure it came from."""
    out: dict[tuple[str, str], tuple[Claim, Figure]] = {}
    for fig in figures:
        for c in fig.claims:
            key = (c.paper, c.claim_id)
            if key in out:
                raise EvidenceError(f"claim {c.paper}/{c.claim_id} is in the evidence of both {out[key][1].rule} and "
                                    f"{fig.rule}")
            out[key] = (c, fig)
    return out


# ------------------------------------------------------------------------------------------- showing


def verdict_cell(claim: Claim) -> str:
    """The paper-scale column of a claims table: verdict and measured value."""
    verdict = claim.verdict if claim.verdict == REPRODUCED else f"**{claim.verdict}**"
    return f"{verdict}: {shown_value(claim)}" if not math.isnan(claim.measured) else verdict


def summary_line(figures: list[Figure], paper: str | None = None) -> str:
    """One sentence: how many figures have paper-scale evidence and what their empirical claims say."""
    figs = [f for f in figures if paper is None or f.paper == paper]
    where = f"`{EVIDENCE_DIR.as_posix()}/{paper}/`" if paper else f"`{EVIDENCE_DIR.as_posix()}/`"
    if not figs:
        return (f"Paper-scale evidence: none committed{' for this paper' if paper else ''} yet ({where}; "
                "`python -m featlearn evidence add` copies a figure out of a paper-scale run).")
    claims = [c for f in figs for c in f.claims]
    counted = [c for c in claims if c.counts]
    reproduced = sum(c.verdict == REPRODUCED for c in counted)
    names = "; ".join(f"{f.paper} {f.label} ({f.provenance()})" if not paper else f"{f.label} ({f.provenance()})"
                      for f in figs)
    return (f"Paper-scale evidence ({where}, committed from paper-scale runs; the column *paper scale* of the claims "
            f"tables): {len(figs)} figure{'s' if len(figs) != 1 else ''}: {names}. Of their {len(counted)} empirical "
            f"claims decided at paper scale, {reproduced} reproduced.")


def figure_lines(fig: Figure, page_dir: str | os.PathLike) -> list[str]:
    """The lines a results page shows under one of its figures: the committed paper-scale drawing and verdicts."""
    lines = [f"Paper scale (committed evidence: {fig.provenance()}):", ""]
    for name in fig.files:
        if name.endswith(".png"):
            rel = os.path.relpath(Path(fig.folder, name).resolve(), Path(page_dir).resolve())
            lines += [f"![{fig.label} at paper scale]({Path(rel).as_posix()})", ""]
    if fig.claims:
        lines += ["- paper-scale verdicts: " + ", ".join(f"`{c.claim_id}` {c.verdict}" for c in fig.claims), ""]
    return lines


def index_markdown(figures: list[Figure], root: str | os.PathLike = EVIDENCE_DIR) -> str:
    """The list of figures with paper-scale evidence (``evidence/README.md`` and the README's block)."""
    if not figures:
        return "No figure has committed paper-scale evidence yet.\n"
    lines = ["| paper | figure | rule | claims (all kinds) | empirical claims reproduced | run | compute (job wall, h) |",
             "|---|---|---|---|---|---|---|"]
    for f in figures:
        counted = [c for c in f.claims if c.counts]
        hours = f.compute_hours()
        lines.append(f"| `{f.paper}` | {f.label} | [`{f.rule}`]({Path(root, f.paper, f.rule).as_posix()}/) | "
                     f"{len(f.claims)} | {sum(c.verdict == REPRODUCED for c in counted)} of {len(counted)} | {f.provenance()} | "
                     f"{'—' if math.isnan(hours) else ('≥ ' if f.lower_bound() else '') + f'{hours:.2f}'}"
                     f"{' *' if f.resumed() and not f.lower_bound() else ''} |")
    if any(f.resumed() and not f.lower_bound() for f in figures):
        lines += ["", "*: a job of that figure resumed from earlier runs of itself that were killed; the hours include "
                      "their wall time (its log gives it), and so count work computed again after a kill."]
    if any(f.lower_bound() for f in figures):
        lines += ["", "≥: a lower bound; a job of that figure resumed from an earlier run of itself that was killed, "
                      "and its benchmark file timed the last run only."]
    return "\n".join(lines) + "\n"


def evidence_readme(figures: list[Figure], root: str | os.PathLike = EVIDENCE_DIR) -> str:
    return ("# Paper-scale evidence\n\n"
            "Results of runs at the papers' own settings (`config/paper.yaml`), committed figure by figure by "
            "`python -m featlearn evidence add` (`src/featlearn/pipeline/evidence.py`). Each folder holds the figure, "
            "its claims as that run judged them, and the run's record (commit, config and code hashes, precision, "
            "package versions, and the device, threads and time of each compute job). The scorecard and the results "
            "pages of every run show these verdicts beside the run's own.\n\n"
            + index_markdown(figures, Path("paper")))


def readme_block(figures: list[Figure]) -> str:
    """The README's block between the markers."""
    body = (index_markdown(figures, EVIDENCE_DIR) if figures else
            "None yet: no figure has committed paper-scale evidence (`evidence/README.md`).\n")
    return f"{README_BEGIN}\n{body}{README_END}"


def update_readme(readme: str | os.PathLike, figures: list[Figure]) -> bool:
    """Rewrite the README's block; False (and nothing written) where the README has no markers."""
    path = Path(readme)
    if not path.is_file():
        return False
    text = path.read_text()
    start, end = text.find(README_BEGIN), text.find(README_END)
    if start < 0 or end < start:
        return False
    new = text[:start] + readme_block(figures) + text[end + len(README_END):]
    if new != text:
        write_text(path, new)
    return True


# ------------------------------------------------------------------------------------------- adding


def _job_rows(jobs: list[dict], workdir: Path) -> list[dict]:
    from featlearn.pipeline.benchfiles import job_device, job_earlier_wall, job_resumed, read_benchmark

    rows = []
    for job in jobs:
        bench = workdir / job["benchmark"]
        cost = read_benchmark(bench) or {}
        dev = job_device(bench) or {}
        rows.append({"label": job["label"], "device": dev.get("device", ""), "threads": dev.get("threads", ""),
                     "precision": dev.get("precision", ""), "wall_s": cost.get("wall_s", math.nan),
                     "cpu_s": cost.get("cpu_s", math.nan), "max_rss_mb": cost.get("max_rss_mb", math.nan),
                     "resumed": job_resumed(bench)})
        if rows[-1]["resumed"]:  # the wall time of its earlier, killed runs, where its log gives it (else null)
            earlier = job_earlier_wall(bench)
            rows[-1]["earlier_runs_s"] = None if math.isnan(earlier) else earlier
    return rows


def _overlap(a: str, b: str) -> bool:
    """Whether claim ids or id patterns ``a`` and ``b`` can name the same claim (either matches the other)."""
    from fnmatch import fnmatchcase

    return fnmatchcase(a, b) or fnmatchcase(b, a)


def prerequisite_tables(claim_ids: list[str], gates: dict[str, list[str]], tables: dict[str, list[str]]) -> list[str]:
    """The claims tables, of ``tables`` (claims file -> the claim ids or patterns its figure writes), that hold the
    sanity checks which the claims ``claim_ids`` of one figure rest on (``gates``: claim id pattern -> the ids of the
    checks): what rule ``figure_evidence`` reads besides the figure's own table, so that the same run judges them."""
    needs = {p for pattern, ids in gates.items() if any(_overlap(c, pattern) for c in claim_ids) for p in ids}
    return sorted(path for path, ids in tables.items() if any(_overlap(n, i) for n in needs for i in ids))


def figure_claims(part: str | os.PathLike, gates: dict[str, list[str]], few_seeds: dict[str, str],
                  prerequisites: list[str | os.PathLike] = ()) -> list[Claim]:
    """A figure's claims as its paper's claims.csv would hold them (rule ``paper_claims``): seed reasons added, and a
    claim whose prerequisite sanity check failed made unchecked (:func:`featlearn.pipeline.claims.gate`). The
    prerequisite checks are looked up in the figure's own rows and in ``prerequisites``, the claims tables of the
    other figures of the same run that hold them (:func:`prerequisite_tables`); a claim whose prerequisite is in
    neither is unchecked here, with that said, rather than judged without it."""
    from fnmatch import fnmatchcase

    from featlearn.pipeline.claims import gate, unchecked, with_seeds_reason

    claims = read_claims(part)
    by_id = {c.claim_id: c for table in prerequisites for c in read_claims(table)} | {c.claim_id: c for c in claims}
    out = []
    for c in claims:
        needs = [p for pattern, ids in gates.items() if fnmatchcase(c.claim_id, pattern) for p in ids]
        absent = [p for p in needs if p not in by_id]
        if absent and c.verdict != "unchecked":
            c = unchecked(c.paper, c.claim_id, c.figure, c.statement,
                          f"its prerequisite checks {', '.join(absent)} belong to another figure, not in this evidence; "
                          f"measured {c.measured:.4g} against {c.target}, which would be {c.verdict}", c.scale,
                          kind=c.kind, paper_value=c.paper_value, reason=c.threshold_reason)
        else:
            c = gate(c, *(by_id[p] for p in needs))
        out.append(with_seeds_reason(c, few_seeds))
    return out


def prepare(paper: str, entry: dict, gates: dict, few_seeds: dict, run_json: str | os.PathLike,
            out: str | os.PathLike, workdir: str | os.PathLike = ".", prerequisites: list[str] = ()) -> dict:
    """What ``evidence add`` copies of one figure of this run (rule ``figure_evidence``): its page entry (drawings,
    tables, claims table, jobs), its claims as the paper's claims.csv would hold them (``prerequisites``: the claims
    tables of this run's other figures that hold the checks they rest on), where and how long its compute jobs ran,
    and the run record. Written by the run itself, so a figure can be added from a run of that figure alone."""
    workdir = Path(workdir)
    claims = figure_claims(workdir / entry["claims"], gates, few_seeds,
                           [workdir / p for p in prerequisites]) if entry.get("claims") else []
    from dataclasses import asdict

    prepared = {"paper": paper, "rule": entry["rule"], "label": entry["label"], "entry": entry,
                "claims": [asdict(c) for c in claims], "jobs": _job_rows(entry.get("jobs", []), workdir),
                "run": json.loads(Path(run_json).read_text())}
    write_json(out, prepared)
    return prepared


def prepared_path(results: str | os.PathLike, paper: str, rule: str) -> Path:
    """Where rule ``figure_evidence`` writes a figure's prepared evidence."""
    return Path(results) / paper / "evidence" / f"{rule}.json"


def add_figures(paper: str, figures: list[str] | None = None, workdir: str | os.PathLike = ".",
                results: str = "results", root: str | os.PathLike = EVIDENCE_DIR,
                readme: str | os.PathLike | None = "README.md") -> list[Figure]:
    """Copy figures of a paper-scale run (``<workdir>/<results>``) into ``root``: each figure's drawings and tables,
    its claims and the run record, from what rule ``figure_evidence`` prepared (``results/<paper>/evidence/<rule>.json``;
    every figure so prepared when ``figures`` is None)."""
    workdir = Path(workdir)
    if paper not in PAPERS:
        raise EvidenceError(f"unknown paper {paper!r}; expected one of {', '.join(PAPERS)}")
    folder = workdir / results / paper / "evidence"
    rules = figures or sorted(f.stem for f in folder.glob("*.json"))
    if not rules:
        raise EvidenceError(f"no figure of {paper} is prepared in {folder}: run snakemake "
                            f"{results}/{paper}/evidence/<rule>.json --configfile config/paper.yaml first")
    added = []
    for rule in rules:
        path = prepared_path(workdir / results, paper, rule)
        try:
            prepared = json.loads(path.read_text())
        except FileNotFoundError:
            raise EvidenceError(f"{path} is missing: run snakemake {prepared_path(results, paper, rule)} "
                                "--configfile config/paper.yaml first (it runs the figure)") from None
        run = prepared["run"]
        if run.get("scale") != "paper":
            raise EvidenceError(f"{path}: the run is at scale {run.get('scale')!r}; only a paper-scale run "
                                "(--configfile config/paper.yaml) gives paper-scale evidence")
        entry = prepared["entry"]
        outputs = [workdir / p for p in entry.get("pngs", []) + entry.get("tables", [])]
        absent = [str(p) for p in outputs if not p.is_file()]
        if absent:
            raise EvidenceError(f"{rule}: {', '.join(absent)} absent; rerun its figure")
        dest = Path(root) / paper / rule
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        files = []
        for src in outputs:
            shutil.copy2(src, dest / src.name)
            files.append(src.name)
        write_claims(dest / CLAIMS, [Claim(**row) for row in prepared["claims"]])
        record = {"paper": paper, "rule": rule, "label": prepared["label"], "order": entry.get("order", ""),
                  "added_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
                  "files": files, "jobs": prepared["jobs"], "run": run}
        write_json(dest / RECORD, record)
        added.append(read_figure(dest))
    everything = read_evidence(root)
    write_text(Path(root).parent / "README.md", evidence_readme(everything, root))
    if readme is not None:
        update_readme(readme, everything)
    return added


# ------------------------------------------------------------------------------------------ commands


def _add(args) -> None:
    added = add_figures(args.paper, args.figure or None, args.workdir, args.results, args.evidence, args.readme)
    if not added:
        raise SystemExit(f"evidence: no figure of {args.paper} was written by the run in {args.results}")
    for f in added:
        print(f"evidence: {f.folder} ({f.label}: {len(f.claims)} claims, {f.provenance()})")


def _list(args) -> None:
    print(index_markdown(read_evidence(args.evidence), args.evidence), end="")


def _prepare(args) -> None:
    prepared = prepare(args.paper, json.loads(args.entry), json.loads(args.gates), json.loads(args.few_seeds),
                       args.run, args.out, prerequisites=json.loads(args.prerequisites))
    print(f"evidence: {prepared['rule']} prepared ({len(prepared['claims'])} claims, scale {prepared['run'].get('scale')})")


def register(sub) -> None:
    p = sub.add_parser("evidence", help="paper-scale evidence: add a figure of a paper-scale run, list them")
    verbs = p.add_subparsers(dest="verb", required=True)
    a = verbs.add_parser("add", help="copy figures of a paper-scale run into evidence/paper/<paper>/<rule>/")
    a.add_argument("--paper", required=True, choices=PAPERS)
    a.add_argument("--figure", action="append", help="a figure's rule (repeatable; default: every figure the run "
                   "prepared, results/<paper>/evidence/*.json)")
    a.add_argument("--workdir", default=".", help="the workflow's folder (where results/ is)")
    a.add_argument("--results", default="results")
    a.add_argument("--evidence", default=str(EVIDENCE_DIR))
    a.add_argument("--readme", default="README.md", help="the README whose evidence block is rewritten")
    a.set_defaults(func=_add)
    r = verbs.add_parser("prepare", help="(rule figure_evidence) what evidence add copies of one figure of this run")
    r.add_argument("--paper", required=True, choices=PAPERS)
    r.add_argument("--entry", required=True, help="JSON: the figure's results-page entry")
    r.add_argument("--gates", default="{}", help="JSON: claim id pattern -> the sanity checks those claims rest on")
    r.add_argument("--few-seeds", default="{}", help="JSON: claim id pattern -> why they rest on fewer than 3 seeds")
    r.add_argument("--prerequisites", default="[]",
                   help="JSON list: claims tables of this run's other figures that hold the checks the claims rest on")
    r.add_argument("--run", required=True, help="the run record (results/run.json)")
    r.add_argument("--out", required=True)
    r.set_defaults(func=_prepare)
    s = verbs.add_parser("list", help="the figures with committed paper-scale evidence")
    s.add_argument("--evidence", default=str(EVIDENCE_DIR))
    s.set_defaults(func=_list)
