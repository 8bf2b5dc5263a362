"""``python -m featlearn templates-sweep|templates-sweep-figure|templates-checks ...``: what the sweep rules
run (Figs. 2c, 3c, 5, 8-23, 25; claims 1-10)."""

from __future__ import annotations

import json

from featlearn.cliutil import add_figure_arguments


def _sweep(args) -> None:
    import torch

    from featlearn.devices import resolve_device
    from featlearn.templates.sweep_experiments import run_figure

    torch.set_num_threads(args.threads)
    run_figure(args.figure, json.loads(args.settings), args.out, device=resolve_device(args.device))


def _figure(args) -> None:
    from featlearn.claims import write_claims
    from featlearn.templates.sweep_figures import figure

    claims = figure(args.figure, args.tables[0], args.figures, args.scale, args.dpi)
    if args.claims:
        write_claims(args.claims, claims)
        print(f"templates Fig. {args.figure}: {sum(c.passed for c in claims)}/{len(claims)} claims pass")
    elif claims:
        raise SystemExit(f"templates Fig. {args.figure} checks claims: give --claims")
    else:
        print(f"templates Fig. {args.figure}: drawn (no claim reads it)")


def _checks(args) -> None:
    import pandas as pd
    import torch

    from featlearn.claims import write_claims
    from featlearn.templates.sweep import write_csv
    from featlearn.templates.sweep_experiments import data_and_identity_checks
    from featlearn.templates.sweep_figures import check_claims

    torch.set_num_threads(1)
    rows = pd.DataFrame(data_and_identity_checks())
    write_csv(rows, args.out)
    claims = check_claims(rows, args.scale)
    write_claims(args.claims, claims)
    print(f"templates checks: {sum(c.passed for c in claims)}/{len(claims)} claims pass")


def register(sub) -> None:
    from featlearn.templates.sweep_experiments import FIGURES, GRIDS

    p = sub.add_parser("templates-sweep", help="train every run of one sweep grid (vectorised per n)")
    p.add_argument("--figure", required=True, choices=GRIDS, help="the grid, named by its (first) figure")
    p.add_argument("--settings", required=True, help="JSON object of templates.sweeps")
    p.add_argument("--device", default="cpu", choices=["auto", "cpu", "cuda"])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", required=True)
    p.set_defaults(func=_sweep)
    p = sub.add_parser("templates-sweep-figure", help="a sweep figure and its claims from its runs table")
    p.add_argument("--figure", required=True, choices=FIGURES)
    add_figure_arguments(p, claims_required=False)
    p.set_defaults(func=_figure)
    p = sub.add_parser("templates-checks", help="claims 1-2: data checks of every task, identity scalings at zero")
    p.add_argument("--out", required=True)
    p.add_argument("--claims", required=True)
    p.add_argument("--scale", required=True)
    p.set_defaults(func=_checks)
