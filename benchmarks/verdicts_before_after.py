"""Two scorecards of the same measurements under two sets of verdict rules: the headline per paper and every claim
whose kind or verdict changed, as Markdown.

    python benchmarks/verdicts_before_after.py BEFORE/results/scorecard.csv AFTER/results/scorecard.csv

The "before" headline is counted as the rules of its day counted it (every paper or paper-theory claim that
discriminates); the "after" one as :func:`featlearn.pipeline.scorecard.headline` counts now (empirical claims only,
theory numerics apart).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

COUNTED = ("reproduced", "not reproduced")


def _old_counts(rows) -> tuple[int, int]:
    counted = [c for c in rows if c.kind != "sanity" and c.verdict in COUNTED]
    return sum(c.verdict == "reproduced" for c in counted), len(counted)


def _new_counts(rows) -> tuple[int, int, int, int]:
    counted = [c for c in rows if c.counts]
    theory = [c for c in rows if c.is_theory]
    return sum(c.verdict == "reproduced" for c in counted), len(counted), sum(c.passed for c in theory), len(theory)


def read_any(path: str) -> list:
    """A claims table of this version, or of an earlier one whose columns were fewer: the missing columns get the
    values a row of that day meant (no seeds reason; a baseline, where there is one, of one draw)."""
    import csv
    import tempfile

    from featlearn.pipeline.claims import COLUMNS, read_claims

    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
        if tuple(reader.fieldnames or ()) == COLUMNS:
            return read_claims(path)
    for row in rows:
        row.setdefault("seeds_reason", "")
        one = row["baseline_passed"] in ("True", "False")
        row.setdefault("baseline_draws", "1" if one else "0")
        row.setdefault("baseline_pass_rate", repr(float(row["baseline_passed"] == "True")) if one else "nan")
    with tempfile.NamedTemporaryFile("w", suffix=".csv", newline="", delete=False) as tmp:
        writer = csv.DictWriter(tmp, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows({k: row.get(k, "") for k in COLUMNS} for row in rows)
    try:
        return read_claims(tmp.name)
    finally:
        Path(tmp.name).unlink()


def _why(a, b) -> str:
    if b.verdict in ("unchecked", "inconclusive"):
        return b.note
    if a.kind != b.kind:
        return "re-kinded by what it measures"
    if b.verdict == "not discriminating" and b.baseline_draws > 1:
        return (f"{round(b.baseline_pass_rate * b.baseline_draws)} of {b.baseline_draws} draws of its null "
                f"({b.baseline}) pass too")
    if b.target != a.target:
        return f"threshold {a.target} -> {b.target}: {b.threshold_reason}"
    return ""


def compare(before_csv: str, after_csv: str, before_counts: str = "old") -> str:
    """``before_counts``: ``old`` counts the before table as the first rules did (every discriminating paper or
    paper-theory claim), ``new`` as the headline counts now (empirical claims only)."""
    from featlearn import PAPERS

    before, after = read_any(before_csv), read_any(after_csv)
    count_before = _old_counts if before_counts == "old" else (lambda rows: _new_counts(rows)[:2])
    label = "reproduced of counted" if before_counts == "old" else "reproduced of empirical"
    old = {(c.paper, c.claim_id): c for c in before}
    new = {(c.paper, c.claim_id): c for c in after}
    lines = [f"| paper | before: {label} | after: reproduced of empirical | after: theory numerics hold | "
             "after: unchecked | after: inconclusive |", "|---|---|---|---|---|---|"]
    for p in PAPERS:
        r0, d0 = count_before([c for c in before if c.paper == p])
        r1, d1, t1, m1 = _new_counts([c for c in after if c.paper == p])
        u1 = sum(c.verdict == "unchecked" and c.kind == "paper" for c in after if c.paper == p)
        i1 = sum(c.verdict == "inconclusive" for c in after if c.paper == p)
        lines.append(f"| `{p}` | {r0} of {d0} | {r1} of {d1} | {t1} of {m1} | {u1} | {i1} |")
    r0, d0 = count_before(before)
    r1, d1, t1, m1 = _new_counts(after)
    u1 = sum(c.verdict == "unchecked" and c.kind == "paper" for c in after)
    i1 = sum(c.verdict == "inconclusive" for c in after)
    lines.append(f"| all | {r0} of {d0} | {r1} of {d1} | {t1} of {m1} | {u1} | {i1} |")
    lines += ["", "| paper | claim | before (kind, verdict) | after (kind, verdict) | why |", "|---|---|---|---|---|"]
    for key in sorted(set(old) | set(new), key=lambda k: (PAPERS.index(k[0]), k[1])):
        a, b = old.get(key), new.get(key)
        if a and b and (a.kind, a.verdict) == (b.kind, b.verdict):
            continue
        was = f"{a.kind}, {a.verdict}" if a else "no row"
        now = f"{b.kind}, {b.verdict}" if b else "no row"
        why = _why(a, b) if a and b else b.note if b else ""
        lines.append(f"| `{key[0]}` | `{key[1]}` | {was} | {now} | {why.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--before-counts", choices=("old", "new"), default="old",
                    help="count the before table as the first rules did (old) or as the headline counts now (new)")
    args = ap.parse_args(argv)
    print(compare(args.before, args.after, args.before_counts), end="")


if __name__ == "__main__":
    main()
