"""Cost estimate of a config's whole DAG: ``python -m featlearn estimate [--configfile OVERLAY ...]``.

For every compute job Snakemake would run under the merged config (config/config.yaml with the overlays,
datasets and papers switched on or off as the Snakefile decides), the estimate lists

- ``runs``: trainings the job performs (several are trained in one batched or vectorised pass);
- ``steps``: optimiser steps (one step advances every run of a batched group at once);
- ``FLOPs``: training FLOPs of the whole job (formula per job kind, in the table's formula column);
- ``peak memory``: parameters + gradients + optimiser state + activations, float bytes (formula per kind);
- ``s/step``: seconds per step measured on the current device by a short timed probe of the real model at
  the job's shape (warm-up steps, then timed steps), cached per (device, torch version, rule, shape);
- ``time``: the process start-up (measured once) + steps x s/step x (1 + the stated evaluation share), summed
  over the job's parts.

Then the DAG (job inputs that are other jobs' outputs) gives the total time (sum), the critical path and a
list-schedule makespan for 1, 2 and 4 GPUs. Method, units and what is not estimated: docs/estimate.md.
Jobs without a cost model (data preparation, theory, analyses) say "not modelled" and show the wall time of
their Snakemake benchmark file when one exists, labelled as such.
"""

from __future__ import annotations

import datetime
import functools
import importlib
import json
import math
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from featlearn import PAPERS
from featlearn.pipeline.sizing import ESTIMATE_RESOURCES
from featlearn.pipeline.workflow import merged_config

DEFAULT_OUT = "results/estimate.md"
DEFAULT_CACHE = "results/estimate/probes.json"
GPU_COUNTS = (1, 2, 4)
FLOAT32 = 4  # bytes
FLOAT64 = 8
# A probe step predicted to take longer than this (from a pilot at the smallest shape) is probed at a
# reduced batch / run count and extrapolated linearly; the table says so [D].
MAX_PROBE_STEP_SECONDS = 5.0
# FLOPs per step above which the pilot is run first (below it a step takes milliseconds on any device) [D].
PILOT_FLOPS = 2e9
# Part of every cache key: raise it when a probe's method changes, so that older records are not reused.
PROBE_VERSION = 1
# Distinct probes measured per job by default; the rest of a larger job are interpolated (probe_parts).
MAX_PROBES_PER_JOB = 6


# --------------------------------------------------------------------------------------- the job graph


@dataclass
class Part:
    """A homogeneous piece of a job: ``steps`` optimiser steps of ``runs`` runs trained together, at one probed
    shape. ``flops`` and ``memory`` are per step and for the whole part's batch of runs (None: not derived)."""

    probe: "Probe | None"
    steps: int
    runs: int
    flops_per_step: float | None = None
    memory_bytes: float | None = None


@dataclass(frozen=True)
class Probe:
    """What a probe times: ``kind`` (a key of ``PROBES``), ``shape`` (JSON-able: everything the step cost depends
    on), ``dim`` (the shape key that may be reduced for a slow probe, extrapolated linearly) and the threads."""

    kind: str
    shape_json: str
    dim: str
    threads: int = 1

    @property
    def shape(self) -> dict:
        return json.loads(self.shape_json)


def probe(kind: str, shape: dict, dim: str, threads: int = 1) -> Probe:
    return Probe(kind, json.dumps(shape, sort_keys=True), dim, threads)


@dataclass
class Cost:
    """A job's cost model: its parts, the evaluation share added to the training time, the formulas used."""

    parts: list[Part]
    eval_share: float = 0.0
    eval_note: str = ""
    formula: str = ""
    note: str = ""

    @property
    def runs(self) -> int:
        return sum(p.runs for p in self.parts)

    @property
    def steps(self) -> int:
        return sum(p.steps for p in self.parts)

    @property
    def flops(self) -> float | None:
        if any(p.flops_per_step is None for p in self.parts):
            return None
        return sum(p.flops_per_step * p.steps for p in self.parts)

    @property
    def memory(self) -> float | None:
        mems = [p.memory_bytes for p in self.parts if p.memory_bytes is not None]
        return max(mems) if mems else None


@dataclass
class Node:
    """One job of the DAG, with its cost model (None: not modelled, ``why`` says why) and its estimate."""

    label: str
    rule: str
    paper: str
    wildcards: dict
    settings: dict | None
    gpu: bool
    threads: int
    benchmark: str
    deps: list[str] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)
    cost: Cost | None = None
    why: str = ""
    # filled by estimate(): seconds of the job, where they come from, seconds per step of each part
    seconds: float | None = None
    source: str = ""
    measured: float | None = None  # wall seconds of its benchmark file, when that comes from a run at this scale
    per_step: list = field(default_factory=list)


def _data_jobs(paths, prepared_on: dict) -> list:
    """The data preparations of data.smk as registry records (no model: they are listed and scheduled only)."""
    from featlearn.data.registry import DATASETS, PREPARED
    from featlearn.pipeline.registry import Job

    names = "|".join(n for n, on in prepared_on.items() if on) or "^$"
    return [Job(name="data_prepare", paper="data", run="", outputs={"files": paths.prepared("{name}", "{file}")}, settings={},
                stem="prepare_{name}", code=(),
                inputs=lambda wc: {"raw": [paths.raw(PREPARED[wc.name].raw, f.name)
                                           for f in DATASETS[PREPARED[wc.name].raw].files]},
                wildcards={"name": names, "file": "[^/]+"})]


def build_dag(config: dict, results: str = "results") -> list[Node]:
    """The compute jobs of the DAG that ``snakemake`` (rule ``all``) would build under ``config``, each with the
    jobs it depends on. Datasets and checkpoints are resolved as the Snakefile resolves them in a dry run
    (no contact with the model hub: uncached checkpoints are left out, as ``snakemake -n`` leaves them out)."""
    import featlearn.pipeline.workflow as wf
    from featlearn.pipeline.dag import JobIndex, files_of
    from featlearn.pipeline.registry import Paths

    paths = Paths(results)
    status = wf.dataset_status(config, f"{results}/data/raw")  # as common.smk: RAW = results/data/raw
    prepared_on = wf.prepared_enabled(status)

    def dataset_on(name: str) -> bool:
        return prepared_on[name] if name in prepared_on else status[name].enabled

    # rule all's data summary reads every prepared dataset that is switched on
    jobs, roots = [], [paths.prepared(name, "stats.json") for name, on in prepared_on.items() if on]
    allowed = wf.HUB_CONTACT["allowed"]
    wf.HUB_CONTACT["allowed"] = False
    try:
        for paper in PAPERS:
            reg = importlib.import_module(f"featlearn.{paper}.registry").registry(config, paths, dataset_on)
            jobs += list(reg.jobs)
            if not config["papers"][paper]:
                continue
            for fig in reg.figures:
                roots += [p for v in fig.inputs.values() for p in files_of(v)]
            roots += list(reg.job_claims)
    finally:
        wf.HUB_CONTACT["allowed"] = allowed
    index = JobIndex(jobs + _data_jobs(paths, prepared_on), paths)
    nodes: dict[str, Node] = {}

    def one_job(job, wc):  # one data_prepare job per prepared dataset, whichever of its files is asked for
        return type(wc)(name=wc["name"], file="*") if job.name == "data_prepare" else wc

    def inputs_of(job, wc) -> list[str]:
        return files_of(job.inputs(one_job(job, wc))["raw"]) if job.name == "data_prepare" else index.inputs(job, wc)

    for job, wc, inputs in index.walk(roots, inputs_of):
        wc = one_job(job, wc)
        cj = index.concrete(job, wc)
        label = f"data_prepare[name={wc['name']}]" if job.name == "data_prepare" else cj.label
        if label in nodes:
            continue
        deps = []
        for p in inputs:
            dep = index.producer(p)
            if dep is not None:
                djob, dwc = dep
                if djob.name == "data_prepare":
                    deps.append(f"data_prepare[name={dwc['name']}]")
                else:
                    deps.append(index.concrete(djob, dwc).label)
        settings = json.loads(job.settings_json(wc)) if job.name != "data_prepare" else None
        nodes[label] = Node(label, job.name, job.paper, {k: v for k, v in wc.items() if k != "file"}, settings,
                            job.resources.gpu, job.threads, cj.benchmark, sorted(set(deps)), inputs)
    return list(nodes.values())


# --------------------------------------------------------------------------------------- data sizes


def _stats(path: str) -> dict | None:
    p = Path(path)
    return json.loads(p.read_text()) if p.is_file() else None


def lm_data(dataset: str, results: str = "results", bpe: bool = False) -> dict:
    """Train/valid token counts and vocabulary of a prepared LM dataset: its stats.json when present, else the
    documented sizes of ``featlearn.pipeline.sizing`` and ``featlearn.lm_bench`` (``source`` says which)."""
    from featlearn.pipeline.sizing import BPE_PER_WORD, TRAIN_TOKENS

    stats = _stats(f"{results}/templates/gpt2_bpe/{dataset}/stats.json" if bpe
                   else f"{results}/data/prepared/{dataset}/stats.json")
    if stats:
        s = stats["splits"]
        return {"train": s["train"]["n_tokens"], "valid": s.get("valid", {}).get("n_tokens"), "vocab": stats.get("vocab_size"),
                "source": "stats.json"}
    from featlearn.lm_bench import VOCAB

    train = TRAIN_TOKENS.get(dataset)
    return {"train": None if train is None else int(train * (BPE_PER_WORD if bpe else 1.0)), "valid": None,
            "vocab": VOCAB.get(dataset), "source": "documented size (no stats.json)"}


# --------------------------------------------------------------------------------------- cost models


def lm_flops_per_step(non_embedding: int, n_layer: int, seq: int, d_model: int, batch: int) -> int:
    """Training FLOPs of one step of a transformer LM: (6 N + 6 n_layer T d) x batch x T (``lm_bench``'s
    per-token formula, Kaplan et al. 2020)."""
    from featlearn.lm_bench import flops_per_token

    return flops_per_token(non_embedding, n_layer, seq, d_model) * batch * seq


def lm_memory_bytes(parameters: int, optimizer_slots: int, batch: int, seq: int, n_layer: int, d_model: int, d_ff: int,
                    n_head: int, vocab: int, bytes_per_float: int = FLOAT32) -> int:
    """Peak training memory of a transformer LM, in bytes: parameters, gradients and optimiser state
    (P x (2 + slots); Adam/AdamW 2 slots, plain SGD 0) plus the activations kept for the backward pass,
    B T [n_layer (9 d + 2 d_ff + 2 H T) + 3 V] floats [D: per layer the inputs of the four linear maps, q, k,
    v, the two layer norms and dropout masks (~9 d), the feed-forward hidden and its mask (2 d_ff), the
    attention weights and their dropout mask (2 H T); the logits, their softmax and its gradient (3 V)]."""
    state = parameters * (2 + optimizer_slots)
    acts = batch * seq * (n_layer * (9 * d_model + 2 * d_ff + 2 * n_head * seq) + 3 * vocab)
    return (state + acts) * bytes_per_float


def evaluations(total: int, every: int) -> int:
    """How many times ``featlearn.training.resumable_training`` evaluates: at step 0, every ``every`` steps and
    at the last step."""
    return 1 + total // every + (1 if total % every else 0)


# the lm_bench model of each LM rule, and the key of its batch size in the settings
LM_RULES = {
    "joma_wikitext": ("joma_lm", "batch_size"),
    "scan_snap_wikitext": ("scan_snap_lm", "batch_size"),
    "features_lm_word": ("features_word", "batch_size"),
    "features_lm_char": ("features_char", "batch_size"),
    "templates_gpt2_wikitext": ("templates_gpt2", "batch"),
}


@functools.lru_cache(maxsize=None)
def _lm_sizes(model: str, settings_json: str, vocab: int) -> tuple[int, int, tuple[int, int, int, int]]:
    """(all parameters, N of the FLOPs formula, (batch, sequence, layers, width)) of an LM as
    ``featlearn.lm_bench.build`` builds it, on PyTorch's meta device (shapes only: no memory, no init)."""
    import torch

    from featlearn.lm_bench import Spec, build, non_embedding_parameters

    with torch.device("meta"):
        built = build(Spec(model, "", "", json.loads(settings_json)), vocab)
    return (sum(p.numel() for p in built.net.parameters()), non_embedding_parameters(built),
            (built.batch, built.seq, built.n_layer, built.d_model))


def lm_cost(node: Node, results: str = "results") -> Cost:
    """The WikiText/PTB/Shakespeare language models: one run; steps from the budget (iterations, or epochs x
    steps per epoch of the prepared train split); the model built by ``featlearn.lm_bench.build`` at the job's
    settings (its parameters give FLOPs and memory); evaluation share from the validation passes."""
    from featlearn.lm.train import LMRun, run_length

    model, _ = LM_RULES[node.rule]
    s = dict(node.settings)
    dataset = s.get("dataset") or node.wildcards.get("dataset")
    if not dataset:  # scan_snap: the variant's dataset is the folder of its prepared train split
        dataset = next(Path(p).parent.name for p in node.inputs if p.endswith("/train.pt"))
    bpe = node.rule == "templates_gpt2_wikitext" and s.get("tokenizer") == "gpt2"
    data = lm_data(dataset, results, bpe=bpe)
    vocab_file = next((p for p in node.inputs if p.endswith((".json",))), None)
    if vocab_file and Path(vocab_file).is_file():  # the job's own vocabulary input, as the job reads it
        data["vocab"] = len(json.loads(Path(vocab_file).read_text(encoding="utf-8")))
    elif bpe:
        from featlearn.templates.gpt2.experiments import GPT2_VOCAB

        data["vocab"] = GPT2_VOCAB
    if data["vocab"] is None:
        raise ValueError(f"no vocabulary size for {dataset} (no prepared stats.json)")
    settings = {k: v for k, v in s.items() if k != "dataset"}
    P, N, (B, T, L, d) = _lm_sizes(model, json.dumps(settings, sort_keys=True), data["vocab"])
    slots = 2 if model in ("joma_lm", "features_char", "templates_gpt2") else 0
    if model == "templates_gpt2":
        d_ff, H = 4 * d, s["n_head"]
    elif model == "features_char":
        d_ff, H = 4 * d, s.get("n_head", 6)
    else:
        run = LMRun(**{k: v for k, v in s.items() if k in LMRun.__dataclass_fields__})
        d_ff, H = run.d_ff, run.n_head
    # steps and evaluation share
    if model == "templates_gpt2":
        per_epoch = None if data["train"] is None else data["train"] // T // B
        if s.get("steps"):
            total = int(s["steps"])
        elif per_epoch is None:
            raise ValueError(f"epochs budget but no train size of {dataset}")
        else:
            total = int(s["epochs"]) * per_epoch
        final = (data["valid"] // T) if s.get("val_blocks") is None and data["valid"] else (s.get("val_blocks") or 0)
        ev_blocks = evaluations(total, s["eval_every"]) * s["val_blocks_log"] + final
        eval_steps = ev_blocks / B / 3
        eval_note = f"{ev_blocks} validation blocks forward (= 1/3 of a step per batch of {B}) [D]"
    elif model == "features_char":
        total = int(s["iterations"])
        n_ev = evaluations(total, s["eval_every"])
        eval_steps = n_ev * s["eval_batches"] / 3
        eval_note = f"{n_ev} evaluations x {s['eval_batches']} batches forward (1/3 of a step each) [D]"
    else:
        run = LMRun(**{k: v for k, v in s.items() if k in LMRun.__dataclass_fields__})
        if run.epochs is not None and data["train"] is None:
            raise ValueError(f"epochs budget but no train size of {dataset}")
        per_epoch = 0 if data["train"] is None else (data["train"] // run.batch_size - 1) // run.bptt
        total = run_length(run, per_epoch)
        if run.val_windows is None:
            if not data["valid"]:
                raise ValueError(f"whole-split evaluation but no validation size of {dataset}")
            windows = (data["valid"] // run.eval_batch_size - 1) // run.bptt
        else:
            windows = run.val_windows
        n_ev = evaluations(total, run.log_every)
        eval_steps = n_ev * windows * run.eval_batch_size / run.batch_size / 3
        eval_note = (f"{n_ev} evaluations x {windows} windows of {run.eval_batch_size} streams forward "
                     f"(1/3 of a step of {run.batch_size} streams each) [D]")
    shape = {"model": model, "dataset": dataset, "vocab": data["vocab"], "batch": B, "seq": T,
             "settings": {k: v for k, v in sorted(s.items()) if k not in _LM_BUDGET_KEYS}}
    part = Part(probe(f"lm:{model}", shape, "batch", node.threads), total, 1,
                lm_flops_per_step(N, L, T, d, B), lm_memory_bytes(P, slots, B, T, L, d, d_ff, H, data["vocab"]))
    return Cost([part], eval_steps / max(total, 1), eval_note,
                "FLOPs = (6 N + 6 L T d) B T per step [Kaplan 2020]; "
                "memory = 4 B x [P (2 + slots) + B T (L (9d + 2d_ff + 2HT) + 3V)]",
                f"{P / 1e6:.2f}M parameters, vocab {data['vocab']} ({data['source']})")


# settings that change the budget or logging, not the cost of a step (left out of the probe's shape)
_LM_BUDGET_KEYS = ("iterations", "epochs", "steps", "log_every", "checkpoint_every", "val_windows", "eval_every",
                   "val_blocks_log", "val_blocks", "n_frequent", "top_k", "map_steps", "lr", "ffn_lr", "seed", "eval_batches",
                   "warmup", "lr_decay_iters", "min_lr", "dataset", "reset_optimizer_each_epoch", "kq_mask_diag", "tokenizer")


def _non_embedding(model) -> int:
    import torch.nn as nn

    emb = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    return sum(p.numel() for p in model.parameters() if id(p) not in emb)


def sweep_cost(node: Node, results: str = "results") -> Cost:
    """templates_sweep / templates_calibration: the engine's groups (``expand_groups`` of each curve); a group of R
    runs trains epochs x ceil(n / batch) steps. FLOPs per step = 6 x P_ne x samples x positions x R (P_ne: the
    non-embedding parameters of one run's model at the job's vocabulary; a sequence model applies them at each
    of the task's positions [D: upper bound for a readout on the last position only]; the MLPs' one-hot first
    layer counts hidden x inputs, as it is computed); memory = 4 B x R (4 P + 8 samples x positions x width),
    width the widest layer's output."""
    import torch

    from featlearn.templates.sweeps.engine import expand_groups, init_model
    from featlearn.templates.sweeps.experiments import calibration_curves, figure_curves
    from featlearn.templates.tasks import make_datasets

    s = node.settings
    curves = calibration_curves(s["sweeps"]) if node.rule == "templates_calibration" else figure_curves(s["grid"], s["sweeps"])
    parts = []
    for _, settings in curves:
        for g in expand_groups({**settings, "progress": False}):
            R = len(g.runs)
            samples = min(g.n, g.batch)
            vocab = make_datasets(g.task, 1, 1, n_val=1, n_test=1, train_alphabet=g.n).vocab.size  # the job's vocabulary
            m = init_model(g, g.runs[0], vocab, g.structure)
            P = sum(p.numel() for p in m.parameters())
            emb = {id(x.weight) for x in m.modules() if isinstance(x, torch.nn.Embedding)}
            width = max((p.shape[0] for p in m.parameters() if p.dim() == 2 and id(p) not in emb), default=1)
            if g.arch.startswith("mlp"):  # the one-hot first layer is a sum of the selected columns: hidden x inputs
                first = m.layers[0].weight
                per_sample = 6 * (_non_embedding(m) - first.numel()
                                  + first.shape[0] * (g.task.length + g.task.length ** 2 * (g.arch == "mlp_xxt")))
            else:  # a sequence model applies its weights at every position
                per_sample = 6 * _non_embedding(m) * g.task.length
            shape = {"task": settings["task"], "arch": g.arch, "model": g.model, "variants": sorted({r.variant for r in g.runs}),
                     "runs": R, "batch": g.batch, "n_probe": samples, "trainable": list(g.trainable) if g.trainable else None,
                     "dtype": str(g.dtype), "eval_every": g.eval_every, "n_val": g.n_val, "n_test": g.n_test,
                     **({"cuda_graphs": True} if g.cuda_graphs else {})}  # (absent when off: earlier probes stay valid)
            parts.append(Part(probe("sweep", shape, "runs", node.threads), g.epochs * g.steps_per_epoch, R,
                              per_sample * samples * R, FLOAT32 * R * (4 * P + samples * g.task.length * width * 8)))
    return Cost(parts, 0.0, "evaluation (validation + test, every epoch) is inside the timed probe epochs",
                "FLOPs = 6 P_ne x samples x positions x R per step (MLP: 6 P_ne x samples x R, first layer hidden x inputs); "
                "memory = 4 B x R (4P + 8 samples x positions x width) [D]",
                f"{len(parts)} groups")


def table1_cost(node: Node, results: str = "results") -> Cost:
    """joma_table1_cell: every seed of the cell in one job (vectorised or looped), ``steps`` Adam steps. A step
    runs one forward per class (C sequences of T tokens, weighted by the batch's class counts), so FLOPs per
    step = 6 x P_ne x C x T x seeds; memory = 4 B x seeds x (4 P + C T (3 d + 2 d_hidden) x layers)."""
    from featlearn.joma.table1 import build_model

    s = node.settings
    R = len(s["seeds"])
    m = build_model(s["M"], s["C"], s, 1)
    P = sum(p.numel() for p in m.parameters())
    shape = {k: s[k] for k in ("C", "M", "T", "d", "d_hidden", "layers", "batch", "vectorise")} | {"seeds": R, "n_ch": s["n_ch"],
                                                                                                   "n": [s["n0"], s["n1"]]}
    flops = 6 * _non_embedding(m) * s["C"] * s["T"] * R
    mem = FLOAT32 * R * (4 * P + s["C"] * s["T"] * (3 * s["d"] + 2 * s["d_hidden"]) * s["layers"])
    return Cost([Part(probe("table1", shape, "seeds", node.threads), int(s["steps"]), R, flops, mem)], 0.0,
                "final NCorr evaluation on eval_samples not included",
                "FLOPs = 6 P_ne C T R per step; memory = 4 B x R (4P + C T (3d + 2 d_hidden) layers) [D]",
                f"{P / 1e6:.2f}M parameters per run")


def scan_snap_runsets(node: Node) -> list[tuple[dict, int]]:
    """The RunSets of a Scan and Snap synthetic job, as (probe shape, iterations): syn_small trains both query
    layouts, adam one, syn_medium one per query count (``featlearn.scan_snap.experiments``)."""
    from featlearn.scan_snap.experiments import LAYOUTS

    s = node.settings
    if node.rule == "scan_snap_syn_small":
        return [({"num_last": nl, "per_last": pl, "seq_len": s["seq_len"], "runs": len(s["ratios"]) * s["seeds"],
                  "optimizer": "sgd", "init": "zero", "batch": s["batch"], "log_every": s["log_every"]}, s["iterations"])
                for nl, pl in LAYOUTS.values()]
    if node.rule == "scan_snap_adam":
        nl, pl = LAYOUTS["separate"]
        return [({"num_last": nl, "per_last": pl, "seq_len": s["seq_len"], "runs": len(s["lrs"]) * s["seeds"],
                  "optimizer": "adam", "init": "zero", "batch": s["batch"], "log_every": s["log_every"]}, s["iterations"])]
    R = len(s["eta_z"]) * len(s["ratios"]) * s["seeds"]
    return [({"num_last": nl, "per_last": s["num_next_per_last"], "seq_len": s["seq_len"], "runs": R, "optimizer": "sgd",
              "init": s["init"], "batch": s["batch"], "log_every": s["iterations"]}, s["iterations"]) for nl in s["num_last"]]


def scan_snap_cost(node: Node, results: str = "results") -> Cost:
    """Scan and Snap synthetic jobs: R runs of the reparameterised 1-layer model (Y, Z of M x M each, float64)
    per RunSet. FLOPs per step = 6 x B x M^2 x R (the Y product 2 B M^2 forward, twice that backward; the
    softmax over M is O(B M)); memory = 8 B x R x (2 M^2 (2 + slots) + 3 B M)."""
    from featlearn.scan_snap.data import SequenceClasses

    parts = []
    for shape, iters in scan_snap_runsets(node):
        M = SequenceClasses(shape["num_last"], shape["per_last"], shape["seq_len"]).M
        R, B = shape["runs"], shape["batch"]
        slots = 2 if shape["optimizer"] == "adam" else 1
        parts.append(Part(probe("scan_snap", shape, "runs", node.threads), int(iters), R, 6 * B * M * M * R,
                          FLOAT64 * R * (2 * M * M * (2 + slots) + 3 * B * M)))
    return Cost(parts, 0.0, "logging every log_every steps is inside the timed probe steps when they reach it",
                "FLOPs = 6 B M^2 R per step; memory = 8 B x R (2 M^2 (2 + slots) + 3 B M) [D]", "")


def features_data(cfg: dict, results: str = "results") -> dict | None:
    """Sizes of a features training job's splits, as ``featlearn.features.experiments.load_splits`` reads them
    (train subsampled to ``max_train``, dev/test to ``max_eval``, tokens cut at ``max_len``): from the prepared
    files when they exist (the synthetic data are built), else None. Read once per dataset and subsample."""
    keys = ("dataset", "max_train", "max_eval", "subsample_seed", "synthetic")
    return _features_data(json.dumps({k: cfg.get(k) for k in keys} | {"max_len": cfg["settings"].get("max_len")}, sort_keys=True),
                          results)


@functools.lru_cache(maxsize=None)
def _features_data(cfg_json: str, results: str) -> dict | None:
    from featlearn.features.experiments import load_splits
    from featlearn.pipeline.registry import Paths

    cfg = json.loads(cfg_json)
    inputs = {}
    if cfg["dataset"] != "synthetic":
        paths = Paths(results)
        inputs = {s: paths.prepared(cfg["dataset"], f"{s}.tsv") for s in ("train", "dev", "test")} | {
            "vocab": paths.prepared(cfg["dataset"], "vocab.json")}
        if not all(Path(v).is_file() for v in inputs.values()):
            return None
    rows, vocab = load_splits(cfg, inputs)
    max_len = cfg["max_len"] or 0

    def lengths(split):
        return [max(1, min(len(t.split()), max_len) if max_len > 0 else len(t.split())) for _, t in rows.get(split, [])]

    train = lengths("train")
    labels = {y for r in rows.values() for y, _ in r}
    return {"n_train": len(train), "mean_length": sum(train) / max(len(train), 1),
            "eval_instances": len(lengths("dev")) + len(lengths("test")), "vocab": len(vocab),
            "n_classes": max(max(labels) + 1, 2)}


def batches_per_epoch(n: int, batch: int, pool: int) -> int:
    """Minibatches of one epoch of ``featlearn.features.train.epoch_batches``: pools of ``pool x batch`` instances,
    each cut into batches of ``batch`` (the last one of a pool may be smaller)."""
    step = max(1, pool) * batch
    full, rest = divmod(n, step)
    return full * max(1, pool) + math.ceil(rest / batch)


def features_cost(node: Node, results: str = "results") -> Cost:
    """features_train: every activation x sigma_v x seed of the job in one batched model (R runs), epochs x
    minibatches steps. FLOPs per step = 6 x P_ne x batch x mean length x R (each non-embedding weight used once
    per token [D: an approximation of the per-kind models]); memory = 4 B x R (3 P + 8 batch x length x d)."""
    from featlearn.features.models import InitScales, init_params
    from featlearn.features.train import Settings, _spec

    cfg = node.settings
    data = features_data(cfg, results)
    if data is None:
        raise ValueError(f"prepared {cfg['dataset']} splits not found (the job's sizes come from them)")
    st = Settings.from_dict({**cfg["settings"], "device": "cpu"})
    R = len(cfg["activations"]) * len(cfg["sigma_v"]) * len(cfg["seeds"])
    spec = _spec(st, data["vocab"], 1 if data["n_classes"] == 2 else data["n_classes"])
    params = init_params(spec, [1], [0.1], InitScales(st.sigma_e, st.sigma_w, st.sigma_h))
    P = sum(p.numel() for p in params.values())
    P_ne = sum(p.numel() for k, p in params.items() if k != "E")
    L = max(1, round(data["mean_length"]))
    steps = st.epochs * batches_per_epoch(data["n_train"], st.batch, st.bucket_pool)
    slots = 2 if st.optimizer == "adam" else 1 if st.optimizer == "adagrad" else 0
    shape = {"kind": st.kind, "d": st.d, "ffn": st.ffn, "kernel": st.kernel, "sa_variant": st.sa_variant, "mv_bos": st.mv_bos,
             "optimizer": st.optimizer, "activations": list(cfg["activations"]), "sigma_v": len(cfg["sigma_v"]),
             "seeds": len(cfg["seeds"]), "runs": R, "batch": st.batch, "length": L,
             "vocab": data["vocab"], "n_classes": data["n_classes"], "dropout": st.dropout, "dtype": st.dtype}
    eval_share = data["eval_instances"] * (st.epochs + 1) / 3 / max(data["n_train"] * st.epochs, 1)
    return Cost([Part(probe("features", shape, "runs", node.threads), steps, R, 6 * P_ne * st.batch * L * R,
                      FLOAT32 * R * ((2 + slots) * P + 8 * st.batch * L * st.d))],
                eval_share, f"dev + test ({data['eval_instances']} instances) forward after every epoch and at epoch 0 "
                "(1/3 of a training pass) [D]",
                "FLOPs = 6 P_ne B L R per step; memory = 4 B x R ((2 + slots) P + 8 B L d) [D]",
                f"{data['n_train']} train instances of mean length {data['mean_length']:.1f}, vocab {data['vocab']}")


def _gpt2_config(model: str, revision: str, cache_dir: str | None):
    """The architecture of a public GPT-2 checkpoint, from the Hugging Face cache only (as a dry run resolves it)."""
    from transformers import GPT2Config

    return GPT2Config.from_pretrained(model, revision=revision, cache_dir=cache_dir, local_files_only=True)


def gpt2_non_embedding(d: int, n_layer: int, d_ff: int | None = None) -> int:
    """Parameters of a GPT-2 body outside its embedding tables, plus the fine-tuning head Linear(d, 1): per block
    the attention c_attn (d x 3d + 3d) and c_proj (d^2 + d), the MLP (d x d_ff + d_ff, d_ff x d + d) and two
    layer norms (4 d); the final layer norm (2 d) [C: transformers' GPT2Model]."""
    d_ff = d_ff or 4 * d
    block = 3 * d * d + 3 * d + d * d + d + 2 * d * d_ff + d_ff + d + 4 * d
    return n_layer * block + 2 * d + d + 1


def finetune_cost(node: Node, results: str = "results") -> Cost:
    """templates_gpt2_finetune: one run per (n, seed), each ``epochs`` x ceil(n / batch) Adam steps on template
    strings (``featlearn.templates.gpt2.experiments.finetune_t5``); FLOPs per step = 6 x P_ne x B x length;
    memory as the LMs with no vocabulary output (a regression head)."""
    from featlearn.templates.tasks import aba_abb, make_datasets

    s = node.settings
    cfg = _gpt2_config(s["model"], s["revision"], s.get("cache_dir"))
    d, L, H = cfg.n_embd, cfg.n_layer, cfg.n_head
    task = aba_abb()
    parts = []
    for n in s["n"]:
        data = make_datasets(task, int(n), 1)
        V, T, B = data.vocab.size, task.length, min(int(s["batch"]), int(n))
        p_ne = gpt2_non_embedding(d, L, cfg.n_inner)
        P = p_ne + (cfg.vocab_size + cfg.n_positions + V) * d
        shape = {"config": {"n_embd": d, "n_layer": L, "n_head": H, "n_positions": cfg.n_positions, "n_inner": cfg.n_inner,
                            "vocab_size": cfg.vocab_size, "activation_function": cfg.activation_function},
                 "vocab": V, "length": T, "batch": B}
        steps = int(s["seeds"]) * int(s["epochs"]) * math.ceil(int(n) / int(s["batch"]))
        parts.append(Part(probe("gpt2_t5", shape, "batch", node.threads), steps, int(s["seeds"]), 6 * p_ne * B * T,
                          lm_memory_bytes(P, 2, B, T, L, d, cfg.n_inner or 4 * d, H, 0)))
    n_total = sum(int(n) for n in s["n"])
    share = (len(s["n"]) * 200 + n_total) / 3 / n_total
    return Cost(parts, share, "validation and test (100 each) and the train split forward after every epoch: an upper bound "
                "(test and train are evaluated only when validation improves) [D]",
                "FLOPs = 6 P_ne B T per step; memory = 4 B x [4 P + B T L (9d + 2 d_ff + 2 H T)]",
                f"{s['model']}@{s['revision']}: {L} layers, d {d}")


# rule -> cost model(node, results folder)
COST_MODELS: dict[str, Callable[[Node, str], Cost]] = {
    **{rule: lm_cost for rule in LM_RULES},
    "templates_sweep": sweep_cost,
    "templates_calibration": sweep_cost,
    "joma_table1_cell": table1_cost,
    "scan_snap_syn_small": scan_snap_cost,
    "scan_snap_adam": scan_snap_cost,
    "scan_snap_syn_medium": scan_snap_cost,
    "features_train": features_cost,
    "templates_gpt2_finetune": finetune_cost,
}


# --------------------------------------------------------------------------------------- probes


def _lm_probe(shape: dict, dim_value: int, device: str, steps: int, warmup: int) -> dict:
    """One LM at the job's shape (batch ``dim_value``): ``featlearn.lm_bench.benchmark``'s timed training steps."""
    from featlearn.lm_bench import Spec, benchmark

    model = shape["model"]
    # seed and learning rate are left out of the shape (they do not change a step's cost); any value builds the model
    settings = {"seed": 1, "lr": 1e-3, **shape["settings"], LM_KEYS_BATCH[model]: dim_value}
    row = benchmark(Spec(model, shape["dataset"], shape["dataset"], settings), device, steps=steps, warmup=warmup,
                    vocab=shape["vocab"])
    # the median step: robust to another process taking the device for a moment
    return {"seconds_per_step": row["median_step_seconds"], "peak_memory_bytes": (row["peak_memory_gib"] or 0) * 2**30 or None}


LM_KEYS_BATCH = {model: key for model, key in LM_RULES.values()}


def _sweep_probe(shape: dict, dim_value: int, device: str, steps: int, warmup: int) -> dict:
    """One engine group of the job's shape (R = ``dim_value`` runs) at n = the group's minibatch, so an epoch is
    one step (plus the epoch's evaluation): ``warmup`` epochs, then ``steps`` timed epochs (``train_group``)."""
    from dataclasses import replace

    from featlearn.templates.sweeps.engine import RunSpec, expand_groups, train_group

    variants = shape["variants"]
    settings = {"task": shape["task"], "arch": shape["arch"], "model": shape["model"], "variants": variants,
                "n": [shape["n_probe"]], "lrs": [1e-3], "seeds": 1, "epochs": 1, "batch": shape["batch"], "max_group": 10**6,
                "trainable": shape["trainable"], "device": device, "eval_every": shape["eval_every"], "n_val": shape["n_val"],
                "n_test": shape["n_test"],
                "dtype": shape["dtype"].replace("torch.", ""), "progress": False,
                "cuda_graphs": shape.get("cuda_graphs", False)}  # captured steps replay after 3 eager ones: probe more steps
    runs = [RunSpec(1 + i // len(variants), 1e-3, variants[i % len(variants)]) for i in range(dim_value)]
    group = replace(expand_groups(settings)[0], runs=runs)
    if warmup:
        train_group(replace(group, epochs=warmup))
    return {"seconds_per_step": train_group(replace(group, epochs=steps)).seconds / steps}


def _table1_probe(shape: dict, dim_value: int, device: str, steps: int, warmup: int) -> dict:
    """One Table 1 cell with ``dim_value`` seeds: ``featlearn.joma.table1.train`` for ``warmup`` then ``steps`` steps."""
    from featlearn.joma.hierarchy import make_hierarchy
    from featlearn.joma.table1 import build_model, train

    seeds = list(range(1, dim_value + 1))
    cfg = {**shape, "lr": 1e-5, "wd": 0.0, "log_every": 10**9}
    hiers = [make_hierarchy(list(shape["n"]), shape["C"], shape["n_ch"], shape["M"], shape["T"], generator=s) for s in seeds]
    models = [build_model(shape["M"], shape["C"], cfg, s).to(device) for s in seeds]
    if warmup:
        train(models, hiers, seeds, {**cfg, "steps": warmup}, vectorise=shape["vectorise"])
    _sync(device)
    t0 = time.perf_counter()
    train(models, hiers, seeds, {**cfg, "steps": steps}, vectorise=shape["vectorise"])
    _sync(device)
    return {"seconds_per_step": (time.perf_counter() - t0) / steps}


def _scan_snap_probe(shape: dict, dim_value: int, device: str, steps: int, warmup: int) -> dict:
    """One RunSet of ``dim_value`` runs: ``featlearn.scan_snap.train.train`` for ``w = max(1, warmup)`` and then for
    ``w + steps`` iterations; the difference over ``steps`` leaves out the set-up and the final forward pass
    and keeps the job's logging every ``log_every`` iterations."""
    from featlearn.scan_snap.data import SequenceClasses
    from featlearn.scan_snap.train import RunSet, train

    spec = SequenceClasses(shape["num_last"], shape["per_last"], shape["seq_len"])
    R = dim_value

    def seconds(iterations: int) -> float:
        runs = RunSet(spec, [1 + i for i in range(R)], [1.0] * R, [2.0] * R, optimizer=shape["optimizer"], init=shape["init"],
                      batch=shape["batch"], iterations=iterations, log_every=shape["log_every"], device=device)
        _sync(device)
        t0 = time.perf_counter()
        train(runs)
        _sync(device)
        return time.perf_counter() - t0

    w = max(1, warmup)
    short = seconds(w)
    return {"seconds_per_step": max(0.0, seconds(w + steps) - short) / steps}


def _features_probe(shape: dict, dim_value: int, device: str, steps: int, warmup: int) -> dict:
    """``featlearn.features.train.train`` of ``dim_value`` runs for one epoch over ``batch x steps`` random instances
    of the job's mean length (no dev/test split and no probe units: their share is the stated evaluation share)."""
    import torch

    from featlearn.features.train import Encoded, Probes, Run, Settings, train

    # the job's order, activations x sigma_v x seeds (``job_runs``): each distinct seed draws its own batches
    acts, n_sv, n_seeds = shape["activations"], shape["sigma_v"], shape["seeds"]
    runs = [Run(seed=1 + i % n_seeds, activation=acts[i // (n_sv * n_seeds) % len(acts)], sigma_v=0.1 * (1 + i // n_seeds % n_sv))
            for i in range(dim_value)]
    st = Settings(kind=shape["kind"], epochs=1, batch=shape["batch"], optimizer=shape["optimizer"], dropout=shape["dropout"],
                  d=shape["d"], kernel=shape["kernel"], ffn=shape["ffn"], sa_variant=shape["sa_variant"], mv_bos=shape["mv_bos"],
                  device=device,
                  dtype=shape["dtype"], threads=0)
    gen = torch.Generator().manual_seed(0)

    def split(n: int) -> dict:
        L = shape["length"]
        ids = torch.randint(2, shape["vocab"], (n * L,), generator=gen)
        return {"train": Encoded(ids, torch.arange(n + 1) * L, torch.randint(shape["n_classes"], (n,), generator=gen))}

    def fit(n_steps: int) -> float:
        return train(st, runs, split(shape["batch"] * n_steps), shape["vocab"], Probes(), n_classes=shape["n_classes"],
                     progress=False).seconds

    if warmup:
        fit(warmup)
    return {"seconds_per_step": fit(steps) / steps}


def _gpt2_t5_probe(shape: dict, dim_value: int, device: str, steps: int, warmup: int) -> dict:
    """A GPT-2 body of the checkpoint's architecture (random init: the same cost) in ``TemplateGPT2``, trained with
    Adam and the MSE of ``finetune_t5`` on ``dim_value`` random template strings."""
    import torch
    from transformers import GPT2Config, GPT2Model

    from featlearn.templates.gpt2.experiments import TemplateGPT2

    cfg = GPT2Config(**shape["config"])
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = TemplateGPT2(GPT2Model(cfg), shape["vocab"]).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    x = torch.randint(shape["vocab"], (dim_value, shape["length"]), device=device)
    y = torch.randn(dim_value, device=device)

    def step() -> None:
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(warmup):
        step()
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    _sync(device)
    return {"seconds_per_step": (time.perf_counter() - t0) / steps}


def _sync(device: str) -> None:
    if str(device).startswith("cuda"):
        import torch

        torch.cuda.synchronize()


PROBES: dict[str, Callable[..., dict]] = {
    **{f"lm:{model}": _lm_probe for model, _ in LM_RULES.values()},
    "sweep": _sweep_probe,
    "table1": _table1_probe,
    "scan_snap": _scan_snap_probe,
    "features": _features_probe,
    "gpt2_t5": _gpt2_t5_probe,
}


def device_name(device: str, threads: int) -> str:
    """The device as the cache keys it: the GPU's name, or the CPU's with the torch thread count."""
    import torch

    if str(device).startswith("cuda"):
        return torch.cuda.get_device_name()
    return f"{platform.processor() or platform.machine()} CPU, {threads} threads"


class Prober:
    """Seconds per step of a (rule, probe), measured once per (device, torch version, rule, shape) and cached in a
    JSON file; ``probe=False`` answers from the cache only (None when missing).

    A probe of a large step (over ``PILOT_FLOPS``) first times the step at the reducible dimension 1 (batch or
    runs: a pilot of one warm-up and two timed steps, fewer when the probe itself has fewer). When ``pilot x
    full dimension`` exceeds ``max_seconds``, the probe runs at the largest dimension ``k`` >= 2 that fits and
    extrapolates linearly through the two points (time = fixed cost + cost per unit of the dimension, FLOPs
    being linear in it); the record says so. Each record keeps the 1-minute load average when it was taken."""

    def __init__(self, device: str, cache: str | os.PathLike, steps: int = 3, warmup: int = 1, probe: bool = True,
                 max_seconds: float = MAX_PROBE_STEP_SECONDS, probes: dict | None = None, log=None, threads: int | None = None,
                 max_parts: int = 0):
        import torch

        self.device, self.cache_path = device, Path(cache)
        self.steps, self.warmup, self.probe, self.max_seconds = max(1, steps), max(0, warmup), probe, max_seconds
        self.probes = PROBES if probes is None else probes
        self.torch = torch.__version__
        self.cache = json.loads(self.cache_path.read_text()) if self.cache_path.is_file() else {}
        self.measured = 0  # probes run by this object (the rest came from the cache)
        self.threads = threads  # torch threads of every probe; None: each job's declared threads
        self.max_parts = max_parts  # distinct probes measured per job; the rest interpolated (0: every one measured)
        self.log = log or (lambda msg: print(f"[estimate] {msg}", file=sys.stderr, flush=True))

    def key(self, rule: str, p: Probe) -> str:
        return json.dumps({"device": device_name(self.device, self.threads or p.threads), "torch": self.torch, "rule": rule,
                           "kind": p.kind, "shape": p.shape, "version": PROBE_VERSION}, sort_keys=True)

    def get(self, rule: str, p: Probe, flops_per_step: float | None = None) -> dict | None:
        key = self.key(rule, p)
        if key in self.cache:
            return self.cache[key]
        if not self.probe:
            return None
        rec = self._measure(p, flops_per_step)
        if "error" in rec:  # reported, not cached: the next run tries again
            return rec
        rec["measured_utc"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        self.cache[key] = rec
        self.measured += 1
        self._save()
        return rec

    def _measure(self, p: Probe, flops_per_step: float | None) -> dict:
        import torch

        fn = self.probes[p.kind]
        shape, full = p.shape, int(p.shape[p.dim])
        torch.set_num_threads(self.threads or p.threads)
        use, pilot, t0 = full, None, time.perf_counter()
        try:
            if full > 1 and (flops_per_step or 0) > PILOT_FLOPS:
                pilot = fn(shape, 1, self.device, min(2, self.steps), min(1, self.warmup))["seconds_per_step"]
                if pilot * full > self.max_seconds:
                    use = max(2, min(full, int(self.max_seconds / pilot)))
            out = fn(shape, use, self.device, self.steps, self.warmup)
        except Exception as exc:  # out of memory above all: the table says it was not measured, and why
            text = str(exc).splitlines()[0][:120] if str(exc) else ""
            msg = "out of memory" if "out of memory" in str(exc).lower() else f"{type(exc).__name__}: {text}"
            self.log(f"probe {p.kind} failed: {msg}")
            return {"error": msg, "steps": self.steps, "warmup": self.warmup}
        t = out["seconds_per_step"]
        rec = {"measured_dim": use, "full_dim": full, "dim": p.dim, "steps": self.steps, "warmup": self.warmup,
               "load_average": round(os.getloadavg()[0], 2), "cpus": os.cpu_count()}
        if use == full:
            rec["seconds_per_step"] = t
        else:  # two points (the pilot at 1, the probe at `use`): a fixed cost plus a cost linear in the dimension
            slope = max(0.0, (t - pilot) / (use - 1))
            rec["seconds_per_step"] = t + slope * (full - use)
            rec["note"] = f"probed at {p.dim} 1 and {use} of {full}, extrapolated linearly (FLOPs linear in {p.dim})"
        rec["probe_seconds"] = time.perf_counter() - t0
        if out.get("peak_memory_bytes") and use == full:  # measured at the job's own shape only
            rec["peak_memory_bytes"] = out["peak_memory_bytes"]
        self.log(f"probe {p.kind} {p.dim}={use}/{full}: {rec['seconds_per_step']:.4g} s/step")
        return rec

    def startup(self) -> float | None:
        """Seconds to start a job's process: ``python -c "import torch, pandas, featlearn.pipeline.compute"`` in a fresh
        interpreter (the faster of two), measured once per device (cached like a probe; None with ``--no-probe``
        and no cache)."""
        key = json.dumps({"device": device_name(self.device, 1), "torch": self.torch, "kind": "startup"}, sort_keys=True)
        if key not in self.cache:
            if not self.probe:
                return None
            import subprocess

            times = []
            for _ in range(2):  # the faster of two: the first may read the libraries from disk
                t0 = time.perf_counter()
                subprocess.run([sys.executable, "-c", "import torch, pandas, featlearn.pipeline.compute"], check=True,
                               env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
                times.append(time.perf_counter() - t0)
            self.cache[key] = {"seconds": min(times), "load_average": round(os.getloadavg()[0], 2)}
            self._save()
        return self.cache[key]["seconds"]

    def _save(self) -> None:
        from featlearn.io import write_text

        self.cache_path.parent.mkdir(parents=True, exist_ok=True)
        write_text(self.cache_path, json.dumps(self.cache, indent=1, sort_keys=True) + "\n")


# --------------------------------------------------------------------------------------- schedule


def critical_path(times: dict[str, float], deps: dict[str, list[str]]) -> tuple[float, list[str]]:
    """Length and jobs of the longest path through the DAG (a job's path includes its own time)."""
    finish, best_prev = {}, {}

    def visit(n: str) -> float:
        if n not in finish:
            prev = max(deps.get(n, []), key=lambda d: visit(d), default=None)
            best_prev[n] = prev
            finish[n] = times[n] + (visit(prev) if prev is not None else 0.0)
        return finish[n]

    for n in times:
        visit(n)
    if not finish:
        return 0.0, []
    end = max(finish, key=finish.get)
    path = [end]
    while best_prev[path[-1]] is not None:
        path.append(best_prev[path[-1]])
    return finish[end], path[::-1]


def makespan(times: dict[str, float], deps: dict[str, list[str]], gpu: dict[str, bool], n_gpus: int) -> float:
    """Finish time of a list schedule: a job starts when its dependencies are done; a GPU job also needs one of
    ``n_gpus`` free GPUs, a CPU job runs beside them at once (CPU cores are not limited); among ready GPU jobs
    the one with the longest remaining path to the end of the DAG starts first."""
    children: dict[str, list[str]] = {n: [] for n in times}
    for n, ds in deps.items():
        for d in ds:
            children[d].append(n)
    rank: dict[str, float] = {}

    def bottom(n: str) -> float:
        if n not in rank:
            rank[n] = times[n] + max((bottom(c) for c in children[n]), default=0.0)
        return rank[n]

    waiting = {n: len(set(deps.get(n, []))) for n in times}
    ready = [n for n, k in waiting.items() if k == 0]
    running: list[tuple[float, str]] = []  # (finish, job)
    free, now, done = n_gpus, 0.0, 0
    while done < len(times):
        ready.sort(key=lambda n: (-bottom(n), n))
        for n in list(ready):
            if not gpu[n] or free > 0:
                ready.remove(n)
                free -= 1 if gpu[n] else 0
                running.append((now + times[n], n))
        if not running:
            raise ValueError("the DAG has a cycle")
        running.sort()
        now, n = running.pop(0)
        done += 1
        free += 1 if gpu[n] else 0
        for c in children[n]:
            waiting[c] -= 1
            if waiting[c] == 0:
                ready.append(c)
    return now


# --------------------------------------------------------------------------------------- the estimate


def benchmark_seconds(path: str) -> float | None:
    """Wall seconds (column ``s``) of a Snakemake benchmark file, when it exists."""
    p = Path(path)
    if not p.is_file():
        return None
    lines = p.read_text().splitlines()
    try:
        return float(lines[1].split("\t")[0])
    except (IndexError, ValueError):
        return None


def benchmark_scale(results: str = "results") -> str | None:
    """The scale of the run that wrote the benchmark files, from its run record (``results/run.json``)."""
    rec = _stats(f"{results}/run.json")
    return rec.get("scale") if rec else None


def estimate(nodes: list[Node], prober: Prober, config: dict, results: str = "results") -> list[Node]:
    """Fill each node's cost model, seconds per step of each part and job time (in place; returns the nodes).
    A job without a cost model takes the wall time of its benchmark file when the run record says the files
    come from a run at this config's scale; otherwise the file's time is shown and not used."""
    bench_scale = benchmark_scale(results)
    same_scale = bench_scale == config.get("scale")
    for node in nodes:
        model = COST_MODELS.get(node.rule)
        bench = benchmark_seconds(node.benchmark)
        node.measured = bench if same_scale else None
        bench_text = None if bench is None else (
            f"benchmark file {duration(bench)}" + ("" if same_scale else f" (from a `{bench_scale}`-scale run: not used)"))
        if model is None:
            node.why = "not modelled"
        else:
            try:
                node.cost = model(node, results)
            except Exception as exc:
                node.why = f"cost model failed: {type(exc).__name__}: {exc}"
        if node.cost is None:
            node.seconds = bench if same_scale else None
            node.source = bench_text or "no benchmark file"
            continue
        seconds, missing, notes = 0.0, [], []
        recs = probe_parts(node.rule, node.cost.parts, prober)
        interpolated = sum(1 for r in recs if r and r.get("interpolated"))
        if interpolated:
            notes.append(f"{interpolated} of {len(recs)} parts interpolated from {len(recs) - interpolated} probes "
                         f"(s/step = a + b x FLOPs per step)")
        for part, rec in zip(node.cost.parts, recs):
            node.per_step.append(rec)
            if rec is None or "seconds_per_step" not in rec:
                missing.append("not in the cache" if rec is None else rec["error"])
                continue
            seconds += part.steps * rec["seconds_per_step"]
            if rec.get("note"):
                notes.append(rec["note"])
        if missing:
            node.seconds = None
            node.source = f"{len(missing)} of {len(node.cost.parts)} probes missing ({missing[0]})"
        else:
            start = prober.startup() or 0.0
            node.seconds = start + seconds * (1 + node.cost.eval_share)
            node.source = "probe" + (f"; {notes[0]}" + (f" (+{len(notes) - 1} more parts)" if len(notes) > 1 else "")
                                     if notes else "")
        if bench_text:
            node.source += f"; {bench_text}"
    return nodes


# ------------------------------------------------------------------------------ interpolation between probes
# A sweep job of the paper's grids has hundreds of engine groups (one per (n, model) cell); probing each one
# takes longer than the whole estimate may (issue 34: about 670 groups did not finish in 9 minutes of GPU time).
# Of a job's distinct probes, at most ``Prober.max_parts`` are measured, chosen evenly along the FLOPs per step
# (the smallest and the largest always); the others get s/step = a + b x FLOPs, fitted by least squares to the
# measured ones of the same model and architecture (a: the fixed cost of a step, its kernel launches and
# Python; b: seconds per FLOP), with a, b >= 0. Probes already in the cache are used as they are.
# `benchmarks/estimate_interpolation.py` checks the fit against probes it did not use.


def representatives(flops: list[float], k: int) -> list[int]:
    """Indices of ``k`` of the values, evenly spread over their sorted order (the smallest and the largest first)."""
    order = sorted(range(len(flops)), key=lambda i: flops[i])
    if k >= len(order):
        return order
    if k == 1:
        return [order[-1]]
    return sorted({order[round(j * (len(order) - 1) / (k - 1))] for j in range(k)})


def fit_step_time(points: list[tuple[float, float]]) -> Callable[[float], float] | None:
    """s/step as a function of FLOPs per step, ``a + b x F`` with a, b >= 0, least squares over ``points``
    ((FLOPs, s/step)); None without points."""
    pts = [(f, t) for f, t in points if f is not None and t is not None]
    if not pts:
        return None
    n = len(pts)
    mf, mt = sum(f for f, _ in pts) / n, sum(t for _, t in pts) / n
    var = sum((f - mf) ** 2 for f, _ in pts)
    b = sum((f - mf) * (t - mt) for f, t in pts) / var if var > 0 else 0.0
    a = mt - b * mf
    if b < 0:  # no growth with FLOPs measured: a constant
        a, b = mt, 0.0
    elif a < 0:  # through the origin
        a, b = 0.0, sum(f * t for f, t in pts) / max(sum(f * f for f, _ in pts), 1e-300)
    return lambda f: a + b * (f or 0.0)


def _family(p: Probe) -> str:
    shape = p.shape
    return json.dumps({k: shape.get(k) for k in ("kind", "arch", "model", "task")} | {"kind": p.kind}, sort_keys=True)


def probe_parts(rule: str, parts: list[Part], prober: "Prober") -> list[dict | None]:
    """The probe record of every part: measured or cached where possible, interpolated for the rest of a job
    with more distinct probes than ``prober.max_parts`` (see above); a record made by interpolation has
    ``interpolated: True``."""
    keys = [prober.key(rule, p.probe) if p.probe else None for p in parts]
    distinct = {k: i for i, k in enumerate(keys) if k is not None}
    limit = prober.max_parts
    if not limit or len(distinct) <= limit:
        return [prober.get(rule, p.probe, p.flops_per_step) if p.probe else None for p in parts]
    by_family: dict[str, list[int]] = {}
    for k, i in distinct.items():
        by_family.setdefault(_family(parts[i].probe), []).append(i)
    measured: dict[str, dict | None] = {}
    share = max(2, limit // max(1, len(by_family)))  # at least two points per family: a and b
    for fam, idx in by_family.items():
        cached = [i for i in idx if keys[i] in prober.cache]
        todo = [idx[j] for j in representatives([parts[i].flops_per_step or 0.0 for i in idx], share)]
        for i in sorted(set(cached) | set(todo)):
            measured[keys[i]] = prober.get(rule, parts[i].probe, parts[i].flops_per_step)
    out = []
    for part, key in zip(parts, keys):
        if key is None:
            out.append(None)
        elif key in measured:
            out.append(measured[key])
        else:
            fam = _family(part.probe)
            pts = [(parts[i].flops_per_step, (measured.get(keys[i]) or {}).get("seconds_per_step")) for i in by_family[fam]]
            fit = fit_step_time(pts)
            out.append(None if fit is None else {"seconds_per_step": fit(part.flops_per_step), "interpolated": True,
                                                 "from_probes": sum(1 for _, t in pts if t is not None)})
    return out


def schedule(nodes: list[Node]) -> dict:
    """Total, critical path and makespans; jobs without a time count as 0 s (the results are then lower bounds)."""
    times = {n.label: n.seconds or 0.0 for n in nodes}
    deps = {n.label: [d for d in n.deps if d in times] for n in nodes}
    gpu = {n.label: n.gpu for n in nodes}
    length, path = critical_path(times, deps)
    return {
        "total": sum(times.values()),
        "gpu_total": sum(t for n, t in times.items() if gpu[n]),
        "critical": length,
        "critical_path": path,
        "makespan": {g: makespan(times, deps, gpu, g) for g in GPU_COUNTS},
        "unknown": sorted(n.label for n in nodes if n.seconds is None),
    }


# --------------------------------------------------------------------------------------- report


def _si(x: float | None, unit: str = "") -> str:
    if x is None:
        return "—"
    for scale, prefix in ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}".rstrip()


def _bytes(x: float | None) -> str:
    if x is None:
        return "—"
    for scale, unit in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if x >= scale:
            return f"{x / scale:.3g} {unit}"
    return f"{x:.0f} B"


def duration(seconds: float | None) -> str:
    """Seconds as ``1.5 s``, ``12.3 min``, ``4.2 h`` or ``3.1 d``."""
    if seconds is None:
        return "—"
    for limit, unit, div in ((60, "s", 1), (3600, "min", 60), (86400, "h", 3600)):
        if seconds < limit:
            return f"{seconds / div:.3g} {unit}"
    return f"{seconds / 86400:.3g} d"


def _per_step(node: Node) -> str:
    recs = node.per_step
    if not recs:
        return "—"
    vals = [r["seconds_per_step"] for r in recs if r and "seconds_per_step" in r]
    if not vals:
        return "not probed"
    text = f"{min(vals):.3g}" if len(set(vals)) == 1 or len(vals) == 1 else f"{min(vals):.3g}–{max(vals):.3g}"
    return text + ("" if len(vals) == len(recs) else f" ({len(recs) - len(vals)} missing)")


def report(nodes: list[Node], sched: dict, meta: dict) -> str:
    """The Markdown of results/estimate.md."""
    lines = [
        "# Cost estimate of the DAG",
        "",
        f"- config: config/config.yaml{''.join(' + ' + c for c in meta['configfiles'])} (scale `{meta['scale']}`)",
        f"- device: {meta['device_name']} (`{meta['device']}`), torch {meta['torch']}, python {meta['python']}",
        f"- date (UTC): {meta['date']}",
        f"- probes: {meta['probe_steps']} timed steps after {meta['probe_warmup']} warm-up steps per (rule, shape), "
        "torch threads: "
        f"{meta['threads']}; "
        f"{meta['measured']} measured now, the rest from the cache {meta['cache']}"
        + ("" if meta["probing"] else " (--no-probe: cache only)"),
        f"- start-up of a job's process (python importing torch and pandas, measured once): {duration(meta['startup'])}, "
        "added to every modelled job",
        f"- load average (1 min) when the probes were taken: {meta['load']} on {os.cpu_count()} CPUs (other work on the "
        "machine makes the probed times longer)",
        "",
        "Method (details, units and what is left out: docs/estimate.md): runs and steps from the job's settings "
        "and the training code; FLOPs and memory from the formula in each section (float32 unless stated); "
        "s/step measured on this device by a short probe of the real model at the job's shape (a range when "
        "the job trains several shapes); time = start-up + steps x s/step x (1 + evaluation share). Jobs without a model "
        "show the wall time of their Snakemake benchmark file when there is one (labelled) and count as 0 s "
        "otherwise. Times of GPU jobs are this device's: on a CPU they are CPU times.",
        "",
    ]
    by_paper: dict[str, list[Node]] = {}
    for n in nodes:
        by_paper.setdefault(n.paper, []).append(n)
    for paper in [p for p in ("data", *PAPERS) if p in by_paper]:
        lines += [f"## {paper}", "", "| job | GPU | runs | steps | FLOPs | peak memory | s/step | eval share | time | source |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        formulas = {}
        for n in by_paper[paper]:
            c = n.cost
            if c is None:
                lines.append(f"| {n.label} | {'yes' if n.gpu else 'no'} | — | — | — | — | — | — | {duration(n.seconds)} | "
                             f"{n.why}; "
                             f"{n.source} |")
                continue
            formulas.setdefault(n.rule, c.formula)
            peaks = [r["peak_memory_bytes"] for r in n.per_step if r and r.get("peak_memory_bytes")]
            memory = _bytes(c.memory) + (f" (CUDA peak {_bytes(max(peaks))})" if peaks else "")
            lines.append(f"| {n.label} | {'yes' if n.gpu else 'no'} | {c.runs} | {c.steps:,} | {_si(c.flops, 'FLOP')} | "
                         f"{memory} | {_per_step(n)} | {c.eval_share:.1%} | {duration(n.seconds)} | "
                         f"{n.source}{'; ' + c.note if c.note else ''} |")
        lines.append("")
        for rule, formula in formulas.items():
            lines.append(f"- `{rule}`: {formula}")
        if formulas:
            lines.append("")
    modelled = sum(n.cost is not None and n.seconds is not None for n in nodes)
    bench = sum(n.cost is None and n.seconds is not None for n in nodes)
    lines += [
        "## Totals",
        "",
        f"{len(nodes)} jobs: {modelled} modelled and probed, {bench} from benchmark files, "
        f"{len(sched['unknown'])} without a time "
        "(counted as 0 s: the figures below are then lower bounds).",
        "",
        "| quantity | time |",
        "|---|---|",
        f"| total (sum of all jobs, one after another) | {duration(sched['total'])} |",
        f"| of which GPU jobs | {duration(sched['gpu_total'])} |",
        f"| critical path (unlimited GPUs and cores) | {duration(sched['critical'])} |",
        *[f"| makespan, {g} GPU{'s' if g > 1 else ''} (list schedule) | {duration(sched['makespan'][g])} |" for g in GPU_COUNTS],
        "",
        "Schedule policy: a job starts when all its inputs are made; a GPU job (registry `gpu: true`) holds one GPU "
        "for its whole time, a CPU job runs beside them (cores not limited); ready GPU jobs start longest remaining "
        "path first.",
        "",
        "Critical path: " + " → ".join(sched["critical_path"]),
        "",
    ]
    if sched["unknown"]:
        lines += ["Jobs without a time: " + ", ".join(sched["unknown"]), ""]
    checked = sorted((n.seconds / n.measured, n.label) for n in nodes if n.cost and n.seconds and n.measured)
    if checked:
        ratios = [r for r, _ in checked]
        lines += ["## Against the benchmark files", "",
                  f"{len(checked)} modelled jobs have a benchmark file from a run at this scale: estimated / measured wall time "
                  f"median {ratios[len(ratios) // 2]:.2f}, range {ratios[0]:.2f} ({checked[0][1]}) to "
                  f"{ratios[-1]:.2f} ({checked[-1][1]}). "
                  "The run and the probes may have met different loads on the machine.", ""]
    return "\n".join(lines)


def resources_table(nodes: list[Node], meta: dict) -> dict:
    """The scheduler limits of every modelled job with an estimated time (``featlearn.pipeline.sizing``), keyed by rule and
    settings digest: what the workflow's ``runtime``, ``mem_mb`` and ``gpu_mem_mb`` read where this file exists
    (``gpu_mem_mb`` from the CUDA peak where every part of the job measured one, else from the formula)."""
    from featlearn.pipeline.sizing import estimated_limits, resource_key

    jobs = {}
    for n in nodes:
        if n.cost is None or n.seconds is None or n.settings is None:
            continue
        peaks = [rec.get("peak_memory_bytes") for rec in n.per_step if rec and rec.get("peak_memory_bytes")]
        limits = estimated_limits(n.seconds, n.cost.memory, max(peaks) if len(peaks) == len(n.cost.parts) else None, gpu=n.gpu)
        jobs[resource_key(n.rule, json.dumps(n.settings, sort_keys=True))] = {"job": n.label, "seconds": round(n.seconds, 1),
                                                                              **limits}
    return {"device": meta["device_name"], "date": meta["date"], "configfiles": meta["configfiles"], "jobs": jobs}


def run_estimate(configfiles: list[str], out: str, cache: str, device: str, probe_steps: int, probe_warmup: int,
                 probing: bool, results: str = "results", config_dir: str = "config", max_seconds: float = MAX_PROBE_STEP_SECONDS,
                 threads: int | None = None, resources_out: str | None = None, max_parts: int = 0) -> dict:
    """Build the DAG of the merged config, estimate every job, write the Markdown to ``out`` and, with
    ``resources_out``, the jobs' scheduler limits (:func:`resources_table`); returns the summary."""
    import torch

    from featlearn.io import write_text

    config = merged_config(configfiles, config_dir)
    nodes = build_dag(config, results)
    prober = Prober(device, cache, probe_steps, probe_warmup, probing, max_seconds, threads=threads, max_parts=max_parts)
    own_threads = torch.get_num_threads()
    estimate(nodes, prober, config, results)
    torch.set_num_threads(own_threads)
    sched = schedule(nodes)
    loads = [r["load_average"] for n in nodes for r in n.per_step if r and "load_average" in r]
    meta = {"configfiles": configfiles, "scale": config.get("scale"), "device": device,
            "device_name": device_name(device, own_threads).split(",")[0], "torch": torch.__version__,
            "python": platform.python_version(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"), "probe_steps": probe_steps,
            "probe_warmup": probe_warmup, "measured": prober.measured, "cache": cache, "probing": probing,
            "startup": prober.startup(),
            "load": f"{min(loads):.1f}–{max(loads):.1f}" if loads else "not recorded",
            "threads": f"{prober.threads} (--threads)" if prober.threads else "each job's declared threads"}
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    write_text(out, report(nodes, sched, meta))
    if resources_out:
        Path(resources_out).parent.mkdir(parents=True, exist_ok=True)
        write_text(resources_out, json.dumps(resources_table(nodes, meta), indent=1, sort_keys=True) + "\n")
    return {"jobs": len(nodes), "nodes": nodes, **sched, "out": out}


def register(sub) -> None:
    """``python -m featlearn estimate [--configfile F ...] [--out MD] [--cache JSON] [--probe-steps K] [--no-probe]``."""

    def run(args) -> None:
        from featlearn.devices import resolve_device

        device = resolve_device(args.device)
        res = run_estimate(args.configfile, args.out, args.cache, device, args.probe_steps, args.probe_warmup, not args.no_probe,
                           results=args.results, config_dir=args.config_dir, max_seconds=args.max_probe_seconds,
                           threads=args.threads, resources_out=args.resources_out or None, max_parts=args.max_probes_per_job)
        print(f"estimate: {res['jobs']} jobs, total {duration(res['total'])}, critical path {duration(res['critical'])}, "
              + ", ".join(f"{g} GPU{'s' if g > 1 else ''} {duration(res['makespan'][g])}" for g in GPU_COUNTS)
              + (f"; {len(res['unknown'])} jobs without a time" if res["unknown"] else "") + f" -> {res['out']}")

    p = sub.add_parser("estimate", help="cost estimate of the config's DAG: runs, steps, FLOPs, memory, probed s/step, times")
    p.add_argument("--configfile", nargs="*", default=[], help="overlays merged onto config/config.yaml in order")
    p.add_argument("--out", default=DEFAULT_OUT)
    p.add_argument("--cache", default=DEFAULT_CACHE, help="JSON cache of the probes")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--probe-steps", type=int, default=3, help="timed steps per probe")
    p.add_argument("--probe-warmup", type=int, default=1, help="untimed steps before them")
    p.add_argument("--max-probe-seconds", type=float, default=MAX_PROBE_STEP_SECONDS,
                   help="a probe step predicted slower than this is probed at a reduced batch or run count, scaled")
    p.add_argument("--no-probe", action="store_true", help="use only cached probes; missing ones are marked")
    p.add_argument("--max-probes-per-job", type=int, default=MAX_PROBES_PER_JOB,
                   help="distinct probes measured per job; a job with more (a paper-scale sweep's hundreds of groups) "
                        "gets the rest interpolated by FLOPs per step (0: measure every one)")
    p.add_argument("--threads", type=int, default=None,
                   help="torch threads of every probe (default: each job's declared threads, as Snakemake gives them)")
    p.add_argument("--results", default="results", help="results folder (prepared data sizes, benchmark files, run record)")
    p.add_argument("--config-dir", default="config", help="folder of config.yaml")
    p.add_argument("--resources-out", default=f"results/{ESTIMATE_RESOURCES}",
                   help="per-job runtime and mem_mb from the estimate, which the workflow's resources then use ('' to skip)")
    p.set_defaults(func=run)

