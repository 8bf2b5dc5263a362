"""``python -m featlearn joma-compute|joma-figure ...``: what the joma rules run."""

from __future__ import annotations

import json

from featlearn.cliutil import add_figure_arguments


def _compute(args) -> None:
    from featlearn.joma import experiments as ex

    cfg = json.loads(args.settings)
    {"eq6": ex.eq6_tables, "theorem2": ex.theorem2_table}[args.experiment](cfg, *args.out)


def _figure(args) -> None:
    from featlearn.claims import write_claims
    from featlearn.joma import figures as F

    cfg = json.loads(args.settings) if args.settings else {}
    t = args.tables
    claims = {
        "4": lambda: F.fig4(t[0], t[1], args.figures, args.scale, args.dpi, cfg["log_every"], cfg["converge_tol"]),
        "theorem2": lambda: F.theorem2_claims(t[0], args.scale),
    }[args.figure]()
    write_claims(args.claims, claims)
    print(f"joma {args.figure}: {sum(c.passed for c in claims)}/{len(claims)} claims pass")


def register(sub) -> None:
    p = sub.add_parser("joma-compute", help="JoMA: simulate and write tidy tables")
    p.add_argument("--experiment", required=True, choices=["eq6", "theorem2"])
    p.add_argument("--settings", required=True)
    p.add_argument("--out", nargs="+", required=True)
    p.set_defaults(func=_compute)
    p = sub.add_parser("joma-figure", help="JoMA: one figure (and its claims) from tables")
    p.add_argument("--figure", required=True, choices=["4", "theorem2"])
    add_figure_arguments(p, claims_required=True)
    p.set_defaults(func=_figure)
