"""Scan and Snap's cost models for ``python -m featlearn estimate`` (docs/estimate.md), named by its registry's job
records: the synthetic jobs, one vectorised RunSet of the reparameterised 1-layer model per query layout or
query count (:func:`syn_small_cost`, :func:`adam_cost`, :func:`syn_medium_cost`, probed by :func:`runset_probe`),
and a WikiText language model, the tutorial transformer of ``featlearn.lm`` trained with SGD
(:func:`wikitext_cost`, :func:`wikitext_probe`). Standard library only at import time."""

from __future__ import annotations

import time

from featlearn.pipeline.estimate import FLOAT64, Cost, Node, Part, lm_cost, probe, sync
from featlearn.scan_snap.constants import LAYOUTS


def runsets_cost(node: Node, runsets: list[tuple[dict, int]]) -> Cost:
    """R runs of the reparameterised 1-layer model (Y, Z of M x M each, float64) per RunSet, given as (probe
    shape, iterations). FLOPs per step = 6 x B x M^2 x R (the Y product 2 B M^2 forward, twice that backward;
    the softmax over M is O(B M)); memory = 8 B x R x (2 M^2 (2 + slots) + 3 B M)."""
    from featlearn.scan_snap.data import SequenceClasses

    parts = []
    for shape, iters in runsets:
        M = SequenceClasses(shape["num_last"], shape["per_last"], shape["seq_len"]).M
        R, B = shape["runs"], shape["batch"]
        slots = 2 if shape["optimizer"] == "adam" else 1
        parts.append(Part(probe("scan_snap", shape, "runs", node.threads, f"{__name__}:runset_probe"), int(iters), R,
                          6 * B * M * M * R, FLOAT64 * R * (2 * M * M * (2 + slots) + 3 * B * M)))
    return Cost(parts, 0.0, "logging every log_every steps is inside the timed probe steps when they reach it",
                "FLOPs = 6 B M^2 R per step; memory = 8 B x R (2 M^2 (2 + slots) + 3 B M) [D]", "")


def _graphs(settings: dict) -> dict:
    """The probe shape's CUDA graphs switch: present only when on, so that the eager probes stay valid."""
    return {"cuda_graphs": True} if settings.get("cuda_graphs") else {}


def syn_small_cost(node: Node, results: str = "results") -> Cost:
    """scan_snap_syn_small: both query layouts (``featlearn.scan_snap.experiments.syn_small``), ratios x seeds
    runs each, SGD from zero."""
    s = node.settings
    return runsets_cost(node, [({"num_last": nl, "per_last": pl, "seq_len": s["seq_len"], "runs": len(s["ratios"]) * s["seeds"],
                                 "optimizer": "sgd", "init": "zero", "batch": s["batch"], "log_every": s["log_every"],
                                 **_graphs(s)},
                                s["iterations"]) for nl, pl in LAYOUTS.values()])


def adam_cost(node: Node, results: str = "results") -> Cost:
    """scan_snap_adam: the separate layout, lrs x seeds runs with Adam from zero."""
    s = node.settings
    nl, pl = LAYOUTS["separate"]
    return runsets_cost(node, [({"num_last": nl, "per_last": pl, "seq_len": s["seq_len"], "runs": len(s["lrs"]) * s["seeds"],
                                 "optimizer": "adam", "init": "zero", "batch": s["batch"], "log_every": s["log_every"],
                                 **_graphs(s)},
                                s["iterations"])])


def syn_medium_cost(node: Node, results: str = "results") -> Cost:
    """scan_snap_syn_medium: one RunSet of eta_z x ratios x seeds runs per query count, SGD, logged once."""
    s = node.settings
    R = len(s["eta_z"]) * len(s["ratios"]) * s["seeds"]
    return runsets_cost(node, [({"num_last": nl, "per_last": s["num_next_per_last"], "seq_len": s["seq_len"], "runs": R,
                                 "optimizer": "sgd", "init": s["init"], "batch": s["batch"], "log_every": s["iterations"],
                                 **_graphs(s)},
                                s["iterations"]) for nl in s["num_last"]])


def runset_probe(shape: dict, dim_value: int, device: str, steps: int, warmup: int) -> dict:
    """One RunSet of ``dim_value`` runs: ``featlearn.scan_snap.train.train`` for ``w = max(1, warmup)`` and then for
    ``w + steps`` iterations; the difference over ``steps`` leaves out the set-up and the final forward pass
    and keeps the job's logging every ``log_every`` iterations. With ``cuda_graphs`` the step is captured after 3
    eager ones (on a CUDA device): probe more than 3 steps beyond the warm-up."""
    from featlearn.scan_snap.data import SequenceClasses
    from featlearn.scan_snap.train import RunSet, train

    spec = SequenceClasses(shape["num_last"], shape["per_last"], shape["seq_len"])
    R = dim_value

    # what the shape leaves out does not change a step's cost: any learning rates, any SGD momentum
    momentum = None if shape["optimizer"] == "adam" else 0.9

    def seconds(iterations: int) -> float:
        runs = RunSet(spec, [1 + i for i in range(R)], [1.0] * R, [2.0] * R, optimizer=shape["optimizer"], init=shape["init"],
                      batch=shape["batch"], iterations=iterations, log_every=shape["log_every"], momentum=momentum,
                      device=device, cuda_graphs=shape.get("cuda_graphs", False))
        sync(device)
        t0 = time.perf_counter()
        train(runs)
        sync(device)
        return time.perf_counter() - t0

    w = max(1, warmup)
    short = seconds(w)
    return {"seconds_per_step": max(0.0, seconds(w + steps) - short) / steps}


def wikitext_cost(node: Node, results: str = "results") -> Cost:
    """scan_snap_wikitext: the tutorial transformer with SGD (:mod:`featlearn.lm.cost`), probed as ``lm:scan_snap_lm``."""
    from featlearn.lm.bench import tutorial_size
    from featlearn.lm.cost import tutorial_budget
    from featlearn.scan_snap.wikitext import OPTIMIZER

    return lm_cost(node, results, "scan_snap_lm", lambda s, vocab: tutorial_size(s, vocab, OPTIMIZER), tutorial_budget,
                   f"{__name__}:wikitext_probe")


def wikitext_probe(shape: dict, dim_value: int, device: str, steps: int, warmup: int) -> dict:
    from featlearn.lm.bench import tutorial_probe
    from featlearn.scan_snap.wikitext import OPTIMIZER

    return tutorial_probe(shape, dim_value, device, steps, warmup, OPTIMIZER)
