"""Train many Scan-and-Snap runs at once: stacked parameters [R, M, M], one process, no per-run loop.

Runs that share a sequence-class layout (same M) are trained together. Each run has its own seed,
learning rates and init; runs with the same seed see the same data stream (one generator per seed),
so a run trained alone gives the same result as inside a batch.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

import torch

from featlearn.scan_snap.data import SequenceClasses, sample_counts
from featlearn.scan_snap.model import class_composition, init_params, run_losses
from featlearn.seeding import derived_seed


@dataclass
class RunSet:
    """R runs of one layout. ``eta_z`` and ``eta_y`` are per-run learning rates."""

    spec: SequenceClasses
    seeds: list[int]
    eta_z: list[float]
    eta_y: list[float]
    optimizer: str = "sgd"  # sgd (momentum 0.9, no weight decay) or adam (default betas)
    init: str = "zero"
    batch: int = 128
    iterations: int = 100
    log_every: int = 2
    momentum: float = 0.9
    dtype: torch.dtype = torch.float64
    device: str = "cpu"  # data are sampled on the CPU (seeded generators) and moved to the device

    def __post_init__(self):
        R = len(self.seeds)
        if not (len(self.eta_z) == len(self.eta_y) == R):
            raise ValueError("seeds, eta_z and eta_y need one entry per run")
        if self.optimizer not in ("sgd", "adam"):
            raise ValueError(f"unknown optimizer {self.optimizer!r}")


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


def train(runs: RunSet, progress: bool = False) -> History:
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

    def log(step: int, loss: torch.Tensor) -> None:
        with torch.no_grad():
            hist.steps.append(step)
            hist.loss.append(loss.detach().cpu())
            hist.composition.append(class_composition(Z, P, queries_k).cpu())
            hist.z_query.append(Z[:, queries_k, :].detach().cpu())

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
        with torch.no_grad():
            for name, p, g in (("Y", Y, gY), ("Z", Z, gZ)):
                st = state[name]
                if runs.optimizer == "sgd":  # torch.optim.SGD with momentum, dampening 0
                    st["m"].mul_(runs.momentum).add_(g)
                    p.sub_(lr[name] * st["m"])
                else:  # torch.optim.Adam, betas (0.9, 0.999), eps 1e-8
                    t = step + 1
                    st["m"].mul_(0.9).add_(g, alpha=0.1)
                    st["v"].mul_(0.999).addcmul_(g, g, value=0.001)
                    denom = (st["v"].sqrt() / (1 - 0.999**t) ** 0.5).add_(1e-8)
                    p.sub_(lr[name] / (1 - 0.9**t) * st["m"] / denom)
        if progress and step % 20 == 0:
            print(f"[scan_snap] K={spec.K} R={R} step {step}/{runs.iterations} mean loss {losses.mean():.4f}", file=sys.stderr,
                  flush=True)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    hist.seconds = time.perf_counter() - start
    return hist
