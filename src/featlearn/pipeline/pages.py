"""What a run writes about itself: one results page per paper
(``results/<paper>/README.md`` and an HTML copy for the report) and the compute table
(``results/benchmarks.md``) built from Snakemake's ``benchmark:`` files.

Every number on these pages is read from the run's own files (claims tables, benchmark files, the run
record, :mod:`featlearn.pipeline.runrecord`); nothing is typed in. The manifests the rules pass (figures, their jobs and
benchmark files, how this run's settings differ from ``config/paper.yaml``) are built by the Snakefile from the
paper registries.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

from featlearn.io import write_text
from featlearn.pipeline.benchfiles import _max, _sum, job_device, job_earlier_wall, job_resumed, read_benchmark
from featlearn.pipeline.markdown_html import markdown_to_html
from featlearn.pipeline.runrecord import provenance_line

ARXIV = {
    "features": "https://arxiv.org/abs/2310.16350",
    "scan_snap": "https://arxiv.org/abs/2305.16380",
    "joma": "https://arxiv.org/abs/2310.00535",
    "templates": "https://arxiv.org/abs/2310.09753",
}


# --------------------------------------------------------------------------------- benchmark files


def job_costs(jobs: list[dict]) -> dict:
    """Totals over jobs (each ``{"label", "benchmark"}``): how many, how many have a benchmark file, wall and
    CPU seconds summed, the largest peak memory."""
    read = [read_benchmark(j["benchmark"]) for j in jobs]
    have = [r for r in read if r is not None]
    return {
        "jobs": len(jobs),
        "measured": len(have),
        "wall_s": _sum(r["wall_s"] for r in have),
        "cpu_s": _sum(r["cpu_s"] for r in have),
        "max_rss_mb": _max(r["max_rss_mb"] for r in have),
    }


def _num(x: float, digits: int = 0) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:,.{digits}f}"


def _minutes(seconds: float) -> str:
    return "—" if math.isnan(seconds) else f"{seconds / 60:.1f}"


# ------------------------------------------------------------------------------------ captions


def caption_markdown(rst_path: str | os.PathLike) -> str:
    """A figure's report caption (reStructuredText) as one Markdown paragraph."""
    text = Path(rst_path).read_text() if Path(rst_path).is_file() else ""
    text = re.sub(r":math:`([^`]*)`", r"$\1$", text)
    text = re.sub(r"``([^`]*)``", r"`\1`", text)
    text = text.replace("\\|", "|").replace("\\*", "*")
    return " ".join(text.split())


# ------------------------------------------------------------------------------------------- pages


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _short(value, width: int = 70) -> str:
    text = json.dumps(value, sort_keys=True) if not isinstance(value, str) else value
    return text if len(text) <= width else text[: width - 1] + "…"


def render_page(manifest: dict, claims_csv: str | os.PathLike, record: dict, evidence: list | None = None) -> str:
    """The Markdown results page of one paper; ``evidence`` (its committed paper-scale figures,
    :mod:`featlearn.pipeline.evidence`) is shown under each figure and beside the claims."""
    from featlearn.pipeline.claims import read_claims
    from featlearn.pipeline.evidence import figure_lines
    from featlearn.pipeline.scorecard import TITLES, headline, paper_section

    paper = manifest["paper"]
    at_paper_scale = {f.rule: f for f in evidence or [] if f.paper == paper}
    claims = read_claims(claims_csv) if Path(claims_csv).is_file() else []
    all_jobs = {j["benchmark"]: j for f in manifest["figures"] for j in f["jobs"]}
    total = job_costs(list(all_jobs.values()))

    lines = [f"# {paper}: {TITLES[paper]}", "",
             f"Results of this run, written by the pipeline (rule `paper_page`); the paper: <{ARXIV[paper]}>. "
             "Design notes without numbers: `docs/results/" + paper + ".md`.", "",
             provenance_line(record), "",
             f"**{headline(claims).capitalize()}.**" if claims else "No claims were checked in this run.", "",
             f"Compute: {total['jobs']} jobs (compute and figure rules), {_minutes(total['wall_s'])} min wall and "
             f"{_minutes(total['cpu_s'])} CPU-min "
             f"summed over the {total['measured']} with a benchmark file (jobs run in parallel finish sooner); "
             f"largest peak memory {_num(total['max_rss_mb'])} MB.", ""]
    if manifest.get("skipped"):
        lines += ["Left out of this run:", ""] + [f"- {w}: {why}" for w, why in sorted(manifest["skipped"].items())] + [""]

    lines += ["## Figures and tables", ""]
    for fig in manifest["figures"]:
        cost = job_costs(fig["jobs"])
        lines += [f"### {fig['label']} (`{fig['rule']}`)", ""]
        for png in fig.get("pngs", []):
            lines += [f"![{fig['label']}]({os.path.relpath(png, Path(manifest['out_dir']))})", ""]
        for table in fig.get("tables", []):
            lines += [f"Table: [`{Path(table).name}`]({os.path.relpath(table, Path(manifest['out_dir']))})", ""]
        caption = caption_markdown(fig["caption"]) if fig.get("caption") else ""
        if caption:
            lines += [caption, ""]
        ids = [c.claim_id for c in read_claims(fig["claims"])] if fig.get("claims") and Path(fig["claims"]).is_file() else []
        facts = [f"compute and drawing: {cost['jobs']} job{'s' if cost['jobs'] != 1 else ''}, "
                 f"{_minutes(cost['wall_s'])} min wall, {_minutes(cost['cpu_s'])} CPU-min"]
        if ids:
            facts.append("claims " + ", ".join(f"`{i}`" for i in ids))
        lines += ["- " + "; ".join(facts), ""]
        if fig["rule"] in at_paper_scale:
            lines += figure_lines(at_paper_scale[fig["rule"]], manifest["out_dir"])

    lines += ["## Claims", ""] + paper_section(claims, None if evidence is None else list(at_paper_scale.values())) + [""]

    lines += ["## Where this run's settings differ from the paper's", ""]
    diffs = manifest.get("differences", [])
    if diffs:
        lines += [f"{len(diffs)} settings of `{paper}` differ from the paper-scale config (`config/paper.yaml` merged onto "
                  "`config/config.yaml`; its comments give each value's source: [P] paper, [C] authors' code, "
                  "[D] this project's decision).", "",
                  "| setting | this run | paper scale |", "|---|---|---|"]
        lines += [f"| `{_cell(k)}` | {_cell(_short(ours))} | {_cell(_short(ref))} |" for k, ours, ref in diffs]
    else:
        lines.append(f"None: every setting of `{paper}` is the paper-scale value (`config/paper.yaml`).")
    lines += ["", "## Provenance", "", "| | |", "|---|---|"]
    for key in ("scale", "commit", "uncommitted_changes", "config_sha256", "code_sha256", "device", "job_device", "precision",
                "date_utc", "host_cpus", "host_cpu"):
        lines.append(f"| {key} | {_cell(record.get(key, ''))} |")
    versions = record.get("versions", {})
    if versions:
        lines.append("| versions | " + _cell(", ".join(f"{k} {v}" for k, v in versions.items())) + " |")
    return "\n".join(lines) + "\n"


def write_page(manifest_path, claims_csv, run_json, out_md, out_html, evidence_dir=None) -> str:
    manifest = json.loads(Path(manifest_path).read_text())
    record = json.loads(Path(run_json).read_text())
    evidence = None
    if evidence_dir is not None:
        from featlearn.pipeline.evidence import read_evidence

        evidence = read_evidence(evidence_dir, manifest["paper"])
    text = render_page(manifest, claims_csv, record, evidence)
    write_text(out_md, text)
    write_text(out_html, markdown_to_html(text, f"featlearn: {manifest['paper']}"))
    return text


# ------------------------------------------------------------------------------------ compute table


def compute_rows(manifest: dict) -> list[dict]:
    """One row per figure (and one per data preparation): jobs, wall and CPU seconds, peak memory."""
    rows = []
    for job in manifest.get("data", []):
        rows.append({"paper": "data", "item": job["label"], **job_costs([job])})
    for paper, figures in manifest["papers"].items():
        for fig in figures:
            rows.append({"paper": paper, "item": f"{fig['label']} ({fig['rule']})", **job_costs(fig["jobs"])})
    return rows


def devices_line(jobs: list[dict]) -> str:
    """One Markdown line: how many compute jobs ran on each device, with which thread counts and precisions."""
    counts: dict[str, int] = {}
    for j in jobs:
        dev = job_device(j["benchmark"])
        if dev:
            key = (f"{dev['device']}, {dev['threads']} thread{'s' if dev['threads'] != '1' else ''}, "
                   f"{dev.get('precision', 'fp32')}")
            counts[key] = counts.get(key, 0) + 1
    if not counts:
        return "No compute job's log names its device."
    return ("**Where the compute jobs ran** (the first line of each job's log): "
            + "; ".join(f"{k}: {n} job{'s' if n != 1 else ''}" for k, n in sorted(counts.items())) + ".")


def render_compute(manifest: dict, record: dict) -> tuple[str, list[dict]]:
    rows = compute_rows(manifest)
    unique = {j["benchmark"]: j
              for jobs in ([manifest.get("data", [])] + [f["jobs"] for figs in manifest["papers"].values() for f in figs])
              for j in jobs}
    total = job_costs(list(unique.values()))
    served = sum(1 for j in unique.values() if (read_benchmark(j["benchmark"]) or {}).get("served"))
    server_note = (f" {served} of the jobs ran in the job server (`job_server: true`): Snakemake's file of such a job "
                   "sees only the client process, so the worker's CPU seconds and peak memory, recorded beside it "
                   "(`<benchmark>.server.json`), are added in." if served else "")
    resumed = [j for j in unique.values() if job_resumed(j["benchmark"])]
    if resumed:
        earlier = [job_earlier_wall(j["benchmark"]) for j in resumed]
        known = [e for e in earlier if not math.isnan(e)]
        server_note += (f" {len(resumed)} of the jobs resumed from an earlier run of themselves that was killed (their "
                        "logs say so): their files timed the last run only, so their times and the sums below leave "
                        "out the earlier runs" + (f"; the logs of {len(known)} of them give those runs' wall time, "
                                                  f"{_minutes(sum(known))} min in all" if known else "") +
                        (", and the sums are lower bounds." if len(known) < len(resumed) else "."))
    lines = ["# Compute of this run", "",
             "From Snakemake's `benchmark:` files (`results/benchmarks/`), written by rule `compute_table`. "
             "A figure's row counts its compute jobs and its own rule (drawing and claims); a job shared by several "
             "figures counts in each of their rows and once in the total. Snakemake's own start-up and "
             "bookkeeping are not in these files. Snakemake samples a job's CPU seconds and memory (every 30 s after "
             "its first 15), which misses the end of a longer job: where a compute job's log ends with the kernel's "
             "count of its own (`featlearn: usage`), the larger of the two is used." + server_note, "",
             provenance_line(record), "",
             f"**Total: {total['jobs']} jobs (compute and figure rules), {_minutes(total['cpu_s'])} CPU-min, "
             f"{_minutes(total['wall_s'])} min of job wall time summed** ({total['measured']} with a benchmark file; "
             "largest peak memory "
             f"{_num(total['max_rss_mb'])} MB).", "",
             devices_line(list(unique.values())), "",
             "| paper | figure or step | jobs | wall s | CPU s | peak MB |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['paper']} | {_cell(r['item'])} | {r['jobs']} | {_num(r['wall_s'], 1)} | {_num(r['cpu_s'], 1)} | "
                     f"{_num(r['max_rss_mb'])} |")
    return "\n".join(lines) + "\n", rows + [{"paper": "all", "item": "total (each job once)", **total}]


def write_compute(manifest_path, run_json, out_md, out_csv) -> dict:
    import pandas as pd

    from featlearn.io import write_csv

    manifest = json.loads(Path(manifest_path).read_text())
    record = json.loads(Path(run_json).read_text())
    text, rows = render_compute(manifest, record)
    write_text(out_md, text)
    write_csv(pd.DataFrame(rows), out_csv)
    return rows[-1]


# ------------------------------------------------------------------------------------------ commands


def register(sub) -> None:
    p = sub.add_parser("paper-page", help="write one paper's results page (Markdown and HTML)")
    p.add_argument("--manifest", required=True)
    p.add_argument("--claims", required=True)
    p.add_argument("--run", required=True, help="the run record (results/run.json)")
    p.add_argument("--out-md", required=True)
    p.add_argument("--out-html", required=True)
    p.add_argument("--evidence", default=None, help="the committed paper-scale evidence (evidence/paper)")
    p.set_defaults(func=lambda a: write_page(a.manifest, a.claims, a.run, a.out_md, a.out_html, a.evidence)
                   and print(f"wrote {a.out_md}"))

    p = sub.add_parser("compute-table", help="the compute table of this run from its benchmark files")
    p.add_argument("--manifest", required=True)
    p.add_argument("--run", required=True)
    p.add_argument("--out-md", required=True)
    p.add_argument("--out-csv", required=True)
    p.set_defaults(func=lambda a: print(write_compute(a.manifest, a.run, a.out_md, a.out_csv)))
