"""``python -m featlearn figure``: draw one registry :class:`~featlearn.pipeline.registry.Figure` and write its claims.

A draw function returns a matplotlib figure (saved in every requested format) or a :class:`Table` (written
as CSV and Markdown, and LaTeX where it has one); a claims function returns the list of
:class:`~featlearn.pipeline.claims.Claim` it checked. One command writes the record's own drawing (``--draw``,
``--figures``) and each further drawing of the record (``--also``: its function and files).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import pandas as pd


@dataclass(frozen=True)
class Table:
    """A table figure: the tidy frame (CSV) and its rendering for the report (Markdown)."""

    frame: pd.DataFrame
    markdown: str
    latex: str | None = None


def write_outputs(drawn, paths: list[str], dpi: int) -> None:
    """Save what a draw function returned to ``paths`` (the format follows each extension)."""
    from featlearn.io import write_csv, write_text

    if isinstance(drawn, Table):
        for path in paths:
            ext = os.path.splitext(path)[1]
            if ext == ".csv":
                write_csv(drawn.frame, path)
            elif ext == ".md":
                write_text(path, drawn.markdown)
            elif ext == ".tex" and drawn.latex is not None:
                write_text(path, drawn.latex)
            else:
                raise ValueError(f"{path}: a table is written as .csv or .md (or .tex, when it has LaTeX)")
        return
    from featlearn.plotting import save_figure

    save_figure(drawn, *paths, dpi=dpi)


def check_declared(claims, declared: list[str]) -> None:
    """Every claim written is one the registry declares (when it declares them). A declared claim may be
    missing: some are written only when the run has what they need (a step-0 checkpoint, a second layer)."""
    from fnmatch import fnmatchcase

    if not declared:
        return
    stray = [c.claim_id for c in claims if not any(fnmatchcase(c.claim_id, pattern) for pattern in declared)]
    if stray:
        raise ValueError(f"claims {stray} are not declared in the registry (declared: {declared})")


def _main(args) -> None:
    from featlearn.pipeline.claims import write_claims
    from featlearn.pipeline.registry import load

    inputs = json.loads(args.inputs)
    cfg = {**json.loads(args.settings), "scale": args.scale}
    if args.draw:
        write_outputs(load(args.draw)(inputs, cfg), args.figures, args.dpi)
    for drawing in json.loads(args.also):
        write_outputs(load(drawing["draw"])(inputs, cfg), drawing["files"], args.dpi)
    if args.claims_fn:
        claims = load(args.claims_fn)(inputs, cfg)
        check_declared(claims, json.loads(args.claim_ids))
        write_claims(args.claims, claims)
        verdicts = ", ".join(f"{c.claim_id}: {c.verdict}" for c in claims)
        print(f"{args.claims}: {verdicts}")


def register(sub) -> None:
    p = sub.add_parser("figure", help="draw one figure or table of a paper's registry and check its claims")
    p.add_argument("--draw", default="", help="module:function drawing the figure (none for a check)")
    p.add_argument("--claims-fn", default="", help="module:function returning the figure's claims")
    p.add_argument("--inputs", required=True, help="JSON object: table name -> path or list of paths")
    p.add_argument("--settings", default="{}", help="JSON object: the figure's settings")
    p.add_argument("--figures", nargs="*", default=[], help="output files; the format follows the extension")
    p.add_argument("--also", default="[]", help='JSON list of further drawings: {"draw": module:function, "files": [...]}')
    p.add_argument("--claims", default="", help="claims table to write")
    p.add_argument("--claim-ids", default="[]", help="JSON list: the claim ids (patterns) the registry declares")
    p.add_argument("--scale", required=True, help="label of the configuration scale")
    p.add_argument("--dpi", type=int, required=True)
    p.set_defaults(func=_main)
