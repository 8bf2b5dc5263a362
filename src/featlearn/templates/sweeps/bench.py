"""Throughput of the sweep engine against training the same runs one at a time.

A model-step is one optimiser step of one run (one minibatch; each epoch also evaluates the 200
validation and test samples, in both ways of training). ``benchmark`` trains R runs (variants x seeds,
one n) as one engine group in both of its forward modes (vmap over the runs, and the runs' forwards one
after another; ``sweep.auto_looped`` picks one, reported as the engine's figure), then a subset of the same
runs one at a time in the plain way (``sweep.train_reference``: nn.Module + torch.optim.Adam) and through
the engine with R = 1; one-at-a-time figures are per run, so they extrapolate linearly to R runs.
"""

from __future__ import annotations

import dataclasses
import json
import sys

import torch

from featlearn.devices import device_label
from featlearn.templates.sweeps.engine import VARIANTS, Group, RunSpec, auto_looped, train_group, train_reference
from featlearn.templates.tasks import make_task


# Settings a benchmark may set and the config does not (Adam lr 1e-3 as most sweep grids, float32, the eager step).
OPTIONAL = {"lr": 1e-3, "dtype": "float32", "cuda_graphs": False}


def _group(settings: dict, n: int, runs: list[RunSpec], epochs: int) -> Group:
    dtype = {"float32": torch.float32, "float64": torch.float64}[settings["dtype"]]
    return Group(
        make_task(**dict(settings["task"])),
        n,
        runs,
        arch=settings["arch"],
        model=dict(settings["model"]),
        epochs=epochs,
        batch=int(settings["batch"]),
        eval_every=int(settings["eval_every"]),
        n_val=int(settings["n_val"]),
        n_test=int(settings["n_test"]),
        cuda_graphs=bool(settings["cuda_graphs"]),
        dtype=dtype,
        device=settings["device"],
        progress=False,
    )


def benchmark(settings: dict, n: int) -> dict:
    """One measurement at training-set size n. ``settings``: task, arch, model, runs (R), epochs, batch, eval_every,
    n_val, n_test, sequential_runs, device (required) and optionally lr, dtype, cuda_graphs (``OPTIONAL``; see
    ``featlearn.templates.sweeps.engine.Group``)."""
    settings = {**OPTIONAL, **settings}
    R, epochs = int(settings["runs"]), int(settings["epochs"])
    variants = list(VARIANTS) if settings["arch"] == "transformer" else ["vanilla"]
    runs = [RunSpec(1 + i // len(variants), float(settings["lr"]), variants[i % len(variants)]) for i in range(R)]
    train_group(_group(settings, n, runs[:2], 1))  # warm-up (allocator, kernels)
    group = _group(settings, n, runs, epochs)
    vmapped = train_group(dataclasses.replace(group, looped=False)).seconds
    looped = train_group(dataclasses.replace(group, looped=True)).seconds
    mode = "looped" if auto_looped(group) else "vmap"
    vec = looped if mode == "looped" else vmapped
    m = min(int(settings["sequential_runs"]), R)
    ref = sum(train_reference(group, run).seconds for run in runs[:m]) / m
    single = sum(train_group(_group(settings, n, [run], epochs)).seconds for run in runs[:m]) / m
    steps = epochs * group.steps_per_epoch
    device = settings["device"]
    out = {
        "task": group.task.name,
        "arch": group.arch,
        "model": json.dumps(group.model, sort_keys=True),
        "n": n,
        "runs": R,
        "epochs": epochs,
        "steps_per_epoch": group.steps_per_epoch,
        "batch": group.batch,
        "device": device,
        "device_name": device_label(device),
        "threads": torch.get_num_threads(),
        "dtype": str(group.dtype).replace("torch.", ""),
        "engine_mode": mode,
        "vectorised_seconds": vec,
        "vectorised_model_steps_per_s": R * steps / vec,
        "vmap_model_steps_per_s": R * steps / vmapped,
        "looped_model_steps_per_s": R * steps / looped,
        "sequential_runs_measured": m,
        "sequential_seconds_per_run": ref,
        "sequential_model_steps_per_s": steps / ref,
        "engine_single_seconds_per_run": single,
        "engine_single_model_steps_per_s": steps / single,
        "speedup": ref * R / vec,
    }
    print(
        f"[templates bench] n={n} R={R}: engine ({mode}) {out['vectorised_model_steps_per_s']:.1f} model-steps/s "
        f"(vmap {out['vmap_model_steps_per_s']:.1f}, looped {out['looped_model_steps_per_s']:.1f}), "
        f"one at a time {out['sequential_model_steps_per_s']:.1f} (engine R=1: {out['engine_single_model_steps_per_s']:.1f}), "
        f"speedup x{out['speedup']:.2f}",
        file=sys.stderr,
        flush=True,
    )
    return out


def run_benchmark(settings: dict, out: str | None = None) -> list[dict]:
    """``benchmark`` at every n of ``settings['n']``; the list is written as JSON to ``out``."""
    rows = [benchmark(settings, int(n)) for n in settings["n"]]
    if out:
        from featlearn.io import write_text

        write_text(out, json.dumps(rows, indent=2) + "\n")
    return rows


def bench(settings: dict, inputs: dict, outputs: dict, ctx) -> None:
    """Compute job ``templates_bench``: ``run_benchmark`` on the job's device to ``outputs["bench"]``."""
    print(json.dumps(run_benchmark({**settings, "device": ctx.device}, outputs["bench"]), indent=2))


def register(sub) -> None:
    """``python -m featlearn templates-bench --settings JSON [--out bench.json] [--threads T]``."""
    from featlearn.devices import resolve_device

    def run(args) -> None:
        torch.set_num_threads(args.threads)
        settings = json.loads(args.settings)
        settings["device"] = resolve_device(settings.get("device", "auto"))  # a hand-written JSON may leave it out
        print(json.dumps(run_benchmark(settings, args.out), indent=2))

    p = sub.add_parser("templates-bench", help="templates: vectorised sweep vs one-at-a-time training throughput")
    p.add_argument("--settings", required=True, help="JSON settings (task, model, n, runs, epochs, ...)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default=None)
    p.set_defaults(func=run)
