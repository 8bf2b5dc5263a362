"""``python -m featlearn joma-compute|joma-figure ...``: what the joma rules run."""

from __future__ import annotations

import json

from featlearn.cliutil import add_figure_arguments

EXPERIMENTS = ["eq6", "theorem2", "sim_softmax", "sim_exp", "wikitext", "checkpoint", "table1", "hblt"]
FIGURES = ["2", "3", "4", "theorem2", "6", "7", "8", "table1", "hblt"]


def _compute(args) -> None:
    import torch

    from featlearn.devices import resolve_device

    torch.set_num_threads(args.threads)
    cfg = json.loads(args.settings)
    if args.experiment == "wikitext":
        from featlearn.joma.wikitext import run

        run(cfg, args.dataset, *args.inputs, *args.out, work_dir=args.work_dir, device=resolve_device(args.device))
        return
    if args.experiment in ("table1", "hblt"):
        from featlearn.joma import table1 as T1

        if args.experiment == "table1":
            T1.table1_cell({**cfg, "device": resolve_device(args.device)}, *args.out)
        else:
            T1.hblt_tables(cfg, *args.out)
        return
    if args.experiment == "checkpoint":
        from featlearn.joma.checkpoints import analyse_checkpoint

        analyse_checkpoint({**cfg, "device": args.device}, args.model, args.revision, *args.inputs, *args.out)
        return
    from featlearn.joma import attention_sim as sim
    from featlearn.joma import experiments as ex

    {"eq6": ex.eq6_tables, "theorem2": ex.theorem2_table, "sim_softmax": sim.softmax_tables, "sim_exp": sim.exp_tables}[args.experiment](cfg, *args.out)


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
    elif args.figure in ("table1", "hblt"):
        from featlearn.joma import table1_figures as TF

        claims = TF.table1(t, *fig, s) if args.figure == "table1" else TF.hblt(t[0], fig, s, dpi)
    elif args.figure == "7":
        from featlearn.joma.checkpoints_figures import fig7

        claims = fig7(t, fig, s, dpi)
    elif args.figure in ("2", "3"):
        from featlearn.joma import attention_sim_figures as SF

        claims = SF.fig2(t[0], t[1], t[2], fig, s, dpi) if args.figure == "2" else SF.fig3(t[0], t[1], fig, s, dpi)
    else:
        from featlearn.joma import figures as F

        claims = {
            "4": lambda: F.fig4(t[0], t[1], fig, s, dpi, cfg["log_every"], cfg["converge_tol"]),
            "theorem2": lambda: F.theorem2_claims(t[0], s),
        }[args.figure]()
    if args.claims:
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
    p.add_argument("--model", default=None, help="checkpoint: model name (e.g. pythia-70m)")
    p.add_argument("--revision", default=None, help="checkpoint: revision (e.g. step1000)")
    p.set_defaults(func=_compute)
    p = sub.add_parser("joma-figure", help="JoMA: one figure (and its claims) from tables")
    p.add_argument("--figure", required=True, choices=FIGURES)
    add_figure_arguments(p, claims_required=False)
    p.set_defaults(func=_figure)
