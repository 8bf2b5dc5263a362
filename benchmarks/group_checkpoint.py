"""A paper-scale templates sweep group killed in the middle of its training and resumed from its checkpoint
(``featlearn.templates.sweeps.engine.train_group`` with a resume folder): the time of the epochs with a checkpoint
after each against an uninterrupted group, the time of a resume, the checkpoint's size, and whether the resumed group
ends with the uninterrupted one's parameters and selection bit for bit.

    python benchmarks/group_checkpoint.py                        # Fig. 25's MLP at n 8,192, 3 epochs, one thread
    python benchmarks/group_checkpoint.py --arch mlp_xxt --n 2048 --epochs 4 --kill-after 2

Measured on a 2-core AMD EPYC, one thread (2026-12-02): Fig. 25's MLP at n 8,192 (20 runs, 8 steps an epoch),
3 epochs uninterrupted 44.2 s; killed in its third epoch with a checkpoint after each of the first two 48.2 s;
the resume (set-up, loading the checkpoint, one epoch) 18.8 s; the checkpoint 1.46 GiB; bit for bit equal.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import tempfile
import time

import torch

from featlearn.lm_bench import load_config
from featlearn.templates.sweeps import engine as S
from featlearn.templates.sweeps.experiments import figure_curves

RESULTS = ("best_epoch", "val_loss", "test_loss", "test_metric", "train_loss", "final_train_loss", "final_val_loss",
           "final_test_metric")


def paper_group(fig: str, arch: str, n: int, epochs: int) -> S.Group:
    """The group of ``arch`` at ``n`` of the paper-scale sweep behind ``fig``, cut to ``epochs`` epochs."""
    cfg = load_config("paper")["templates"]["sweeps"]
    settings = [s for _, s in figure_curves(fig, cfg) if s["arch"] == arch]
    if not settings:
        raise SystemExit(f"Fig. {fig} has no {arch} curve")
    groups = [g for g in S.expand_groups({**settings[0], "progress": False}) if g.n == n]
    if not groups:
        raise SystemExit(f"Fig. {fig}'s {arch} curve has no group at n = {n}")
    return dataclasses.replace(groups[0], epochs=epochs)


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal bit for bit, a NaN (a run's value never evaluated) matching a NaN."""
    return torch.equal(a.isnan(), b.isnan()) and torch.equal(a[~a.isnan()], b[~b.isnan()])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fig", default="25")
    ap.add_argument("--arch", default="mlp")
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--kill-after", type=int, default=2, help="epochs kept before the kill (a checkpoint after each)")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    if not 0 < args.kill_after < args.epochs:
        raise SystemExit("--kill-after must lie between 0 and --epochs")
    torch.set_num_threads(args.threads)
    group = paper_group(args.fig, args.arch, args.n, args.epochs)
    steps = group.steps_per_epoch
    print(f"Fig. {args.fig} {group.arch} n={group.n}: {len(group.runs)} runs, {steps} step{'s' if steps != 1 else ''} an epoch, "
          f"{args.epochs} epochs, {args.threads} thread(s)", flush=True)

    t0 = time.perf_counter()
    clean = S.train_group(group)
    print(f"uninterrupted: {time.perf_counter() - t0:.1f} s", flush=True)

    real, calls = S._Selector.update, []

    def killed(self, *a, **kw):  # the group is evaluated every epoch: the kill lands in epoch kill_after + 1
        calls.append(1)
        if len(calls) > args.kill_after:
            raise KeyboardInterrupt
        return real(self, *a, **kw)

    with tempfile.TemporaryDirectory() as work:
        S._Selector.update = killed
        t0 = time.perf_counter()
        try:
            S.train_group(group, work, {"benchmark": args.fig}, checkpoint_seconds=0.0)
        except KeyboardInterrupt:
            pass
        finally:
            S._Selector.update = real
        print(f"killed in epoch {args.kill_after + 1}, a checkpoint after each epoch before: "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(work) for f in files)
        t0 = time.perf_counter()
        resumed = S.train_group(group, work, {"benchmark": args.fig}, checkpoint_seconds=float("inf"))
        left = args.epochs - args.kill_after
        print(f"resumed (set-up, load, {left} epoch{'s' if left != 1 else ''}): {time.perf_counter() - t0:.1f} s; "
              f"checkpoint {size / 2**30:.2f} GiB")
    same = all(torch.equal(resumed.params[k], clean.params[k]) for k in clean.params) and all(
        _same(getattr(resumed, k), getattr(clean, k)) for k in RESULTS)
    print(f"resumed equals uninterrupted bit for bit: {same}")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
