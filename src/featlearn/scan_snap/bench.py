"""Throughput of vectorised training against training the same runs one at a time.

``python -m featlearn scan-snap-bench --num-last 10 --runs 160 --device auto --out bench.json``
reports model-steps per second (runs x iterations / seconds) both ways, for Syn-Medium's runs as the config
(``--scale``, key ``scan_snap.syn_medium``) sets them; the one-at-a-time figure is measured on a subset of the runs
(``--sequential-runs``) and is per run, so it extrapolates linearly.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from featlearn.devices import device_label
from featlearn.scan_snap.data import SequenceClasses
from featlearn.scan_snap.train import RunSet, train

CONFIG_DIR = Path(__file__).resolve().parents[3] / "config"


def benchmark(num_last: int, runs: int, iterations: int, sequential_runs: int, device: str, dtype: torch.dtype,
              syn_medium: dict) -> dict:
    """Syn-Medium's runs (``syn_medium``: config ``scan_snap.syn_medium``, its sequence length, classes per query,
    batch, initialisation and SGD momentum) at one query count, eager, logged once."""
    spec = SequenceClasses(num_last, syn_medium["num_next_per_last"], syn_medium["seq_len"])
    seeds = [1 + i % 10 for i in range(runs)]
    eta_z = [(0.5, 1.0, 2.0, 3.0)[i % 4] for i in range(runs)]
    eta_y = [ez * (1, 2, 5, 10)[(i // 4) % 4] for i, ez in enumerate(eta_z)]
    kw = dict(optimizer="sgd", momentum=syn_medium["momentum"], init=syn_medium["init"], batch=syn_medium["batch"],
              iterations=iterations, log_every=iterations, cuda_graphs=False, device=device, dtype=dtype)
    train(RunSet(spec, seeds[:2], eta_z[:2], eta_y[:2], **{**kw, "iterations": 2}))  # warm-up (CUDA context, kernels)
    t0 = time.perf_counter()
    train(RunSet(spec, seeds, eta_z, eta_y, **kw))
    vectorised = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i in range(sequential_runs):
        train(RunSet(spec, [seeds[i]], [eta_z[i]], [eta_y[i]], **kw))
    sequential = time.perf_counter() - t0
    return {
        "num_last": num_last,
        "M": spec.M,
        "runs": runs,
        "iterations": iterations,
        "device": device,
        "device_name": device_label(device),
        "threads": torch.get_num_threads(),
        "dtype": str(dtype).replace("torch.", ""),
        "vectorised_seconds": vectorised,
        "vectorised_model_steps_per_s": runs * iterations / vectorised,
        "sequential_runs_measured": sequential_runs,
        "sequential_seconds_per_run": sequential / sequential_runs,
        "sequential_model_steps_per_s": sequential_runs * iterations / sequential,
        "speedup": (sequential / sequential_runs * runs) / vectorised,
    }


def register(sub) -> None:
    from featlearn.devices import resolve_device

    def run(args) -> None:
        from featlearn.pipeline.workflow import scale_config

        torch.set_num_threads(args.threads)
        dtype = torch.float64 if args.dtype == "float64" else torch.float32
        syn_medium = scale_config(args.scale, CONFIG_DIR)["scan_snap"]["syn_medium"]
        rows = [benchmark(n, args.runs, args.iterations, args.sequential_runs, resolve_device(args.device), dtype, syn_medium)
                for n in args.num_last]
        text = json.dumps(rows, indent=2)
        print(text)
        if args.out:
            from featlearn.io import write_text

            write_text(args.out, text + "\n")

    p = sub.add_parser("scan-snap-bench", help="Scan and Snap: vectorised vs one-at-a-time training throughput")
    p.add_argument("--num-last", type=int, nargs="+", default=[1, 10])
    p.add_argument("--runs", type=int, default=160)
    p.add_argument("--iterations", type=int, default=100)
    p.add_argument("--sequential-runs", type=int, default=8)
    p.add_argument("--device", default="auto")
    p.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--scale", choices=["smoke", "default", "paper"], default="default",
                   help="config.yaml, with smoke.yaml or paper.yaml merged in: the timed runs' scan_snap.syn_medium")
    p.add_argument("--out", default=None)
    p.set_defaults(func=run)
