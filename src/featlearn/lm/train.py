"""Train a transformer LM with logged validation loss, per-layer attention entropy, per-layer stable rank
of the feed-forward up-projection (``linear1``, JoMA Fig. 7's measure on our own checkpoints) and
attention maps.

The budget is ``iterations`` steps, or ``epochs`` passes over the training stream when that is set (the
papers' own unit; the step count then follows from the prepared data). ``reset_optimizer_each_epoch``
clears the optimiser's state at every epoch boundary, as the JoMA authors' script does (it builds a new Adam
at each epoch). ``val_windows`` of None evaluates on the whole validation split.

Tables (long format) are written when training ends; a resume checkpoint is written atomically every
``checkpoint_every`` iterations and at least every 10 minutes (``featlearn.training.resumable_training``), so a killed
job continues from there when rerun (same result on CPU:
the model, optimiser, data position and random state are all restored).

CUDA graphs (``LMRun.cuda_graphs``; config ``joma.wikitext.cuda_graphs``, ``scan_snap.wikitext.cuda_graphs`` and
``features.lm.word.cuda_graphs``; only on a CUDA device): every step has the same shape (``batch_size`` streams of
``bptt`` tokens, the training stream already on the device), so :func:`train_step` (forward, backward, gradient
clipping, the optimiser's step) is captured once and replayed (``featlearn.cudagraphs``); each step copies its
window into the graph's inputs. Nothing in it syncs with the host: the clipping scales the gradients by a device
tensor, SGD's learning rates are constants, and Adam is PyTorch's fused, capturable one (its step counts on the
device). Evaluations, checkpoints and logged values run between replays, at the same steps as the eager loop; a
resumed run restores the same state (the optimiser's step counts onto the device) and captures again after 3
eager steps. ``reset_optimizer_each_epoch`` zeroes the optimiser's state in place (the captured step keeps
using those tensors), which is what a fresh optimiser starts from. The graph-safe step is the eager step with
SGD, and computes it up to float rounding with Adam (fused against the default); on a CPU the switch does
nothing: the eager step runs and tables are unchanged.
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict, dataclass

import pandas as pd
import torch
import torch.nn.functional as F

from featlearn.cudagraphs import GraphedSteps, captured, graph_safe_step
from featlearn.lm.attention import attention_entropy
from featlearn.lm.data import batchify, get_batch, num_batches
from featlearn.lm.loss import next_token_loss
from featlearn.lm.model import LMConfig, TransformerLM
from featlearn.lm.rank import stable_rank
from featlearn.training import resumable_training


@dataclass(frozen=True, kw_only=True)
class LMRun:
    """One training run. Every value comes from the run's settings (the config); the fields with a default are
    those whose default means "off": no separate feed-forward learning rate, a budget in iterations, the
    optimiser kept across epochs, the first validation window's attention maps, no CUDA graphs."""

    n_layer: int
    n_head: int
    d_model: int
    d_ff: int
    dropout: float
    optimizer: str  # sgd (no momentum) or adam
    lr: float
    ffn_lr: float | None = None  # SGD only: learning rate of the feed-forward weights (default: lr)
    clip: float
    batch_size: int
    bptt: int
    iterations: int
    epochs: float | None = None  # when set, the budget is this many passes over the training stream
    reset_optimizer_each_epoch: bool = False
    log_every: int
    checkpoint_every: int
    val_windows: int | None  # None: the whole validation split
    eval_batch_size: int
    probe_window: int = 0  # index of the fixed validation window whose attention maps are recorded
    seed: int
    cuda_graphs: bool = False  # capture the training step as a CUDA graph (CUDA only; module docstring)


def make_optimizer(model: TransformerLM, optimizer: str, lr: float, ffn_lr: float | None = None,
                   graph_safe: bool = False) -> torch.optim.Optimizer:
    """Adam, or SGD without momentum with its own learning rate for the feed-forward weights (``ffn_lr``, None: ``lr``).
    ``graph_safe``: the optimiser of a step captured as a CUDA graph: Adam fused and capturable (its step counts and
    bias corrections on the device); SGD as it is (no state, constant learning rates). The eager Adam stays PyTorch's
    default: the fused one, 1.3x faster on a CPU, moved one JoMA Fig. 6 claim across its threshold at the default scale
    (docs/performance.md, "The LM step's cross-entropy and Adam")."""
    if optimizer == "adam":
        if graph_safe:
            return torch.optim.Adam(model.parameters(), lr=lr, fused=True, capturable=True)
        return torch.optim.Adam(model.parameters(), lr=lr)
    if optimizer != "sgd":
        raise ValueError(f"unknown optimizer {optimizer!r}")
    ffn = {id(p) for p in model.ffn_parameters()}
    groups = [{"params": [p for p in model.parameters() if id(p) not in ffn], "lr": lr}]
    groups.append({"params": model.ffn_parameters(), "lr": ffn_lr if ffn_lr is not None else lr})
    return torch.optim.SGD(groups, lr=lr)


@torch.no_grad()
def _evaluate(model: TransformerLM, valid: torch.Tensor, run: LMRun) -> tuple[float, torch.Tensor, list[torch.Tensor]]:
    """Validation loss and per-layer mean attention entropy over the first ``val_windows`` windows (all of
    them when it is None), and the attention maps of the probe window (first column)."""
    model.eval()
    losses, ents, probe = [], [], None
    n = num_batches(valid, run.bptt) if run.val_windows is None else min(run.val_windows, num_batches(valid, run.bptt))
    for i in range(n):
        x, y = get_batch(valid, i, run.bptt)
        logits, maps = model(x)
        losses.append(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).item())
        ents.append(torch.stack([attention_entropy(a).mean() for a in maps]))
        if i == run.probe_window:
            probe = [a[0].mean(dim=0).cpu() for a in maps]  # first sequence, mean over heads: [T, T]
    model.train()
    return sum(losses) / len(losses), torch.stack(ents).mean(dim=0).cpu(), probe


def train_step(model: TransformerLM, opt: torch.optim.Optimizer, clip: float, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """One training step on inputs ``x`` and targets ``y`` [batch, bptt]: the loss, its gradients clipped to norm
    ``clip``, the optimiser's step; returns the loss (detached, on the device). Nothing syncs with the host, so a
    CUDA graph can hold it with a graph-safe optimiser (:func:`make_optimizer`)."""
    logits, _ = model(x)
    loss = next_token_loss(logits, y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    opt.step()
    return loss.detach()


def zero_optimizer_state(opt: torch.optim.Optimizer) -> None:
    """Reset an optimiser to its fresh state in place (moments and step counts zero), keeping its state tensors:
    what ``opt.state.clear()`` does for an eager step, for a step a CUDA graph holds."""
    for state in opt.state.values():
        for value in state.values():
            if isinstance(value, torch.Tensor):
                value.zero_()


def run_length(iterations: int, epochs: float | None, per_epoch: int) -> int:
    """Training steps of a run: ``iterations``, or ``epochs`` x ``per_epoch`` rounded when ``epochs`` is set."""
    if epochs is None:
        return iterations
    if epochs <= 0:
        raise ValueError(f"epochs must be positive, got {epochs}")
    return max(1, round(epochs * per_epoch))


def train_lm(run: LMRun, train_ids: torch.Tensor, valid_ids: torch.Tensor, vocab: int, work_dir: str | os.PathLike,
             device: str = "cpu", tag: str = "", capture: bool = True) -> dict[str, pd.DataFrame]:
    """Train one LM (resumable: :func:`featlearn.training.resumable_training`); returns its log and
    attention-map tables and the trained model. With ``run.cuda_graphs`` on a CUDA device the step is captured as a
    CUDA graph and replayed; with ``capture=False`` the same graph-safe step runs uncaptured on any device (the CPU
    test of that step)."""
    dev = torch.device(device)
    torch.manual_seed(run.seed)
    model = TransformerLM(LMConfig(vocab, run.d_model, run.d_ff, run.n_head, run.n_layer, run.dropout)).to(dev)
    graph_safe = graph_safe_step(run.cuda_graphs, dev, capture)
    opt = make_optimizer(model, run.optimizer, run.lr, run.ffn_lr, graph_safe=graph_safe)
    train = batchify(train_ids, run.batch_size).to(dev)
    valid = batchify(valid_ids, run.eval_batch_size).to(dev)
    per_epoch = num_batches(train, run.bptt)
    total = run_length(run.iterations, run.epochs, per_epoch)
    log_rows: list[dict] = []
    map_rows: list[pd.DataFrame] = []

    def say(message: str) -> None:
        print(f"[lm{tag}] {message}", file=sys.stderr, flush=True)

    def record(step: int, train_loss: float | None) -> None:
        val_loss, ents, probe = _evaluate(model, valid, run)
        log_rows.append({"step": step, "metric": "val_loss", "layer": -1, "value": val_loss})
        if train_loss is not None:
            log_rows.append({"step": step, "metric": "train_loss", "layer": -1, "value": train_loss})
        for layer, e in enumerate(ents.tolist()):
            log_rows.append({"step": step, "metric": "attention_entropy", "layer": layer, "value": e})
        for layer, block in enumerate(model.layers):
            log_rows.append({"step": step, "metric": "stable_rank", "layer": layer, "value": stable_rank(block.linear1.weight)})
        if probe is not None:
            for layer, a in enumerate(probe):
                T = a.shape[0]
                ii, jj = torch.meshgrid(torch.arange(T), torch.arange(T), indexing="ij")
                map_rows.append(pd.DataFrame({"step": step, "layer": layer, "i": ii.reshape(-1).numpy(),
                                              "j": jj.reshape(-1).numpy(), "a": a.reshape(-1).numpy()}))
        say(f"iteration {step}/{total} (epoch {step / per_epoch:.2f}) val loss {val_loss:.3f} "
            f"entropy {[round(e, 3) for e in ents.tolist()]}")

    if graph_safe:
        loss_out = torch.zeros((), device=dev)  # each step's loss, read between replays

        def graph_step(x: torch.Tensor, y: torch.Tensor) -> None:
            loss_out.copy_(train_step(model, opt, run.clip, x, y))

        stepper = GraphedSteps(graph_step) if captured(capture, dev) else graph_step

    def step(i: int) -> torch.Tensor:
        if run.reset_optimizer_each_epoch and i > 1 and (i - 1) % per_epoch == 0:
            # a fresh optimiser (moments and step counts) at the start of each epoch
            if graph_safe:
                zero_optimizer_state(opt)
            else:
                opt.state.clear()
        x, y = get_batch(train, (i - 1) % per_epoch, run.bptt)
        if graph_safe:
            stepper(x, y)
            return loss_out  # (the loop adds it to its running sum before the next step rewrites it)
        return train_step(model, opt, run.clip, x, y)  # summed on the device (no host sync per step)

    def load_log(logged: dict) -> None:
        log_rows[:] = logged["log_rows"]
        map_rows[:] = [pd.DataFrame(m) for m in logged["map_rows"]]

    resumable_training(
        model, opt, total=total, step=step, record=record, eval_every=run.log_every,
        checkpoint_every=run.checkpoint_every, work_dir=work_dir, settings=asdict(run), device=dev,
        save_log=lambda: {"log_rows": log_rows, "map_rows": [m.to_dict("list") for m in map_rows]},
        load_log=load_log, log=say,
    )
    return {"log": pd.DataFrame(log_rows), "maps": pd.concat(map_rows, ignore_index=True) if map_rows else pd.DataFrame(),
            "model": model}


def train_from_files(
    settings: dict, train_pt: str, valid_pt: str, vocab_json: str, work_dir: str, device: str, tag: str = ""
) -> dict:
    """Train on a prepared LM dataset (token tensors and vocabulary written by ``data-prepare``)."""
    import json

    from featlearn.io import load_tensor

    with open(vocab_json, encoding="utf-8") as fh:
        vocab = len(json.load(fh))
    print(f"[lm{tag}] settings {settings}", file=sys.stderr, flush=True)
    return train_lm(LMRun(**settings), load_tensor(train_pt), load_tensor(valid_pt), vocab, work_dir, device=device, tag=tag)
