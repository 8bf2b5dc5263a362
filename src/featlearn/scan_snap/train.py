"""Train many Scan-and-Snap runs at once: stacked parameters [R, M, M], one process, no per-run loop.

Runs that share a sequence-class layout (same M) are trained together. Each run has its own seed,
learning rates and init; runs with the same seed see the same data stream (one generator per seed),
so a run trained alone gives the same result as inside a batch.

CUDA graphs (``RunSet.cuda_graphs``, config ``scan_snap.cuda_graphs``; only on a CUDA device): the training step
(the batch of each run, the losses, their gradients and the SGD or Adam update) is :func:`_graph_step`, captured
once and replayed (``featlearn.cudagraphs``); the step count and Adam's bias corrections live on the device, and
the batches are drawn ahead by the same generators in the same order and moved to the device many steps at a
time. Logged steps read the loss and Z between replays, at the same steps as the eager loop. The graph-safe step
computes what the eager step computes up to float rounding (tested on the CPU, where it runs uncaptured); on a
CPU the switch does nothing: the eager step runs and tables are unchanged.
"""

from __future__ import annotations

import sys
import time
from dataclasses import KW_ONLY, dataclass, field

import torch

from featlearn.cudagraphs import GraphedSteps, StagedBatches, captured, graph_safe_step
from featlearn.scan_snap.data import SequenceClasses, sample_counts
from featlearn.scan_snap.model import class_composition, init_params, run_losses
from featlearn.seeding import derived_seed


@dataclass
class RunSet:
    """R runs of one layout. ``eta_z`` and ``eta_y`` are per-run learning rates. The training settings come from the
    job's settings (config ``scan_snap.syn_small``, ``adam``, ``syn_medium`` and ``cuda_graphs``); the fields with a
    default are not config keys: float64, the precision of the reparameterised model [D], and the CPU (a job passes
    its device)."""

    spec: SequenceClasses
    seeds: list[int]
    eta_z: list[float]
    eta_y: list[float]
    _: KW_ONLY
    optimizer: str  # sgd (with momentum, dampening 0, no weight decay) or adam (torch's default betas)
    init: str  # zero or default (``featlearn.scan_snap.model.init_params``)
    batch: int
    iterations: int
    log_every: int
    momentum: float | None  # SGD's momentum; None for Adam
    cuda_graphs: bool  # capture the training step as a CUDA graph (CUDA only; see the module docstring)
    dtype: torch.dtype = torch.float64
    device: str = "cpu"  # data are sampled on the CPU (seeded generators) and moved to the device

    def __post_init__(self):
        R = len(self.seeds)
        if not (len(self.eta_z) == len(self.eta_y) == R):
            raise ValueError("seeds, eta_z and eta_y need one entry per run")
        if self.optimizer not in ("sgd", "adam"):
            raise ValueError(f"unknown optimizer {self.optimizer!r}")
        if (self.momentum is None) != (self.optimizer == "adam"):
            raise ValueError("SGD needs a momentum and Adam takes none (momentum None)")


@dataclass
class History:
    steps: list[int] = field(default_factory=list)
    loss: list[torch.Tensor] = field(default_factory=list)  # [R] per logged step (loss of that step's batch)
    composition: list[torch.Tensor] = field(default_factory=list)  # [R, K, M] per logged step
    z_query: list[torch.Tensor] = field(default_factory=list)  # Z[r, psi(n), :], [R, K, M]
    final_loss: torch.Tensor | None = None
    seconds: float = 0.0


def _data_seed(seed: int) -> int:
    return derived_seed(seed, 17)


def _init_seed(seed: int) -> int:
    return derived_seed(seed, 29)


def train(runs: RunSet, progress: bool = False, capture: bool = True) -> History:
    """Train the R runs together; returns the logged steps (every ``log_every`` steps and the last).

    With ``runs.cuda_graphs`` on a CUDA device the step is captured as a CUDA graph and replayed; with
    ``capture=False`` the same graph-safe step runs uncaptured on any device (the CPU test of that step)."""
    spec, R = runs.spec, len(runs.seeds)
    distinct_seeds = sorted(set(runs.seeds))
    data_gens = {s: torch.Generator().manual_seed(_data_seed(s)) for s in distinct_seeds}
    run_of_seed = torch.tensor([distinct_seeds.index(s) for s in runs.seeds])
    dev = torch.device(runs.device)
    Y, Z = init_params(R, spec.M, runs.init, [torch.Generator().manual_seed(_init_seed(s)) for s in runs.seeds], runs.dtype)
    Y, Z = Y.to(dev).requires_grad_(True), Z.to(dev).requires_grad_(True)
    lr = {name: torch.tensor(v, dtype=runs.dtype, device=dev).view(R, 1, 1) for name, v in (("Y", runs.eta_y), ("Z", runs.eta_z))}
    state = {name: {"m": torch.zeros_like(p), "v": torch.zeros_like(p)} for name, p in (("Y", Y), ("Z", Z))}
    P = spec.probabilities().to(dev)
    queries_k, labels_k = spec.queries().to(dev), spec.labels().to(dev)
    hist = History()
    start = time.perf_counter()

    def log_params(step: int) -> None:
        with torch.no_grad():
            hist.steps.append(step)
            hist.composition.append(class_composition(Z, P, queries_k).cpu())
            hist.z_query.append(Z[:, queries_k, :].detach().cpu())

    def log(step: int, loss: torch.Tensor) -> None:
        log_params(step)
        hist.loss.append(loss.detach().cpu())

    def sample() -> tuple[torch.Tensor, torch.Tensor]:
        """One step's batches, one per distinct seed: classes [S, B] and counts [S, B, M] (float32)."""
        batches = [sample_counts(spec, runs.batch, data_gens[s]) for s in distinct_seeds]
        return torch.stack([b[0] for b in batches]), torch.stack([b[1] for b in batches])

    graph_safe = graph_safe_step(runs.cuda_graphs, dev, capture)
    if graph_safe:
        staged = StagedBatches(sample, runs.iterations + 1, dev)
        seed_index = run_of_seed.to(dev)
        t_dev = torch.zeros((), dtype=torch.float64, device=dev)  # the graph-safe steps' count, on the device
        loss_out = torch.zeros(R, dtype=runs.dtype, device=dev)  # each step's losses, read between replays

        def step_fn(classes, counts):
            _graph_step(runs, Y, Z, state, lr, t_dev, queries_k, labels_k, classes[seed_index], counts[seed_index], loss_out)

        graph_step = GraphedSteps(step_fn) if captured(capture, dev) else step_fn
        for step in range(runs.iterations):
            logged = step % runs.log_every == 0
            if logged:
                log_params(step)  # Z before this step's update, as the eager loop logs it
            graph_step(*staged[step])
            if logged:
                hist.loss.append(loss_out.to("cpu", copy=True))  # (a copy: the next step rewrites loss_out)
            if progress and step % 20 == 0:
                _progress(spec, R, step, runs.iterations, loss_out)
        classes, counts = (x[seed_index] for x in staged[runs.iterations])
        losses = run_losses(Y, Z, queries_k[classes], counts.to(runs.dtype), labels_k[classes])
        log(runs.iterations, losses)
        hist.final_loss = losses.detach().cpu()
    else:
        for step in range(runs.iterations + 1):
            batches = [sample_counts(spec, runs.batch, data_gens[s]) for s in distinct_seeds]
            classes = torch.stack([b[0] for b in batches])[run_of_seed].to(dev)
            counts = torch.stack([b[1] for b in batches])[run_of_seed].to(dev, runs.dtype)
            losses = run_losses(Y, Z, queries_k[classes], counts, labels_k[classes])
            if step % runs.log_every == 0 or step == runs.iterations:
                log(step, losses)
            if step == runs.iterations:
                hist.final_loss = losses.detach().cpu()
                break
            gY, gZ = torch.autograd.grad(losses.sum(), (Y, Z))  # runs are independent: sum = per-run grads
            t = step + 1
            with torch.no_grad():
                _update(runs, Y, Z, gY, gZ, state, lr, 1 - 0.9**t, (1 - 0.999**t) ** 0.5)
            if progress and step % 20 == 0:
                _progress(spec, R, step, runs.iterations, losses)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    hist.seconds = time.perf_counter() - start
    return hist


def _progress(spec: SequenceClasses, R: int, step: int, iterations: int, losses: torch.Tensor) -> None:
    print(f"[scan_snap] K={spec.K} R={R} step {step}/{iterations} mean loss {losses.mean():.4f}", file=sys.stderr, flush=True)


def _update(runs: RunSet, Y, Z, gY, gZ, state, lr, bc1, sqrt_bc2) -> None:
    """The optimiser's update of Y and Z given their gradients. SGD: torch.optim.SGD with momentum, dampening 0.
    Adam: torch.optim.Adam, betas (0.9, 0.999), eps 1e-8, with the bias corrections 1 - 0.9^t and sqrt(1 - 0.999^t)
    given as Python numbers (the eager step) or device tensors (the graph-safe step)."""
    for name, p, g in (("Y", Y, gY), ("Z", Z, gZ)):
        st = state[name]
        if runs.optimizer == "sgd":
            st["m"].mul_(runs.momentum).add_(g)
            p.sub_(lr[name] * st["m"])
        else:
            st["m"].mul_(0.9).add_(g, alpha=0.1)
            st["v"].mul_(0.999).addcmul_(g, g, value=0.001)
            denom = (st["v"].sqrt() / sqrt_bc2).add_(1e-8)
            p.sub_(lr[name] / bc1 * st["m"] / denom)


def _graph_step(runs: RunSet, Y, Z, state, lr, t, queries_k, labels_k, classes, counts, loss_out) -> None:
    """One training step that a CUDA graph can hold: no host sync, no Python number that changes between steps.
    ``classes`` [R, B] and ``counts`` [R, B, M] (as sampled, float32) are the runs' batch; the step count ``t`` (a
    0-d tensor) is advanced on the device and Adam's bias corrections are computed from it; the step's losses
    (before its update) are written to ``loss_out``. Same update as the eager step."""
    losses = run_losses(Y, Z, queries_k[classes], counts.to(runs.dtype), labels_k[classes])
    gY, gZ = torch.autograd.grad(losses.sum(), (Y, Z))
    with torch.no_grad():
        loss_out.copy_(losses)
        bc1 = sqrt_bc2 = None
        if runs.optimizer == "adam":
            t.add_(1)
            bc1 = (1 - torch.pow(torch.full_like(t, 0.9), t)).to(runs.dtype)
            sqrt_bc2 = torch.sqrt(1 - torch.pow(torch.full_like(t, 0.999), t)).to(runs.dtype)
        _update(runs, Y, Z, gY, gZ, state, lr, bc1, sqrt_bc2)
