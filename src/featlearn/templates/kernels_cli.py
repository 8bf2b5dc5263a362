"""``python -m featlearn templates-kernels|templates-kernels-figure ...``: what the kernel-theory rules run (Sec. 3)."""

from __future__ import annotations

import json

from featlearn.cliutil import add_figure_arguments


def _compute(args) -> None:
    import torch

    from featlearn.templates.kernels import write_tables

    torch.set_num_threads(args.threads)
    write_tables(json.loads(args.settings), *args.out)


def _figure(args) -> None:
    from featlearn.claims import write_claims
    from featlearn.templates.kernels_figures import fig_kernels

    claims = fig_kernels(*args.tables, args.figures, args.scale, args.dpi)
    if args.claims:
        write_claims(args.claims, claims)
    print(f"templates kernels: {sum(c.passed for c in claims)}/{len(claims)} claims pass")


def register(sub) -> None:
    p = sub.add_parser("templates-kernels", help="Templates Sec. 3: N matrices, K_attn at beta = 0, kernel ridge regression")
    p.add_argument("--settings", required=True, help="JSON object of templates.kernels")
    p.add_argument("--out", nargs=3, required=True, metavar=("N_MATRIX_CSV", "BETA0_CSV", "KRR_CSV"))
    p.add_argument("--threads", type=int, default=1)
    p.set_defaults(func=_compute)
    p = sub.add_parser("templates-kernels-figure", help="Templates Sec. 3: the kernel figure and claim 11 from the tables")
    add_figure_arguments(p, claims_required=False)
    p.set_defaults(func=_figure)
