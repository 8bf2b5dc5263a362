"""The scorecard: every paper's claims in one CSV and one readable Markdown page."""

from __future__ import annotations

import os
from collections import defaultdict

from featlearn import PAPERS
from featlearn.claims import Claim, merge_claims
from featlearn.io import write_text

TITLES = {
    "features": "Sun, Li, Lu 2023: Unraveling feature extraction mechanisms (NTK)",
    "scan_snap": "Tian et al. 2023: Scan and Snap",
    "joma": "Tian et al. 2023: JoMA",
    "templates": "Boix-Adserà et al. 2023: Template tasks",
}


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def render_markdown(claims: list[Claim], skipped: dict[str, str] | None = None) -> str:
    by_paper: dict[str, list[Claim]] = defaultdict(list)
    for c in claims:
        by_paper[c.paper].append(c)
    total = sum(c.passed for c in claims)
    lines = ["# Scorecard", "", f"{total}/{len(claims)} claims pass.", ""]
    lines += ["| paper | passed | total |", "|---|---|---|"]
    for p in PAPERS:
        rows = by_paper.get(p, [])
        lines.append(f"| `{p}` | {sum(c.passed for c in rows)} | {len(rows)} |")
    if skipped:
        lines += ["", "Skipped in this run:", ""]
        lines += [f"- {what}: {why}" for what, why in sorted(skipped.items())]
    for p in PAPERS:
        rows = by_paper.get(p, [])
        lines += ["", f"## {p}: {TITLES[p]}", ""]
        if not rows:
            lines.append("No claims checked yet.")
            continue
        lines.append(f"{sum(c.passed for c in rows)}/{len(rows)} pass.")
        lines += ["", "| claim | figure | statement | metric | measured | target | scale | result |", "|---|---|---|---|---|---|---|---|"]
        for c in rows:
            cells = [c.claim_id, c.figure, c.statement, c.metric, _fmt(c.measured), c.target, c.scale, "pass" if c.passed else "**FAIL**"]
            lines.append("| " + " | ".join(s.replace("|", "\\|") for s in cells) + " |")
    return "\n".join(lines) + "\n"


def build_scorecard(
    parts: list[str | os.PathLike], out_csv: str | os.PathLike, out_md: str | os.PathLike, skipped: dict[str, str] | None = None
) -> list[Claim]:
    claims = merge_claims(parts, out_csv)
    write_text(out_md, render_markdown(claims, skipped))
    return claims
