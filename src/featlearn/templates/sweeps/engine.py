"""Sweep engine: many independent template-task trainings at once, in one process, data on the device.

Protocol [P App. A/B]: Adam (β = (0.9, 0.999), ε = 1e-8, no weight decay), minibatch B (1024), E epochs
(1000); after every ``eval_every`` epochs the validation and test sets (100 samples each, disjoint
alphabets) are evaluated; the reported numbers are those of the epoch with the lowest validation loss.
Regression: loss and metric are the MSE; next-token: cross-entropy loss, metric = test error
(argmax ≠ label). The test set is evaluated only at epochs where some run's validation loss improves, at
the last epoch and at curve epochs: the reported numbers are the same as evaluating it every time.
Train loss of an epoch = the mean of its minibatch losses (each taken before that minibatch's step).

Vectorisation: the R runs of a ``Group`` share the task, n, architecture sizes, batch and epochs; each has
its own seed (data, init, shuffling), learning rate and identity-scaling variant. Parameters are stacked
[R, ...]; the per-run forward is ``torch.func.functional_call`` on one meta-device copy of the model,
vmapped over the run axis; per-run gradients come from one backward of Σ_r loss_r (runs share no
parameters); Adam is applied with a per-run learning rate, with exactly torch.optim.Adam's update
(m <- β1 m + (1-β1) g, v <- β2 v + (1-β2) g², p <- p - lr/(1-β1^t) · m / (sqrt(v)/sqrt(1-β2^t) + ε)).
A group with mixed variants builds every run with both a_h and b_h; a run without +KQ (+VO) keeps its
a_h (b_h) frozen at exactly 0, which is exactly the vanilla model (zero gradient => zero Adam step).

Random templates (T8): a task ``{"name": "random", ..., "seed": "per_run"}`` draws its templates for each run
from the run's seed (template seed s for run seed s), so a curve averages over template draws as well as data
and init; the group's task is the seed-0 draw renamed without its seed (every draw has the same length, kind
and vocabulary), and each row of the runs table names its run's templates.

CUDA graphs (``Group.cuda_graphs``, config ``templates.sweeps.cuda_graphs``; only on a CUDA device): the training
step (the minibatch gather, the runs' losses, their gradients and Adam) is captured once per minibatch width as
a CUDA graph and replayed (``featlearn.cudagraphs.GraphedSteps``), so its kernels launch as one graph instead of
one by one from Python (small groups are launch-bound). The captured step is :func:`_graph_step`, which keeps its
step count and Adam's bias corrections on the device; it computes what the eager step computes up to float
rounding (tested on the CPU, where it runs uncaptured). On a CPU the switch does nothing: the eager step runs and
tables are unchanged, unless the environment asks for the graph-safe step uncaptured
(``featlearn.cudagraphs.UNCAPTURED_ENV``, a diagnostic).

Determinism: run seed s gives data ``make_datasets(task, n, data_seed(s))``, init under
``torch.manual_seed(init_seed(s))`` and, when an epoch has several minibatches, per-run permutations
from ``torch.Generator().manual_seed(shuffle_seed(s))``. A run trained alone (``train_reference``: plain
nn.Module + torch.optim.Adam) or in any group gives the same numbers up to float rounding.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import itertools
import json
import math
import multiprocessing
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import KW_ONLY, dataclass, field, replace

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch.func import functional_call, vmap

from featlearn.cudagraphs import GraphedSteps, captured, graph_safe_step
from featlearn.keptwork import CHECKPOINT_SECONDS
from featlearn.io import write_csv
from featlearn.templates.models import build_model
from featlearn.templates.tasks import TaskData, TemplateTask, make_datasets, make_task
from featlearn.templates.sweeps.selection import n_star, select_lr  # noqa: F401 (re-exported)
from featlearn.seeding import derived_seed
from featlearn.templates.sweeps.grids import PER_RUN  # the template seed of a random task drawn from each run's seed

VARIANTS = {"vanilla": (False, False), "kq": (True, False), "vo": (False, True), "kq_vo": (True, True)}
BETAS = (0.9, 0.999)
EPS = 1e-8


def data_seed(seed: int) -> int:
    return derived_seed(seed, 11)


def init_seed(seed: int) -> int:
    return derived_seed(seed, 23)


def shuffle_seed(seed: int) -> int:
    return derived_seed(seed, 37)


@dataclass(frozen=True)
class RunSpec:
    seed: int
    lr: float
    variant: str = "vanilla"

    def __post_init__(self):
        if self.variant not in VARIANTS:
            raise ValueError(f"unknown variant {self.variant!r}; expected one of {sorted(VARIANTS)}")
        if not self.lr > 0:
            raise ValueError("lr must be > 0")


@dataclass
class Group:
    """R runs trained together (see module docstring). The architecture and sizes come from the sweep's grid and
    the training settings from the config (``templates.sweeps``, through :class:`SweepSettings`); the fields with a
    default are switches whose default is "off" or "as given": every parameter trained (``trainable``: parameter-name
    prefixes that are trained, e.g. ("head.",) trains only the final readout, Fig. 15), full precision, the CPU (a
    job passes its device), no curves, no progress lines, vmap or a loop as :func:`auto_looped` picks, the group's
    templates."""

    task: TemplateTask
    n: int
    runs: list[RunSpec]
    _: KW_ONLY
    arch: str
    model: dict
    epochs: int
    batch: int
    eval_every: int
    n_val: int
    n_test: int
    cuda_graphs: bool  # capture the training step as a CUDA graph (CUDA only; see module docstring)
    trainable: tuple[str, ...] | None = None
    dtype: torch.dtype = torch.float32
    device: str = "cpu"
    curve_every: int = 0  # > 0: keep the evaluated values every curve_every epochs (multiple of eval_every)
    progress: bool = False
    looped: bool | None = None  # the runs' forwards one after another instead of vmap; None: ``auto_looped``
    per_run_templates: bool = False  # random task: each run draws its templates from its own seed
    flush_denormal: bool = False  # on a CPU, flush denormal floats to zero while training (``denormals_flushed``)
    # the training alphabet (None: n tokens, as the paper's tasks have it): the estimate's probe of a group of n > batch
    # trains batch samples over the alphabet of the job's n, so that its embedding tables are the job's
    train_alphabet: int | None = None

    def __post_init__(self):
        if not self.runs:
            raise ValueError("a group needs at least one run")
        if self.epochs < 1 or self.batch < 1 or self.eval_every < 1:
            raise ValueError("epochs, batch and eval_every must be >= 1")
        if self.arch != "transformer" and any(r.variant != "vanilla" for r in self.runs):
            raise ValueError(f"identity-scaling variants need the transformer, not {self.arch}")

    @property
    def structure(self) -> tuple[bool, bool]:
        """(kq, vo) of the stacked model: a scaling exists if any run of the group trains it."""
        return any(VARIANTS[r.variant][0] for r in self.runs), any(VARIANTS[r.variant][1] for r in self.runs)

    @property
    def steps_per_epoch(self) -> int:
        return math.ceil(self.n / self.batch)


@dataclass
class GroupResult:
    """Per-run results [R] at the best-validation epoch, final-epoch values, optional curves [E', R]."""

    best_epoch: torch.Tensor
    val_loss: torch.Tensor
    test_loss: torch.Tensor
    test_metric: torch.Tensor
    train_loss: torch.Tensor
    final_train_loss: torch.Tensor
    final_val_loss: torch.Tensor
    final_test_metric: torch.Tensor
    params: dict[str, torch.Tensor]
    seconds: float
    curves: dict[str, list] = field(default_factory=dict)


# --------------------------------------------------------------------------------------- pieces


def run_task(group: Group, run: RunSpec) -> TemplateTask:
    """The task of one run: the group's, or with ``per_run_templates`` the random templates of the run's seed."""
    if not group.per_run_templates:
        return group.task
    return make_task("random", **{**group.task.params, "seed": run.seed, "noise": group.task.noise})


def run_data(group: Group, run: RunSpec) -> TaskData:
    return make_datasets(run_task(group, run), group.n, data_seed(run.seed), n_val=group.n_val, n_test=group.n_test,
                         train_alphabet=group.train_alphabet)


def group_data(group: Group) -> list[TaskData]:
    datas = [run_data(group, r) for r in group.runs]
    if len({d.vocab.size for d in datas}) > 1:
        raise ValueError(f"{group.task.name}: the runs' vocabularies differ in size; they cannot be stacked")
    return datas


def init_model(group: Group, run: RunSpec, vocab_size: int, structure: tuple[bool, bool] | None = None) -> torch.nn.Module:
    """The run's model at init (seeded, float32 init then cast to the group's dtype)."""
    kq, vo = structure if structure is not None else VARIANTS[run.variant]
    cfg = dict(group.model)
    if group.arch == "transformer":
        cfg.update(kq=kq, vo=vo)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(init_seed(run.seed))
        model = build_model(group.arch, vocab_size, group.task.length, group.task.kind, **cfg)
    return model.to(group.dtype)


@dataclass(frozen=True)
class ModelSize:
    """The shapes of one run's model that the cost formulas read (:func:`model_size`)."""

    parameters: int  # all of one run's parameters
    outside_embeddings: int  # those outside its nn.Embedding tables (P_ne)
    first_layer: tuple[int, ...]  # the MLPs' one-hot first layer ``layers[0].weight`` (out, in); () for other models
    width: int  # the widest layer's output: the largest first dimension of a 2-D parameter outside the embeddings


def model_size(group: Group, vocab_size: int) -> ModelSize:
    """The size of one run's model in ``group`` at ``vocab_size`` (the stacked model's structure, as
    :func:`init_model` builds it), counted on the meta device: no memory is allocated and nothing is initialised,
    whatever the model's size; groups of one shape share one count (a paper-scale grid has hundreds of groups and a
    few shapes)."""
    cfg = {**group.model, **({"kq": group.structure[0], "vo": group.structure[1]} if group.arch == "transformer" else {})}
    return _model_size(group.arch, vocab_size, group.task.length, group.task.kind, json.dumps(cfg, sort_keys=True))


@functools.lru_cache(maxsize=None)
def _model_size(arch: str, vocab_size: int, length: int, kind: str, cfg_json: str) -> ModelSize:
    with torch.device("meta"):
        model = build_model(arch, vocab_size, length, kind, **json.loads(cfg_json))
    emb = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
    outside = [p for p in model.parameters() if id(p) not in emb]
    return ModelSize(parameters=sum(p.numel() for p in model.parameters()),
                     outside_embeddings=sum(p.numel() for p in outside),
                     first_layer=tuple(model.layers[0].weight.shape) if arch.startswith("mlp") else (),
                     width=max((p.shape[0] for p in outside if p.dim() == 2), default=1))


def run_memory_bytes(group: Group, vocab_size: int) -> int:
    """The memory formula of one run of ``group`` (the estimate's, ``featlearn.templates.cost``): 4 B x (6 P + 8 x
    samples x positions x width + 4 x samples x outputs), P the parameters of one run's model (6 P: the parameters,
    their gradient, Adam's two moments and the update's two buffers, ``_adam_update``), samples a minibatch (at most
    n), width the widest layer's output (:func:`model_size`), outputs a sample's outputs (the vocabulary for a
    next-token task, else 1; 4 x: the logits, their log-softmax and the gradients of both). The last term is the
    transformer's tied logits, which the width leaves out: measured on a CPU, vmapped as on a GPU, a paper-scale grid
    3c run (n 262,144, a vocabulary of 262,354) held 8.0 GiB, 4.2 by the formula without it and 8.2 with it
    (``benchmarks/group_memory.py``, docs/performance.md)."""
    size = model_size(group, vocab_size)
    samples = min(group.n, group.batch)
    outputs = vocab_size if group.task.kind == "next_token" else 1
    return 4 * (6 * size.parameters + 8 * samples * group.task.length * size.width + 4 * samples * outputs)


def step_flops(group: Group, size: ModelSize) -> int:
    """FLOPs of one training step of ``group``, all its runs (the estimate's formula, ``featlearn.templates.cost``):
    6 x P_ne x samples x positions x R, ``size`` one run's model (:func:`model_size`). A sequence model applies its
    weights at each of the task's positions [D: an upper bound for a readout on the last position only]; the MLPs'
    one-hot first layer counts hidden x inputs, as it is computed (a sum of the selected columns)."""
    if group.arch.startswith("mlp"):
        hidden, inputs = size.first_layer
        length = group.task.length
        per_sample = 6 * (size.outside_embeddings - hidden * inputs
                          + hidden * (length + length ** 2 * (group.arch == "mlp_xxt")))
    else:
        per_sample = 6 * size.outside_embeddings * group.task.length
    return per_sample * min(group.n, group.batch) * len(group.runs)


# The weights of group_work's terms, in FLOP-equivalents, fitted by non-negative least squares to the wall times of
# the 130 groups of 10 default-scale grids (Figs. 25, 22, 9, 14, 5, 17, 8, 2c, 16, 13 at 40 epochs; 1 thread, a 2-core
# Intel Xeon, 2026-12-03; docs/performance.md, "Costliest group first"): a parameter that Adam updates costs about 460
# FLOPs of the step's products (a memory-bound update), a step a fixed 4e7 and each run's share of it 6.2e7 (the
# launches and Python work of small models), an evaluated sample's forward about its FLOPs. Only the order they give
# matters: on those grids it is the order of the measured times' (the same makespans on 2 and 4 workers).
STEP_FLOP_EQUIVALENT = 4e7
RUN_STEP_FLOP_EQUIVALENT = 6.2e7
UPDATE_FLOP_EQUIVALENT = 460.0
EVAL_FLOP_EQUIVALENT = 0.93


def group_work(group: Group, size: ModelSize | None = None) -> float:
    """A group's training work in FLOP-equivalents (the order in which a CPU job's :func:`group_pool` takes its groups,
    costliest first): epochs x (steps x (4e7 + FLOPs + 460 x parameters updated + 6.2e7 x runs) per step + 0.93 x the
    FLOPs of the evaluation's forwards, a third of a trained sample's per evaluated sample / eval_every); the weights
    are fitted to measured group times (above). A relative measure without a probe: the estimate's times come from
    its probes. ``size``: one run's model at the group's vocabulary, where the caller has counted it."""
    size = size or model_size(group, group_vocab(group))
    R = len(group.runs)
    flops = step_flops(group, size)
    per_step = (STEP_FLOP_EQUIVALENT + flops + UPDATE_FLOP_EQUIVALENT * R * size.parameters
                + RUN_STEP_FLOP_EQUIVALENT * R)
    evaluation = EVAL_FLOP_EQUIVALENT * flops / min(group.n, group.batch) / 3 * (group.n_val + group.n_test)
    return float(group.epochs * (group.steps_per_epoch * per_step + evaluation / group.eval_every))


def group_vocab(group: Group) -> int:
    """The vocabulary of a group's data at its n, or its ``train_alphabet`` (the datasets' token count, as the training
    builds them)."""
    from featlearn.templates.tasks import make_datasets

    return make_datasets(group.task, 1, 1, n_val=1, n_test=1, train_alphabet=group.train_alphabet or group.n).vocab.size


def trainable_mask(group: Group, run: RunSpec, name: str) -> bool:
    if group.trainable is not None and not name.startswith(tuple(group.trainable)):
        return False
    kq, vo = VARIANTS[run.variant]
    if name.endswith("kq_scale"):
        return kq
    if name.endswith("vo_scale"):
        return vo
    return True


def _losses(out: torch.Tensor, y: torch.Tensor, kind: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss, metric) of one run's outputs: MSE and MSE, or cross-entropy and error."""
    if kind == "regression":
        mse = ((out - y) ** 2).mean()
        return mse, mse
    return F.cross_entropy(out, y), (out.argmax(dim=-1) != y).to(out.dtype).mean()


class _Selector:
    """Best-validation-epoch bookkeeping for R runs (a NaN validation loss is never the best). Its tensors live on
    ``device``: on the CPU (the default) each update reads the losses back; on a GPU (:func:`sync_free`) they stay
    there, so an evaluation does not wait for the queued steps, and :meth:`result` reads them once."""

    def __init__(self, R: int, device: torch.device | str = "cpu"):
        self.device = torch.device(device)
        self.best_val = torch.full((R,), math.inf, dtype=torch.float64, device=self.device)
        self.best_epoch = torch.full((R,), -1, dtype=torch.int64, device=self.device)
        self.test_loss = torch.full((R,), math.nan, dtype=torch.float64, device=self.device)
        self.test_metric = torch.full((R,), math.nan, dtype=torch.float64, device=self.device)
        self.train_loss = torch.full((R,), math.nan, dtype=torch.float64, device=self.device)
        self.curves: dict[str, list] = {k: [] for k in ("epoch", "train_loss", "val_loss", "test_loss", "test_metric")}
        self.last: dict[str, torch.Tensor] = {}

    def update(self, epoch: int, train_loss, val_loss, test_loss, test_metric, record: bool) -> None:
        vals = {
            k: v.detach().to(self.device, torch.float64, copy=True)
            for k, v in (
                ("train_loss", train_loss),
                ("val_loss", val_loss),
                ("test_loss", test_loss),
                ("test_metric", test_metric),
            )
        }
        better = vals["val_loss"] < self.best_val
        self.best_val = torch.where(better, vals["val_loss"], self.best_val)
        self.best_epoch = torch.where(better, torch.full_like(self.best_epoch, epoch), self.best_epoch)
        for k in ("test_loss", "test_metric", "train_loss"):
            setattr(self, k, torch.where(better, vals[k], getattr(self, k)))
        self.last = vals
        if record:
            self.curves["epoch"].append(epoch)
            for k, v in vals.items():
                self.curves[k].append(v)

    BEST = ("best_val", "best_epoch", "test_loss", "test_metric", "train_loss")  # the values at each run's best epoch

    def state(self) -> dict:
        """Everything the selection has seen, on the CPU (:meth:`result`, and a group's checkpoint: :func:`train_group`)."""
        return {**{k: getattr(self, k).cpu() for k in self.BEST}, "last": {k: v.cpu() for k, v in self.last.items()},
                "curves": {k: v if k == "epoch" else [t.cpu() for t in v] for k, v in self.curves.items()}}

    def load(self, state: dict) -> None:
        """Take up the selection where :meth:`state` left it."""
        for k in self.BEST:
            setattr(self, k, state[k].to(self.device))
        self.last = {k: v.to(self.device) for k, v in state["last"].items()}
        self.curves = {k: list(v) if k == "epoch" else [t.to(self.device) for t in v] for k, v in state["curves"].items()}

    def result(self, params, seconds) -> GroupResult:
        cpu = self.state()
        last, curves = cpu["last"], cpu["curves"]
        best_val = torch.where(cpu["best_epoch"] >= 0, cpu["best_val"], torch.tensor(math.nan, dtype=torch.float64))
        return GroupResult(
            cpu["best_epoch"],
            best_val,
            cpu["test_loss"],
            cpu["test_metric"],
            cpu["train_loss"],
            last["train_loss"],
            last["val_loss"],
            last["test_metric"],
            params,
            seconds,
            curves,
        )


def sync_free(dev: torch.device) -> bool:
    """Whether a group's epochs run without reading anything back to the host (on a GPU): the selection stays on the
    device, the test split is evaluated at every evaluation (the host cannot ask whether a run improved; where
    none did, the values are discarded as before, so the results are the same), and the shuffles are copied from
    pinned memory without waiting. On a CPU there is nothing to wait for, and the CPU path is kept as it was."""
    return dev.type == "cuda"


# --------------------------------------------------------------------------------------- engine


@contextlib.contextmanager
def denormals_flushed(on: bool):
    """With ``on``, the CPU's denormal floats (below 1.2e-38 in float32) are flushed to zero inside the block
    (``torch.set_flush_denormal``: the FTZ and DAZ bits of x86's SSE control register), and set back off after it.
    Late in a sweep run's training, Adam's second moments of near-zero gradients fall into that range, and some CPUs
    compute on denormals many times slower than on normal numbers (docs/performance.md, "Denormal floats"). A
    flushed value was below 1.2e-38; the tables can differ only where one such value changed a printed digit."""
    if not on:
        yield
        return
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(False)


def checkpoint_key(key: dict) -> dict:
    """The key under which a group identified by ``key`` keeps its checkpoint in a resume folder (apart from the key of
    its finished frames, ``sweep_frames``)."""
    return {"templates group checkpoint": key}


def train_group(group: Group, work_dir: str | None = None, key: dict | None = None,
                checkpoint_seconds: float | None = None, on_epoch: Callable[[int], None] | None = None,
                before_eval: Callable[[int], None] | None = None) -> GroupResult:
    """Train the group's runs together; returns per-run results (see ``GroupResult``).

    With ``work_dir`` (a compute job's resume folder) and ``key`` (a JSON-able dict of everything the group depends on)
    the group keeps a checkpoint there at the end of an epoch once ``checkpoint_seconds`` (None: ``CHECKPOINT_SECONDS``)
    have passed since the last one
    (``featlearn.training.save_part`` under :func:`checkpoint_key`: the stacked parameters, Adam's moments and step
    count, the runs' shuffle generators, the selection so far and the seconds trained), and a rerun of a killed job
    starts after the epoch it saved: on the CPU its results equal an uninterrupted run's bit for bit, and its
    ``seconds`` count the trained epochs of both runs. A paper-scale group trains for hours (templates Fig. 25's n 8,192
    MLP group: about 6 h on one CPU core; grid 3c's groups on a GPU for longer), more than a scheduler's time limit may
    allow. The caller removes the checkpoint once it has kept the group's results (``sweep_frames``).

    ``on_epoch(epoch)`` is called at the end of every epoch (after its evaluation), ``before_eval(epoch)`` after the
    epoch's training steps when the epoch evaluates: the estimate's probe times the group's later epochs, their steps
    and their evaluations apart, with them (``featlearn.templates.cost.sweep_probe``). Neither changes what is computed."""
    if work_dir and key is None:
        raise ValueError("a group's checkpoint in a resume folder needs the group's key")
    with denormals_flushed(group.flush_denormal and torch.device(group.device).type == "cpu"):
        return _train_group(group, work_dir, key, CHECKPOINT_SECONDS if checkpoint_seconds is None else checkpoint_seconds,
                            on_epoch, before_eval)


def _stacked_layout(arch: str, name: str, p: torch.Tensor) -> torch.Tensor:
    """The stacked parameter ``p`` [R, ...] as the engine keeps it: the MLP's one-hot first layer [R, hidden, inputs]
    with each run's weight stored input-major (the same values, transposed strides), the others as stacked.
    The first layer is read as the rows of its transpose (``TemplateMLP.first_layer``, an embedding lookup):
    stored hidden-major, vmap copied the whole stacked weight into that layout at every forward, and the gradient
    back at every backward (a paper-scale group of n 8,192: 516 MB each way, about a second on a CPU core)."""
    if arch in ("mlp", "mlp_xxt") and name == "layers.0.weight":
        return p.transpose(1, 2).contiguous().transpose(1, 2)
    return p


def _train_group(group: Group, work_dir: str | None, key: dict | None, checkpoint_seconds: float,
                 on_epoch: Callable[[int], None] | None = None,
                 before_eval: Callable[[int], None] | None = None) -> GroupResult:
    from featlearn.training import PROGRESS_SECONDS, load_part, progress, save_part

    dev, R, kind = torch.device(group.device), len(group.runs), group.task.kind
    datas = group_data(group)
    V = datas[0].vocab.size
    structure = group.structure
    models = [init_model(group, run, V, structure) for run in group.runs]
    names = [name for name, _ in models[0].named_parameters()]
    params = {
        name: _stacked_layout(group.arch, name, torch.stack([dict(m.named_parameters())[name].detach() for m in models]))
        .to(dev).requires_grad_(True)
        for name in names
    }
    base = copy.deepcopy(models[0]).to("meta")
    del models
    masks = {
        name: torch.tensor([trainable_mask(group, run, name) for run in group.runs], device=dev).view(
            R, *[1] * (params[name].dim() - 1)
        )
        for name in names
    }
    trained = [name for name in names if bool(masks[name].any())]
    # the update masks a gradient only where some run freezes the parameter (decided here, once: no host sync later)
    masks = {name: None if bool(mask.all()) else mask for name, mask in masks.items()}
    scratch: dict = {}  # the update's buffers (_adam_update)
    lr = torch.tensor([run.lr for run in group.runs], dtype=group.dtype, device=dev)
    state = {name: (torch.zeros_like(params[name]), torch.zeros_like(params[name])) for name in trained}

    ydtype = group.dtype if kind == "regression" else torch.int64
    X = torch.stack([d.train.tokens for d in datas]).to(dev)
    Y = torch.stack([d.train.targets for d in datas]).to(dev, ydtype)
    Xv, Yv = (torch.stack([getattr(d.val, a) for d in datas]).to(dev) for a in ("tokens", "targets"))
    Xt, Yt = (torch.stack([getattr(d.test, a) for d in datas]).to(dev) for a in ("tokens", "targets"))
    Yv, Yt = Yv.to(ydtype), Yt.to(ydtype)
    n, k = group.n, group.task.length

    def run_loss(p, x, y):
        return _losses(functional_call(base, p, (x,)), y, kind)[0]

    def run_eval(p, x, y):
        return _losses(functional_call(base, p, (x,)), y, kind)

    if group.looped if group.looped is not None else auto_looped(group):
        batched_loss, batched_eval = _looped(run_loss, R), _looped(run_eval, R)
    else:
        batched_loss, batched_eval = vmap(run_loss), vmap(run_eval)
    gens = [torch.Generator().manual_seed(shuffle_seed(run.seed)) for run in group.runs]
    nb = group.steps_per_epoch
    no_sync = sync_free(dev)
    sel = _Selector(R, dev if no_sync else "cpu")
    step = 0
    graphed = None
    if graph_safe_step(group.cuda_graphs, dev):
        t_dev = torch.zeros((), dtype=torch.float64, device=dev)  # the graphed steps' count, on the device
        train_buf = torch.zeros(R, dtype=group.dtype, device=dev)  # their train-loss accumulator

        def step_fn(idx):
            _graph_step(batched_loss, params, trained, state, masks, lr, t_dev, X, Y, idx, k, n, train_buf, scratch)

        graphed = GraphedSteps(step_fn) if captured(group.cuda_graphs, dev) else step_fn
    first, earlier_s = 0, 0.0
    saved = load_part(work_dir, checkpoint_key(key), log=_log) if work_dir else None
    if saved is not None:  # a killed run of this job kept the group after epoch ``first``: go on from there
        first, step, earlier_s = saved["epoch"], saved["step"], saved["seconds"]
        with torch.no_grad():
            for name, p in params.items():
                p.copy_(saved["params"][name])
            for name, (m, v) in state.items():
                m.copy_(saved["state"][name][0])
                v.copy_(saved["state"][name][1])
        for gen, gen_state in zip(gens, saved["gens"], strict=True):
            gen.set_state(gen_state)
        if graphed is not None:
            t_dev.fill_(saved["t"])
        sel.load(saved["selector"])
        _log(f"resuming: [templates] {group.task.name} {group.arch} n={n} R={R} at epoch {first} of {group.epochs} "
             f"from {work_dir}")
    start = saved_at = shown_at = time.perf_counter()
    for epoch in range(first + 1, group.epochs + 1):
        if nb > 1:
            perm = torch.stack([torch.randperm(n, generator=g) for g in gens])
            if no_sync and dev.type == "cuda":  # a fresh pinned buffer each epoch: the copy need not be waited for
                perm = perm.pin_memory().to(dev, non_blocking=True)
            else:
                perm = perm.to(dev)
        train_loss = torch.zeros(R, dtype=group.dtype, device=dev)
        if graphed is not None:
            train_buf.zero_()
        for b in range(nb):
            idx = None if nb == 1 else perm[:, b * group.batch : (b + 1) * group.batch]
            if graphed is not None:
                graphed(idx)
                continue
            if idx is None:
                xb, yb = X, Y
            else:
                xb = torch.gather(X, 1, idx.unsqueeze(-1).expand(-1, -1, k))
                yb = torch.gather(Y, 1, idx)
            losses = batched_loss(params, xb, yb)
            grads = torch.autograd.grad(losses.sum(), [params[name] for name in trained], allow_unused=True)
            step += 1
            _adam_step(params, trained, grads, state, masks, lr, step, scratch)
            train_loss += losses.detach() * (xb.shape[1] / n)
        if graphed is not None:
            train_loss = train_buf.clone()
        if epoch % group.eval_every == 0 or epoch == group.epochs:
            if before_eval is not None:
                before_eval(epoch)
            with torch.no_grad():
                vl, _ = batched_eval(params, Xv, Yv)
                # the test set is only needed where a run improves, at the last epoch and on curve epochs
                if no_sync or bool((vl.detach().double().cpu() < sel.best_val).any()) or epoch == group.epochs \
                        or _record(group, epoch):
                    tl, tm = batched_eval(params, Xt, Yt)
                else:
                    tl = tm = torch.full_like(vl, math.nan)
            sel.update(epoch, train_loss, vl, tl, tm, _record(group, epoch))
        now = time.perf_counter()
        if group.progress and (epoch % max(1, group.epochs // 10) == 0 or epoch == group.epochs
                               or now - shown_at >= PROGRESS_SECONDS):
            _log(f"[templates] {group.task.name} {group.arch} n={n} R={R} epoch {epoch}/{group.epochs} "
                 f"train {train_loss.mean():.4f} best val {sel.best_val.nanmean():.4f} "
                 f"({progress(epoch - first, group.epochs - epoch, now - start, 'epochs')} in this group)")
            shown_at = now
        since = time.perf_counter() - saved_at
        if work_dir and epoch < group.epochs and since >= checkpoint_seconds:
            save_part(work_dir, checkpoint_key(key), {
                "epoch": epoch, "step": step, "t": float(t_dev) if graphed is not None else None,
                "seconds": earlier_s + time.perf_counter() - start,
                "params": {name: p.detach().cpu() for name, p in params.items()},
                "state": {name: (m.cpu(), v.cpu()) for name, (m, v) in state.items()},
                "gens": [g.get_state() for g in gens], "selector": sel.state()})
            if group.progress:
                _log(f"[templates] {group.task.name} {group.arch} n={n} R={R} checkpoint at epoch {epoch}, "
                     f"{since / 60:.1f} min after the last one")
            saved_at = time.perf_counter()
        if on_epoch is not None:
            on_epoch(epoch)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    seconds = earlier_s + time.perf_counter() - start
    return sel.result({name: p.detach() for name, p in params.items()}, seconds)


# Samples per step from which a CPU transformer group runs its forwards one run after another (measured
# here with 1 thread, R = 8-32 runs, 10 epochs: vmap/loop time 0.81 at 16 samples, 1.03 at 128, 1.21 at
# 256, 1.54 at 1024, 1.59 at 2048). vmap turns every linear map into a batched product over the runs, which
# is slower on a CPU than R plain products once these are large; Adam stays batched either way.
LOOP_MIN_SAMPLES = 256


def auto_looped(group: Group) -> bool:
    """Whether ``train_group`` loops over the runs (True) or vmaps them (False) when ``group.looped`` is None."""
    return (
        torch.device(group.device).type == "cpu"
        and group.arch == "transformer"
        and min(group.n, group.batch) >= LOOP_MIN_SAMPLES
    )


def _looped(fn, R: int):
    """``vmap(fn)`` computed run by run on views of the stacked parameters (one plain forward per run)."""

    def batched(params, x, y):
        # unbind: one backward (a stack of the runs' gradients) instead of R zero-filled index backwards
        per_run = {name: p.unbind(0) for name, p in params.items()}
        xs, ys = x.unbind(0), y.unbind(0)
        outs = [fn({name: ps[r] for name, ps in per_run.items()}, xs[r], ys[r]) for r in range(R)]
        if isinstance(outs[0], tuple):
            return tuple(torch.stack(col) for col in zip(*outs))
        return torch.stack(outs)

    return batched


def _record(group: Group, epoch: int) -> bool:
    return group.curve_every > 0 and (epoch % group.curve_every == 0 or epoch == group.epochs)


def _adam_step(params, trained, grads, state, masks, lr, t, scratch: dict | None = None) -> None:
    """torch.optim.Adam's update (defaults, no weight decay) with a per-run learning rate; frozen entries
    of a run get a zero gradient, hence an exactly zero step."""
    b1, b2 = BETAS
    with torch.no_grad():
        _adam_update(params, trained, grads, state, masks, lr, 1 - b1**t, math.sqrt(1 - b2**t), scratch)


def _adam_update(params, trained, grads, state, masks, lr, bc1, sqrt_bc2, scratch: dict | None = None) -> None:
    """The update of ``_adam_step`` given the bias corrections 1 - β1^t and sqrt(1 - β2^t): Python numbers (the
    eager step) or device tensors (the graph-safe step).

    ``masks[name]`` is None where every run trains the parameter (no masking). Every step writes into two buffers
    per parameter kept in ``scratch`` (filled on first use; None: fresh ones), the denominator and the update: the same
    operations in the same order as ``p -= (lr / bc1) * m / (sqrt(v) / sqrt_bc2 + eps)``, so the same bits, without
    a fresh tensor per operation. A large stacked parameter (a paper-scale MLP group's first layer: 20 runs x
    256 x 25,182 floats) spent most of its step in the page faults of those fresh tensors on a CPU: this update
    takes 0.35-0.44 s there instead of 1.9-3.7 s (docs/performance.md)."""
    b1, b2 = BETAS
    scratch = {} if scratch is None else scratch
    for name, g in zip(trained, grads):
        p, mask = params[name], masks[name]
        if g is None:
            g = torch.zeros_like(p)
        elif mask is not None:
            g = torch.where(mask, g, 0.0)
        m, v = state[name]
        m.lerp_(g, 1 - b1)
        v.mul_(b2).addcmul_(g, g, value=1 - b2)
        if name not in scratch:
            scratch[name] = (torch.empty_like(p), torch.empty_like(p))
        denom, update = scratch[name]
        torch.sqrt(v, out=denom).div_(sqrt_bc2).add_(EPS)
        step_size = (lr / bc1).view(-1, *[1] * (p.dim() - 1))
        torch.mul(step_size, m, out=update).div_(denom)
        p.sub_(update)


def _graph_step(batched_loss, params, trained, state, masks, lr, t, X, Y, idx, k: int, n: int, train_loss,
                scratch: dict | None = None) -> None:
    """One training step that a CUDA graph can hold: no host sync, no Python number that changes between steps.
    The step count ``t`` (a 0-d tensor) is advanced on the device and Adam's bias corrections are computed from
    it; the minibatch is gathered from ``X``, ``Y`` with ``idx`` (None: the whole training set); the minibatch's
    share of the losses is added to ``train_loss``. Same update as the eager step (``_adam_step``)."""
    if idx is None:
        xb, yb = X, Y
    else:
        xb, yb = torch.gather(X, 1, idx.unsqueeze(-1).expand(-1, -1, k)), torch.gather(Y, 1, idx)
    losses = batched_loss(params, xb, yb)
    grads = torch.autograd.grad(losses.sum(), [params[name] for name in trained], allow_unused=True)
    b1, b2 = BETAS
    with torch.no_grad():
        t.add_(1)
        bc1 = 1 - torch.pow(torch.full_like(t, b1), t)
        sqrt_bc2 = torch.sqrt(1 - torch.pow(torch.full_like(t, b2), t))
        _adam_update(params, trained, grads, state, masks, lr, bc1.to(lr.dtype), sqrt_bc2.to(lr.dtype), scratch)
        train_loss.add_(losses.detach() * (xb.shape[1] / n))


def train_reference(group: Group, run: RunSpec) -> GroupResult:
    """One run alone, the plain way: its own nn.Module (vanilla structure unless its variant adds
    scalings), torch.optim.Adam, the same data, init, shuffling and best-epoch selection as the engine."""
    dev, kind = torch.device(group.device), group.task.kind
    data = run_data(group, run)
    model = init_model(group, run, data.vocab.size).to(dev)
    params = [p for name, p in model.named_parameters() if trainable_mask(group, run, name)]
    opt = torch.optim.Adam(params, lr=run.lr)
    ydtype = group.dtype if kind == "regression" else torch.int64
    X, Y = data.train.tokens.to(dev), data.train.targets.to(dev, ydtype)
    Xe = torch.cat([data.val.tokens, data.test.tokens]).to(dev)
    Ye = torch.cat([data.val.targets, data.test.targets]).to(dev, ydtype)
    gen = torch.Generator().manual_seed(shuffle_seed(run.seed))
    nb, n, nv = group.steps_per_epoch, group.n, group.n_val
    sel = _Selector(1)
    start = time.perf_counter()
    for epoch in range(1, group.epochs + 1):
        perm = torch.randperm(n, generator=gen).to(dev) if nb > 1 else torch.arange(n, device=dev)
        train_loss = torch.zeros((), dtype=group.dtype, device=dev)
        for b in range(nb):
            idx = perm[b * group.batch : (b + 1) * group.batch]
            loss = _losses(model(X[idx]), Y[idx], kind)[0]
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            train_loss += loss.detach() * (len(idx) / n)
        if epoch % group.eval_every == 0 or epoch == group.epochs:
            with torch.no_grad():
                out = model(Xe)
                vl, _ = _losses(out[:nv], Ye[:nv], kind)
                tl, tm = _losses(out[nv:], Ye[nv:], kind)
            sel.update(epoch, train_loss.view(1), vl.view(1), tl.view(1), tm.view(1), _record(group, epoch))
    seconds = time.perf_counter() - start
    return sel.result({name: p.detach().unsqueeze(0) for name, p in model.named_parameters()}, seconds)


# --------------------------------------------------------------------------------------- grids


def _seeds(value) -> list[int]:
    return list(range(1, int(value) + 1)) if isinstance(value, (int, np.integer)) else [int(s) for s in value]


@dataclass(frozen=True)
class SweepSettings:
    """One curve of a sweep figure (built by ``experiments.figure_curves`` from the config): every
    variant x learning rate x seed at every n. ``seeds``: an int S (seeds 1..S) or a list. ``device``:
    already resolved (``cpu`` or ``cuda``). The fields with defaults are not config keys: every parameter
    trained, full precision (float32 [P App. A]), no curves, progress lines (switches of the caller)."""

    task: dict
    arch: str
    model: dict
    variants: list
    n: list
    lrs: list
    seeds: int | list
    epochs: int
    batch: int
    eval_every: int
    n_val: int
    n_test: int
    max_group: int
    device: str
    cuda_graphs: bool
    max_group_gb: float | None = None  # memory budget of one group (the run memory formula x runs); None: no cap
    flush_denormal: bool = False  # on a CPU, flush denormal floats to zero while training (``denormals_flushed``)
    trainable: list | None = None
    dtype: str = "float32"
    curve_every: int = 0
    progress: bool = True

    @classmethod
    def parse(cls, settings: dict) -> "SweepSettings":
        stray = set(settings) - set(cls.__dataclass_fields__)
        if stray:
            raise ValueError(f"unknown sweep settings {sorted(stray)}")
        return cls(**settings)


def expand_groups(settings: dict | SweepSettings) -> list[Group]:
    """The groups of a sweep: one per n (chunks of at most ``max_group`` runs), each holding every
    variant x learning rate x seed of that n (see :class:`SweepSettings`). With ``max_group_gb``, a chunk holds at
    most as many runs as fit in that many GiB by the run memory formula (:func:`run_memory_bytes`): a paper-scale
    sweep of wide models is split into smaller groups, and the estimate, which expands the same groups, times the
    split that will run. A run alone larger than the budget is an error."""
    s = settings if isinstance(settings, SweepSettings) else SweepSettings.parse(settings)
    spec = dict(s.task)
    per_run = spec.get("seed") == PER_RUN
    if per_run and spec.get("name") != "random":
        raise ValueError(f"seed {PER_RUN!r} is for random templates, not task {spec.get('name')!r}")
    task = make_task(**{**spec, "seed": 0}) if per_run else make_task(**spec)
    if per_run:
        task = replace(task, name=task.name.rsplit("_s", 1)[0])
    dtype = {"float32": torch.float32, "float64": torch.float64}[s.dtype]
    runs = [RunSpec(seed, float(lr), variant) for variant, lr, seed in itertools.product(s.variants, s.lrs, _seeds(s.seeds))]
    groups = []
    for n in s.n:
        size = int(s.max_group)
        if s.max_group_gb:
            size = _runs_that_fit(s, task, int(n), runs, dtype, per_run)
        for i in range(0, len(runs), size):
            groups.append(
                Group(
                    task,
                    int(n),
                    runs[i : i + size],
                    arch=s.arch,
                    model=dict(s.model),
                    epochs=int(s.epochs),
                    batch=int(s.batch),
                    eval_every=int(s.eval_every),
                    trainable=tuple(s.trainable) if s.trainable else None,
                    n_val=int(s.n_val),
                    n_test=int(s.n_test),
                    dtype=dtype,
                    device=s.device,
                    curve_every=int(s.curve_every),
                    progress=bool(s.progress),
                    per_run_templates=per_run,
                    cuda_graphs=bool(s.cuda_graphs),
                    flush_denormal=bool(s.flush_denormal),
                )
            )
    return groups


def _runs_that_fit(s: SweepSettings, task, n: int, runs: list[RunSpec], dtype, per_run: bool) -> int:
    """How many runs of a sweep at ``n`` one group holds within ``max_group_gb`` (at most ``max_group``), by the run
    memory formula of the most demanding structure among the runs."""
    budget = float(s.max_group_gb) * 2**30
    worst = 0
    for structure_runs in {VARIANTS[r.variant]: [r] for r in runs}.values():
        probe = Group(task, n, structure_runs, arch=s.arch, model=dict(s.model), epochs=int(s.epochs), batch=int(s.batch),
                      eval_every=int(s.eval_every), n_val=int(s.n_val), n_test=int(s.n_test), dtype=dtype,
                      cuda_graphs=False, per_run_templates=per_run)
        worst = max(worst, run_memory_bytes(probe, group_vocab(probe)))
    fit = int(budget // worst)
    if fit < 1:
        raise ValueError(f"one run of {s.arch} {s.model} at n={n} needs {worst / 2**30:.1f} GiB by the memory formula, "
                         f"more than max_group_gb {s.max_group_gb:g}")
    return max(1, min(int(s.max_group), fit))


def _group_frame(group: Group, res: GroupResult) -> pd.DataFrame:
    model = group.model
    return pd.DataFrame(
        {
            "task": group.task.name,
            "kind": group.task.kind,
            "arch": group.arch,
            "variant": [r.variant for r in group.runs],
            "templates": [_templates(run_task(group, r)) if group.task.params.get("r") else "" for r in group.runs],
            "n": group.n,
            "lr": [r.lr for r in group.runs],
            "seed": [r.seed for r in group.runs],
            "batch": group.batch,
            "epochs": group.epochs,
            "d_emb": model.get("d_emb", np.nan),
            "depth": model.get("depth", np.nan),
            "heads": model.get("heads", np.nan),
            "d_head": model.get("d_head", np.nan),
            "d_mlp": model.get("d_mlp", np.nan),
            "hidden": model.get("hidden", np.nan),
            "attn_mult": model.get("attn_mult", 1.0),
            "kq_mult": model.get("kq_mult", 1.0),
            "vo_mult": model.get("vo_mult", 1.0),
            "readout": model.get("readout", "cls") if group.arch == "transformer" else "",
            "trainable": ",".join(group.trainable) if group.trainable else "all",
            "metric": "mse" if group.task.kind == "regression" else "error",
            "best_epoch": res.best_epoch.numpy(),
            "val_loss": res.val_loss.numpy(),
            "test_loss": res.test_loss.numpy(),
            "test_metric": res.test_metric.numpy(),
            "train_loss": res.train_loss.numpy(),
            "final_train_loss": res.final_train_loss.numpy(),
            "final_val_loss": res.final_val_loss.numpy(),
            "final_test_metric": res.final_test_metric.numpy(),
            "group_runs": len(group.runs),
            "group_seconds": res.seconds,
        }
    )


def _templates(task: TemplateTask) -> str:
    """A random task's templates and labels, e.g. ``βαββα:+1 ααβαα:-1``."""
    return " ".join(f"{''.join(t)}:{y:+.3g}" for t, y in zip(task.templates, task.labels))


def _curve_frame(group: Group, res: GroupResult) -> pd.DataFrame:
    c = res.curves
    if not c.get("epoch"):
        return pd.DataFrame()
    E, R = len(c["epoch"]), len(group.runs)
    frame = pd.DataFrame(
        {
            "task": group.task.name,
            "arch": group.arch,
            "variant": np.tile([r.variant for r in group.runs], E),
            "n": group.n,
            "lr": np.tile([r.lr for r in group.runs], E),
            "seed": np.tile([r.seed for r in group.runs], E),
            "epoch": np.repeat(c["epoch"], R),
        }
    )
    for key in ("train_loss", "val_loss", "test_loss", "test_metric"):
        frame[key] = torch.stack(c[key]).numpy().reshape(-1)
    return frame


def sweep_frames(settings: dict, work_dir: str | None = None, pool=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Train every group of ``settings`` (see ``expand_groups``); returns (one row per run, curves).

    With ``work_dir`` (a compute job's resume folder) each finished group's frames are kept there
    (``featlearn.training.save_part``, keyed by the settings, the group's n and its runs), and a group kept by an
    earlier, killed run of the same job under the same run identity is loaded instead of trained: groups share
    nothing (each run's data, init and shuffles come from its own seed), so the tables equal an uninterrupted
    run's. The group being trained when the job was killed takes up from its last checkpoint (``train_group``: one
    every ``CHECKPOINT_SECONDS`` of its training), which goes once its frames are kept. With ``pool``
    (:func:`group_pool`) the groups train in its processes, several at once."""
    return collect_frames(sweep_parts(settings, work_dir, pool))


def sweep_parts(settings: dict, work_dir: str | None = None, pool=None) -> list:
    """Each group's frames of ``settings`` (``sweep_frames``), in the groups' order: loaded from ``work_dir``, trained
    here, or, with a ``pool``, a future of them, so that a caller can start the groups of several sweeps before it
    waits for any (``collect_frames``)."""
    from featlearn.training import load_part

    parts = []
    for group in expand_groups(settings):
        key = {"sweep": settings, "n": group.n, "runs": [[r.seed, r.lr, r.variant] for r in group.runs]}
        frames = load_part(work_dir, key, log=_log) if work_dir else None
        if frames is not None:
            _log(f"resuming: [templates] {group.task.name} {group.arch} n={group.n} R={len(group.runs)} was finished "
                 "by an earlier run of this job; loaded")
            parts.append(frames)
        elif pool is None:
            parts.append(_trained_frames(group, work_dir, key))
        else:
            parts.append(pool.submit(group_work(group), _trained_frames, group, work_dir, key))
    return parts


def collect_frames(parts: list) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(one row per run, curves) of ``sweep_parts``'s parts, waiting for those still training."""
    frames = [p.result() if isinstance(p, _Queued) else p for p in parts]
    return pd.concat([f[0] for f in frames], ignore_index=True), pd.concat([f[1] for f in frames], ignore_index=True)


def _trained_frames(group: Group, work_dir: str | None, key: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Train one group and keep its frames in ``work_dir`` (its checkpoint goes: the frames stand for it now)."""
    from featlearn.training import remove_part, save_part

    res = train_group(group, work_dir, key)
    frames = (_group_frame(group, res), _curve_frame(group, res))
    if work_dir:
        save_part(work_dir, key, frames)
        remove_part(work_dir, checkpoint_key(key))
    return frames


def _pool_worker() -> None:
    """Set up a process of :func:`group_pool`: one torch thread, freed memory kept, as a 1-thread compute job."""
    from featlearn.allocator import keep_freed_memory

    keep_freed_memory()
    torch.set_num_threads(1)


class _Queued:
    """A group's frames to come from a :class:`GroupQueue`: ``result()`` starts the queue (once) and waits."""

    def __init__(self, queue: "GroupQueue"):
        self._queue = queue
        self.future: Future | None = None

    def result(self):
        self._queue.start()
        return self.future.result()


class GroupQueue:
    """The groups of a job, queued on a process pool and handed to it costliest first (:func:`group_work`) when the
    first result is asked for: so the longest groups do not come last, when the other workers have nothing left to
    take. Groups queued after that go to the pool at once. The order changes no result: each group trains alone."""

    def __init__(self, pool: ProcessPoolExecutor):
        self.pool = pool
        self._waiting: list[tuple[float, _Queued, tuple]] = []
        self.started = False

    def submit(self, work: float, fn, *args) -> _Queued:
        queued = _Queued(self)
        if self.started:
            queued.future = self.pool.submit(fn, *args)
        else:
            self._waiting.append((work, queued, (fn, *args)))
        return queued

    def start(self) -> None:
        if self.started:
            return
        self.started = True
        from featlearn.pipeline.order import work_order  # the order the estimate schedules (ties as queued)

        for _, (queued, call) in work_order([(w, (q, c)) for w, q, c in self._waiting]):
            queued.future = self.pool.submit(*call)
        self._waiting = []

    def order(self) -> list[float]:
        """The works of the groups still waiting, in the order they will be submitted (largest first)."""
        return sorted((w for w, _, _ in self._waiting), reverse=True)


@contextlib.contextmanager
def group_pool(workers: int, device: str = "cpu"):
    """A :class:`GroupQueue` on ``workers`` processes of one torch thread each, in which a CPU job trains that many
    sweep groups at once, costliest first (None for one worker or a GPU job: the groups train one after another in
    the job's process, in their order).

    Groups share nothing, and each trains on one thread in either case, so the tables of a job of any ``threads``
    are byte-identical to those of a 1-thread job (tested); the job's peak memory is that of its largest groups
    at once. A job of many small groups on a machine with cores to spare is what gains (docs/performance.md)."""
    if workers <= 1 or torch.device(device).type != "cpu":
        yield None
        return
    ctx = multiprocessing.get_context("spawn")  # no fork of a process that holds torch's threads
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_pool_worker) as pool:
        try:
            yield GroupQueue(pool)
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run_sweep(settings: dict, out: str, curves_out: str | None = None) -> pd.DataFrame:
    """Train a sweep and write its per-run table to ``out`` (and the curves to ``curves_out``)."""
    runs, curves = sweep_frames(settings)
    write_csv(runs, out)
    if curves_out is not None:
        write_csv(curves, curves_out)
    return runs


# --------------------------------------------------------------------------------------- table helpers


