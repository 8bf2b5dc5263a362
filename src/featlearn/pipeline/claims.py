"""Claims: one row per checked statement of a paper, honestly measured, with its verdict.

Each figure's claims function returns :class:`Claim` records made by :func:`check` (or :func:`unchecked`);
a paper's ``claims.csv`` concatenates them and the scorecard gathers every paper. ``passed`` is computed
from ``measured`` by the comparison the claim states, never typed in by hand, and so is the verdict:

- ``kind``: ``paper`` (an empirical statement of the paper: what a trained network does), ``paper-theory`` (a
  number the paper's theory predicts, checked numerically: an ODE, a quadrature, kernel algebra; it holds
  whatever the training budget, so it is counted on its own line, never in the headline's empirical count)
  or ``sanity`` (a check of this project's own setup: a loss falls, a value at initialisation; listed apart
  and never counted).
- ``baseline``: a trivial model run on the same data (the untrained network, a unigram model, a constant
  predictor), measured the same way and put through the same comparison. A claim its baseline passes too
  does not discriminate: it could not have told a trained network from an untrained one. A baseline of several
  draws (untrained networks of several initialisations, one per seed) is a null: ``baseline_draws`` says how
  many, ``baseline_pass_rate`` which fraction of them passes, and the baseline passes when that fraction exceeds
  :data:`NULL_ALPHA`. A claim with no baseline that could pass says why in ``baseline`` (``no baseline: why``).
- ``verdict``: ``reproduced`` (passes; no baseline passes), ``not reproduced`` (fails), ``not
  discriminating`` (passes, and so does the baseline), ``inconclusive`` (an empirical claim whose measurement,
  a mean over seeds, lies within its seed spread of the threshold: the seeds' noise could carry it to either
  side; not counted), ``unchecked`` (not measurable in this run: the reason is in ``note``); sanity checks get
  ``sanity ok`` or ``sanity failed``.
- ``threshold_reason`` says where the threshold comes from (a number the paper prints, a statistical
  argument with its number of seeds, an exact identity); ``paper_value`` is the paper's own number where it
  prints one; ``spread`` is the standard deviation over ``seeds`` seeds where the measurement is a mean;
  ``seeds_reason`` says why an empirical claim rests on fewer than :data:`MIN_SEEDS` seeds.
"""

from __future__ import annotations

import csv
import math
import os
from dataclasses import asdict, dataclass, fields
import numbers
import re
from typing import Iterable, Mapping, Sequence

from featlearn import PAPERS
from featlearn.io import atomic_open

KINDS = ("paper", "paper-theory", "sanity")
REPRODUCED, NOT_REPRODUCED, NOT_DISCRIMINATING, UNCHECKED = "reproduced", "not reproduced", "not discriminating", "unchecked"
INCONCLUSIVE = "inconclusive"
SANITY_OK, SANITY_FAILED = "sanity ok", "sanity failed"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, NOT_DISCRIMINATING, INCONCLUSIVE, UNCHECKED, SANITY_OK, SANITY_FAILED)
COLUMNS = (
    "paper", "claim_id", "figure", "statement", "kind", "metric", "measured", "spread", "seeds", "seeds_reason", "target",
    "threshold_reason", "paper_value", "baseline", "baseline_measured", "baseline_draws", "baseline_pass_rate",
    "baseline_passed", "passed", "verdict",
    "scale", "note",
)
_FLOATS = ("measured", "spread", "baseline_measured", "baseline_pass_rate")
_OPS = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b,
}
NAN = float("nan")
# A baseline of several draws passes when more than this fraction of its draws passes the claim's comparison: the
# usual 5% level of a test, here the share of null draws (untrained initialisations) a claim lets through. With k
# draws the smallest nonzero rate is 1/k, so a null of fewer than 20 draws passes as soon as one draw does.
NULL_ALPHA = 0.05
NO_BASELINE = "no baseline"
# An empirical claim rests on at least this many seeds where the paper's figure has seeds; a claim on fewer says why
# (``seeds_reason``, declared by the paper's registry: the cost of more at this scale, or one run in the paper).
MIN_SEEDS = 3


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
    kind: str = "paper"
    spread: float = NAN
    seeds: int = 1
    seeds_reason: str = ""
    threshold_reason: str = ""
    paper_value: str = ""
    baseline: str = ""
    baseline_measured: float = NAN
    baseline_draws: int = 0
    baseline_pass_rate: float = NAN
    baseline_passed: bool | None = None
    verdict: str = ""
    note: str = ""

    def __post_init__(self):
        if self.paper not in PAPERS:
            raise ValueError(f"unknown paper {self.paper!r}; expected one of {PAPERS}")
        if not self.claim_id:
            raise ValueError("claim_id must not be empty")
        if self.kind not in KINDS:
            raise ValueError(f"claim {self.claim_id}: unknown kind {self.kind!r}; expected one of {KINDS}")
        if self.baseline_draws > 1 and self.baseline_passed is not (self.baseline_pass_rate > NULL_ALPHA):
            raise ValueError(f"claim {self.claim_id}: a baseline of {self.baseline_draws} draws passes exactly when more "
                             f"than {NULL_ALPHA:g} of them pass (rate {self.baseline_pass_rate:g})")
        derived = verdict_of(self.kind, self.passed, self.baseline_passed)
        if not self.verdict:
            object.__setattr__(self, "verdict", derived)
        if self.verdict not in VERDICTS:
            raise ValueError(f"claim {self.claim_id}: unknown verdict {self.verdict!r}")
        # a verdict is derived, never typed in: only "unchecked" (nothing measured) stands on its own, and
        # "inconclusive" (set by check from the margin) needs an empirical claim with a seed spread
        within_noise = self.verdict == INCONCLUSIVE and self.kind == "paper" and not math.isnan(self.spread)
        if self.verdict != derived and not within_noise and not (self.verdict == UNCHECKED and math.isnan(self.measured)):
            raise ValueError(f"claim {self.claim_id}: verdict {self.verdict!r} does not follow from its result ({derived!r})")

    @property
    def counts(self) -> bool:
        """Whether the claim counts in the headline: an empirical paper claim that discriminates (see module
        docstring)."""
        return self.kind == "paper" and self.verdict in (REPRODUCED, NOT_REPRODUCED)

    @property
    def null(self) -> str:
        """What the claim was tested against: ``k draws`` (a null of several untrained initialisations), ``1 draw``
        (one trivial model), ``none`` (the claim says why in its baseline) or empty (no baseline recorded)."""
        if self.baseline.startswith(NO_BASELINE):
            return "none"
        if self.baseline_draws:
            return f"{self.baseline_draws} draw{'s' if self.baseline_draws > 1 else ''}"
        return ""

    @property
    def is_theory(self) -> bool:
        """A numerical check of the paper's theory that was measured (counted on the headline's theory line)."""
        return self.kind == "paper-theory" and self.verdict != UNCHECKED

    # identity that survives a CSV round trip (NaN != NaN would make equal claims compare unequal)
    def _key(self):
        return tuple("nan" if isinstance(v, float) and math.isnan(v) else v for v in asdict(self).values())

    def __eq__(self, other):
        return isinstance(other, Claim) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())


UNTRAINED = "untrained network"


def frozen_at_init(table, keys: list[str], values: list[str]):
    """The untrained-network baseline of a training history (a pandas table with a ``step`` column): every
    step carries the first step's ``values`` (per ``keys``), as if nothing had been learned, so a claim
    measured on it the same way shows what the untrained network scores."""
    first = table.loc[table["step"] == table["step"].min(), keys + values]
    return table.drop(columns=values).merge(first, on=keys, how="left")[table.columns]


def verdict_of(kind: str, passed: bool, baseline_passed: bool | None) -> str:
    if kind == "sanity":
        return SANITY_OK if passed else SANITY_FAILED
    if not passed:
        return NOT_REPRODUCED
    return NOT_DISCRIMINATING if baseline_passed else REPRODUCED


def _compare(value: float, op: str, threshold: float, within: float | None) -> bool:
    if math.isnan(value):
        return False
    if within is not None:
        return abs(value - threshold) <= within
    return bool(_OPS[op](value, threshold))


def passes(value: float, op: str, threshold: float, within: float | None = None) -> bool:
    """Whether ``value`` passes the comparison of :func:`check` (a NaN never does)."""
    return _compare(float(value), op, threshold, within)


def fixed_baseline(name: str, draws, op: str, threshold: float, why: str, within: float | None = None) -> dict:
    """The ``baseline`` argument of :func:`check` for a trivial model that is the same on every draw by construction
    (a zero initialisation, a constant predictor): when it fails the comparison it could never have passed, so the
    claim gets ``no_baseline`` with ``why`` and the value instead of a baseline that makes it look discriminating."""
    values = [float(draws)] if isinstance(draws, numbers.Real) else [float(v) for v in draws]
    same = all(v == values[0] or (math.isnan(v) and math.isnan(values[0])) for v in values)
    if same and not _compare(values[0], op, threshold, within):
        return {"no_baseline": f"{why}: it scores {values[0]:.4g} on every draw, which fails by construction"}
    return {"baseline": (name, draws)}


def fmt_value(x: float) -> str:
    """A measured value as the pages print it (4 significant digits; empty for NaN)."""
    return "" if math.isnan(x) else f"{x:.4g}"


def shown_value(c: Claim) -> str:
    """A claim's measurement as the pages print it: value, ± its seeds' spread, (n seeds); an em dash when none."""
    if math.isnan(c.measured):
        return "—"
    spread = f" ± {fmt_value(c.spread)}" if not math.isnan(c.spread) else ""
    seeds = f" ({c.seeds} seeds)" if c.seeds > 1 else ""
    return f"{fmt_value(c.measured)}{spread}{seeds}"


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
    kind: str = "paper",
    reason: str = "",
    paper_value: str | float = "",
    spread: float = NAN,
    seeds: int = 1,
    baseline: tuple[str, float | Sequence[float]] | None = None,
    no_baseline: str = "",
    note: str = "",
) -> Claim:
    """Make a claim whose pass/fail is ``measured <op> threshold`` (or ``|measured - threshold| <= within``).

    A NaN measurement (e.g. a diverged run) always fails. ``baseline`` = (what it is, its measurement) is
    put through the same comparison; a sequence of measurements is a null of several draws (one per untrained
    initialisation), which passes when more than :data:`NULL_ALPHA` of its draws pass (a NaN draw fails).
    ``no_baseline``: why the claim has no baseline that could pass (its baseline reads ``no baseline: why``).
    ``reason`` is the threshold's reason. An empirical claim (kind ``paper``)
    measured as a mean over seeds whose distance to the threshold is at most its ``spread`` (the seeds' standard
    deviation) is ``inconclusive``, passed or not: the margin must exceed the noise (:func:`margin`).
    """
    measured = float(measured)
    if within is not None:
        target = f"{threshold:g} ± {within:g}"
    else:
        if op not in _OPS:
            raise ValueError(f"unknown comparison {op!r}; use one of {sorted(_OPS)}")
        target = f"{op} {threshold:g}"
    passed = _compare(measured, op, threshold, within)
    base_name, base_value, base_passed, draws, rate = "", NAN, None, 0, NAN
    if baseline is not None and no_baseline:
        raise ValueError(f"claim {claim_id}: a baseline and a reason for having none")
    if baseline is not None:
        base_name, values = baseline[0], baseline[1]
        values = [float(values)] if isinstance(values, numbers.Real) else [float(v) for v in values]
        if not values:
            raise ValueError(f"claim {claim_id}: a baseline of no draws")
        finite = [v for v in values if not math.isnan(v)]
        base_value = sum(finite) / len(finite) if finite else NAN
        draws = len(values)
        rate = sum(_compare(v, op, threshold, within) for v in values) / draws
        base_passed = rate > NULL_ALPHA if draws > 1 else rate == 1.0
    elif no_baseline:
        base_name = f"{NO_BASELINE}: {no_baseline}"
    if isinstance(paper_value, float):
        paper_value = f"{paper_value:g}"
    verdict = ""
    if kind == "paper" and not (passed and base_passed) and within_noise(measured, op, threshold, within, float(spread)):
        verdict = INCONCLUSIVE
        note = "; ".join(x for x in (note, f"within the seed spread {float(spread):.3g} of the threshold "
                                           f"(margin {margin(measured, op, threshold, within):.3g})") if x)
    return Claim(paper, claim_id, figure, statement, metric, measured, target, passed, scale, kind=kind,
                 spread=float(spread), seeds=int(seeds), threshold_reason=reason, paper_value=str(paper_value),
                 baseline=base_name, baseline_measured=base_value, baseline_draws=draws, baseline_pass_rate=rate,
                 baseline_passed=base_passed, verdict=verdict, note=note)


def margin(value: float, op: str, threshold: float, within: float | None) -> float:
    """How far ``value`` lies from the claim's decision boundary (the threshold, or threshold ± within)."""
    if within is not None:
        return abs(abs(value - threshold) - within)
    return abs(value - threshold)


def within_noise(value: float, op: str, threshold: float, within: float | None, spread: float) -> bool:
    """Whether a measured mean lies within its seed spread of the decision boundary (an exact comparison, ``==``,
    has none: it is a count, not a noisy mean)."""
    if math.isnan(value) or math.isnan(spread) or op == "==" and within is None:
        return False
    return margin(value, op, threshold, within) <= spread


def unchecked(paper: str, claim_id: str, figure: str, statement: str, why: str, scale: str, *, kind: str = "paper",
              paper_value: str = "", reason: str = "") -> Claim:
    """A claim this run cannot decide (e.g. the grid stops before the paper's transition): ``why`` goes to the
    note; ``reason`` is the reason of the threshold it would be checked against."""
    return Claim(paper, claim_id, figure, statement, "", NAN, "", False, scale, kind=kind, threshold_reason=reason,
                 paper_value=paper_value, verdict=UNCHECKED, note=why)


def short_grid(claim: Claim, why: str) -> Claim:
    """The short-grid rule, one for every paper: a claim that fails on a grid that stops before the condition the
    paper states (its n, its learning rates) is ``unchecked`` with ``why``, not "not reproduced": the grid could not
    have shown it. A claim that passes on a shorter grid passes. ``why`` empty: the grid reaches the condition."""
    if not why or claim.passed or claim.verdict == UNCHECKED:
        return claim
    return unchecked(claim.paper, claim.claim_id, claim.figure, claim.statement, why, claim.scale, kind=claim.kind,
                     paper_value=claim.paper_value, reason=claim.threshold_reason)


def gate(claim: Claim, *prerequisites: Claim) -> Claim:
    """``claim``, or, when a sanity check it rests on failed (a run that has not converged, a data count off), the
    same claim as ``unchecked: prerequisite <id> failed`` with what it measured in the note: a claim about
    converged runs says nothing about runs that have not converged."""
    failed = [p for p in prerequisites if p.kind == "sanity" and p.verdict == SANITY_FAILED]
    if not failed or claim.verdict == UNCHECKED:
        return claim
    why = "; ".join(f"prerequisite {p.claim_id} failed ({p.metric} = {p.measured:.4g}, needs {p.target})" for p in failed)
    was = f"; measured {claim.measured:.4g} against {claim.target}, which would be {claim.verdict}"
    return unchecked(claim.paper, claim.claim_id, claim.figure, claim.statement, why + was, claim.scale, kind=claim.kind,
                     paper_value=claim.paper_value, reason=claim.threshold_reason)


def write_claims(path: str | os.PathLike, claims: Iterable[Claim]) -> None:
    with atomic_open(path, newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS)
        writer.writeheader()
        for c in claims:
            row = asdict(c)
            for name in _FLOATS:
                row[name] = repr(getattr(c, name))
            row["baseline_passed"] = "" if c.baseline_passed is None else str(c.baseline_passed)
            writer.writerow(row)


def _bool(path, row, name, allow_empty=False):
    value = row[name]
    if allow_empty and value == "":
        return None
    if value not in ("True", "False"):
        raise ValueError(f"{path}: {name} must be True or False, got {value!r}")
    return value == "True"


def read_claims(path: str | os.PathLike) -> list[Claim]:
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        if tuple(reader.fieldnames or ()) != COLUMNS:
            raise ValueError(f"{path}: columns {reader.fieldnames} are not the claims columns {COLUMNS}")
        out = []
        special = (*_FLOATS, "passed", "baseline_passed", "seeds", "baseline_draws")
        for row in reader:
            out.append(
                Claim(
                    **{f.name: row[f.name] for f in fields(Claim) if f.name not in special},
                    **{name: float(row[name]) for name in _FLOATS},
                    seeds=int(row["seeds"]),
                    baseline_draws=int(row["baseline_draws"]),
                    passed=_bool(path, row, "passed"),
                    baseline_passed=_bool(path, row, "baseline_passed", allow_empty=True),
                )
            )
    return out


def merge_claims(parts: Iterable[str | os.PathLike], out: str | os.PathLike, paper: str | None = None,
                 unchecked_claims: Mapping[str, Sequence[str]] | None = None, scale: str = "",
                 gates: Mapping[str, Sequence[str]] | None = None,
                 few_seeds: Mapping[str, str] | None = None) -> list[Claim]:
    """Concatenate claim tables, then add ``unchecked_claims`` (claim id -> (figure, statement, why): the claims of
    figures this run skips) as unchecked; duplicated (paper, claim_id) pairs are an error. ``gates`` (claim id
    pattern -> the ids of the sanity checks those claims rest on) makes a claim unchecked when one of its
    prerequisites failed (:func:`gate`). ``few_seeds`` (claim id pattern -> why) gives an empirical claim measured
    on fewer than :data:`MIN_SEEDS` seeds its ``seeds_reason``."""
    extra = [unchecked(paper or "", cid, fig, statement, why, scale)
             for cid, (fig, statement, why) in (unchecked_claims or {}).items()]
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
    for c in extra:
        if (c.paper, c.claim_id) in seen:
            raise ValueError(f"claim {c.paper}/{c.claim_id} is both measured and listed as unchecked")
        claims.append(c)
    if gates:
        from fnmatch import fnmatchcase

        by_id = {c.claim_id: c for c in claims}
        claims = [gate(c, *(by_id[p] for pattern, needs in gates.items() if fnmatchcase(c.claim_id, pattern)
                            for p in needs if p in by_id))
                  for c in claims]
    if few_seeds:
        claims = [with_seeds_reason(c, few_seeds) for c in claims]
    write_claims(out, claims)
    return claims


def with_seeds_reason(claim: Claim, few_seeds: Mapping[str, str]) -> Claim:
    """``claim`` with the reason its registry gives for resting on fewer than :data:`MIN_SEEDS` seeds (the most specific
    matching pattern of ``few_seeds``: the longest before its first wildcard, so ``12_*`` wins over ``*`` whatever the
    order), when it is a measured empirical claim on fewer and has none yet."""
    from dataclasses import replace
    from fnmatch import fnmatchcase

    if claim.kind != "paper" or claim.verdict == UNCHECKED or claim.seeds >= MIN_SEEDS or claim.seeds_reason:
        return claim
    matching = [p for p in few_seeds if fnmatchcase(claim.claim_id, p)]
    if not matching:
        return claim
    best = max(matching, key=lambda p: (len(re.split(r"[*?\[]", p, maxsplit=1)[0]), len(p)))
    return replace(claim, seeds_reason=few_seeds[best])
