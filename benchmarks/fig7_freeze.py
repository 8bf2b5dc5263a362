"""How Scan and Snap Fig. 7's layer-0 attention changes over training, beyond the one probe sequence the claims read.

Trains one Fig. 7 LM variant with the settings its registry gives at a scale (``scan_snap.wikitext``), and at every
logged step keeps the layer-0 attention maps of every sequence of the first ``--windows`` validation windows
(``eval_batch_size`` sequences each), not only the probe window's first one. Then prints JSON lines:

- per interval between logged steps: the mean |A(t) - A(t - log_every)| of the probe sequence and of all sequences,
  the share of query rows (i >= 1) whose largest key moved, and the mean largest attention of a row (sparsity);
- the freeze ratio of the claims (mean |A(last) - A(previous)| / mean |A(1) - A(0)| over ``map_steps``) for the probe
  sequence, for the maps of all sequences together, and its distribution over the sequences one by one.

    python benchmarks/fig7_freeze.py --variant 1layer --prepared results/data/prepared/wikitext2
    python benchmarks/fig7_freeze.py --variant 3layer --windows 10 --precision fp32

Needs the prepared WikiText-2 files (``snakemake results/data/prepared/wikitext2/train.pt``). Results are in
docs/scan_snap_fig7_freeze.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def changes(maps: dict[int, np.ndarray], probe: int) -> list[dict]:
    """Per interval between consecutive recorded steps of ``maps`` (step -> [sequences, T, T]): the mean absolute change
    of the probe sequence and of all, the share of rows i >= 1 whose argmax moved, the mean row maximum at its end."""
    steps = sorted(maps)
    rows = []
    for a, b in zip(steps, steps[1:]):
        d = np.abs(maps[b] - maps[a])
        moved = maps[b][:, 1:].argmax(-1) != maps[a][:, 1:].argmax(-1)
        rows.append({"from": a, "to": b, "probe_change": float(d[probe].mean()), "all_change": float(d.mean()),
                     "argmax_moved": float(moved.mean()), "row_max": float(maps[b][:, 1:].max(-1).mean())})
    return rows


def freeze_ratios(maps: dict[int, np.ndarray], map_steps: list[int], probe: int) -> dict:
    """The claims' freeze ratio for the probe sequence, for all sequences together, and over the sequences one by one."""
    early = np.abs(maps[map_steps[1]] - maps[map_steps[0]]).mean(axis=(1, 2))
    late = np.abs(maps[map_steps[-1]] - maps[map_steps[-2]]).mean(axis=(1, 2))
    each = late / early
    return {"probe": float(each[probe]), "all": float(late.mean() / early.mean()),
            "per_sequence_median": float(np.median(each)),
            "per_sequence_q10_q90": [float(np.quantile(each, q)) for q in (0.1, 0.9)],
            "share_below_0.25": float((each < 0.25).mean()), "sequences": int(len(each))}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", default="default", help="config of that scale (default, paper, smoke)")
    p.add_argument("--variant", default="1layer", help="a Fig. 7 variant (scan_snap.wikitext.fig7.variants)")
    p.add_argument("--prepared", default="results/data/prepared/wikitext2", help="the prepared WikiText-2 folder")
    p.add_argument("--windows", type=int, default=20, help="validation windows whose sequences are kept")
    p.add_argument("--precision", default=None, help="fp32 | bf16 | auto (default: the config's for these LMs)")
    args = p.parse_args()

    from featlearn import precision as P
    from featlearn.lm import train as T
    from featlearn.lm.data import get_batch, num_batches
    from featlearn.lm_bench import load_config
    from featlearn.scan_snap.registry import lm_runs

    torch.set_num_threads(1)
    cfg = load_config(args.scale)["scan_snap"]
    _, settings = lm_runs(cfg)[f"fig7_{args.variant}"]
    map_steps = cfg["wikitext"]["fig7"]["map_steps"]
    arithmetic = P.resolve(args.precision or cfg["wikitext"].get("precision") or "fp32", "cpu")  # (auto: on this CPU)
    run = T.LMRun(**{**settings, "optimizer": "sgd"})
    windows = []  # per evaluation: [windows x eval_batch_size, T, T], layer 0

    real = T._evaluate

    @torch.no_grad()
    def evaluate(model, valid, lm_run):
        out = real(model, valid, lm_run)
        model.eval()
        kept = []
        for i in range(min(args.windows, num_batches(valid, lm_run.bptt))):
            x, _ = get_batch(valid, i, lm_run.bptt)
            _, maps = model(x)
            kept.append(maps[0].float().mean(dim=1).cpu())  # [sequences, T, T], mean over heads
        model.train()
        windows.append(torch.cat(kept).numpy())
        return out

    T._evaluate = evaluate
    prepared = Path(args.prepared)
    with tempfile.TemporaryDirectory() as work, P.apply(arithmetic, "cpu"):
        out = T.train_from_files({**settings, "optimizer": "sgd"}, str(prepared / "train.pt"), str(prepared / "valid.pt"),
                                 str(prepared / "vocab.json"), work, "cpu", tag=f" fig7 {args.variant}")
    steps = sorted(int(step) for step in out["log"]["step"].unique())
    if len(steps) != len(windows):
        raise SystemExit(f"{len(windows)} evaluations for {len(steps)} logged steps")
    maps = dict(zip(steps, windows))
    probe = run.probe_window * run.eval_batch_size  # the first sequence of the probe window
    meta = {"variant": args.variant, "scale": args.scale, "precision": arithmetic, "iterations": run.iterations}
    for row in changes(maps, probe):
        print(json.dumps({**meta, **row}), flush=True)
    print(json.dumps({**meta, "map_steps": map_steps, "freeze_ratio": freeze_ratios(maps, map_steps, probe)}), flush=True)


if __name__ == "__main__":
    main()
