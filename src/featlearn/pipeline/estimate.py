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

This module is the estimate's core: the records (:class:`Node`, :class:`Cost`, :class:`Part`, :class:`Probe`),
the DAG, the probe cache (:class:`Prober`), the schedule and the report. The cost models sit beside each
paper's code (``featlearn/<paper>/cost.py``; the LM shared by several papers in ``featlearn.lm.cost``): a
compute job's registry record names its model as ``module:function`` (:attr:`featlearn.pipeline.registry.Job.cost`),
called as ``function(node, results) -> Cost``, and each :class:`Probe` names the function that times it. Jobs
whose record names no cost model (data preparation, theory, analyses) say "not modelled" and show the wall time
of their Snakemake benchmark file when one exists, labelled as such. Standard library only at import time.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import heapq
import importlib
import json
import math
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from featlearn import PAPERS, precision
from featlearn.pipeline.benchfiles import job_resumed
from featlearn.pipeline.evidence import EVIDENCE_DIR, read_evidence
from featlearn.pipeline.order import work_order  # the order of a job's groups, as the sweep engine's pool takes them
from featlearn.pipeline.reference import REFERENCE_FILE, read_reference, reference_seconds
from featlearn.pipeline.registry import load
from featlearn.pipeline.sizing import ESTIMATE_RESOURCES
from featlearn.pipeline.workflow import CONFIG_SCALES, merged_config, scale_config

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
# A probe whose timed steps took less than this in all is timed again over enough steps to take it (at most
# MAX_PROBE_STEPS): a features probe is the difference of two trainings' times, whose set-up varies by tens of
# milliseconds, so 3 steps of 10 ms measured 9.5-15.9 ms on one shape where 50 steps gave 15.0-16.5 (2 CPUs,
# 2026-11-28) [D].
MIN_TIMED_SECONDS = 0.5
MAX_PROBE_STEPS = 500
# Part of every cache key: raise it when a probe's method changes, so that older records are not reused.
PROBE_VERSION = 1
# Distinct probes measured per job by default; the rest of a larger job are interpolated (probe_parts).
MAX_PROBES_PER_JOB = 6
# --scale-from: probes of each kind measured on both devices before another device's records are scaled (the fastest,
# the slowest and a middle step there: the ratio is their median), and the longest such a probe may have taken
# there, so that the calibration costs seconds of the estimate's budget, not minutes [D].
CALIBRATION_PROBES = 3
CALIBRATION_MAX_PROBE_SECONDS = 30.0


# --------------------------------------------------------------------------------------- the job graph


@dataclass
class Part:
    """A homogeneous piece of a job: ``steps`` optimiser steps of ``runs`` runs trained together, at one probed
    shape. ``flops`` and ``memory`` are per step and for the whole part's batch of runs (None: not derived);
    ``updates_per_step``: the parameters its optimiser updates each step, all runs together (None: not derived), a
    second measure of a step's work besides its FLOPs, for the interpolation between probes (``probe_parts``);
    ``work``: the key by which a job of several workers takes its parts, the largest first (a templates sweep's
    ``group_work``; None: in the listed order). ``evals``: the evaluations the part makes, timed by a probe that
    times them apart from its steps (its record's ``seconds_per_eval``: the part takes steps x s/step + evals x
    s/eval; a record without it holds an evaluation within its steps' time, as probed), and ``eval_flops`` the
    FLOPs of one, the measure their time is interpolated on between probes."""

    probe: "Probe | None"
    steps: int
    runs: int
    flops_per_step: float | None = None
    memory_bytes: float | None = None
    updates_per_step: float | None = None
    work: float | None = None
    evals: int = 0
    eval_flops: float | None = None


def part_time(part: Part, rec: dict) -> float:
    """A part's time from its probe record: its steps, plus its evaluations where the probe timed them apart."""
    return part.steps * rec["seconds_per_step"] + part.evals * rec.get("seconds_per_eval", 0.0)


@dataclass(frozen=True)
class Probe:
    """What a probe times: ``kind`` (its name in the cache), ``shape`` (JSON-able: everything the step cost depends
    on), ``dim`` (the shape key that may be reduced for a slow probe, extrapolated linearly), the threads, and
    ``run``, the ``module:function`` that times it: ``function(shape, dim_value, device, steps, warmup) ->
    {"seconds_per_step": ...}`` (left out of the cache key), and the ``precision`` it is timed in (the job's:
    :func:`estimate` sets it; featlearn.precision)."""

    kind: str
    shape_json: str
    dim: str
    threads: int = 1
    run: str = ""
    precision: str = "fp32"
    # a shape whose cached record answers where this one's is missing (a probe whose shape gained a key: the records of
    # before it, e.g. the committed GPU caches, still give a time; the record then says so); "": none
    fallback_json: str = ""

    @property
    def shape(self) -> dict:
        return json.loads(self.shape_json)


def probe(kind: str, shape: dict, dim: str, threads: int = 1, run: str = "") -> Probe:
    return Probe(kind, json.dumps(shape, sort_keys=True), dim, threads, run)


@dataclass
class Cost:
    """A job's cost model: its parts, the evaluation share added to the training time, the formulas used."""

    parts: list[Part]
    eval_share: float = 0.0
    eval_note: str = ""
    formula: str = ""
    note: str = ""
    workers: int = 1  # parts trained at once on a CPU, largest work first (a templates sweep job's groups, list_makespan)

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
        """The largest part's memory; of ``workers`` parts at once, the sum of the largest that many (an upper bound,
        also for a GPU job, which trains its parts one after another: 1 worker in every shipped config)."""
        mems = sorted((p.memory_bytes for p in self.parts if p.memory_bytes is not None), reverse=True)
        return sum(mems[:max(1, self.workers)]) if mems else None


@dataclass
class Node:
    """One job of the DAG, the cost model its record names (``cost_model``, ``module:function``; None: not
    modelled), that model's :class:`Cost` of the job (None: ``why`` says why) and its estimate."""

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
    cost_model: str | None = None
    precision: str = "fp32"  # the job's arithmetic (featlearn.precision.of_job), which its probes are timed in
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


def assume_online(status: dict) -> dict:
    """Dataset switches as a machine with network access would resolve them: a dataset left out only because its
    files are neither here nor in the mirror and the run is offline (``enabled: auto``) is switched on; one switched
    off in the config stays off."""
    import featlearn.pipeline.workflow as wf

    return {name: wf.DatasetStatus(name, True, "assumed online (--assume-online): sizes as documented")
            if not st.enabled and st.reason.startswith(("offline and ", wf.UNREACHABLE)) else st
            for name, st in status.items()}


def build_dag(config: dict, results: str = "results", online: bool = False,
              figures: list[str] | None = None) -> list[Node]:
    """The compute jobs of the DAG that ``snakemake`` (rule ``all``) would build under ``config``, each with the
    jobs it depends on. Datasets and checkpoints are resolved as the Snakefile resolves them in a dry run
    (no contact with the model hub: uncached checkpoints are left out, as ``snakemake -n`` leaves them out);
    ``online``: the datasets absent offline are counted as a machine with network access would download them
    (:func:`assume_online`), their jobs sized by the datasets' documented sizes. ``figures`` (figure rules, e.g.
    ``fig_features_3``): only the jobs those figures need, as ``snakemake fig_features_3`` would run them; a name
    that is not a figure rule of this config's DAG is an error."""
    import featlearn.pipeline.workflow as wf
    from featlearn.pipeline.dag import JobIndex, files_of
    from featlearn.pipeline.registry import Paths

    paths = Paths(results)
    status = wf.dataset_status(config, f"{results}/data/raw")  # as common.smk: RAW = results/data/raw
    if online:
        status = assume_online(status)
    prepared_on = wf.prepared_enabled(status)

    def dataset_on(name: str) -> bool:
        return prepared_on[name] if name in prepared_on else status[name].enabled

    # rule all's data summary reads every prepared dataset that is switched on
    jobs, roots = [], [paths.prepared(name, "stats.json") for name, on in prepared_on.items() if on and figures is None]
    known: set[str] = set()
    allowed = wf.HUB_CONTACT["allowed"]
    wf.HUB_CONTACT["allowed"] = False
    try:
        for paper in PAPERS:
            reg = importlib.import_module(f"featlearn.{paper}.registry").registry(config, paths, dataset_on)
            jobs += list(reg.jobs)
            if not config["papers"][paper]:
                continue
            for fig in reg.figures:
                if figures is None or fig.rule in figures:
                    roots += [p for v in fig.inputs.values() for p in files_of(v)]
                    known.add(fig.rule)
            if figures is None:
                roots += list(reg.job_claims)
    finally:
        wf.HUB_CONTACT["allowed"] = allowed
    if figures is not None:
        unknown = sorted(set(figures) - known)
        if unknown:
            raise ValueError(f"not a figure rule of this config's DAG: {', '.join(unknown)} (figure rules are "
                             "fig_<paper>_<id>, table_<paper>_<id> or check_<paper>_<id>; a figure whose paper or "
                             "dataset is switched off has none)")
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
                            job.resources.gpu, job.threads, cj.benchmark, sorted(set(deps)), inputs, job.cost,
                            precision=precision.of_job(job.precision, config["precision"], job.resources.gpu))
    return list(nodes.values())


# --------------------------------------------------------------------------------------- data sizes


def _stats(path: str) -> dict | None:
    p = Path(path)
    return json.loads(p.read_text()) if p.is_file() else None


def lm_data(dataset: str, results: str = "results", stats: str | None = None, tokens_per_word: float = 1.0) -> dict:
    """Train/valid token counts and vocabulary of a prepared LM dataset: its ``stats.json`` when present
    (``stats``: another one than ``results/data/prepared/<dataset>/stats.json``, e.g. GPT-2 BPE ids), else the
    documented sizes: train and validation tokens of ``featlearn.pipeline.sizing`` (times ``tokens_per_word``) and the vocabulary
    that ``featlearn.data.registry`` expects (``source`` says which)."""
    from featlearn.data.registry import PREPARED
    from featlearn.pipeline.sizing import TRAIN_TOKENS, VALID_TOKENS

    found = _stats(stats or f"{results}/data/prepared/{dataset}/stats.json")
    if found:
        s = found["splits"]
        return {"train": s["train"]["n_tokens"], "valid": s.get("valid", {}).get("n_tokens"), "vocab": found.get("vocab_size"),
                "source": "stats.json"}
    train, valid = TRAIN_TOKENS.get(dataset), VALID_TOKENS.get(dataset)
    return {"train": None if train is None else int(train * tokens_per_word),
            "valid": None if valid is None else int(valid * tokens_per_word),
            "vocab": PREPARED[dataset].expected_vocab if dataset in PREPARED else None,
            "source": "documented size (no stats.json)"}


# --------------------------------------------------------------------------------------- shared by the cost models


def parameters_outside_embeddings(model) -> int:
    """Parameters of a torch module outside its ``nn.Embedding`` tables (P_ne of the cost formulas)."""
    import torch.nn as nn

    emb = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    return sum(p.numel() for p in model.parameters() if id(p) not in emb)


def sync(device: str) -> None:
    """Wait for the device (a probe times what ran, not what was queued)."""
    if str(device).startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def lm_cost(node: Node, results: str, model: str, size: Callable, budget: Callable, probe_run: str, *,
            stats: str | None = None, tokens_per_word: float = 1.0, vocab: int | None = None) -> Cost:
    """The cost of an LM job, one run: its data sizes (:func:`lm_data`; the job's own vocabulary input where it has
    one, else ``vocab``), the model at the job's settings (``size(settings, vocab) ->``
    :class:`featlearn.lm.cost.LMSize`), its steps and evaluation share (``budget(settings, data, size) ->``
    :class:`featlearn.lm.cost.LMBudget`) and a probe of kind ``lm:<model>`` run by ``probe_run`` at batch size.
    The papers' cost modules call it with their model's functions (:mod:`featlearn.lm.cost`)."""
    from featlearn.lm.cost import BUDGET_KEYS, FORMULA

    s = dict(node.settings)
    dataset = s.get("dataset") or node.wildcards.get("dataset")
    if not dataset:  # scan_snap: the variant's dataset is the folder of its prepared train split
        dataset = next(Path(p).parent.name for p in node.inputs if p.endswith("/train.pt"))
    data = lm_data(dataset, results, stats, tokens_per_word)
    vocab_file = next((p for p in node.inputs if p.endswith((".json",))), None)
    if vocab_file and Path(vocab_file).is_file():  # the job's own vocabulary input, as the job reads it
        data["vocab"] = len(json.loads(Path(vocab_file).read_text(encoding="utf-8")))
    elif vocab is not None:
        data["vocab"] = vocab
    if data["vocab"] is None:
        raise ValueError(f"no vocabulary size for {dataset} (no prepared stats.json)")
    sz = size({k: v for k, v in s.items() if k != "dataset"}, data["vocab"])
    b = budget(s, data, sz)
    shape = {"model": model, "dataset": dataset, "vocab": data["vocab"], "batch": sz.batch, "seq": sz.seq,
             "settings": {k: v for k, v in sorted(s.items()) if k not in BUDGET_KEYS}}
    part = Part(probe(f"lm:{model}", shape, "batch", node.threads, probe_run), b.steps, 1, sz.flops_per_step,
                sz.memory_bytes(data["vocab"]))
    return Cost([part], b.eval_steps / max(b.steps, 1), b.eval_note, FORMULA,
                f"{sz.parameters / 1e6:.2f}M parameters, vocab {data['vocab']} ({data['source']})")


# --------------------------------------------------------------------------------------- probes


def device_name(device: str, threads: int) -> str:
    """The device as the cache keys it: the GPU's name, or the CPU's model (``featlearn.devices.cpu_model``) with
    the torch thread count. (Before 2026-11-29 a CPU was keyed by its architecture alone, ``x86_64 CPU``, so probes
    of different CPU models shared keys; such a cache's CPU probes are not read now and are measured again.)"""
    from featlearn.devices import cpu_model, device_label

    if str(device).startswith("cuda"):
        return device_label(device)
    return f"{cpu_model()} CPU, {threads} threads"


def cached_torch(cache: dict, label: str, where: str | os.PathLike = "the cache") -> str:
    """The torch version under which most of the cache's probes of the device ``label`` were measured (a GPU's name
    as the keys spell it, or a CPU's without ``, N threads``); ValueError naming the cache's devices if none was."""
    keys = [json.loads(k) for k in cache]
    mine = [k.get("torch") for k in keys if k.get("device") == label or str(k.get("device", "")).startswith(label + ", ")]
    if not mine:
        devices = sorted({str(k.get("device")).split(", ")[0] for k in keys})
        raise ValueError(f"no probe in {where} was measured on {label!r}; its devices: {', '.join(devices) or 'none'}")
    return collections.Counter(mine).most_common(1)[0][0]


def read_cache(path: str | os.PathLike) -> dict:
    """The probes of a cache file (empty where there is none). A file that is not a cache (cut short on its way back
    from a device, edited) stops the estimate naming it rather than being overwritten: its probes may be minutes of
    a device's time."""
    from featlearn.data.fetch import DataError

    p = Path(path)
    if not p.is_file():
        return {}
    try:
        cache = json.loads(p.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise DataError(f"{p} is not a probe cache (not JSON: {exc}); repair it, or give another --cache") from exc
    if not isinstance(cache, dict):
        raise DataError(f"{p} is not a probe cache (a JSON {type(cache).__name__}, not an object of probes); repair it, "
                        "or give another --cache")
    return cache


class Prober:
    """Seconds per step of a (rule, probe), measured once per (device, torch version, rule, shape) and cached in a
    JSON file; ``probe=False`` answers from the cache only (None when missing).

    A probe of a large step (over ``PILOT_FLOPS``) first times the step at the reducible dimension 1 (batch or
    runs: a pilot of one warm-up and two timed steps, fewer when the probe itself has fewer). When ``pilot x
    full dimension`` exceeds ``max_seconds``, the probe runs at the largest dimension ``k`` >= 2 that fits and
    extrapolates linearly through the two points (time = fixed cost + cost per unit of the dimension, FLOPs
    being linear in it); the record says so. Each record keeps the 1-minute load average when it was taken.

    ``label`` reads the cache as another machine wrote it: the probes of the device it names (as the cache keys
    it, e.g. ``NVIDIA H200``, or a CPU's name without its thread count), under the torch version most of them were
    measured with. Nothing is measured then, so a GPU's estimate can be made where there is no GPU.

    ``budget``: seconds of probing in all; once the probes measured by this object have taken that long, no other
    probe starts and the parts left answer ``probe budget spent`` (not cached: a later estimate measures them)."""

    def __init__(self, device: str, cache: str | os.PathLike, steps: int = 3, warmup: int = 1, probe: bool = True,
                 max_seconds: float = MAX_PROBE_STEP_SECONDS, probes: dict | None = None, log=None, threads: int | None = None,
                 max_parts: int = 0, label: str | None = None, budget: float | None = None,
                 scale_from: str | None = None):
        import torch

        self.device, self.cache_path = device, Path(cache)
        self.steps, self.warmup, self.probe, self.max_seconds = max(1, steps), max(0, warmup), probe, max_seconds
        self.probes = probes or {}  # probe kind -> function, in place of the function a probe names (tests)
        self.torch = torch.__version__
        self.cache = read_cache(self.cache_path)
        self.label = label
        if label is not None:
            self.probe = False
            self.torch = cached_torch(self.cache, label, cache)
            # a GPU's keys name it alone, a CPU's add the thread count
            self._exact = any(json.loads(k).get("device") == label for k in self.cache)
        self.measured = 0  # probes run by this object (the rest came from the cache)
        self.threads = threads  # torch threads of every probe; None: each job's declared threads
        self.max_parts = max_parts  # distinct probes measured per job; the rest interpolated (0: every one measured)
        self.budget, self.spent = budget, 0.0  # seconds of probing allowed (None: no limit), and taken so far
        self.skipped = 0  # probes not started because the budget was spent
        self.clock = time.perf_counter  # what the budget is counted on (tests plant their own)
        self.failed: dict[str, dict] = {}  # probes that failed in this object (out of memory...): not tried twice
        # a record of a probe's earlier shape answers before the probe is measured (the first round: every job a time
        # first, the probes of the new shapes after; Probe.fallback_json)
        self.older_first = False
        self.log = log or (lambda msg: print(f"[estimate] {msg}", file=sys.stderr, flush=True))
        # another device's records, scaled by the ratio of this device's times to its own (scale_from: its name as
        # the cache keys it; scaled)
        self.scale_from, self.foreign_torch = None, None
        self.pairs: dict[str, dict[str, float]] = {}  # probe kind -> {this device's key: own / foreign time}
        if scale_from is not None:
            self.foreign_torch = foreign_torch(self.cache, scale_from, self.torch, cache)
            if scale_from.endswith(" threads") != self.on_cpu:
                raise ValueError(f"--scale-from {scale_from!r}: a {'CPU' if self.on_cpu else 'GPU'} estimate scales "
                                 f"the records of another {'CPU' if self.on_cpu else 'GPU'} only (the step of a small "
                                 "model is bound by launches on one and by arithmetic on the other)")
            if scale_from == self.device_key(self.threads or 1) and self.foreign_torch == self.torch:
                self.log(f"--scale-from {scale_from!r} is this device under this torch: its records are its own")
            else:
                self.scale_from = scale_from

    @property
    def on_cpu(self) -> bool:
        """Whether the estimate is a CPU's (this machine's CPU, or a cache's CPU named by ``label``)."""
        if self.label is not None:
            return not self._exact
        return self.device.split(":")[0] == "cpu"

    def device_key(self, threads: int) -> str:
        """The device as this object's cache keys name it (``label``'s spelling where one is given)."""
        if self.label is None:
            return device_name(self.device, threads)
        return self.label if self._exact else f"{self.label}, {threads} threads"

    def key(self, rule: str, p: Probe) -> str:
        return self._key(rule, p, self.device_key(self.threads or p.threads), self.torch)

    def _key(self, rule: str, p: Probe, device: str, torch_version: str) -> str:
        key = {"device": device, "torch": torch_version, "rule": rule,
               "kind": p.kind, "shape": p.shape, "version": PROBE_VERSION}
        arithmetic = self.arithmetic(p)
        if arithmetic != "fp32":  # (fp32 probes keep the keys they were cached under before the setting existed)
            key["precision"] = arithmetic
        method = self.cpu_method(p) if self.on_cpu else None
        if method:  # a probe whose method on a CPU changed: CPU records of before it are not reused (GPU ones are)
            key["method"] = method
        return json.dumps(key, sort_keys=True)

    def arithmetic(self, p: Probe) -> str:
        """What ``p``'s job computes in on the estimate's device (``featlearn.precision.resolve``: a job's ``auto`` is
        bf16 where the device computes bfloat16 natively, else fp32). A cache read under another machine's ``label``
        cannot ask that machine: a GPU's label counts as native (every card the committed probes name, H100 and H200,
        is), a CPU's as not (fp32, the arithmetic of a CPU without AVX-512 BF16)."""
        if self.label is None:
            return precision.resolve(p.precision, self.device)
        if p.precision == "auto":
            return "fp32" if self.on_cpu else "bf16"
        return precision.resolve(p.precision, "cpu")

    def cpu_method(self, p: Probe) -> str | None:
        """What the probe function times on a CPU where it says so (its ``cpu_method`` attribute, e.g.
        ``featlearn.templates.cost.sweep_probe``'s), part of a CPU probe's cache key; None for the others."""
        fn = self.probes.get(p.kind) or (load(p.run) if p.run else None)
        return getattr(fn, "cpu_method", None)

    def get(self, rule: str, p: Probe, flops_per_step: float | None = None) -> dict | None:
        key = self.key(rule, p)
        if key in self.cache:
            self._pair(rule, p, key)
            return self.cache[key]
        # where this shape cannot be measured now, or not yet, a stand-in answers: a record of its earlier shape
        # (Probe.fallback_json), or another device's record scaled (scale_from)
        if self.older_first and (stand_in := self.stand_in(rule, p)) is not None:
            return stand_in
        if key in self.failed:
            return self.stand_in(rule, p) or self.failed[key]
        if not self.probe:
            return self.stand_in(rule, p)
        if self.budget is not None and self.spent >= self.budget:
            if not self.skipped:
                self.log(f"probe budget of {self.budget:g} s spent: no more probes start (--probe-budget)")
            self.skipped += 1
            return self.stand_in(rule, p) or {"error": f"probe budget spent (--probe-budget {self.budget:g} s)",
                                              "budget_spent": True}
        t0 = self.clock()
        try:
            rec = self._measure(p, flops_per_step)
        finally:
            self.spent += self.clock() - t0
        if "error" in rec:  # reported, not cached: the next run tries again (this one does not: the first round
            self.failed[key] = rec  # and the second ask for the same probes)
            return self.stand_in(rule, p) or rec
        rec["measured_utc"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        self.cache[key] = rec
        self.measured += 1
        self._save()
        self._pair(rule, p, key)
        return rec

    def stand_in(self, rule: str, p: Probe) -> dict | None:
        """What answers for ``p`` without measuring it: its earlier shape's record on this device (:meth:`older`),
        else another device's record scaled (:meth:`scaled`); None without either."""
        return self.older(rule, p) or self.scaled(rule, p)

    # ------------------------------------------------------------------ another device's records, scaled

    def foreign_key(self, rule: str, p: Probe) -> str:
        """``p``'s key as the device ``scale_from`` cached it (under the torch most of its records were measured with)."""
        return self._key(rule, p, self.scale_from, self.foreign_torch)

    def foreign(self, rule: str, p: Probe, fallback: bool = True) -> tuple[dict, bool] | None:
        """The ``scale_from`` device's record of ``p`` (or, with ``fallback``, of its earlier shape), with whether it
        is the earlier shape's; None without one."""
        if self.scale_from is None:
            return None
        for shape_json, older in ((p.shape_json, False), (p.fallback_json if fallback else "", True)):
            if shape_json:
                rec = self.cache.get(self.foreign_key(rule, dataclasses.replace(p, shape_json=shape_json,
                                                                                fallback_json="")))
                if rec is not None and (with_eval(rec) or 0.0) > 0.0:
                    return rec, older
        return None

    def _pair(self, rule: str, p: Probe, key: str) -> None:
        """Note this device's record of ``p`` against ``scale_from``'s record of the same shape, where it has one."""
        own, theirs = self.cache.get(key), self.foreign(rule, p, fallback=False)
        if theirs is not None and own is not None and with_eval(own):
            self.pairs.setdefault(p.kind, {})[key] = with_eval(own) / with_eval(theirs[0])

    def ratio(self, kind: str) -> tuple[float, int, str] | None:
        """(this device's time / ``scale_from``'s, the probes it is the median of, of which kinds): the median
        over the probes of ``kind`` that both measured, else over every kind's (None before any)."""
        own = list(self.pairs.get(kind, {}).values())
        pooled = own or [r for rs in self.pairs.values() for r in rs.values()]
        if not pooled:
            return None
        return statistics.median(pooled), len(pooled), f"`{kind}`" if own else "every kind"

    def scaled(self, rule: str, p: Probe) -> dict | None:
        """``scale_from``'s record of ``p`` (or of its earlier shape) with its times multiplied by :meth:`ratio`,
        noted as such; None without a record or a ratio. Not cached: a later estimate measures the probe here."""
        found = self.foreign(rule, p)
        ratio = self.ratio(p.kind) if found is not None else None
        if ratio is None:
            return None
        (rec, older), (factor, n, scope) = found, ratio
        out = {k: v for k, v in rec.items() if k not in ("measured_utc", "load_average", "probe_seconds", "note", "cpus")}
        for k in ("seconds_per_step", "seconds_per_eval"):
            if k in rec:
                out[k] = rec[k] * factor
        gained = sorted(set(json.loads(p.shape_json)) - set(json.loads(p.fallback_json or "{}"))) if older else []
        out.update(scaled_from=self.scale_from, ratio=factor, note=(
            f"{self.scale_from}'s record{' of the shape without ' + ', '.join(gained) if gained else ''} x {factor:.3g}, "
            f"this device's time over its: the median of {n} probes of {scope} that both measured"))
        return out

    def calibrate(self, wanted: list[tuple[str, Probe, float | None]]) -> None:
        """Measure, for each probe kind among ``wanted`` ((rule, probe, FLOPs per step)), up to :data:`CALIBRATION_PROBES`
        probes that ``scale_from`` also measured, so that :meth:`ratio` has pairs before any stand-in is scaled: the
        kind's fastest, slowest and middle step there among those whose probe took at most
        :data:`CALIBRATION_MAX_PROBE_SECONDS` there (:func:`calibration_order`), the kinds in turns; this device's
        cached records of the same probes count first."""
        if self.scale_from is None:
            return
        by_kind: dict[str, dict[str, tuple[str, Probe, float | None, dict]]] = {}
        for rule, p, flops in wanted:
            theirs = self.foreign(rule, p, fallback=False)
            if theirs is not None:
                by_kind.setdefault(p.kind, {})[self.key(rule, p)] = (rule, p, flops, theirs[0])
        picks: dict[str, list[tuple[str, Probe, float | None]]] = {}
        for kind, cands in by_kind.items():
            for key, (rule, p, _, _) in cands.items():
                if key in self.cache:
                    self._pair(rule, p, key)
            need = CALIBRATION_PROBES - len(self.pairs.get(kind, {}))
            fresh = [c for k, c in cands.items() if k not in self.cache and k not in self.failed]
            picks[kind] = [fresh[i][:3] for i in calibration_order([c[3] for c in fresh])[:max(0, need)]]
        # kind by kind in turns (each kind's fastest probe first), so that a short budget gives every kind a pair
        # before any kind its third
        for turn in range(CALIBRATION_PROBES):
            for kind_picks in picks.values():
                if turn < len(kind_picks):
                    self.get(*kind_picks[turn])

    def ratio_check(self) -> dict[str, tuple[float, int, float | None, float | None]]:
        """Per kind: (ratio, pairs, median and largest leave-one-out error): each pair's own time against its foreign
        time times the median of the kind's other pairs (None with fewer than two pairs)."""
        out = {}
        for kind, rs in sorted(self.pairs.items()):
            vals = list(rs.values())
            errs = [abs(statistics.median(vals[:i] + vals[i + 1:]) / v - 1.0) for i, v in enumerate(vals)] \
                if len(vals) > 1 else []
            out[kind] = (statistics.median(vals), len(vals), statistics.median(errs) if errs else None,
                         max(errs) if errs else None)
        return out

    def older(self, rule: str, p: Probe) -> dict | None:
        """The cached record of ``p``'s fallback shape (``Probe.fallback_json``), noted as such; None without one."""
        if not p.fallback_json:
            return None
        rec = self.cache.get(self.key(rule, dataclasses.replace(p, shape_json=p.fallback_json, fallback_json="")))
        if rec is None or "seconds_per_step" not in rec:
            return None
        gained = sorted(set(json.loads(p.shape_json)) - set(json.loads(p.fallback_json)))
        return {**rec, "note": f"a record of the probe's shape without {', '.join(gained)} (cached before it)"}

    def cached(self, rule: str, p: Probe) -> bool:
        """Whether :meth:`get` answers ``p`` from the cache: its own record, or without probing a stand-in."""
        return self.key(rule, p) in self.cache or (
            (not self.probe or self.older_first) and self.stand_in(rule, p) is not None)

    def _measure(self, p: Probe, flops_per_step: float | None) -> dict:
        import torch

        fn = self.probes.get(p.kind) or load(p.run)
        shape, full = p.shape, int(p.shape[p.dim])
        torch.set_num_threads(self.threads or p.threads)
        use, pilot, t0 = full, None, time.perf_counter()
        try:
            with precision.scoped(self.arithmetic(p), self.device):  # the job's arithmetic, only while timed
                if full > 1 and (flops_per_step or 0) > PILOT_FLOPS:
                    pilot = fn(shape, 1, self.device, min(2, self.steps), min(1, self.warmup))
                    if pilot["seconds_per_step"] * full > self.max_seconds:
                        use = max(2, min(full, int(self.max_seconds / pilot["seconds_per_step"])))
                steps = self.steps
                out = fn(shape, use, self.device, steps, self.warmup)
                if out["seconds_per_step"] * steps < MIN_TIMED_SECONDS:  # fast steps: time enough of them
                    per = max(out["seconds_per_step"], MIN_TIMED_SECONDS / MAX_PROBE_STEPS)
                    steps = max(steps + 1, min(MAX_PROBE_STEPS, math.ceil(MIN_TIMED_SECONDS / per)))
                    out = fn(shape, use, self.device, steps, self.warmup)
        except Exception as exc:  # out of memory above all: the table says it was not measured, and why
            text = str(exc).splitlines()[0][:120] if str(exc) else ""
            msg = "out of memory" if "out of memory" in str(exc).lower() else f"{type(exc).__name__}: {text}"
            self.log(f"probe {p.kind} {p.dim}={use}/{full} failed: {msg} ({p.shape_json[:160]})")
            return {"error": msg, "steps": self.steps, "warmup": self.warmup}
        rec = {"measured_dim": use, "full_dim": full, "dim": p.dim, "steps": steps, "warmup": self.warmup,
               "load_average": round(os.getloadavg()[0], 2), "cpus": os.cpu_count()}
        timed = [k for k in ("seconds_per_step", "seconds_per_eval") if k in out]
        if use == full:
            rec.update({k: out[k] for k in timed})
        else:  # two points (the pilot at 1, the probe at `use`): a fixed cost plus a cost linear in the dimension
            for k in timed:
                slope = max(0.0, (out[k] - pilot.get(k, 0.0)) / (use - 1))
                rec[k] = out[k] + slope * (full - use)
            rec["note"] = f"probed at {p.dim} 1 and {use} of {full}, extrapolated linearly (FLOPs linear in {p.dim})"
        if "probe_steps_per_epoch" in out:
            rec["probe_steps_per_epoch"] = out["probe_steps_per_epoch"]
        rec["probe_seconds"] = time.perf_counter() - t0
        if out.get("peak_memory_bytes") and use == full:  # measured at the job's own shape only
            rec["peak_memory_bytes"] = out["peak_memory_bytes"]
        self.log(f"probe {p.kind} {p.dim}={use}/{full}: {rec['seconds_per_step']:.4g} s/step"
                 + (f", {rec['seconds_per_eval']:.4g} s/evaluation" if "seconds_per_eval" in rec else ""))
        return rec

    def startup(self) -> float | None:
        """Seconds to start a job's process: ``python -c "import torch, pandas, featlearn.pipeline.compute"`` in a fresh
        interpreter (the faster of two), measured once per device (cached like a probe; None with ``--no-probe``
        and no cache)."""
        key = json.dumps({"device": self.device_key(1), "torch": self.torch, "kind": "startup"}, sort_keys=True)
        if key not in self.cache:
            if not self.probe:
                return None
            import subprocess

            times = []
            for _ in range(2):  # the faster of two: the first may read the libraries from disk
                t0 = time.perf_counter()
                subprocess.run([sys.executable, "-c", "import torch, pandas, featlearn.pipeline.compute"], check=True,
                               env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
                times.append(time.perf_counter() - t0)
            self.cache[key] = {"seconds": min(times), "load_average": round(os.getloadavg()[0], 2)}
            self._save()
        return self.cache[key]["seconds"]

    def _save(self) -> None:
        from featlearn.io import write_text

        self.cache_path.parent.mkdir(parents=True, exist_ok=True)
        write_text(self.cache_path, json.dumps(self.cache, indent=1, sort_keys=True) + "\n")


# --------------------------------------------------------------------------------------- schedule


def foreign_torch(cache: dict, label: str, own_torch: str, where: str | os.PathLike = "the cache") -> str:
    """The torch version most of the cache's records of the device ``label`` (its name as the keys spell it) were
    measured with, another than ``own_torch`` where it has one; ValueError naming the cache's devices if none."""
    keys = [json.loads(k) for k in cache]
    mine = [k.get("torch") for k in keys if k.get("device") == label]
    if not mine:
        devices = sorted({str(k.get("device")) for k in keys if k.get("device")})
        raise ValueError(f"no probe in {where} was measured on {label!r}; its devices: {', '.join(devices) or 'none'}")
    other = [t for t in mine if t != own_torch]
    return collections.Counter(other or mine).most_common(1)[0][0]


def calibration_order(theirs: list[dict]) -> list[int]:
    """The order in which a calibration (:meth:`Prober.calibrate`) measures probes that another device recorded as
    ``theirs``: of those whose probe took at most :data:`CALIBRATION_MAX_PROBE_SECONDS` there, the fastest step,
    the slowest and a middle one, then the rest from the fastest."""
    ok = sorted((i for i, r in enumerate(theirs) if _probe_seconds(r) <= CALIBRATION_MAX_PROBE_SECONDS),
                key=lambda i: with_eval(theirs[i]))
    return [ok[j] for j in dict.fromkeys([0, len(ok) - 1, len(ok) // 2, *range(len(ok))])] if ok else []


def _probe_seconds(rec: dict) -> float:
    """Wall seconds a cached probe took (its record's, else its timed and warm-up steps)."""
    if "probe_seconds" in rec:
        return rec["probe_seconds"]
    return (rec.get("steps", 3) + rec.get("warmup", 1)) * (with_eval(rec) or 0.0)


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


def list_makespan(seconds: list[float], workers: int) -> float:
    """The wall time of tasks of ``seconds`` run in that order on ``workers`` workers, each free worker taking the next
    (a process pool's order: ``featlearn.templates.sweeps.engine.group_pool``)."""
    free = [0.0] * max(1, workers)
    for t in seconds:
        heapq.heappush(free, heapq.heappop(free) + t)
    return max(free)


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


def cost_model(node: Node) -> Callable[[Node, str], Cost] | None:
    """The cost model the job's registry record names (``Job.cost``), None where it names none."""
    return load(node.cost_model) if node.cost_model else None


def evidence_walls(root: str | os.PathLike) -> dict[str, tuple[float, str]]:
    """Wall seconds of the CPU jobs the committed paper-scale evidence under ``root`` ran (its records' ``jobs``), by
    job label, with where they ran ('paper-scale evidence of 2026-11-27, 2 CPUs'); the latest run's where several
    ran a job. Empty without evidence."""
    out: dict[str, tuple[str, float, str]] = {}
    for fig in read_evidence(root):
        date = str(fig.run.get("date_utc", ""))
        for job in fig.record.get("jobs", []):
            wall = job.get("wall_s")
            if job.get("device") != "cpu" or not isinstance(wall, (int, float)) or wall != wall or job.get("resumed"):
                continue  # (a job that resumed: its wall time is its last run's only)
            if job["label"] not in out or date > out[job["label"]][0]:
                model = f" ({fig.run['host_cpu']})" if fig.run.get("host_cpu") else ""
                where = f"paper-scale evidence of {date[:10]}, {fig.run.get('host_cpus', '?')} CPUs{model}"
                out[job["label"]] = (date, float(wall), where)
    return {label: (wall, where) for label, (_, wall, where) in out.items()}


def documented_words(dataset: str) -> float | None:
    """Words in the train split of ``dataset`` as documented, a measure of a data job's size that needs no file: a
    language-modelling dataset's train tokens (``featlearn.pipeline.sizing.TRAIN_TOKENS``, else the expected sizes
    of ``featlearn.data.registry``), a classification dataset's train items x its documented mean length in words
    (``featlearn.pipeline.sizing.DOCUMENTED_CLASSIFICATION``); None where neither is documented."""
    from featlearn.data.registry import PREPARED
    from featlearn.pipeline.sizing import DOCUMENTED_CLASSIFICATION as DOCUMENTED, TRAIN_TOKENS

    prep = PREPARED.get(dataset)
    if prep is None:
        return None
    if prep.kind == "lm":
        return float(TRAIN_TOKENS.get(dataset) or (prep.expected_sizes[0] if prep.expected_sizes else 0)) or None
    if prep.expected_sizes and dataset in DOCUMENTED:
        return prep.expected_sizes[0] * DOCUMENTED[dataset]["mean_length"]
    return None


def _dataset_of(node: Node) -> str | None:
    return node.wildcards.get("name") or node.wildcards.get("dataset")


def scale_by_size(nodes: list[Node]) -> list[Node]:
    """Time the CPU jobs left without one (no cost model, benchmark file or evidence) that prepare or read one dataset
    (wildcard ``name`` or ``dataset``) from the same rule's timed jobs of other datasets: the median of their seconds
    per documented train word (:func:`documented_words`) x this dataset's words. This is how a dataset that is absent
    offline (WikiText-103, AG News train) gets its preparation timed from those that are here; it is an
    extrapolation by size (formats differ: a zip, a tarball, plain text), labelled so in the job's source. In place;
    returns the nodes."""
    timed: dict[str, list[tuple[float, str]]] = {}
    for n in nodes:
        words = documented_words(_dataset_of(n) or "")
        if n.cost is None and n.seconds is not None and words:
            timed.setdefault(n.rule, []).append((n.seconds / words, n.label))
    for n in nodes:
        words = documented_words(_dataset_of(n) or "")
        refs = sorted(timed.get(n.rule, []))
        if n.cost is not None or n.seconds is not None or n.gpu or not words or not refs:
            continue
        n.seconds = statistics.median(rate for rate, _ in refs) * words
        n.source += (f"; scaled by size: {words:,.0f} documented train words x the median seconds per word of "
                     + ", ".join(label for _, label in refs) + " (an extrapolation)")
    return nodes


def same_at_scale(nodes: list[Node], scale: str | None, config_dir: str | os.PathLike | None,
                  results: str = "results") -> set[str]:
    """Labels of the jobs among ``nodes`` that the shipped config of ``scale`` (config.yaml, with smoke.yaml or
    paper.yaml on top) runs with the same settings: the same job at both scales (the data preparation, the features'
    extraction, the generators and theory jobs), whose benchmark file from a run at that scale times it here too.
    The setting ``scale`` is left out of the comparison: a job that has it (``templates_checks``) only labels the
    claims it writes with it, the same work at every scale.
    Empty for a scale without a shipped config, or without ``config_dir``."""
    if scale not in CONFIG_SCALES or config_dir is None or not (Path(config_dir) / "config.yaml").is_file():
        return set()

    def work(settings):
        return {k: v for k, v in settings.items() if k != "scale"} if isinstance(settings, dict) else settings

    other = {n.label: work(n.settings) for n in build_dag(scale_config(scale, config_dir), results, online=True)}
    return {n.label for n in nodes if n.label in other and other[n.label] == work(n.settings)}


def estimate(nodes: list[Node], prober: Prober, config: dict, results: str = "results",
             evidence: str | os.PathLike | None = None, config_dir: str | os.PathLike | None = None,
             reference: str | os.PathLike | None = None) -> list[Node]:
    """Fill each node's cost model, seconds per step of each part and job time (in place; returns the nodes).
    A job takes the wall time of its benchmark file when the run record says the files come from a run at this
    config's scale, or from a run at another scale whose shipped config (under ``config_dir``) runs the same job
    (:func:`same_at_scale`); otherwise the file's time is shown and not used (a modelled job's time is its probes'
    in any case, the file's shown beside it). At the paper scale, a
    CPU job without a model and without such a file takes its wall time in the committed paper-scale evidence
    (``evidence``, the folder of :mod:`featlearn.pipeline.evidence`) when that ran it. At any scale, a CPU job without
    a model still without a time takes the committed reference's wall time (``reference``, the file of
    :mod:`featlearn.pipeline.reference`) when that holds the job with the same settings. A data job still without a
    time is then scaled by its dataset's size from the same rule's timed jobs (:func:`scale_by_size`).

    Probing goes breadth first: a first round measures, for every job in turn, only the smallest and the largest
    group of each of its model families (what gives a job a time, :func:`probe_parts` with a limit of 2); the jobs'
    other probes come after. Those two are among the probes the second round would measure anyway, so the round
    costs nothing more, and an estimate cut short (``--probe-budget``, or a device session's time limit) leaves every
    job it reached a time rather than a few jobs probed in full (:func:`first_round`)."""
    bench_scale = benchmark_scale(results)
    same_scale = bench_scale == config.get("scale")
    walls = evidence_walls(evidence) if evidence is not None and config.get("scale") == "paper" else {}
    entries = read_reference(reference) if reference is not None else {}
    same_job = set() if same_scale or bench_scale is None else same_at_scale(nodes, bench_scale, config_dir, results)
    for node in nodes:
        model = cost_model(node)
        if model is None:
            node.why = "not modelled"
            continue
        try:
            node.cost = model(node, results)
            for part in node.cost.parts if node.cost is not None else []:
                if part.probe is not None:  # timed in the job's own arithmetic
                    part.probe = dataclasses.replace(part.probe, precision=node.precision)
        except Exception as exc:
            node.why = f"cost model failed: {type(exc).__name__}: {exc}"
    # with --scale-from, a few probes of each kind that the other device measured come first (or this device's
    # cached records of them): the ratio that scales its records, which then stand in for probes not measured here
    prober.calibrate([(node.rule, part.probe, part.flops_per_step) for node in nodes if node.cost is not None
                      for part in node.cost.parts if part.probe is not None])
    if prober.probe:
        first_round(nodes, prober)
    for node in nodes:
        bench = benchmark_seconds(node.benchmark)
        resumed = bench is not None and job_resumed(node.benchmark)
        # a run at this scale; for another machine's estimate (--cached-device) only a CPU job's file, a GPU job's
        # time on this machine not being that device's; never a job that resumed (its file timed its last run only)
        # (or a run at another scale whose config runs the same job)
        same = same_scale or node.label in same_job
        usable = same and (prober.label is None or not node.gpu) and not resumed
        node.measured = bench if usable else None
        bench_text = None if bench is None else (
            f"benchmark file {duration(bench)}"
            + ((f" (a `{bench_scale}`-scale run's: the same job at both scales)" if not same_scale else "") if usable
               else f" (from a `{bench_scale}`-scale run: not used)" if not same
               else " (a GPU job's, on this machine: not used)" if not resumed
               else " (of a job that resumed: its last run only, not used)"))
        if node.cost is None:
            node.seconds = bench if usable else None
            node.source = bench_text or "no benchmark file"
            if node.seconds is None and not node.gpu and node.label in walls:  # a CPU job is a CPU job anywhere
                node.seconds, where = walls[node.label]
                node.source += f"; {where}: {duration(node.seconds)}"
            ref = reference_seconds(node, entries) if node.seconds is None else None
            if ref is not None:
                node.seconds, where = ref
                node.source += f"; {where}: {duration(node.seconds)}"
            continue
        seconds, longest, missing, notes, part_seconds = 0.0, 0.0, [], [], []
        recs = probe_parts(node.rule, node.cost.parts, prober)
        interpolated = sum(1 for r in recs if r and r.get("interpolated"))
        if interpolated:
            notes.append(f"{interpolated} of {len(recs)} parts interpolated from {len(recs) - interpolated} probes "
                         f"(s/step = a + b x FLOPs per step"
                         + (" + c x parameters updated)" if any(p.updates_per_step is not None for p in node.cost.parts)
                            else ")"))
        for part, rec in zip(node.cost.parts, recs):
            node.per_step.append(rec)
            if rec is None or "seconds_per_step" not in rec:
                missing.append("not in the cache" if rec is None else rec["error"])
                continue
            part_seconds.append((part.work, part_time(part, rec)))
            seconds += part_seconds[-1][1]
            longest = max(longest, part_seconds[-1][1])
            if rec.get("note"):
                notes.append(rec["note"])
        if missing:
            node.seconds = None
            node.source = f"{len(missing)} of {len(node.cost.parts)} probes missing ({missing[0]})"
        else:
            start = prober.startup() or 0.0
            workers = node.cost.workers if prober.on_cpu else 1
            if workers > 1:  # the groups of a CPU job of several threads train that many at once, largest work first
                seconds = list_makespan([t for _, t in work_order(part_seconds)], workers)
                notes.insert(0, f"{len(part_seconds)} parts on {workers} workers of one thread")
            node.seconds = start + seconds * (1 + node.cost.eval_share)
            node.source = "probe" + (f"; {notes[0]}" + (f" (+{len(notes) - 1} more parts)" if len(notes) > 1 else "")
                                     if notes else "")
            if len(node.cost.parts) > 1:  # (a templates sweep, killed, resumes group by group: the least time limit)
                node.source += f"; longest part {duration(longest * (1 + node.cost.eval_share))}"
        if bench_text:
            node.source += f"; {bench_text}"
    return scale_by_size(nodes)


# ------------------------------------------------------------------------------ interpolation between probes
# A sweep job of the paper's grids has hundreds of engine groups (one per (n, model) cell); probing each one
# takes longer than the whole estimate may (issue 34: about 670 groups did not finish in 9 minutes of GPU time).
# Of a job's distinct probes, at most ``Prober.max_parts`` are measured, chosen evenly along the measures of a
# step's work (FLOPs per step, then the parameters updated per step; the smallest and the largest always); the
# others get s/step = a + b x FLOPs + c x updates, fitted by least squares to the measured ones of the same model and
# architecture (a: the fixed cost of a step, its kernel launches and Python; b: seconds per FLOP; c: seconds per
# parameter the optimiser updates, a memory-bound cost), with a, b, c >= 0; a part without an updates count is
# fitted on its FLOPs alone. The second measure is needed where a step's cost grows without its FLOPs: the one-hot
# MLPs of the templates sweeps compute hidden x positions per sample in their first layer, whatever its width,
# while Adam updates all of its vocabulary x positions x hidden weights every step (a paper-scale group of n 8,192
# had 10.6 times the parameters of the n 512 one for the same FLOPs per sample, and most of its step time in Adam;
# docs/estimate.md). Probes already in the cache are used as they are; with --no-probe a
# representative the cache lacks is interpolated from the family's cached probes like the rest, but only within the
# range they span: a group beyond it (in either measure) is left without a time (the smallest and the largest group
# of a family in each measure are the first representatives, so a job probed here always spans its own range).
# `benchmarks/estimate_interpolation.py` checks the fit against probes it did not use.


def representatives(work: list, k: int) -> list[int]:
    """Indices of ``k`` of the values (numbers, or tuples of measures compared in order), evenly spread over their
    sorted order. The smallest and the largest of each measure come first, so that the chosen span every measure's
    range (the interpolation stays within it): with tuples of m measures that may be up to 2m values, more than ``k``."""
    order = sorted(range(len(work)), key=lambda i: work[i])
    if k >= len(order):
        return order
    if k == 1:
        return [order[-1]]
    chosen = [order[0], order[-1]]
    if work and isinstance(work[0], tuple):  # each measure's extremes (ties broken by the whole tuple)
        for j in range(len(work[0])):
            chosen += [min(order, key=lambda i: (work[i][j], work[i])), max(order, key=lambda i: (work[i][j], work[i]))]
    chosen = list(dict.fromkeys(chosen))
    for j in range(1, k - 1):  # then evenly along the sorted order, up to k in all
        if len(chosen) >= k:
            break
        i = order[round(j * (len(order) - 1) / (k - 1))]
        if i not in chosen:
            chosen.append(i)
    return sorted(chosen)


def _least_squares(rows: list[list[float]], ys: list[float]) -> list[float] | None:
    """Coefficients minimising the squared error of ``rows @ coef`` against ``ys`` (normal equations, Gaussian
    elimination with pivoting); None when the columns are linearly dependent."""
    m = len(rows[0])
    A = [[sum(r[i] * r[j] for r in rows) for j in range(m)] + [sum(r[i] * y for r, y in zip(rows, ys))] for i in range(m)]
    for c in range(m):
        piv = max(range(c, m), key=lambda r: abs(A[r][c]))
        if abs(A[piv][c]) <= 1e-12 * max(1.0, max(abs(A[i][i]) for i in range(m))):
            return None
        A[c], A[piv] = A[piv], A[c]
        for r in range(m):
            if r != c:
                f = A[r][c] / A[c][c]
                A[r] = [x - f * y for x, y in zip(A[r], A[c])]
    return [A[i][m] / A[i][i] for i in range(m)]


def fit_step_cost(points: list[tuple[tuple[float, ...], float]]) -> Callable[[tuple[float, ...]], float] | None:
    """s/step as ``a + sum_j c_j x_j`` over the measures ``x`` of a step's work, with a, c_j >= 0: the least-squares
    fit over ``points`` ((measures, s/step)) among the subsets of the terms whose coefficients come out non-negative.
    A subset with more terms is taken only where it fits strictly better; among subsets of one size the intercept
    comes first, then the measures in their order (so two points of a + b x FLOPs give that line, not a line through
    the origin in the second measure). None without points."""
    pts = [(x, t) for x, t in points if t is not None and x is not None and all(v is not None for v in x)]
    if not pts:
        return None
    m = len(pts[0][0])
    scale = [max(abs(x[j]) for x, _ in pts) or 1.0 for j in range(m)]  # columns of order one (FLOPs run to 1e15)
    tol = 1e-12 * sum(t * t for _, t in pts)  # a squared error below this is an exact fit
    order = [m, *range(m)]  # term m: the intercept a; then the measures
    subsets = sorted((tuple(order[i] for i in range(m + 1) if mask >> i & 1) for mask in range(1, 2 ** (m + 1))),
                     key=lambda terms: (len(terms), [order.index(j) for j in terms]))
    best = None
    for terms in subsets:
        rows = [[1.0 if j == m else x[j] / scale[j] for j in terms] for x, _ in pts]
        coef = _least_squares(rows, [t for _, t in pts])
        if coef is None or any(c < 0 for c in coef):
            continue
        sse = sum((sum(c * v for c, v in zip(coef, row)) - t) ** 2 for row, (_, t) in zip(rows, pts))
        if best is None or sse < best[0] - tol:
            best = (sse, terms, coef)
    if best is None:  # (unreachable: the intercept alone always fits, at the mean)
        return None
    _, terms, coef = best
    a = sum(c for j, c in zip(terms, coef) if j == m)
    slopes = {j: c / scale[j] for j, c in zip(terms, coef) if j < m}
    return lambda x: a + sum(c * (x[j] or 0.0) for j, c in slopes.items())


def fit_step_time(points: list[tuple[float, float]]) -> Callable[[float], float] | None:
    """s/step as a function of FLOPs per step, ``a + b x F`` with a, b >= 0, least squares over ``points``
    ((FLOPs, s/step)); None without points (:func:`fit_step_cost` with one measure)."""
    fit = fit_step_cost([((f,), t) for f, t in points if f is not None])
    return None if fit is None else (lambda f: fit((f or 0.0,)))


def _family(p: Probe) -> str:
    shape = p.shape
    return json.dumps({k: shape.get(k) for k in ("kind", "arch", "model", "task")} | {"kind": p.kind}, sort_keys=True)


def _work(part: Part, with_updates: bool) -> tuple[float, ...]:
    """The measures of a part's step that the interpolation fits on: FLOPs, and the parameters updated."""
    return ((part.flops_per_step or 0.0, part.updates_per_step or 0.0) if with_updates
            else (part.flops_per_step or 0.0,))


def _families(parts: list[Part], keys: list[str | None]) -> tuple[dict[str, list[int]], dict[str, bool]]:
    """The parts of each model family (one part per distinct probe), and whether the family is fitted on the
    parameters updated too (where every one of its parts counts them)."""
    distinct = {k: i for i, k in enumerate(keys) if k is not None}
    by_family: dict[str, list[int]] = {}
    for i in distinct.values():
        by_family.setdefault(_family(parts[i].probe), []).append(i)
    return by_family, {fam: all(parts[i].updates_per_step is not None for i in idx) for fam, idx in by_family.items()}


def probe_parts(rule: str, parts: list[Part], prober: "Prober", limit: int | None = None) -> list[dict | None]:
    """The probe record of every part: measured or cached where possible, interpolated for the rest of a job
    with more distinct probes than ``limit`` (default ``prober.max_parts``; see above); a record made by
    interpolation has ``interpolated: True``."""
    keys = [prober.key(rule, p.probe) if p.probe else None for p in parts]
    by_family, updates = _families(parts, keys)
    limit = prober.max_parts if limit is None else limit
    if not limit or sum(map(len, by_family.values())) <= limit:
        return [prober.get(rule, p.probe, p.flops_per_step) if p.probe else None for p in parts]
    share = max(2, limit // max(1, len(by_family)))  # at least two points per family: a and b
    plan = {idx[j] for fam, idx in by_family.items()
            for j in representatives([_work(parts[i], updates[fam]) for i in idx], share)}
    measured: dict[str, dict | None] = {}
    unstarted: dict[str, dict] = {}  # representatives the probe budget left: interpolated like the rest where it can be
    for i in sorted({i for idx in by_family.values() for i in idx if prober.cached(rule, parts[i].probe)} | plan):
        rec = prober.get(rule, parts[i].probe, parts[i].flops_per_step)
        if rec is not None and rec.get("budget_spent"):
            unstarted[keys[i]] = rec
        elif rec is not None:  # a representative not in the cache (--no-probe, or not started: the budget) is
            measured[keys[i]] = rec  # interpolated like the rest; a failed one keeps its error
    out = []
    for part, key in zip(parts, keys):
        if key is None:
            out.append(None)
        elif key in measured:
            out.append(measured[key])
        else:
            fam = _family(part.probe)
            recs = [measured.get(keys[i]) or {} for i in by_family[fam]]
            # the evaluations timed apart where every probe of the family timed them so (else a step with its
            # probe epoch's share of an evaluation, as a record of before the split holds it: with_eval)
            apart = (all("seconds_per_eval" in r for r in recs if "seconds_per_step" in r)
                     and all(parts[i].eval_flops is not None for i in by_family[fam]))
            pts = [(_work(parts[i], updates[fam]), r.get("seconds_per_step") if apart else with_eval(r))
                   for i, r in zip(by_family[fam], recs)]
            fit = fit_step_cost(pts)
            eval_fit = fit_step_cost([((parts[i].eval_flops,), r.get("seconds_per_eval"))
                                      for i, r in zip(by_family[fam], recs)]) if apart else None
            span = [x for x, t in pts if t is not None]
            work = _work(part, updates[fam])
            if fit is None:
                out.append(unstarted.get(key))
            elif not span or not all(min(x[j] for x in span) <= work[j] <= max(x[j] for x in span)
                                     for j in range(len(work))):
                # outside the measured work: a line fitted on launch-bound small groups says nothing of large ones
                out.append({"error": "outside the FLOPs range of the family's probes (not extrapolated)"
                            if not min(x[0] for x in span) <= work[0] <= max(x[0] for x in span)
                            else "outside the range of parameters updated of the family's probes (not extrapolated)"})
            else:
                rec = {"seconds_per_step": fit(work), "interpolated": True, "from_probes": len(span)}
                if eval_fit is not None:
                    rec["seconds_per_eval"] = eval_fit((part.eval_flops,))
                out.append(rec)
    return out


def with_eval(rec: dict) -> float | None:
    """A probe record's seconds per step with its probe epoch's share of an evaluation in it: what a sweep probe of
    before the steps and the evaluations were timed apart measured (``featlearn.templates.cost.sweep_probe``)."""
    if "seconds_per_step" not in rec:
        return None
    return rec["seconds_per_step"] + rec.get("seconds_per_eval", 0.0) / rec.get("probe_steps_per_epoch", 1)


def first_round(nodes: list[Node], prober: "Prober") -> None:
    """The estimate's first round of probes (:func:`estimate`): what gives each job a time, the smallest and the
    largest group of each of its model families (:func:`probe_parts` with a limit of 2), job by job in the DAG's
    order; a group whose probe's earlier shape is cached (``Probe.fallback_json``) takes that record in this round and
    is measured in the second. (Ordering the jobs by the probes or the FLOPs they need was tried on a CPU, 2026-12-02:
    at the same probing time it timed as many jobs or fewer, the FLOPs of a step saying little of a probe's wall time;
    docs/estimate.md.)"""
    first = min(2, prober.max_parts or 2)
    prober.older_first = True  # a probe whose earlier shape is cached is measured in the second round, not here
    try:
        for node in nodes:
            if node.cost is not None and node.cost.parts:
                probe_parts(node.rule, node.cost.parts, prober, limit=first)
    finally:
        prober.older_first = False


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


def eval_share(node: Node) -> float:
    """The job's evaluation time as a share of its training steps': its cost model's, or, where its probes timed the
    evaluations apart (a templates sweep), the parts' evaluations over their steps."""
    parts = [(part, rec) for part, rec in zip(node.cost.parts, node.per_step) if rec and "seconds_per_step" in rec]
    evals = sum(part.evals * rec.get("seconds_per_eval", 0.0) for part, rec in parts)
    steps = sum(part.steps * rec["seconds_per_step"] for part, rec in parts)
    return node.cost.eval_share + (evals / steps if steps > 0 else 0.0)


def _per_step(node: Node) -> str:
    recs = node.per_step
    if not recs:
        return "—"
    vals = [r["seconds_per_step"] for r in recs if r and "seconds_per_step" in r]
    if not vals:
        return "not probed"
    text = f"{min(vals):.3g}" if len(set(vals)) == 1 or len(vals) == 1 else f"{min(vals):.3g}–{max(vals):.3g}"
    return text + ("" if len(vals) == len(recs) else f" ({len(recs) - len(vals)} missing)")


def paper_totals(nodes: list[Node]) -> list[str]:
    """The report's table of each paper's jobs one after another (its GPU jobs apart: the GPU-hours a paper needs on
    the estimate's device), with the jobs that have no time (the sums are then lower bounds)."""
    rows = ["### By paper", "", "| paper | jobs | without a time | total, one after another | of which GPU jobs |",
            "|---|---|---|---|---|"]
    for paper in [p for p in ("data", *PAPERS) if any(n.paper == p for n in nodes)]:
        mine = [n for n in nodes if n.paper == paper]
        rows.append(f"| {paper} | {len(mine)} | {sum(n.seconds is None for n in mine)} | "
                    f"{duration(sum(n.seconds or 0.0 for n in mine))} | "
                    f"{duration(sum(n.seconds or 0.0 for n in mine if n.gpu))} |")
    return rows + [""]


def scaled_line(nodes: list[Node], meta: dict) -> str:
    """The report's line on the records of another device that stood in for probes not measured (--scale-from)."""
    used = sum(1 for n in nodes for r in n.per_step if r and r.get("scaled_from"))
    kinds = "; ".join(
        f"`{kind}` {ratio:.3g} ({n} probe{'s' if n > 1 else ''}"
        + (f", leave-one-out error median {med:.0%}, largest {big:.0%})" if med is not None else ")")
        for kind, (ratio, n, med, big) in meta["ratios"].items())
    return (f"- another device's records (--scale-from {meta['scale_from']}, torch {meta['foreign_torch']}): {used} "
            "parts not measured here take its record of the same probe times the median of this device's time over "
            "its, per probe kind, of the probes both measured: " + (kinds or "none measured on both, so none scaled")
            + " (docs/estimate.md, \"Another device's records\")")


def report(nodes: list[Node], sched: dict, meta: dict) -> str:
    """The Markdown of results/estimate.md."""
    lines = [
        "# Cost estimate of the DAG",
        "",
        f"- config: config/config.yaml{''.join(' + ' + c for c in meta['configfiles'])} (scale `{meta['scale']}`)"
        + (f"; only the jobs of {', '.join(f'`{f}`' for f in meta['figures'])} (--figure)" if meta.get("figures") else ""),
        (f"- device: {meta['device_name']}, torch {meta['torch']}: its probes in the cache, measured there "
         f"(--cached-device; this machine measured nothing, and its benchmark files time only CPU jobs)"
         if meta.get("cached_device") else
         f"- device: {meta['device_name']} (`{meta['device']}`), torch {meta['torch']}, python {meta['python']}"),
        f"- date (UTC): {meta['date']}",
        f"- probes: {meta['probe_steps']} timed steps after {meta['probe_warmup']} warm-up steps per (rule, shape), "
        "torch threads: "
        f"{meta['threads']}; "
        f"{meta['measured']} measured now, the rest from the cache {meta['cache']}"
        + ("" if meta["probing"] else " (--no-probe: cache only)")
        + (f"; probe budget {meta['budget']:g} s (--probe-budget), {meta['spent']:.0f} s taken"
           + (f", {meta['skipped']} probes not started" if meta.get("skipped") else "")
           if meta.get("budget") is not None else ""),
        f"- start-up of a job's process (python importing torch and pandas, measured once): {duration(meta['startup'])}, "
        "added to every modelled job",
        f"- load average (1 min) when the probes were taken: {meta['load']} on {meta['cpus']} CPUs (other work on the "
        "machine makes the probed times longer)",
    ] + (["- datasets absent offline are counted (--assume-online): their jobs are sized by the datasets' documented "
          "sizes (each job's note says so)"] if meta.get("assume_online") else []) + (
        [scaled_line(nodes, meta)] if meta.get("scale_from") else []) + [
        "",
        "Method (details, units and what is left out: docs/estimate.md): runs and steps from the job's settings "
        "and the training code; FLOPs and memory from the formula in each section (float32 unless stated); "
        "s/step measured on this device by a short probe of the real model at the job's shape (a range when "
        "the job trains several shapes); time = start-up + steps x s/step x (1 + evaluation share). Jobs without a model "
        "take the wall time of their Snakemake benchmark file from a run at this scale, else (a CPU job at the paper "
        "scale) the committed paper-scale evidence's, else (a CPU job run with the same settings there) the committed "
        f"reference's ({REFERENCE_FILE.as_posix()}), else (a data job) a time scaled by their dataset's documented "
        "size from the same rule's timed jobs; each says which, and one without any counts as 0 s. Times of GPU jobs "
        "are this device's: on a CPU they are CPU times.",
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
                         f"{memory} | {_per_step(n)} | {eval_share(n):.1%} | {duration(n.seconds)} | "
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
        f"{len(nodes)} jobs: {modelled} modelled and probed, {bench} from benchmark files, paper-scale evidence, "
        "the committed reference or scaled by size, "
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
        *paper_totals(nodes),
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
    """The scheduler limits of every modelled job (``featlearn.pipeline.sizing``), keyed by rule and settings digest: what
    the workflow's ``runtime``, ``mem_mb`` and ``gpu_mem_mb`` read where this file exists. ``runtime`` only where the
    job got a time; ``mem_mb`` and ``gpu_mem_mb`` wherever its cost model gives a peak memory, which needs no probe, so
    that an estimate without probes (``--no-probe`` and an empty cache: seconds) still sizes every modelled job's memory
    (``gpu_mem_mb`` from the CUDA peak where every part of the job measured one, else from the formula)."""
    from featlearn.pipeline.benchfiles import read_benchmark
    from featlearn.pipeline.sizing import estimated_limits, resource_key

    jobs = {}
    for n in nodes:
        if n.cost is None or n.settings is None or (n.seconds is None and n.cost.memory is None):
            continue
        peaks = [rec.get("peak_memory_bytes") for rec in n.per_step if rec and rec.get("peak_memory_bytes")]
        # the peak resident memory of a run of the job at this scale, where its benchmark file is usable for its time
        bench = read_benchmark(n.benchmark) if n.measured is not None and n.benchmark else None
        limits = estimated_limits(n.seconds, n.cost.memory, max(peaks) if len(peaks) == len(n.cost.parts) else None,
                                  gpu=n.gpu, rss_mb=(bench or {}).get("max_rss_mb"))
        timed = {"seconds": round(n.seconds, 1)} if n.seconds is not None else {}
        jobs[resource_key(n.rule, json.dumps(n.settings, sort_keys=True))] = {"job": n.label, **timed, **limits}
    return {"device": meta["device_name"], "date": meta["date"], "configfiles": meta["configfiles"], "jobs": jobs}


def run_estimate(configfiles: list[str], out: str, cache: str, device: str, probe_steps: int, probe_warmup: int,
                 probing: bool, results: str = "results", config_dir: str = "config", max_seconds: float = MAX_PROBE_STEP_SECONDS,
                 threads: int | None = None, resources_out: str | None = None, max_parts: int = 0,
                 online: bool = False, cached_device: str | None = None, figures: list[str] | None = None,
                 probe_budget: float | None = None, scale_from: str | None = None) -> dict:
    """Build the DAG of the merged config, estimate every job, write the Markdown to ``out`` and, with
    ``resources_out``, the jobs' scheduler limits (:func:`resources_table`); returns the summary. ``online``: count
    the jobs of datasets that are absent offline too (:func:`assume_online`); ``figures``: only the jobs of these
    figure rules (:func:`build_dag`); ``probe_budget``: seconds of probing in all; ``scale_from``: another device
    whose cached records, scaled, stand in for the probes not measured here (:class:`Prober`)."""
    import torch

    from featlearn.io import write_text

    config = merged_config(configfiles, config_dir)
    nodes = build_dag(config, results, online, figures)
    prober = Prober(device, cache, probe_steps, probe_warmup, probing, max_seconds, threads=threads, max_parts=max_parts,
                    label=cached_device, budget=probe_budget, scale_from=scale_from)
    own_threads = torch.get_num_threads()
    estimate(nodes, prober, config, results, evidence=Path(config_dir).parent / EVIDENCE_DIR, config_dir=config_dir,
             reference=Path(config_dir).parent / REFERENCE_FILE)
    torch.set_num_threads(own_threads)
    sched = schedule(nodes)
    loads = [r["load_average"] for n in nodes for r in n.per_step if r and "load_average" in r]
    cpus = sorted({r["cpus"] for n in nodes for r in n.per_step if r and r.get("cpus")}) if cached_device else []
    meta = {"configfiles": configfiles, "scale": config.get("scale"), "device": device,
            "device_name": cached_device or device_name(device, own_threads).rsplit(", ", 1)[0], "torch": prober.torch,
            "cached_device": cached_device,
            "python": platform.python_version(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"), "probe_steps": probe_steps,
            "probe_warmup": probe_warmup, "measured": prober.measured, "cache": cache, "probing": prober.probe,
            "budget": prober.budget if prober.probe else None, "spent": prober.spent, "skipped": prober.skipped,
            "startup": prober.startup(),
            "load": f"{min(loads):.1f}–{max(loads):.1f}" if loads else "not recorded",
            "threads": f"{prober.threads} (--threads)" if prober.threads else "each job's declared threads",
            "assume_online": online, "cpus": "/".join(map(str, cpus)) or str(os.cpu_count()), "figures": figures,
            "scale_from": prober.scale_from, "foreign_torch": prober.foreign_torch, "ratios": prober.ratio_check()}
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    write_text(out, report(nodes, sched, meta))
    if resources_out:
        Path(resources_out).parent.mkdir(parents=True, exist_ok=True)
        write_text(resources_out, json.dumps(resources_table(nodes, meta), indent=1, sort_keys=True) + "\n")
    return {"jobs": len(nodes), "nodes": nodes, **sched, "out": out, "skipped": prober.skipped}


def register(sub) -> None:
    """``python -m featlearn estimate [--configfile F ...] [--out MD] [--cache JSON] [--probe-steps K] [--no-probe]``."""

    def run(args) -> None:
        from featlearn.devices import resolve_device

        device = "cached" if args.cached_device else resolve_device(args.device)
        # the workflow reads the whole DAG's limits from its results folder's file: an estimate of a few figures
        # writes it only when asked to (--resources-out)
        resources_out = args.resources_out if args.resources_out is not None else (
            None if args.figure else f"{args.results}/{ESTIMATE_RESOURCES}")
        res = run_estimate(args.configfile, args.out, args.cache, device, args.probe_steps, args.probe_warmup, not args.no_probe,
                           results=args.results, config_dir=args.config_dir, max_seconds=args.max_probe_seconds,
                           threads=args.threads, resources_out=resources_out or None, max_parts=args.max_probes_per_job,
                           online=args.assume_online, cached_device=args.cached_device, figures=args.figure,
                           probe_budget=args.probe_budget, scale_from=args.scale_from)
        print(f"estimate: {res['jobs']} jobs, total {duration(res['total'])}, critical path {duration(res['critical'])}, "
              + ", ".join(f"{g} GPU{'s' if g > 1 else ''} {duration(res['makespan'][g])}" for g in GPU_COUNTS)
              + (f"; {len(res['unknown'])} jobs without a time" if res["unknown"] else "")
              + (f" ({res['skipped']} probes not started: --probe-budget spent)" if res["skipped"] else "")
              + f" -> {res['out']}")

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
    p.add_argument("--probe-budget", type=float, default=None, metavar="SECONDS",
                   help="seconds of probing in all: no probe starts after that, and the jobs left are marked; probing "
                        "goes breadth first (every job's smallest and largest group per model family, then the rest), "
                        "so a short budget still gives most jobs a time (default: no limit)")
    p.add_argument("--max-probes-per-job", type=int, default=MAX_PROBES_PER_JOB,
                   help="distinct probes measured per job; a job with more (a paper-scale sweep's hundreds of groups) "
                        "gets the rest interpolated by FLOPs per step (0: measure every one)")
    p.add_argument("--threads", type=int, default=None,
                   help="torch threads of every probe (default: each job's declared threads, as Snakemake gives them)")
    p.add_argument("--results", default="results", help="results folder (prepared data sizes, benchmark files, run record)")
    p.add_argument("--config-dir", default="config", help="folder of config.yaml")
    p.add_argument("--assume-online", action="store_true",
                   help="count the jobs of datasets absent offline (WikiText-103, AG News train) as a machine with network "
                        "access would run them, sized by the datasets' documented sizes")
    p.add_argument("--cached-device", default=None, metavar="NAME",
                   help="the estimate of the device NAME (as the cache names it, e.g. 'NVIDIA H200') from its probes in "
                        "--cache, on any machine: implies --no-probe; of this machine's benchmark files only CPU jobs' are used")
    p.add_argument("--scale-from", default=None, metavar="NAME",
                   help="another device in --cache (as the cache names it, e.g. 'NVIDIA H200', or 'AMD EPYC CPU, 1 "
                        "threads'): a probe not measured here (budget spent, or not yet) takes its record times the "
                        "ratio of this device's times to its, measured first on a few probes of each kind")
    p.add_argument("--resources-out", default=None,
                   help="per-job runtime and mem_mb from the estimate, which the workflow's resources then use "
                        f"(default <--results>/{ESTIMATE_RESOURCES}, where the workflow of that results folder reads "
                        "them; not written with --figure; '' to skip)")
    p.add_argument("--figure", nargs="+", default=None, metavar="RULE",
                   help="only the jobs these figure rules need (e.g. fig_features_3 table_joma_1), as snakemake would "
                        "run them for those targets")
    p.set_defaults(func=run)

