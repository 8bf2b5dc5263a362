"""JoMA's cost models for ``python -m featlearn estimate`` (docs/estimate.md), named by its registry's job records:
a Table 1 cell (:func:`table1_cost`, probed by :func:`table1_probe`) and a WikiText language model, the tutorial
transformer of ``featlearn.lm`` trained with Adam (:func:`wikitext_cost`, :func:`wikitext_probe`).
Standard library only at import time."""

from __future__ import annotations

import time

from featlearn.pipeline.estimate import FLOAT32, Cost, Node, Part, lm_cost, parameters_outside_embeddings, probe, sync


def table1_cost(node: Node, results: str = "results") -> Cost:
    """joma_table1_cell: every seed of the cell in one job (vectorised or looped), ``steps`` Adam steps. A step
    runs one forward per class (C sequences of T tokens, weighted by the batch's class counts), so FLOPs per
    step = 6 x P_ne x C x T x seeds; memory = 4 B x seeds x (4 P + C T (3 d + 2 d_hidden) x layers)."""
    import torch

    from featlearn.joma.table1 import build_model

    s = node.settings
    R = len(s["seeds"])
    with torch.device("meta"):  # shapes only: nothing is initialised or allocated
        m = build_model(s["M"], s["C"], s, 1)
    P = sum(p.numel() for p in m.parameters())
    shape = {k: s[k] for k in ("C", "M", "T", "d", "d_hidden", "layers", "batch", "vectorise")} | {"seeds": R, "n_ch": s["n_ch"],
                                                                                                   "n": [s["n0"], s["n1"]]}
    if s.get("cuda_graphs"):  # (absent from the shape when off: earlier probes stay valid)
        shape["cuda_graphs"] = True
    flops = 6 * parameters_outside_embeddings(m) * s["C"] * s["T"] * R
    mem = FLOAT32 * R * (4 * P + s["C"] * s["T"] * (3 * s["d"] + 2 * s["d_hidden"]) * s["layers"])
    return Cost([Part(probe("table1", shape, "seeds", node.threads, f"{__name__}:table1_probe"), int(s["steps"]), R, flops,
                      mem)], 0.0,
                "final NCorr evaluation on eval_samples not included",
                "FLOPs = 6 P_ne C T R per step; memory = 4 B x R (4P + C T (3d + 2 d_hidden) layers) [D]",
                f"{P / 1e6:.2f}M parameters per run")


def table1_probe(shape: dict, dim_value: int, device: str, steps: int, warmup: int) -> dict:
    """One Table 1 cell with ``dim_value`` seeds: ``featlearn.joma.table1.train`` for ``warmup`` then ``steps`` steps.
    With ``cuda_graphs`` (vectorised, on a CUDA device) each of the two trainings runs 3 eager steps and captures the
    fourth: probe many more steps than that."""
    from featlearn.joma.hierarchy import make_hierarchy
    from featlearn.joma.table1 import build_model, train

    seeds = list(range(1, dim_value + 1))
    cfg = {**shape, "lr": 1e-5, "wd": 0.0, "log_every": 10**9}
    graphs = shape.get("cuda_graphs", False)
    hiers = [make_hierarchy(list(shape["n"]), shape["C"], shape["n_ch"], shape["M"], shape["T"], generator=s) for s in seeds]
    models = [build_model(shape["M"], shape["C"], cfg, s).to(device) for s in seeds]
    if warmup:
        train(models, hiers, seeds, {**cfg, "steps": warmup}, vectorise=shape["vectorise"], cuda_graphs=graphs)
    sync(device)
    t0 = time.perf_counter()
    train(models, hiers, seeds, {**cfg, "steps": steps}, vectorise=shape["vectorise"], cuda_graphs=graphs)
    sync(device)
    return {"seconds_per_step": (time.perf_counter() - t0) / steps}


def wikitext_cost(node: Node, results: str = "results") -> Cost:
    """joma_wikitext: the tutorial transformer with Adam (:mod:`featlearn.lm.cost`), probed as ``lm:joma_lm``."""
    from featlearn.joma.wikitext import OPTIMIZER
    from featlearn.lm.bench import tutorial_size
    from featlearn.lm.cost import tutorial_budget

    return lm_cost(node, results, "joma_lm", lambda s, vocab: tutorial_size(s, vocab, OPTIMIZER), tutorial_budget,
                   f"{__name__}:wikitext_probe")


def wikitext_probe(shape: dict, dim_value: int, device: str, steps: int, warmup: int) -> dict:
    from featlearn.joma.wikitext import OPTIMIZER
    from featlearn.lm.bench import tutorial_probe

    return tutorial_probe(shape, dim_value, device, steps, warmup, OPTIMIZER)
