"""Peak memory of a paper-scale templates sweep group's first training steps against the run memory formula
(``featlearn.templates.sweeps.engine.run_memory_bytes``), on a CPU along the GPU's path: the runs vmapped, the
last query copied to contiguous memory (``featlearn.templates.models.LAST_QUERY_COPY``). The peak is the process's
largest resident set above its size before the group is built, so it counts the group's data, parameters, Adam's
state and the steps' tensors; run it at two numbers of runs and the difference is one run's memory. With
``--device cuda`` the group trains on the GPU and the peak is PyTorch's (``torch.cuda.max_memory_allocated``, and
the caching allocator's reserved peak beside it).

    python benchmarks/group_memory.py --fig 3c --n 262144 --runs 1 2
    python benchmarks/group_memory.py --fig 5 --n 2048 --d-emb 4096 --runs 1 2
    python benchmarks/group_memory.py --device cuda --fig 3c --n 262144 --runs 4   # paper.yaml's split, on a card

Measured on a 2-core AMD EPYC (2026-12-02), 2 threads, 2 steps each, one process per size:

| group | runs | peak above start | formula without the logits term | formula |
|---|---|---|---|---|
| grid 3c, n 262,144 (vocabulary 262,354) | 1 | 8.29 GiB | 4.21 | 8.21 |
| | 2 | 16.30 GiB | 8.43 | 16.43 |
| Fig. 5 copy, d_emb 4096, n 2,048 | 1 | 1.88 GiB | 1.18 | 1.21 |
| | 2 | 3.36 GiB | 2.35 | 2.43 |
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import resource
import subprocess
import sys

import psutil
import torch


def measure(fig: str, n: int, runs: int, steps: int, d_emb: int | None, threads: int, device: str = "cpu") -> dict:
    """One group's peak, in this process (call it in a fresh one: the resident set's peak only grows)."""
    from featlearn.lm_bench import load_config
    from featlearn.templates import models
    from featlearn.templates.sweeps import engine as S
    from featlearn.templates.sweeps.experiments import figure_curves

    torch.set_num_threads(threads)
    cuda = device == "cuda"
    if not cuda:
        models.LAST_QUERY_COPY = True  # a GPU copies it anyway
    curves = [s for _, s in figure_curves(fig, load_config("paper")["templates"]["sweeps"])]
    if d_emb is not None:
        curves = [s for s in curves if s["model"].get("d_emb") == d_emb]
    groups = [g for s in curves[:1] for g in S.expand_groups({**s, "progress": False}) if g.n == n]
    if not groups:
        raise SystemExit(f"no group of Fig. {fig} at n = {n}" + (f", d_emb {d_emb}" if d_emb else ""))
    every = [r for g in groups for r in g.runs]  # the runs of n across the groups max_group_gb splits them into
    if runs > len(every):
        raise SystemExit(f"Fig. {fig} has {len(every)} runs at n = {n}, not {runs}")
    group = dataclasses.replace(groups[0], runs=every[:runs], looped=False, device=device)
    vocab = S.group_vocab(group)
    formula = runs * S.run_memory_bytes(group, vocab)
    free = torch.cuda.mem_get_info()[0] if cuda else psutil.virtual_memory().available
    if formula > 0.8 * free:
        raise SystemExit(f"{runs} runs need about {formula / 2**30:.1f} GiB by the formula; this {device} has "
                         f"{free / 2**30:.1f} GiB free: measure fewer runs")
    real, done = S._adam_step, []

    def counted(*args, **kwargs):
        real(*args, **kwargs)
        done.append(1)
        if len(done) >= steps:
            raise KeyboardInterrupt  # the step's tensors and Adam's state have all been allocated

    S._adam_step = counted
    start = psutil.Process().memory_info().rss
    if cuda:
        torch.cuda.init()
        torch.cuda.reset_peak_memory_stats()
        start = torch.cuda.memory_allocated()
    try:
        S.train_group(group)
    except KeyboardInterrupt:
        pass
    finally:
        S._adam_step = real
    peak = torch.cuda.max_memory_allocated() if cuda else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"task": group.task.name, "model": group.model, "n": n, "runs": runs, "vocab": vocab, "steps": len(done),
            "device": torch.cuda.get_device_name() if cuda else "cpu",
            "reserved_gib": torch.cuda.max_memory_reserved() / 2**30 if cuda else None,
            "peak_gib": (peak - start) / 2**30, "formula_gib": formula / 2**30}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fig", default="3c")
    ap.add_argument("--n", type=int, default=262144)
    ap.add_argument("--d-emb", type=int, default=None, help="the curve of this d_emb (Fig. 5's swept width)")
    ap.add_argument("--runs", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--out", default=None, help="also write the rows as JSON here")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # the measuring child process
    args = ap.parse_args()
    if args.one:
        print(json.dumps(measure(args.fig, args.n, args.runs[0], args.steps, args.d_emb, args.threads, args.device)))
        return
    rows = []
    for runs in args.runs:
        cmd = [sys.executable, __file__, "--one", "--fig", args.fig, "--n", str(args.n), "--runs", str(runs),
               "--steps", str(args.steps), "--threads", str(args.threads), "--device", args.device]
        if args.d_emb is not None:
            cmd += ["--d-emb", str(args.d_emb)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(done.stderr)
        row = json.loads(done.stdout.strip().splitlines()[-1])
        rows.append(row)
        reserved = f", {row['reserved_gib']:.2f} GiB reserved" if row["reserved_gib"] is not None else ""
        print(f"Fig. {args.fig} {row['task']} n={row['n']} {row['model']} R={runs} (vocabulary {row['vocab']}, "
              f"{row['device']}): peak {row['peak_gib']:.2f} GiB above start{reserved}, formula "
              f"{row['formula_gib']:.2f} GiB (ratio {row['peak_gib'] / row['formula_gib']:.2f})", flush=True)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(rows, fh, indent=1)
    if len(rows) >= 2:
        a, b = rows[0], rows[-1]
        per_run = (b["peak_gib"] - a["peak_gib"]) / (b["runs"] - a["runs"])
        print(f"one run: {per_run:.2f} GiB measured, {b['formula_gib'] / b['runs']:.2f} GiB by the formula")


if __name__ == "__main__":
    main()
