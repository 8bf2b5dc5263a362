"""JoMA Table 1: do MLP neurons of a 3-layer transformer learn the latents of the hierarchy?

Model (Sec. 6 [P]; block layout of the authors' public code [C]), tokens x_1..x_T, no positional
embedding:
    e_t = E[x_t]                                               embedding(M, d)
    block s = 0, 1, 2 (one head, no output projection):
        a_t = sum_{t' <= t} softmax_t'(q_t . k_t' / sqrt(d)) v_t',  q, k, v = W_q e, W_k e, W_v e
        f_t = LN(e_t + a_t)                                     residual + post-LN
        h_t = ReLU(W_1 f_t + b_1)                               d -> d_hidden (the neurons of level s)
        e_t <- LN(f_t + W_2 h_t + b_2)                          d_hidden -> d, residual + post-LN
    logits = W_out e_T + b_out                                 linear classifier on the last position
Loss: cross-entropy of the class. A batch of B samples has C distinct sequences (the generator is
deterministic given the class), so its loss is computed exactly as sum_c n_c CE(class c) / B with n_c
the batch's class counts: one forward pass per class instead of per sample [D].
NCorr at level s [P, C]: hidden = h of block s max-pooled over the T positions, on fresh samples;
    corr(latent i, neuron k) = cosine of the indicator of latent i and neuron k after centring each
    over the samples; NCorr_s = mean over latents i of max_k corr(i, k).
Latents whose indicator is constant over the evaluation samples (never or always active: a latent no
class reaches) have no correlation and are left out of the mean [D]; their number is in the table.
Paper settings: M = 100, T = 30, d = 1024, Adam lr 1e-5, 5 seeds [P]; 10,000 steps of batch 128, weight
decay 1e-4 [C] (the authors' table script kept lr 1e-4 runs); the MLP width 4M = 400 of the authors' Table 1
command [C] (the reference said 4d, their code's default); evaluation on 1,280 fresh samples [C].
Training: Adam, constant learning rate, optional weight decay, fresh class labels every step. The
seeds of one grid cell train either in a loop or together (vectorise): their parameters stacked and
one vmap'ed forward and backward pass (torch.func.functional_call) serving all, the same computation
as separate runs because Adam is element-wise.
CUDA graphs (config ``joma.table1.cuda_graphs``; only on a CUDA device, for the vectorised trainer): the training
step (the vmap'ed forward over the batch's class counts, the backward and a fused, capturable Adam) is
:func:`_graph_step`, captured once and replayed (``featlearn.cudagraphs``); the class counts are drawn ahead by
the same generators in the same order and moved to the device many steps at a time, and logged steps read the
losses between replays, at the same steps as the eager loop. The graph-safe step computes what the eager step
computes up to float rounding (fused Adam against the default one; tested on the CPU, where it runs uncaptured).
On a CPU, or with ``vectorise: false``, the switch does nothing: the eager step runs and tables are unchanged.
Resume (a compute job's resume folder): the trainer keeps its state after a step once ``CHECKPOINT_SECONDS`` have
passed since the last save (``featlearn.training.save_part``: parameters, optimiser state, step, the logged losses);
a rerun of a killed cell draws the class counts of the steps already trained again (the generators' draws are cheap
and this holds for the staged draws of the graph step too) and goes on from the saved step, so its table equals an
uninterrupted run's.
"""

from __future__ import annotations

import copy
import math
import sys
import time
from collections.abc import Callable

import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

from featlearn.cudagraphs import GraphedSteps, StagedBatches, captured, graph_safe_step
from featlearn.io import write_csv
from featlearn.joma.hierarchy import Hierarchy, cooccurrence, hblt_pair, hblt_rho0, make_hierarchy, sample_hblt, theorem5
from featlearn.seeding import derived_seed
from featlearn.keptwork import CHECKPOINT_SECONDS
from featlearn.training import load_part, remove_part, run_identity, save_part
from featlearn.training import progress as progress_line

# ----------------------------------------------------------------------------- model


class Block(nn.Module):
    def __init__(self, d: int, d_hidden: int):
        super().__init__()
        self.Wq, self.Wk, self.Wv = (nn.Linear(d, d, bias=False) for _ in range(3))
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.w1, self.w2 = nn.Linear(d, d_hidden), nn.Linear(d_hidden, d)

    def forward(self, e: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        T, d = e.shape[-2], e.shape[-1]
        scores = self.Wq(e) @ self.Wk(e).transpose(-1, -2) / math.sqrt(d)
        causal = torch.ones(T, T, dtype=torch.bool, device=e.device).tril()
        a = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1) @ self.Wv(e)
        f = self.ln1(e + a)
        h = F.relu(self.w1(f))
        return self.ln2(f + self.w2(h)), h


class HierTransformer(nn.Module):
    """forward(tokens [N, T]) -> (logits [N, n_classes], post-ReLU hiddens per block [N, T, d_hidden])."""

    def __init__(self, M: int, d: int, d_hidden: int, n_classes: int, n_layers: int = 3):
        super().__init__()
        self.embed = nn.Embedding(M, d)
        self.blocks = nn.ModuleList(Block(d, d_hidden) for _ in range(n_layers))
        self.out = nn.Linear(d, n_classes)

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        e = self.embed(tokens)
        hiddens = []
        for block in self.blocks:
            e, h = block(e)
            hiddens.append(h)
        return self.out(e[..., -1, :]), hiddens


def build_model(M: int, n_classes: int, cfg: dict, seed: int) -> HierTransformer:
    """PyTorch's default initialisation drawn from ``seed`` alone (the global RNG is left untouched)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(_init_seed(seed))
        return HierTransformer(M, cfg["d"], cfg["d_hidden"], n_classes, cfg["layers"])


def _init_seed(seed: int) -> int:
    return derived_seed(seed, 29)


def _data_seed(seed: int) -> int:
    return derived_seed(seed, 17)


def _eval_seed(seed: int) -> int:
    return derived_seed(seed, 41)


# ----------------------------------------------------------------------------- metric


def centred_cosine(a: torch.Tensor, b: torch.Tensor, eps: float = 1e-9) -> torch.Tensor:
    """[N, P] x [N, Q] -> [P, Q]: cosine of each column pair after centring over the N samples."""
    a = a.double() - a.double().mean(dim=0)
    b = b.double() - b.double().mean(dim=0)
    return (a.T @ b) / (a.norm(dim=0)[:, None] + eps) / (b.norm(dim=0)[None, :] + eps)


def ncorr(pooled: torch.Tensor, latents: torch.Tensor) -> tuple[float, int]:
    """NCorr of neurons ``pooled`` [N, K] with latent indicators ``latents`` [N, n]: mean over the
    non-constant latents of the best (largest) centred cosine over neurons; and how many latents count."""
    lat = latents.double()
    varying = lat.std(dim=0) > 0
    if not bool(varying.any()):
        return math.nan, 0
    best = centred_cosine(lat[:, varying], pooled).max(dim=1).values
    return float(best.mean()), int(varying.sum())


@torch.no_grad()
def level_ncorrs(model: nn.Module, hier: Hierarchy, labels: torch.Tensor) -> list[tuple[float, int]]:
    """NCorr per level s (block s against level-s latents) on the samples with these class labels.
    Samples of one class are identical, so each class is run once and its pooled hiddens repeated."""
    device = next(model.parameters()).device
    seq, active = hier.class_tables()
    _, hiddens = model(seq.to(device))
    out = []
    for s, h in enumerate(hiddens):
        if s >= len(active):
            break
        pooled = h.max(dim=1).values.cpu()  # max over positions -> [C, d_hidden]
        out.append(ncorr(pooled[labels], active[s][labels]))
    return out


@torch.no_grad()
def population_loss(model: nn.Module, hier: Hierarchy) -> float:
    """Expected cross-entropy under uniform classes: the mean over the C class sequences."""
    device = next(model.parameters()).device
    seq, _ = hier.class_tables()
    logits, _ = model(seq.to(device))
    return float(F.cross_entropy(logits.double(), torch.arange(hier.n_classes, device=device)))


def loss_floor(hier: Hierarchy) -> float:
    """Smallest reachable population loss: classes sharing one token sequence cannot be told apart,
    so a group of g such classes costs ln g each."""
    seq, _ = hier.class_tables()
    _, inverse, counts = torch.unique(seq, dim=0, return_inverse=True, return_counts=True)
    return float(counts[inverse].double().log().mean())


# ----------------------------------------------------------------------------- training


def _class_counts(C: int, batch: int, gen: torch.Generator) -> torch.Tensor:
    return torch.bincount(torch.randint(C, (batch,), generator=gen), minlength=C).double()


def _weighted_ce(logits: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """sum_c n_c CE(logits_c, c) / sum_c n_c: the mean loss of a batch with class counts n_c."""
    ce = F.cross_entropy(logits, torch.arange(logits.shape[0], device=logits.device), reduction="none")
    return (counts.to(ce.dtype) * ce).sum() / counts.sum()


def train(models: list[nn.Module], hiers: list[Hierarchy], seeds: list[int], cfg: dict, vectorise: bool = False,
          progress: bool = False, cuda_graphs: bool = False, capture: bool = True, work_dir: str | None = None,
          checkpoint_seconds: float = CHECKPOINT_SECONDS) -> list[list[float]]:
    """Train models[i] on hiers[i] in place (Adam, cfg: steps, batch, lr, wd, log_every); returns each
    run's batch losses at the logged steps. Runs share one vmap'ed pass when ``vectorise`` (on a 2-core
    CPU a plain loop over the runs measured faster: vmap turns the linear layers into slower bmm).
    With ``cuda_graphs`` the vectorised step is captured as a CUDA graph and replayed on a CUDA device; with
    ``capture=False`` the same graph-safe step runs uncaptured on any device (the CPU test of that step).

    With ``work_dir`` (a compute job's resume folder) the state is kept after a step once ``checkpoint_seconds``
    have passed since the last save, and a rerun goes on from there (module docstring); outside a compute job the
    kept state is removed at the end, inside one it stays until the workflow has accepted the cell's table
    (:mod:`featlearn.keptwork`)."""
    if not (len(models) == len(hiers) == len(seeds)):
        raise ValueError("models, hiers and seeds need one entry each per run")
    C = hiers[0].n_classes
    if any(h.n_classes != C for h in hiers):
        raise ValueError("runs trained together need the same number of classes")
    device = next(models[0].parameters()).device
    seqs = torch.stack([h.class_tables()[0] for h in hiers]).to(device)  # [R, C, T]
    gens = [torch.Generator().manual_seed(_data_seed(s)) for s in seeds]
    steps, log_every = cfg["steps"], cfg["log_every"]
    logs: list[list[float]] = [[] for _ in models]
    start = time.perf_counter()

    def host_counts() -> torch.Tensor:
        return torch.stack([_class_counts(C, cfg["batch"], g) for g in gens])  # [R, C]

    def counts() -> torch.Tensor:
        return host_counts().to(device)

    def log(step: int, losses: torch.Tensor) -> None:
        if step % log_every == 0 or step == steps - 1:
            for i, v in enumerate(losses.tolist()):
                logs[i].append(v)
            if progress:
                print(f"  step {step}/{steps}: loss {' '.join(f'{v:.4f}' for v in losses.tolist())} "
                      f"({progress_line(step + 1 - first, steps - 1 - step, time.perf_counter() - start)})",
                      file=sys.stderr, flush=True)

    vectorised = vectorise and len(models) > 1
    graph_safe = vectorised and graph_safe_step(cuda_graphs, device, capture)
    key = {"joma table1 cell": cfg, "seeds": list(seeds), "vectorised": vectorised, "graph_safe": graph_safe}
    saved = load_part(work_dir, key, log=lambda m: print(f"[joma table1] {m}", file=sys.stderr, flush=True)) \
        if work_dir else None
    first = 0 if saved is None else saved["step"]
    if saved is not None:
        for lst, kept in zip(logs, saved["logs"], strict=True):
            lst[:] = kept
        for _ in range(first):  # the class counts of the steps already trained, drawn again: the same stream
            host_counts()
        print(f"[joma table1] resuming at step {first} of {steps} from {work_dir}", file=sys.stderr, flush=True)
    saved_at = time.perf_counter()

    def keep(step: int, state: Callable[[], dict]) -> None:
        """After ``step``: save what a rerun needs (``state()``), once ``checkpoint_seconds`` have passed since the
        last save."""
        nonlocal saved_at
        if work_dir and step < steps - 1 and time.perf_counter() - saved_at >= checkpoint_seconds:
            save_part(work_dir, key, {"step": step + 1, "logs": logs, **_on_cpu(state())})
            saved_at = time.perf_counter()

    if vectorised:
        params, buffers = stack_module_state(models)
        base = copy.deepcopy(models[0]).to("meta")

        def run_loss(p, b, seq, n):
            logits, _ = functional_call(base, (p, b), (seq,))
            return _weighted_ce(logits, n)

        batched = vmap(run_loss)
        opt = graph_optimizer(params, cfg) if graph_safe else torch.optim.Adam(params.values(), lr=cfg["lr"],
                                                                              weight_decay=cfg["wd"])
        if saved is not None:
            with torch.no_grad():
                for name, p in params.items():
                    p.copy_(saved["params"][name])
            opt.load_state_dict(saved["opt"])
        if graph_safe:
            staged = StagedBatches(lambda: (host_counts(),), steps - first, device)
            loss_out = torch.zeros(len(models), dtype=next(iter(params.values())).dtype, device=device)

            def step_fn(n):
                _graph_step(batched, params, buffers, seqs, n, opt, loss_out)

            graph_step = GraphedSteps(step_fn) if captured(capture, device) else step_fn
            for step in range(first, steps):
                graph_step(*staged[step - first])
                log(step, loss_out)  # reads the losses at logged steps only, between replays
                keep(step, lambda: {"params": params, "opt": opt.state_dict()})
        else:
            for step in range(first, steps):
                losses = batched(params, buffers, seqs, counts())
                opt.zero_grad(set_to_none=True)
                losses.sum().backward()  # runs do not share parameters: each gets its own gradient
                opt.step()
                log(step, losses.detach())
                keep(step, lambda: {"params": params, "opt": opt.state_dict()})
        with torch.no_grad():
            for i, m in enumerate(models):
                for name, p in m.named_parameters():
                    p.copy_(params[name][i])
    else:
        opts = [torch.optim.Adam(m.parameters(), lr=cfg["lr"], weight_decay=cfg["wd"]) for m in models]
        if saved is not None:
            for m, opt, m_state, opt_state in zip(models, opts, saved["models"], saved["opts"], strict=True):
                m.load_state_dict(m_state)
                opt.load_state_dict(opt_state)
        for step in range(first, steps):
            n = counts()
            losses = []
            for i, (m, opt) in enumerate(zip(models, opts)):
                logits, _ = m(seqs[i])
                loss = _weighted_ce(logits, n[i])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                losses.append(loss.detach())
            log(step, torch.stack(losses))
            keep(step, lambda: {"models": [m.state_dict() for m in models], "opts": [o.state_dict() for o in opts]})
    if work_dir and not run_identity():  # inside a compute job, the workflow removes it (featlearn.keptwork)
        remove_part(work_dir, key)
    return logs


def _on_cpu(obj):
    """A copy of ``obj`` (dicts, lists, tuples of tensors and numbers) with every tensor detached onto the CPU."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return {k: _on_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_on_cpu(v) for v in obj)
    return obj


def graph_optimizer(params: dict[str, torch.Tensor], cfg: dict) -> torch.optim.Adam:
    """The graph-safe step's Adam: the same update (lr, L2 weight decay, default betas and eps), fused into one
    kernel per step and capturable (its step count and bias corrections stay on the device)."""
    return torch.optim.Adam(params.values(), lr=cfg["lr"], weight_decay=cfg["wd"], fused=True, capturable=True)


def _graph_step(batched, params, buffers, seqs, counts, opt, loss_out) -> None:
    """One vectorised training step that a CUDA graph can hold (no host sync, no Python number that changes
    between steps): the runs' losses on the batch's class ``counts`` [R, C], their gradients, the optimiser's
    step (:func:`graph_optimizer`); the losses go to ``loss_out``. The eager vectorised step's computation."""
    losses = batched(params, buffers, seqs, counts)
    opt.zero_grad(set_to_none=True)
    losses.sum().backward()
    opt.step()
    loss_out.copy_(losses.detach())


# ----------------------------------------------------------------------------- compute API


def table1_cell(cfg: dict, inputs: dict, outputs: dict, ctx) -> None:
    """Train one grid cell (C, n_ch, n0, n1) for all its seeds; write NCorr per level for the trained
    and the untrained network (same init, same evaluation samples).

    cfg: C, n_ch, n0, n1, seeds, M, T, d, d_hidden, layers, steps, batch, lr, wd, eval_samples,
         log_every, vectorise, cuda_graphs; the device is the job's (``ctx.device``).
    Output ``cell``, columns: C, n_ch, n0, n1, seed, trained, level, ncorr, n_latents (latents counted), final_loss
    (population loss of that network), loss_floor, duplicate_classes, d, d_hidden, steps, lr, wd.
    The same cfg gives the same table on the CPU (the run time goes to stderr and the benchmark).
    """
    device = ctx.device
    seeds = list(cfg["seeds"])
    hiers = [make_hierarchy([cfg["n0"], cfg["n1"]], cfg["C"], cfg["n_ch"], cfg["M"], cfg["T"], generator=s) for s in seeds]
    models = [build_model(cfg["M"], cfg["C"], cfg, s).to(device) for s in seeds]
    evals = [torch.randint(cfg["C"], (cfg["eval_samples"],), generator=torch.Generator().manual_seed(_eval_seed(s)))
             for s in seeds]
    cell = {k: cfg[k] for k in ("C", "n_ch", "n0", "n1")}
    print(f"joma table1 cell {cell}: {len(seeds)} seeds, d={cfg['d']}, {cfg['steps']} steps on {device}",
          file=sys.stderr, flush=True)
    if captured(cfg["cuda_graphs"], device) and not (cfg["vectorise"] and len(seeds) > 1):
        print("  cuda_graphs: only the vectorised trainer (vectorise: true, 2 or more seeds) captures its step; "
              "this cell trains eagerly", file=sys.stderr, flush=True)

    before = [(level_ncorrs(m, h, e), population_loss(m, h)) for m, h, e in zip(models, hiers, evals)]
    start = time.perf_counter()
    train(models, hiers, seeds, cfg, vectorise=cfg["vectorise"], progress=True, cuda_graphs=cfg["cuda_graphs"],
          work_dir=ctx.work_dir)
    print(f"  trained in {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
    after = [(level_ncorrs(m, h, e), population_loss(m, h)) for m, h, e in zip(models, hiers, evals)]

    rows = []
    for i, (s, h) in enumerate(zip(seeds, hiers)):
        extra = {"loss_floor": loss_floor(h), "duplicate_classes": h.duplicate_classes(), "d": cfg["d"],
                 "d_hidden": cfg["d_hidden"], "steps": cfg["steps"], "lr": cfg["lr"], "wd": cfg["wd"]}
        for trained, (levels, loss) in ((False, before[i]), (True, after[i])):
            for level, (value, n_lat) in enumerate(levels):
                rows.append({**cell, "seed": s, "trained": trained, "level": level, "ncorr": value, "n_latents": n_lat,
                             "final_loss": loss, **extra})
    df = pd.DataFrame(rows)
    mean = df.groupby(["level", "trained"])["ncorr"].mean()
    print("  NCorr (mean over seeds), untrained -> trained: "
          + "; ".join(f"s={s} {mean[(s, False)]:.3f} -> {mean[(s, True)]:.3f}" for s in sorted(df["level"].unique())),
          file=sys.stderr, flush=True)
    write_csv(df, outputs["cell"])


def hblt_tables(cfg: dict, inputs: dict, outputs: dict, ctx) -> None:
    """Theorem 5 by Monte Carlo: for each rho and depth H = 1..L-1, the empirical P[y_l=1 | y_m=1]
    (one token pair in subtree 0), its standard error, the theory, and n (samples with y_m = 1).

    cfg: rhos, L, n_classes, p_on, p_off, n_samples, seed.
    Output ``table``, columns: rho, L, H, rho0, empirical, se, theory, n, n_samples.
    """
    L = cfg["L"]
    rho0 = hblt_rho0(cfg["n_classes"], cfg["p_on"], cfg["p_off"])
    rows = []
    for k, rho in enumerate(cfg["rhos"]):
        leaves = sample_hblt(cfg["n_samples"], rho, L, cfg["n_classes"], cfg["p_on"], cfg["p_off"],
                             generator=cfg["seed"] + k)[:, 0]  # subtree 0
        for H in range(1, L):
            p, se, n = cooccurrence(leaves, *hblt_pair(H))
            rows.append({"rho": rho, "L": L, "H": H, "rho0": rho0, "empirical": p, "se": se, "theory": theorem5(rho, L, rho0, H),
                         "n": n, "n_samples": cfg["n_samples"]})
        print(f"joma hblt: rho={rho} done", file=sys.stderr, flush=True)
    write_csv(pd.DataFrame(rows), outputs["table"])
