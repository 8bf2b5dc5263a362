"""Claims: one row per checked statement of a paper, honestly measured.

Each experiment writes its checks with :func:`write_claims`; a paper's ``claims.csv`` concatenates them,
and the scorecard gathers every paper. ``passed`` is computed from ``measured`` by the comparison the
claim states; it is never typed in by hand.
"""

from __future__ import annotations

import csv
import math
import os
from dataclasses import asdict, dataclass, fields
from typing import Iterable

from featlearn import PAPERS
from featlearn.io import atomic_open

COLUMNS = ("paper", "claim_id", "figure", "statement", "metric", "measured", "target", "passed", "scale")
_OPS = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b,
}


@dataclass(frozen=True)
class Claim:
    paper: str
    claim_id: str
    figure: str
    statement: str
    metric: str
    measured: float
    target: str
    passed: bool
    scale: str

    def __post_init__(self):
        if self.paper not in PAPERS:
            raise ValueError(f"unknown paper {self.paper!r}; expected one of {PAPERS}")
        if not self.claim_id:
            raise ValueError("claim_id must not be empty")


def check(
    paper: str,
    claim_id: str,
    figure: str,
    statement: str,
    metric: str,
    measured: float,
    op: str,
    threshold: float,
    scale: str,
    *,
    within: float | None = None,
) -> Claim:
    """Make a claim whose pass/fail is ``measured <op> threshold`` (or ``|measured - threshold| <= within``).

    A NaN measurement (e.g. a diverged run) always fails.
    """
    measured = float(measured)
    if within is not None:
        target = f"{threshold:g} ± {within:g}"
        passed = not math.isnan(measured) and abs(measured - threshold) <= within
    else:
        if op not in _OPS:
            raise ValueError(f"unknown comparison {op!r}; use one of {sorted(_OPS)}")
        target = f"{op} {threshold:g}"
        passed = not math.isnan(measured) and _OPS[op](measured, threshold)
    return Claim(paper, claim_id, figure, statement, metric, measured, target, bool(passed), scale)


def write_claims(path: str | os.PathLike, claims: Iterable[Claim]) -> None:
    with atomic_open(path, newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS)
        writer.writeheader()
        for c in claims:
            row = asdict(c)
            row["measured"] = repr(c.measured)
            writer.writerow(row)


def read_claims(path: str | os.PathLike) -> list[Claim]:
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        if tuple(reader.fieldnames or ()) != COLUMNS:
            raise ValueError(f"{path}: columns {reader.fieldnames} are not the claims columns {COLUMNS}")
        out = []
        for row in reader:
            if row["passed"] not in ("True", "False"):
                raise ValueError(f"{path}: passed must be True or False, got {row['passed']!r}")
            out.append(
                Claim(
                    **{f.name: row[f.name] for f in fields(Claim) if f.name not in ("measured", "passed")},
                    measured=float(row["measured"]),
                    passed=row["passed"] == "True",
                )
            )
    return out


def merge_claims(parts: Iterable[str | os.PathLike], out: str | os.PathLike, paper: str | None = None) -> list[Claim]:
    """Concatenate claim tables; duplicated (paper, claim_id) pairs are an error."""
    claims: list[Claim] = []
    seen: set[tuple[str, str]] = set()
    for part in parts:
        for c in read_claims(part):
            if paper is not None and c.paper != paper:
                raise ValueError(f"{part}: claim {c.claim_id} belongs to {c.paper}, not {paper}")
            key = (c.paper, c.claim_id)
            if key in seen:
                raise ValueError(f"{part}: duplicate claim {c.paper}/{c.claim_id}")
            seen.add(key)
            claims.append(c)
    write_claims(out, claims)
    return claims
