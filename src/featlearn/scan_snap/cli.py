"""``python -m featlearn scan-snap-compute|scan-snap-figure ...``: what the scan_snap rules run."""

from __future__ import annotations

import json

import numpy as np

from featlearn.cliutil import add_figure_arguments


def _compute(args) -> None:
    import torch

    from featlearn.scan_snap import experiments as ex

    from featlearn.devices import resolve_device

    torch.set_num_threads(args.threads)
    cfg = json.loads(args.settings)
    cfg["device"] = resolve_device(args.device)
    out = args.out
    if args.experiment == "syn_small":
        ex.syn_small(cfg, *out)
    elif args.experiment == "adam":
        ex.adam(cfg, *out)
    elif args.experiment == "syn_medium":
        t = cfg["recall_thresholds"]
        ex.syn_medium(cfg, np.linspace(t["start"], t["stop"], t["num"]), *out)
    elif args.experiment == "generator":
        ex.generator_check(cfg, *out)
    elif args.experiment == "theory":
        ex.theory_tables(cfg, *out)
    elif args.experiment == "wikitext":
        from featlearn.scan_snap.wikitext import run_variant

        device = cfg.pop("device")
        run_variant(cfg, *args.inputs, *out, work_dir=args.work_dir, device=device)


def _figure(args) -> None:
    from featlearn.claims import write_claims
    from featlearn.scan_snap import figures as F

    s, fig, dpi, t = args.scale, args.figures, args.dpi, args.tables
    cfg = json.loads(args.settings) if args.settings else {}
    claims = {
        "generator": lambda: F.generator_claims(t[0], s),
        "3": lambda: F.fig3(t[0], fig, s, dpi, cfg["M"], cfg["K"]),
        "4": lambda: F.fig4(t[0], t[1], fig, s, dpi),
        "5": lambda: F.fig5(t[0], t[1], fig, s, dpi),
        "6": lambda: F.fig6(t[0], fig, s, dpi),
        "7": lambda: F.fig7(t, fig, s, dpi, cfg["variants"], cfg["map_steps"]),
        "8": lambda: F.fig8(t[0], fig, s, dpi),
        "10": lambda: F.fig10(t, fig, s, dpi, cfg["lrs"]),
        "9": lambda: F.fig9(t[0], fig, s, dpi),
        "11": lambda: F.fig_recall(t[0], fig, s, dpi, by="ratio"),
        "12": lambda: F.fig_recall(t[0], fig, s, dpi, by="eta_z"),
    }[args.figure]()
    if args.claims:
        write_claims(args.claims, claims)
        print(f"scan_snap {args.figure}: {sum(c.passed for c in claims)}/{len(claims)} claims pass")


def register(sub) -> None:
    from featlearn.scan_snap.bench import register as register_bench

    register_bench(sub)
    p = sub.add_parser("scan-snap-compute", help="Scan and Snap: train/simulate and write tidy tables")
    p.add_argument("--experiment", required=True, choices=["syn_small", "adam", "syn_medium", "generator", "theory", "wikitext"])
    p.add_argument("--settings", required=True, help="JSON object: the experiment's config section")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu", help="auto, cpu or cuda (synthetic training only)")
    p.add_argument("--out", nargs="+", required=True)
    p.add_argument("--inputs", nargs="*", default=[], help="wikitext: train.pt valid.pt vocab.json")
    p.add_argument("--work-dir", default=None, help="wikitext: folder of the resume checkpoint")
    p.set_defaults(func=_compute)

    p = sub.add_parser("scan-snap-figure", help="Scan and Snap: one figure (and its claims) from tables")
    p.add_argument("--figure", required=True, choices=["generator", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12"])
    add_figure_arguments(p, claims_required=False)
    p.set_defaults(func=_figure)
