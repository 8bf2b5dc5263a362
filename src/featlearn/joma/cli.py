"""``python -m featlearn joma-compute|joma-figure ...``: what the joma rules run."""

from __future__ import annotations

import json

from featlearn.cliutil import add_figure_arguments

EXPERIMENTS = ["eq6", "theorem2", "wikitext"]
FIGURES = ["4", "theorem2", "6", "8"]


def _compute(args) -> None:
    import torch

    from featlearn.devices import resolve_device

    torch.set_num_threads(args.threads)
    cfg = json.loads(args.settings)
    if args.experiment == "wikitext":
        from featlearn.joma.wikitext import run

        run(cfg, args.dataset, *args.inputs, *args.out, work_dir=args.work_dir, device=resolve_device(args.device))
        return
    from featlearn.joma import experiments as ex

    {"eq6": ex.eq6_tables, "theorem2": ex.theorem2_table}[args.experiment](cfg, *args.out)


def _figure(args) -> None:
    from featlearn.claims import write_claims

    cfg = json.loads(args.settings) if args.settings else {}
    t, s, fig, dpi = args.tables, args.scale, args.figures, args.dpi
    if args.figure in ("6", "8"):
        from featlearn.joma import wikitext_figures as W

        if args.figure == "6":
            n = len(fig) // 2  # the entropy figure's files, then the stable-rank figure's
            claims = W.fig6(t, fig[:n], fig[n:], s, dpi, cfg["lr"], cfg["bptt"])
        else:
            claims = W.fig8(t, fig, s, dpi, cfg["n_layer"], cfg["bptt"])
    else:
        from featlearn.joma import figures as F

        claims = {
            "4": lambda: F.fig4(t[0], t[1], fig, s, dpi, cfg["log_every"], cfg["converge_tol"]),
            "theorem2": lambda: F.theorem2_claims(t[0], s),
        }[args.figure]()
    write_claims(args.claims, claims)
    print(f"joma {args.figure}: {sum(c.passed for c in claims)}/{len(claims)} claims pass")


def register(sub) -> None:
    p = sub.add_parser("joma-compute", help="JoMA: simulate or train, and write tidy tables")
    p.add_argument("--experiment", required=True, choices=EXPERIMENTS)
    p.add_argument("--settings", required=True, help="JSON object of the experiment's settings")
    p.add_argument("--out", nargs="+", required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu", help="auto, cpu or cuda (training only)")
    p.add_argument("--dataset", default=None, help="wikitext: name of the prepared dataset")
    p.add_argument("--inputs", nargs="*", default=[], help="wikitext: train.pt valid.pt vocab.json")
    p.add_argument("--work-dir", default=None, help="wikitext: folder of the resume checkpoint")
    p.set_defaults(func=_compute)
    p = sub.add_parser("joma-figure", help="JoMA: one figure (and its claims) from tables")
    p.add_argument("--figure", required=True, choices=FIGURES)
    add_figure_arguments(p, claims_required=True)
    p.set_defaults(func=_figure)
