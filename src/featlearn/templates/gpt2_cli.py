"""``python -m featlearn templates-gpt2|templates-gpt2-figure ...``: what the GPT-2 rules run (Figs. 6, 7, 24)."""

from __future__ import annotations

import json

from featlearn.cliutil import add_figure_arguments

EXPERIMENTS = ["wikitext", "finetune", "heads"]
FIGURES = ["6", "7", "24"]


def _compute(args) -> None:
    import torch

    from featlearn.data.fetch import resolve_offline
    from featlearn.devices import resolve_device
    from featlearn.templates import gpt2 as G

    torch.set_num_threads(args.threads)
    cfg = json.loads(args.settings)
    if "offline" in cfg:  # FEATLEARN_OFFLINE overrides, as for the datasets
        cfg["offline"] = resolve_offline(bool(cfg["offline"]))
    device = resolve_device(args.device)
    if args.experiment == "wikitext":
        G.train_wikitext(cfg, args.variant, *args.inputs, args.out, work_dir=args.work_dir, device=device)
    elif args.experiment == "finetune":
        G.finetune_table(cfg, args.model, args.init, args.out, device=device)
    else:
        G.heads_table(cfg, args.model, args.out)


def _figure(args) -> None:
    from featlearn.claims import write_claims
    from featlearn.templates import gpt2_figures as GF

    t, fig, s, dpi = args.tables, args.figures, args.scale, args.dpi
    if args.figure == "6":
        # figure files, then the summary table (.csv) and its markdown (.md)
        claims = GF.fig6(t, fig[:-2], fig[-2], fig[-1], s, dpi)
    elif args.figure == "7":
        claims = GF.fig7(t[:-1], t[-1], fig, s, dpi)  # fine-tuning tables, then the heads table
    else:
        claims = GF.fig24(t, fig, s, dpi)
    if args.claims:
        write_claims(args.claims, claims)
    print(f"templates GPT-2 Fig. {args.figure}: {sum(c.passed for c in claims)}/{len(claims)} claims pass")


def register(sub) -> None:
    p = sub.add_parser("templates-gpt2", help="Templates GPT-2: WikiText training, T5 fine-tuning, pretrained heads")
    p.add_argument("--experiment", required=True, choices=EXPERIMENTS)
    p.add_argument("--settings", required=True, help="JSON object of the experiment's settings")
    p.add_argument("--out", required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu", help="auto, cpu or cuda")
    p.add_argument("--variant", default=None, choices=["vanilla", "identity"], help="wikitext: GPT-2 variant")
    p.add_argument("--inputs", nargs="*", default=[], help="wikitext: train.pt valid.pt vocab.json")
    p.add_argument("--work-dir", default=None, help="wikitext: folder of the resume checkpoint")
    p.add_argument("--model", default=None, help="finetune, heads: gpt2, gpt2-medium or gpt2-large")
    p.add_argument("--init", default=None, choices=["pretrained", "scratch"], help="finetune: initialisation")
    p.set_defaults(func=_compute)
    p = sub.add_parser("templates-gpt2-figure", help="Templates GPT-2: one figure (and its claims) from tables")
    p.add_argument("--figure", required=True, choices=FIGURES)
    add_figure_arguments(p, claims_required=False)
    p.set_defaults(func=_figure)
