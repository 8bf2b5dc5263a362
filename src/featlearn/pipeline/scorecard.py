"""The scorecard: every paper's claims in one CSV and one readable Markdown page."""

from __future__ import annotations

import os
from collections import defaultdict

from featlearn import PAPERS
from featlearn.pipeline.claims import (
    NOT_DISCRIMINATING,
    NOT_REPRODUCED,
    REPRODUCED,
    SANITY_OK,
    UNCHECKED,
    INCONCLUSIVE,
    MIN_SEEDS,
    NULL_ALPHA,
    VERDICTS,
    Claim,
    merge_claims,
)
from featlearn.pipeline.claims import fmt_value as _fmt
from featlearn.pipeline.claims import shown_value as _ours
from featlearn.io import write_text
from featlearn.pipeline.evidence import Figure, by_claim
from featlearn.pipeline.evidence import summary_line as evidence_summary
from featlearn.pipeline.evidence import verdict_cell as evidence_cell

TITLES = {
    "features": "Sun, Li, Lu 2023: Unraveling feature extraction mechanisms (NTK)",
    "scan_snap": "Tian et al. 2023: Scan and Snap",
    "joma": "Tian et al. 2023: JoMA",
    "templates": "Boix-Adserà et al. 2023: Template tasks",
}


def _passing_draws(c: Claim) -> int:
    return round(c.baseline_pass_rate * c.baseline_draws)


def _baseline(c: Claim) -> str:
    if not c.baseline or c.null == "none":
        return c.baseline
    if c.baseline_draws > 1:
        return (f"{c.baseline}, {c.baseline_draws} draws: mean {_fmt(c.baseline_measured)}, "
                f"{_passing_draws(c)} of {c.baseline_draws} pass ({'passes' if c.baseline_passed else 'fails'})")
    return f"{c.baseline}: {_fmt(c.baseline_measured)} ({'passes' if c.baseline_passed else 'fails'})"


def null_line(claims: list[Claim]) -> str:
    """How the claims that count were tested against a null: how many against several draws (untrained networks of
    several initialisations), how many against one trivial model, how many say why they have no baseline."""
    counted = [c for c in claims if c.counts]
    if not counted:
        return ""
    several = sum(c.baseline_draws > 1 for c in counted)
    one = sum(c.baseline_draws == 1 for c in counted)
    none = sum(c.null == "none" for c in counted)
    missing = len(counted) - several - one - none
    text = (f"Of the {len(counted)} empirical claims decided, {several} were tested against a null of several draws "
            f"(a baseline passes when more than {NULL_ALPHA:g} of its draws pass), {one} against one draw of a trivial "
            f"model, and {none} have no baseline that could pass (the row says why)")
    return text + (f"; {missing} record no baseline." if missing else ".")


def few_seeds(claims: list[Claim]) -> list[Claim]:
    """The decided empirical claims that rest on fewer than MIN_SEEDS seeds."""
    return [c for c in claims if c.counts and c.seeds < MIN_SEEDS]


def seeds_line(claims: list[Claim]) -> str:
    few = few_seeds(claims)
    if not few:
        return ""
    unexplained = sum(not c.seeds_reason for c in few)
    text = (f"{len(few)} of the {sum(c.counts for c in claims)} rest on fewer than {MIN_SEEDS} seeds; each says why "
            "in the list of claims on few seeds")
    return text + (f" ({unexplained} give no reason)." if unexplained else ".")


def headline(claims: list[Claim]) -> str:
    """"reproduced R of D empirical paper claims (U unchecked, I inconclusive, N not discriminating); theory
    numerics: T of M hold". Only empirical claims (kind ``paper``) are in R of D; the paper's theory checked
    numerically (kind ``paper-theory``) holds whatever the training budget, so it gets its own count."""
    empirical = [c for c in claims if c.kind == "paper"]
    counted = [c for c in empirical if c.counts]
    reproduced = sum(c.verdict == REPRODUCED for c in counted)
    n_unchecked = sum(c.verdict == UNCHECKED for c in empirical)
    n_nd = sum(c.verdict == NOT_DISCRIMINATING for c in empirical)
    n_inc = sum(c.verdict == INCONCLUSIVE for c in empirical)
    text = (f"reproduced {reproduced} of {len(counted)} empirical paper claims "
            f"({n_unchecked} unchecked, {n_inc} inconclusive, {n_nd} not discriminating)")
    unaudited = sum(c.counts and not c.threshold_reason for c in claims)
    if unaudited:
        text += f"; {unaudited} of the {len(counted)} are not yet audited (no threshold reason or baseline recorded)"
    theory = [c for c in claims if c.is_theory]
    if theory:
        text += f"; theory numerics: {sum(c.passed for c in theory)} of {len(theory)} hold"
    return text


def what_differs(c: Claim) -> str:
    """One line on a claim that does not count as reproduced: its note, else what the numbers say."""
    if c.note:
        return c.note
    if c.verdict == NOT_DISCRIMINATING and c.baseline_draws > 1:
        return (f"{_passing_draws(c)} of {c.baseline_draws} draws of the {c.baseline} pass {c.target} too (their mean: "
                f"{_fmt(c.baseline_measured)}), more than {NULL_ALPHA:g}")
    if c.verdict == NOT_DISCRIMINATING:
        return f"the {c.baseline} scores {_fmt(c.baseline_measured)}, which passes {c.target} too"
    paper = f" (the paper: {c.paper_value})" if c.paper_value else ""
    return f"measured {_ours(c)}, the claim needs {c.target}{paper}"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def paper_section(rows: list[Claim], evidence: list[Figure] | None = None) -> list[str]:
    """Markdown lines of one paper's claims: headline, the paper's claims with paper value, ours, baseline
    and verdict (and, where committed paper-scale evidence has the claim, its verdict at paper scale), what differs,
    then the sanity checks apart."""
    if not rows:
        return ["No claims checked in this run."]
    lines = [f"{headline(rows).capitalize()}."]
    if null_line(rows):
        lines += ["", " ".join(x for x in (null_line(rows), seeds_line(rows)) if x)]
    if evidence is not None:
        lines += ["", evidence_summary(evidence, rows[0].paper)]
    at_paper_scale = by_claim(evidence or [])
    paper_rows = [c for c in rows if c.kind != "sanity"]
    if paper_rows:
        shown = any((c.paper, c.claim_id) in at_paper_scale for c in paper_rows)
        head = "| claim | figure | the paper's statement | kind | paper | ours | baseline | threshold | reason | verdict |"
        lines += ["", head + (" paper scale |" if shown else ""), "|---" * (11 if shown else 10) + "|"]
        for c in paper_rows:
            verdict = c.verdict if c.verdict == REPRODUCED else f"**{c.verdict}**"
            cells = [c.claim_id, c.figure, c.statement, c.kind, c.paper_value,
                     f"{c.metric}: {_ours(c)}" if c.metric else _ours(c), _baseline(c), c.target, c.threshold_reason, verdict]
            if shown:
                found = at_paper_scale.get((c.paper, c.claim_id))
                cells.append(evidence_cell(found[0]) if found else "—")
            lines.append("| " + " | ".join(_cell(x) for x in cells) + " |")
    notes = [c for c in paper_rows if c.verdict in (NOT_REPRODUCED, INCONCLUSIVE, UNCHECKED, NOT_DISCRIMINATING)]
    if notes:
        lines += ["", "What differs or why a claim is not decided:", ""]
        lines += [f"- `{c.claim_id}` ({c.verdict}): {what_differs(c)}" for c in notes]
    few = few_seeds(rows)
    if few:
        lines += ["", f"Claims on fewer than {MIN_SEEDS} seeds:", ""]
        lines += [f"- `{c.claim_id}` ({c.seeds} seed{'s' if c.seeds > 1 else ''}): {c.seeds_reason or 'no reason given'}"
                  for c in few]
    sanity_rows = [c for c in rows if c.kind == "sanity"]
    if sanity_rows:
        lines += ["", "Sanity checks (this project's setup; not counted):", "",
                  "| check | figure | statement | measured | threshold | result |", "|---|---|---|---|---|---|"]
        for c in sanity_rows:
            cells = [c.claim_id, c.figure, c.statement, f"{c.metric}: {_ours(c)}", c.target,
                     "ok" if c.verdict == SANITY_OK else "**failed**"]
            lines.append("| " + " | ".join(_cell(x) for x in cells) + " |")
    return lines


def render_markdown(claims: list[Claim], skipped: dict[str, str] | None = None, record: dict | None = None,
                    evidence: list[Figure] | None = None) -> str:
    """The scorecard page; ``record`` (the run record) names the scale and the code that produced it; ``evidence``
    (the committed paper-scale figures, :mod:`featlearn.pipeline.evidence`) is shown beside the run's verdicts."""
    from featlearn.pipeline.runrecord import provenance_line

    by_paper: dict[str, list[Claim]] = defaultdict(list)
    for c in claims:
        by_paper[c.paper].append(c)
    sanity = [c for c in claims if c.kind == "sanity"]
    lines = ["# Scorecard", ""]
    if record:
        lines += [provenance_line(record), ""]
    lines += [f"All papers: {headline(claims)}.", ""]
    if evidence is not None:
        lines += [evidence_summary(evidence), ""]
    if null_line(claims):
        lines += [" ".join(x for x in (null_line(claims), seeds_line(claims)) if x), ""]
    lines += [
        "A claim counts only when it is an empirical statement of the paper (kind `paper`) and no trivial baseline "
        "(the untrained network, a unigram model, a constant predictor) run on the same data passes it too. The paper's "
        "theory checked numerically (kind `paper-theory`: ODEs, quadratures, kernel algebra) holds whatever the training "
        "budget and is counted on its own. "
        "Sanity checks of this project's own setup are listed apart and never counted "
        f"({sum(c.verdict == SANITY_OK for c in sanity)} of {len(sanity)} ok).",
        "",
        "| paper | reproduced | not reproduced | inconclusive | not discriminating | unchecked | theory numerics hold "
        "| sanity ok |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for p in PAPERS:
        rows = by_paper.get(p, [])
        n = {v: sum(c.verdict == v for c in rows if c.kind == "paper") for v in VERDICTS}
        theory = [c for c in rows if c.is_theory]
        sanity_rows = [c for c in rows if c.kind == "sanity"]
        lines.append(f"| `{p}` | {n[REPRODUCED]} | {n[NOT_REPRODUCED]} | {n[INCONCLUSIVE]} | {n[NOT_DISCRIMINATING]} "
                     f"| {n[UNCHECKED]} | "
                     f"{sum(c.passed for c in theory)}/{len(theory)} | "
                     f"{sum(c.verdict == SANITY_OK for c in sanity_rows)}/{len(sanity_rows)} |")
    if skipped:
        lines += ["", "Skipped in this run:", ""]
        lines += [f"- {what}: {why}" for what, why in sorted(skipped.items())]
    for p in PAPERS:
        rows = by_paper.get(p, [])
        lines += ["", f"## {p}: {TITLES[p]}", ""]
        lines += paper_section(rows, None if evidence is None else [f for f in evidence if f.paper == p])
    return "\n".join(lines) + "\n"


def build_scorecard(
    parts: list[str | os.PathLike], out_csv: str | os.PathLike, out_md: str | os.PathLike, skipped: dict[str, str] | None = None,
    out_html: str | os.PathLike | None = None, record: dict | None = None, evidence: list[Figure] | None = None,
) -> list[Claim]:
    """Gather the papers' claims into the scorecard CSV and Markdown (and its HTML copy for the report); the
    committed paper-scale ``evidence`` goes on the Markdown page only (the CSV is this run's)."""
    claims = merge_claims(parts, out_csv)
    text = render_markdown(claims, skipped, record, evidence)
    write_text(out_md, text)
    if out_html:
        from featlearn.pipeline.markdown_html import markdown_to_html

        write_text(out_html, markdown_to_html(text, "featlearn: scorecard"))
    return claims
