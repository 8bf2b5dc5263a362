"""Language models as classifiers over the vocabulary (Sun, Li, Lu 2023, Sec. 5.1 and App. C.1; Figs. 5, 7).

A language model's output before the softmax is a label score for every token of the vocabulary. For
each of the ``n_frequent`` most frequent tokens of the training split, the token is fed alone and the
next-token logits of its top-k and bottom-k co-occurring tokens are read ([P]: k = 30 for the word
models on PTB and WikiText-2, k = 5 for the character GPT on Tiny Shakespeare).

Co-occurrence of (a, b) = the number of times b directly follows a in the training stream (bigram count).
- top-k of a: the k tokens with the largest count after a (ties: lower token id first);
- bottom-k of a [D]: among the other tokens that follow a at least once, the k with the smallest count;
  ties (many tokens follow a only once) go to the tokens that are most frequent overall, so the bottom
  group is not simply the rarest tokens of the vocabulary and the comparison measures co-occurrence
  rather than overall frequency. Tokens never seen after a are not candidates: for a large vocabulary
  nearly all of them tie at zero and a pick among them would be arbitrary.

Models: Fig. 7 is the PyTorch-tutorial transformer of ``featlearn.lm`` (2 layers, 2 heads, d 200, ffn 200,
dropout 0.2, bptt 35, batch 20, SGD lr 5 with clipping 0.5; [P] App. C.1 and [C] the tutorial it cites),
with a causal mask. Fig. 5 is the character GPT of ``featlearn.features.gpt`` trained as nanoGPT's
quick start does ([C]: AdamW betas (0.9, 0.99), weight decay 0.1 on matrices, linear warm-up then cosine
decay to ``min_lr``, gradient clipping 1.0, random windows of ``block_size`` characters).

CUDA graphs of the character GPT's step (``CharRun.cuda_graphs``, config ``features.lm.char.cuda_graphs``; only on
a CUDA device): every step has one shape, so the step (windows gathered from the training stream on the device,
forward, backward, clipping, AdamW) is captured once and replayed (``featlearn.cudagraphs``). Its window starts are
drawn on the host by the same seeded generator, in the same order, as the eager step draws them, and copied to the
graph's input; its learning rate is a device tensor the loop sets before each replay (the schedule changes it every
step), and AdamW is PyTorch's fused, capturable one. The generator's state saved with a checkpoint is the eager
loop's, so a resumed run draws what an uninterrupted one draws. On a CPU the switch does nothing (the eager step
runs, tables unchanged); the graph-safe step run uncaptured computes the eager step up to float rounding (tested).
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from featlearn.cudagraphs import GraphedSteps, captured, graph_safe_step, to_device
from featlearn.io import load_tensor, write_csv
from featlearn.lm.loss import next_token_loss
from featlearn.precision import full_precision
from featlearn.training import resumable_training

# token_count / target_count: occurrences in the training split; cooccurrence: times target follows token
LOGIT_COLUMNS = ("dataset", "token_rank", "token_id", "token", "token_count", "group", "target_id", "target", "target_count",
                 "cooccurrence", "logit")


# --- co-occurrence ---------------------------------------------------------------------------------


def frequent_tokens(ids: torch.Tensor, vocab_size: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``n`` most frequent token ids of a stream (ties: lower id first) and every token's count."""
    if ids.dim() != 1 or ids.numel() < 2:
        raise ValueError(f"expected a 1-d token stream of at least 2 tokens, got shape {tuple(ids.shape)}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    counts = np.bincount(ids.numpy(), minlength=vocab_size)
    if len(counts) > vocab_size:
        raise ValueError(f"token id {len(counts) - 1} is outside the vocabulary of {vocab_size}")
    present = np.flatnonzero(counts)
    order = present[np.lexsort((present, -counts[present]))]
    return order[:n], counts


def follower_counts(ids: torch.Tensor, token: int, vocab_size: int) -> np.ndarray:
    """count[b] = number of positions i with ids[i] == token and ids[i + 1] == b."""
    s = ids.numpy()
    return np.bincount(s[1:][s[:-1] == token], minlength=vocab_size)


def rank_followers(counts: np.ndarray, unigram: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(top-k, bottom-k) token ids by co-occurrence count, as defined in the module docstring.

    The two groups never overlap: with fewer than 2k observed followers the bottom group holds the
    followers left after the top group (possibly fewer than k, possibly none).
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if counts.shape != unigram.shape:
        raise ValueError(f"counts {counts.shape} and unigram {unigram.shape} differ in shape")
    observed = np.flatnonzero(counts)
    top = observed[np.lexsort((observed, -counts[observed]))][:k]
    rest = np.setdiff1d(observed, top)
    bottom = rest[np.lexsort((rest, -unigram[rest], counts[rest]))][:k]
    return top, bottom


@torch.no_grad()
def single_token_logits(
    model_fn: Callable[[torch.Tensor], torch.Tensor], tokens, device: str | torch.device = "cpu"
) -> torch.Tensor:
    """Next-token logits [n, vocab] of each token fed alone (a batch of length-1 sequences)."""
    idx = torch.as_tensor(np.asarray(tokens), dtype=torch.long, device=device).view(-1, 1)
    return model_fn(idx)[:, 0, :].float().cpu()


def cooccurrence_logits(
    model_fn, train_ids: torch.Tensor, vocab: list[str], n_frequent: int, k: int, dataset: str, device="cpu"
) -> pd.DataFrame:
    """The long table of Figs. 5/7: one row per (frequent token, group, target) with the model's logit."""
    V = len(vocab)
    tokens, unigram = frequent_tokens(train_ids, V, n_frequent)
    logits = single_token_logits(model_fn, tokens, device).numpy()
    rows = []
    for rank, (tok, row) in enumerate(zip(tokens, logits)):
        counts = follower_counts(train_ids, int(tok), V)
        for group, ids in zip(("top", "bottom"), rank_followers(counts, unigram, k)):
            for b in ids:
                rows.append((dataset, rank, int(tok), vocab[tok], int(unigram[tok]), group, int(b), vocab[b], int(unigram[b]),
                             int(counts[b]), float(row[b])))
    return pd.DataFrame(rows, columns=LOGIT_COLUMNS)


def read_vocab(path: str | os.PathLike) -> list[str]:
    from featlearn.data.prepare import read_vocab as _read

    return _read(path)


def _log(tag: str, msg: str) -> None:
    print(f"[features-lm{tag}] {msg}", file=sys.stderr, flush=True)


# --- Fig. 7: the tutorial transformer on PTB / WikiText-2 ----------------------------------------------

WORD_OPTIMIZER = "sgd"  # without momentum, at a constant learning rate (module docstring)
WORD_MODEL_KEYS = ("n_layer", "n_head", "d_model", "d_ff", "dropout", "lr", "clip", "batch_size", "bptt", "iterations",
                   "log_every", "checkpoint_every", "val_windows", "eval_batch_size", "seed")


def word_run(settings: dict, inputs: dict, outputs: dict, ctx) -> None:
    """Train the tutorial transformer on ``settings["dataset"]`` (resumable from ``ctx.work_dir``,
    ``featlearn.lm``) and write its log (``outputs["log"]``) and the logit table (``outputs["logits"]``).
    ``inputs``: the prepared ``train``, ``valid`` token tensors and the ``vocab`` (registry ``features_lm_word``)."""
    from featlearn.lm.train import LMRun, train_lm

    dataset, device = settings["dataset"], ctx.device
    tag = f" {dataset}"
    _log(tag, f"settings {settings}")
    vocab = read_vocab(inputs["vocab"])
    train_ids, valid_ids = load_tensor(inputs["train"]), load_tensor(inputs["valid"])
    run = LMRun(optimizer=WORD_OPTIMIZER, cuda_graphs=settings.get("cuda_graphs", False),
                **{k: settings[k] for k in WORD_MODEL_KEYS})
    out = train_lm(run, train_ids, valid_ids, len(vocab), ctx.work_dir, device=device, tag=tag)
    model = out["model"].eval()
    with full_precision(device):  # the logit table in float32 whatever the training's precision
        table = cooccurrence_logits(lambda idx: model(idx)[0], train_ids, vocab, settings["n_frequent"], settings["top_k"],
                                    dataset, device)
    log = out["log"]
    log = log[log["metric"].isin(["train_loss", "val_loss"])][["step", "metric", "value"]]
    log.insert(0, "dataset", dataset)
    write_csv(log, outputs["log"])
    write_csv(table, outputs["logits"])
    _log(tag, f"wrote {outputs['log']} and {outputs['logits']}")


# --- Fig. 5: the character GPT on Tiny Shakespeare ---------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class CharRun:
    """One character-GPT run; every value comes from the run's settings (config ``features.lm.char``)."""

    n_layer: int
    n_head: int
    n_embd: int
    block_size: int
    dropout: float
    batch_size: int
    lr: float
    min_lr: float
    warmup: int
    lr_decay_iters: int
    weight_decay: float
    beta2: float
    grad_clip: float
    iterations: int
    eval_every: int
    eval_batches: int
    checkpoint_every: int
    seed: int
    cuda_graphs: bool = False  # capture the training step as a CUDA graph (CUDA only; module docstring)


def learning_rate(step: int, run: CharRun) -> float:
    """Linear warm-up over ``warmup`` steps, cosine decay to ``min_lr`` at ``lr_decay_iters``, then flat."""
    if step <= run.warmup:
        return run.lr * step / max(run.warmup, 1)
    if step >= run.lr_decay_iters:
        return run.min_lr
    ratio = (step - run.warmup) / max(run.lr_decay_iters - run.warmup, 1)
    return run.min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (run.lr - run.min_lr)


def window_starts(n_tokens: int, block: int, batch: int, gen: torch.Generator) -> torch.Tensor:
    """The first positions of ``batch`` random windows of ``block`` tokens in a stream of ``n_tokens`` (each window
    has its next-token targets inside the stream)."""
    if n_tokens < block + 2:
        raise ValueError(f"a stream of {n_tokens} tokens is too short for windows of {block}")
    return torch.randint(n_tokens - block - 1, (batch,), generator=gen)


def windows_at(ids: torch.Tensor, start: torch.Tensor, block: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The windows of ``block`` tokens of ``ids`` that begin at ``start``, and their next-token targets (on the
    device of ``ids``)."""
    offsets = torch.arange(block, device=ids.device)
    index = start.to(ids.device)[:, None] + offsets
    return ids[index], ids[index + 1]


def random_windows(ids: torch.Tensor, block: int, batch: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch`` random windows of ``block`` tokens and their next-token targets."""
    return windows_at(ids, window_starts(ids.numel(), block, batch, gen), block)


def char_optimizer(model, lr: float, weight_decay: float, beta2: float, graph_safe: bool = False) -> torch.optim.AdamW:
    """AdamW with betas (0.9, ``beta2``), weight decay on the matrices only. ``graph_safe``: the optimiser of a step
    captured as a CUDA graph: fused and capturable (step counts on the device), its learning rate one device tensor
    shared by both groups (:func:`set_learning_rate` changes it in place)."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    if not graph_safe:
        return torch.optim.AdamW(groups, lr=lr, betas=(0.9, beta2))
    opt = torch.optim.AdamW(groups, lr=lr, betas=(0.9, beta2), fused=True, capturable=True)
    set_learning_rate(opt, lr, graph_safe=True)
    return opt


def set_learning_rate(opt: torch.optim.Optimizer, lr: float, graph_safe: bool = False) -> None:
    """Every group's learning rate to ``lr``. ``graph_safe``: in place, in one tensor on the parameters' device (the
    tensor a captured step reads); a group whose learning rate is not yet such a tensor (a new optimiser, or one
    just loaded from a checkpoint) gets one, before any step is captured."""
    if not graph_safe:
        for group in opt.param_groups:
            group["lr"] = lr
        return
    device = opt.param_groups[0]["params"][0].device
    shared = next((g["lr"] for g in opt.param_groups if isinstance(g["lr"], torch.Tensor) and g["lr"].device == device),
                  None)
    if shared is None:
        shared = torch.tensor(float(lr), dtype=torch.float32, device=device)
    shared.fill_(lr)
    for group in opt.param_groups:
        group["lr"] = shared


@torch.no_grad()
def _val_loss(model, valid: torch.Tensor, run: CharRun, device) -> float:
    """Mean loss on ``eval_batches`` fixed validation batches (the same windows at every evaluation)."""
    model.eval()
    gen = torch.Generator().manual_seed(run.seed + 1)
    losses = []
    for _ in range(run.eval_batches):
        x, y = random_windows(valid, run.block_size, run.batch_size, gen)
        logits = model(x.to(device))
        losses.append(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.to(device).reshape(-1)).item())
    model.train()
    return float(np.mean(losses))


def char_train_step(model, opt: torch.optim.Optimizer, grad_clip: float, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """One training step of the character GPT on windows ``x`` and targets ``y`` [batch, block]: the loss, its
    gradients clipped to norm ``grad_clip``, the optimiser's step; returns the loss (detached, on the device).
    Nothing syncs with the host, so a CUDA graph can hold it with a graph-safe optimiser (:func:`char_optimizer`)."""
    logits = model(x)
    loss = next_token_loss(logits, y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    opt.step()
    return loss.detach()


def train_char_gpt(run: CharRun, train_ids: torch.Tensor, valid_ids: torch.Tensor, vocab: int, work_dir: str | os.PathLike,
                   device: str = "cpu", tag: str = "", capture: bool = True):
    """Train the character GPT; returns (model, long log of step/metric/value).

    Resumable from ``work_dir`` (:func:`featlearn.training.resumable_training`; the window generator is
    saved with the checkpoint): on the CPU a resumed run equals an uninterrupted one. With ``run.cuda_graphs`` on a
    CUDA device the step is captured as a CUDA graph and replayed (module docstring); with ``capture=False`` the same
    graph-safe step runs uncaptured on any device (the CPU test of that step).
    """
    from featlearn.features.gpt import GPT, GPTConfig

    dev = torch.device(device)
    torch.manual_seed(run.seed)
    model = GPT(GPTConfig(vocab, run.block_size, run.n_layer, run.n_head, run.n_embd, run.dropout)).to(dev)
    graph_safe = graph_safe_step(run.cuda_graphs, dev, capture)
    opt = char_optimizer(model, run.lr, run.weight_decay, run.beta2, graph_safe=graph_safe)
    gen = torch.Generator().manual_seed(run.seed)
    rows: list[dict] = []

    def record(step: int, train_loss: float | None) -> None:
        val = _val_loss(model, valid_ids, run, dev)
        rows.append({"step": step, "metric": "val_loss", "value": val})
        if train_loss is not None:
            rows.append({"step": step, "metric": "train_loss", "value": train_loss})
        _log(tag, f"iteration {step}/{run.iterations} val loss {val:.3f}")

    if graph_safe:
        stream = train_ids.to(dev)  # the training stream on the device: the graph gathers its windows there
        loss_out = torch.zeros((), device=dev)  # each step's loss, read between replays

        def graph_step(start: torch.Tensor) -> None:
            x, y = windows_at(stream, start, run.block_size)
            loss_out.copy_(char_train_step(model, opt, run.grad_clip, x, y))

        stepper = GraphedSteps(graph_step) if captured(capture, dev) else graph_step

    def step(i: int) -> torch.Tensor:
        if graph_safe:
            set_learning_rate(opt, learning_rate(i, run), graph_safe=True)
            stepper(to_device(window_starts(train_ids.numel(), run.block_size, run.batch_size, gen), dev))
            return loss_out  # (the loop adds it to its running sum before the next step rewrites it)
        set_learning_rate(opt, learning_rate(i, run))
        x, y = random_windows(train_ids, run.block_size, run.batch_size, gen)
        return char_train_step(model, opt, run.grad_clip, x.to(dev), y.to(dev))  # summed on the device (no host sync)

    def load_log(logged: dict) -> None:
        rows[:] = logged["rows"]

    resumable_training(
        model, opt, total=run.iterations, step=step, record=record, eval_every=run.eval_every,
        checkpoint_every=run.checkpoint_every, work_dir=work_dir, settings=asdict(run), device=dev, generators=[gen],
        save_log=lambda: {"rows": rows}, load_log=load_log, log=lambda message: _log(tag, message),
    )
    return model, pd.DataFrame(rows, columns=["step", "metric", "value"])


def char_run(settings: dict, inputs: dict, outputs: dict, ctx) -> None:
    """Train the character GPT on ``settings["dataset"]`` (resumable from ``ctx.work_dir``) and write its log
    and the logit table (as :func:`word_run`; registry ``features_lm_char``)."""
    dataset, device = settings["dataset"], ctx.device
    tag = f" {dataset}"
    _log(tag, f"settings {settings}")
    vocab = read_vocab(inputs["vocab"])
    train_ids, valid_ids = load_tensor(inputs["train"]), load_tensor(inputs["valid"])
    run = CharRun(**{k: v for k, v in settings.items() if k in CharRun.__dataclass_fields__})
    model, log = train_char_gpt(run, train_ids, valid_ids, len(vocab), ctx.work_dir, device=device, tag=tag)
    model.eval()
    with full_precision(device):  # the logit table in float32 whatever the training's precision
        table = cooccurrence_logits(model, train_ids, vocab, settings["n_frequent"], settings["top_k"], dataset, device)
    log.insert(0, "dataset", dataset)
    write_csv(log, outputs["log"])
    write_csv(table, outputs["logits"])
    _log(tag, f"wrote {outputs['log']} and {outputs['logits']}")
