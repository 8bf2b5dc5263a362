"""``python -m featlearn features-compute|features-figure ...``: what the classification rules run."""

from __future__ import annotations

import json
import os

from featlearn.cliutil import add_figure_arguments

EXPERIMENTS = ["extract", "train", "theory"]
FIGURES = ["table6", "table3", "table5", "2", "3", "4", "6", "8", "9", "10", "11", "12", "13"]


def _compute(args) -> None:
    import torch

    from featlearn.features import experiments as ex
    from featlearn.features.extract import extract_table
    from featlearn.features.simulate import theory_job

    torch.set_num_threads(args.threads)
    cfg = json.loads(args.settings)
    if args.experiment == "extract":
        from featlearn.data.prepare import read_classification

        rows = read_classification(args.inputs[0])
        table = extract_table(cfg, args.dataset, rows)
        ex._write_csv(table, args.out[0])
        counts = table.groupby(["kind", "cls"]).size()
        print(f"{args.dataset}: extracted\n{counts.to_string()}")
    else:
        # the prepared dataset's folder is that of its vocabulary; the extraction table ends the inputs
        vocab = next((p for p in args.inputs if os.path.basename(p) == "vocab.json"), None)
        data_dir = os.path.dirname(vocab) if vocab else None
        extracted = next((p for p in args.inputs if os.path.basename(os.path.dirname(p)) == "extracted"), None)
        if args.experiment == "train":
            ex.train_job(cfg, data_dir, extracted, *args.out)
        else:
            if data_dir is None or extracted is None:
                raise ValueError("theory needs the SST vocab.json (beside train.tsv) and the extraction table")
            theory_job(cfg, data_dir, extracted, *args.out)


def _figure(args) -> None:
    from featlearn.claims import write_claims
    from featlearn.features import figures as F

    cfg = json.loads(args.settings) if args.settings else {}
    claims = F.make(args.figure, args.tables, args.figures, cfg, args.scale, args.dpi)
    if args.claims:
        write_claims(args.claims, claims)
    print(f"features {args.figure}: {sum(c.passed for c in claims)}/{len(claims)} claims pass")
    for c in claims:
        print(f"  {c.claim_id}: {c.metric} = {c.measured:.4g} (target {c.target}) {'pass' if c.passed else 'FAIL'}")


def register(sub) -> None:
    p = sub.add_parser("features-compute", help="Sun et al.: extract units, train models, run the NTK flow")
    p.add_argument("--experiment", required=True, choices=EXPERIMENTS)
    p.add_argument("--settings", required=True, help="JSON object of the experiment's settings")
    p.add_argument("--dataset", default=None, help="extract: name of the prepared dataset")
    p.add_argument("--inputs", nargs="*", default=[],
                   help="extract: train.tsv; train/theory: the prepared splits, vocab.json and the extraction table")
    p.add_argument("--out", nargs="+", required=True)
    p.add_argument("--threads", type=int, default=1)
    p.set_defaults(func=_compute)
    p = sub.add_parser("features-figure", help="Sun et al.: one figure or table (and its claims) from tables")
    p.add_argument("--figure", required=True, choices=FIGURES)
    add_figure_arguments(p, claims_required=False)
    p.set_defaults(func=_figure)
