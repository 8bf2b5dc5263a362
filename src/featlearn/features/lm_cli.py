"""``python -m featlearn features-lm-compute|features-lm-figure ...``: what the language-model rules of the
features paper (Figs. 5, 7) run."""

from __future__ import annotations

import json

from featlearn.cliutil import add_figure_arguments

EXPERIMENTS = ["word", "char"]
FIGURES = ["5", "7"]


def _compute(args) -> None:
    import torch

    from featlearn.devices import resolve_device
    from featlearn.features import lm

    torch.set_num_threads(args.threads)
    run = {"word": lm.word_run, "char": lm.char_run}[args.experiment]
    run(json.loads(args.settings), args.dataset, *args.inputs, *args.out, work_dir=args.work_dir, device=resolve_device(args.device))


def _figure(args) -> None:
    from featlearn.claims import write_claims
    from featlearn.features.lm_figures import lm_figure

    claims = lm_figure(args.figure, args.tables, args.figures, args.scale, args.dpi)
    write_claims(args.claims, claims)
    print(f"features {args.figure}: {sum(c.passed for c in claims)}/{len(claims)} claims pass")


def register(sub) -> None:
    p = sub.add_parser("features-lm-compute", help="features (LM): train a language model and write its log and logit table")
    p.add_argument("--experiment", required=True, choices=EXPERIMENTS, help="word: tutorial transformer (Fig. 7); char: GPT (Fig. 5)")
    p.add_argument("--dataset", required=True, help="name of the prepared LM dataset")
    p.add_argument("--settings", required=True, help="JSON object of the run's settings")
    p.add_argument("--inputs", nargs=3, required=True, metavar=("TRAIN_PT", "VALID_PT", "VOCAB_JSON"))
    p.add_argument("--out", nargs=2, required=True, metavar=("LOG_CSV", "LOGITS_CSV"))
    p.add_argument("--work-dir", required=True, help="folder of the resume checkpoint")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu", help="auto, cpu or cuda")
    p.set_defaults(func=_compute)
    p = sub.add_parser("features-lm-figure", help="features (LM): Fig. 5 or 7 and claim 9 from the logit tables")
    p.add_argument("--figure", required=True, choices=FIGURES)
    add_figure_arguments(p, claims_required=True)
    p.set_defaults(func=_figure)
