"""Two runs' scorecards claim by claim: which verdicts changed, and how far each measured value moved, as Markdown.

    python benchmarks/scorecard_compare.py REFERENCE/results/scorecard.csv CANDIDATE/results/scorecard.csv \
        --reference-name "CPU, eager" --name "H200, CUDA graphs" --out compare.md

For a run made another way than a reference run of the same config (another device, a CUDA-graph switch, another
precision): the same claims should get the same verdicts. ``--figure PAPER:FIGURE`` (repeatable) keeps the claims of
those figures only (the scorecard's ``paper`` and ``figure`` columns as they are written, e.g. ``features:2`` or
``scan_snap:Fig. 4``, which ``scan_snap:4`` names too), for a candidate that reran some figures in a copy of the
reference's results. Claims of one run only are listed apart; an unchecked claim has no measured value and counts by its
verdict like any other.

The committed reference of the default config on a CPU, for a GPU run's comparison:
``benchmarks/device/default-cpu/scorecard.csv`` (its README says which run made it).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import pandas as pd

KEY = ["paper", "claim_id"]


def read(path: str | Path, figures: list[str] | None = None) -> pd.DataFrame:
    """A scorecard's claims (paper, claim, figure, kind, measured value, verdict), those of ``figures`` only when
    given (``PAPER:FIGURE``)."""
    df = pd.read_csv(path, dtype={"figure": str})
    missing = {"paper", "claim_id", "figure", "kind", "measured", "verdict"} - set(df.columns)
    if missing:
        raise ValueError(f"{path}: not a scorecard (no column {', '.join(sorted(missing))})")
    if df.duplicated(KEY).any():
        raise ValueError(f"{path}: a claim appears twice: {df[df.duplicated(KEY)][KEY].values.tolist()[:3]}")
    if figures:
        wanted = set()
        for f in figures:
            paper, sep, fig = f.partition(":")
            if not sep:
                raise ValueError(f"--figure takes PAPER:FIGURE (e.g. templates:2c), got {f!r}")
            wanted.add((paper, fig))
        df = df[[(p, str(f)) in wanted or (p, str(f).removeprefix("Fig. ")) in wanted
                 for p, f in zip(df["paper"], df["figure"])]]
        if df.empty:
            raise ValueError(f"{path}: no claim of {', '.join(sorted(figures))}")
    return df[["paper", "claim_id", "figure", "kind", "measured", "verdict"]]


def compare(reference: pd.DataFrame, candidate: pd.DataFrame) -> dict:
    """The claims of both runs side by side (``both``), and the claim keys of one run only."""
    both = reference.merge(candidate, on=KEY, how="inner", suffixes=("_ref", "_cand"))
    both["gap"] = (both["measured_cand"] - both["measured_ref"]).abs()
    both["same"] = both["verdict_ref"] == both["verdict_cand"]
    keys = lambda df: set(map(tuple, df[KEY].values.tolist()))  # noqa: E731
    return {"both": both, "only_ref": sorted(keys(reference) - keys(candidate)),
            "only_cand": sorted(keys(candidate) - keys(reference))}


def _fmt(x) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x:.4g}"


def report(result: dict, reference_name: str = "reference", name: str = "candidate") -> str:
    both = result["both"]
    lines = [f"**Verdicts: {int(both['same'].sum())} of {len(both)} claims the same in {name} as in {reference_name}.**"]
    for label, keys in ((f"only in {reference_name}", result["only_ref"]), (f"only in {name}", result["only_cand"])):
        if keys:
            lines.append(f"Claims {label} ({len(keys)}): " + ", ".join(f"`{p}` `{c}`" for p, c in keys) + ".")
    header = (f"| paper | claim | figure | kind | {reference_name} | {name} | |{name} − {reference_name}| | "
              f"verdict {reference_name} | verdict {name} |")
    rule = "|---|---|---|---|---|---|---|---|---|"

    def row(r) -> str:
        return (f"| `{r.paper}` | `{r.claim_id}` | {r.figure_ref} | {r.kind_ref} | {_fmt(r.measured_ref)} | "
                f"{_fmt(r.measured_cand)} | {_fmt(r.gap)} | {r.verdict_ref} | {r.verdict_cand} |")

    changed = both[~both["same"]]
    if len(changed):
        lines += ["", "Changed verdicts:", "", header, rule] + [row(r) for r in changed.itertuples()]
    lines += ["", "Every claim of both runs:", "", header, rule] + [row(r) for r in both.itertuples()]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("reference", type=Path, help="the reference run's scorecard.csv")
    p.add_argument("candidate", type=Path, help="the other run's scorecard.csv")
    p.add_argument("--reference-name", default="reference", help="the reference's name, for the headers")
    p.add_argument("--name", default="candidate", help="the candidate's name, for the headers")
    p.add_argument("--figure", action="append", metavar="PAPER:FIGURE", help="only the claims of this figure (repeatable)")
    p.add_argument("--out", type=Path, help="write the Markdown here (default: print it)")
    a = p.parse_args(argv)
    text = report(compare(read(a.reference, a.figure), read(a.candidate, a.figure)), a.reference_name, a.name)
    if a.out:
        a.out.write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
