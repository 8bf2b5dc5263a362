"""Train many small runs of one model at once, logging the label scores of extracted units every epoch.

All runs of a call share the model kind and the data; each run has its own seed (initialisation, data order,
dropout masks), activation and sigma_v. Parameters carry a leading run dimension; the runs are independent,
so the gradient of the summed run losses is each run's own gradient.

Data stay out of the loop: the splits are encoded once into flat id tensors (:class:`Encoded`); each epoch
every distinct seed draws its batches from length-sorted pools (bucketing), and the batches of all seeds at
a step are padded together. Batches smaller than ``batch`` (the end of a pool) are filled with weight-0 rows.

Optimisers mirror PyTorch's: Adagrad (lr_decay 0, initial accumulator 0, eps 1e-10) [P] and Adam (betas
0.9/0.999, eps 1e-8). With Adagrad the embedding table is updated only in the rows a batch uses, which is
exact: a row with zero gradient keeps both its value and its accumulator.

Logged (epoch 0 = initialisation): probe label scores (tokens by their closed form, MV bigrams, CNN/L-RNN
position scores, whole phrases), dev/test loss and accuracy, mean training loss; per run the test accuracy
at the best-dev epoch (the first epoch with the highest dev accuracy).

CUDA graphs (``Settings.cuda_graphs``, config ``features.cls.train.cuda_graphs``; only on a CUDA device): the
training step is :class:`_GraphSafeStep`, captured once per batch shape and replayed (``featlearn.cudagraphs``). Its
batches are drawn by the same generators in the same order, but padded to a fixed shape: ``batch`` rows (filler
rows of weight 0) and the longest instance's length rounded up by :func:`padded_length`, so that a job needs a
few graphs (one per rounded length) instead of one per length; padding changes no score (padded positions are
zero vectors and masked). Nothing in the step syncs with the host: the Adagrad update of the embedding table is
dense (a row the batch does not use has zero gradient and keeps its value and accumulator, as the sparse update
leaves it), Adam's step count and bias corrections are device tensors, the runs of each activation go through
the model separately (one activation per call), dropout masks are drawn outside the graph from the seeds' own
streams, and the epoch's training loss is summed on the device and read at the epoch's end. Evaluations and
probe scores run between epochs, as in the eager loop. The graph-safe step computes what the eager step
computes up to float rounding (tested on the CPU, where it runs uncaptured); on a CPU the switch does nothing:
the eager step runs and tables are unchanged.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from dataclasses import dataclass, field, fields

import numpy as np
import pandas as pd
import torch

from featlearn.cudagraphs import GraphedSteps, captured, graph_safe_step, to_device
from featlearn.keptwork import CHECKPOINT_SECONDS
from featlearn.training import load_part, remove_part, run_identity, save_part
from featlearn.training import progress as progress_line
from featlearn.features.models import (
    InitScales,
    ModelSpec,
    bigram_scores,
    embed,
    example_losses,
    forward,
    forward_embedded,
    init_params,
    lengths_to_mask,
    position_scores,
    predictions,
    token_scores,
    with_bos,
)
from featlearn.io import write_csv
from featlearn.seeding import derived_seed

PAD_ID = 0  # "<pad>" comes first in the prepared vocabularies; padded positions are masked anyway
UNK = "unk"


# ---------------------------------------------------------------------------------------------- data
@dataclass
class Encoded:
    """One split as flat token ids: instance i is ``ids[offsets[i]:offsets[i + 1]]``."""

    ids: torch.Tensor
    offsets: torch.Tensor
    labels: torch.Tensor

    @property
    def lengths(self) -> torch.Tensor:
        return self.offsets[1:] - self.offsets[:-1]

    def __len__(self) -> int:
        return len(self.labels)


def encode(rows: list[tuple[int, str]], index: dict[str, int], max_len: int = 0) -> Encoded:
    """Token ids of whitespace-tokenised rows (unknown words -> ``unk``; empty texts -> one ``unk``);
    ``max_len`` > 0 keeps the first ``max_len`` tokens."""
    unk = index.get(UNK, PAD_ID)
    ids: list[int] = []
    offsets = [0]
    for _, text in rows:
        toks = [index.get(t, unk) for t in text.split()] or [unk]
        if max_len > 0:
            toks = toks[:max_len]
        ids.extend(toks)
        offsets.append(len(ids))
    return Encoded(torch.tensor(ids, dtype=torch.long), torch.tensor(offsets, dtype=torch.long),
                   torch.tensor([y for y, _ in rows], dtype=torch.long))


def load_prepared(data_dir: str, max_len: int = 0, splits: tuple[str, ...] = ("train", "dev", "test")
                  ) -> tuple[dict[str, list[tuple[int, str]]], list[str], dict[str, Encoded]]:
    """Rows, vocabulary and encoded splits of a prepared classification dataset folder
    (``{split}.tsv`` and ``vocab.json``, as written by the data layer)."""
    from featlearn.data.prepare import read_classification, read_vocab

    vocab = read_vocab(f"{data_dir}/vocab.json")
    index = {w: i for i, w in enumerate(vocab)}
    rows = {s: read_classification(f"{data_dir}/{s}.tsv") for s in splits}
    return rows, vocab, {s: encode(r, index, max_len) for s, r in rows.items()}


def pad_batch(enc: Encoded, idx: torch.Tensor, length: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded tokens [B, L] and lengths [B] of the instances ``idx``."""
    lengths = enc.lengths[idx]
    L = int(lengths.max()) if length is None else length
    pos = enc.offsets[idx].unsqueeze(1) + torch.arange(L)
    mask = torch.arange(L) < lengths.unsqueeze(1)
    tokens = torch.where(mask, enc.ids[pos.clamp(max=len(enc.ids) - 1)], torch.full_like(pos, PAD_ID))
    return tokens, lengths


def epoch_batches(lengths: torch.Tensor, batch: int, pool: int, gen: torch.Generator) -> list[torch.Tensor]:
    """Index batches of one epoch: a random permutation cut into pools of ``pool * batch`` instances, each
    pool sorted by length and cut into batches, the batches shuffled. The number of batches and the
    multiset of their sizes depend only on len(lengths)."""
    n = len(lengths)
    perm = torch.randperm(n, generator=gen)
    out = []
    step = max(1, pool) * batch
    for a in range(0, n, step):
        chunk = perm[a:a + step]
        chunk = chunk[torch.argsort(lengths[chunk], stable=True)]
        out.extend(chunk[i:i + batch] for i in range(0, len(chunk), batch))
    order = torch.randperm(len(out), generator=gen)
    return [out[i] for i in order]


def epoch_batch_maxima(lengths: torch.Tensor, batch: int, pool: int, gen: torch.Generator) -> torch.Tensor:
    """The longest length of each batch of :func:`epoch_batches` (same ``gen`` state: the same draws, the same
    order), without building the batches: a pool's batches are consecutive slices of its sorted lengths, so each
    batch's longest is the last of its slice. A job's cost estimate pads every step to these (hundreds of thousands
    of instances, one pool at a time instead of one batch at a time)."""
    n = len(lengths)
    perm = torch.randperm(n, generator=gen)
    step = max(1, pool) * batch
    maxima = []
    for a in range(0, n, step):
        ordered = lengths[perm[a:a + step]].sort(stable=True).values
        ends = torch.arange(batch, len(ordered) + batch, batch).clamp(max=len(ordered)) - 1
        maxima.append(ordered[ends])
    per_batch = torch.cat(maxima) if maxima else lengths[:0]
    return per_batch[torch.randperm(len(per_batch), generator=gen)]


# ------------------------------------------------------------------------------------------ settings
@dataclass
class Run:
    seed: int
    activation: str = "relu"
    sigma_v: float = 0.1


@dataclass(kw_only=True)
class Settings:
    """A training job's settings; every value comes from the job's settings (config ``features.cls``), except
    those whose default means "as given": no truncation, the job's own device, full precision."""

    kind: str
    epochs: int
    batch: int
    lr: float
    optimizer: str  # adagrad [P], adam (App. C, Fig. 11) or sgd (plain gradient descent: the NTK flow's)
    dropout: float  # on the embeddings [C]
    d: int
    sigma_e: float
    sigma_w: float
    sigma_h: float
    kernel: int
    ffn: int
    sa_variant: str
    mv_bos: bool  # prepend <bos> (an extra embedding row) to every MV input [D]
    bucket_pool: int  # batches per length-sorted pool; 0 or 1 = no bucketing beyond one batch
    max_len: int = 0  # truncate instances (0 = keep all tokens)
    eval_batch: int
    device: str = "cpu"
    dtype: str = "float32"
    threads: int  # torch CPU threads (these small ops run fastest on one thread; 0 = leave as is)
    cuda_graphs: bool = False  # capture the training step as a CUDA graph (CUDA only; default off; module docstring)

    def __post_init__(self):
        if self.optimizer not in ("adagrad", "adam", "sgd"):
            raise ValueError(f"optimizer must be 'adagrad', 'adam' or 'sgd', got {self.optimizer!r}")
        if self.epochs < 0 or self.batch < 1 or self.lr <= 0 or not 0 <= self.dropout < 1:
            raise ValueError("need epochs >= 0, batch >= 1, lr > 0 and 0 <= dropout < 1")

    @classmethod
    def from_dict(cls, cfg: dict) -> "Settings":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(cfg) - known)
        if unknown:
            raise ValueError(f"unknown training settings {unknown}; known: {sorted(known)}")
        return cls(**cfg)


@dataclass
class Probes:
    """Units whose label scores are logged every epoch (names are what the tables show)."""

    tokens: dict[str, int] = field(default_factory=dict)
    bigrams: dict[str, tuple[int, int]] = field(default_factory=dict)  # MV only
    positions: dict[str, int] = field(default_factory=dict)  # CNN kernel slots / L-RNN distances ``ks``
    ks: list[int] = field(default_factory=list)
    phrases: dict[str, list[int]] = field(default_factory=dict)  # whole inputs (MV: <bos> prepended)


@dataclass
class Result:
    scores: pd.DataFrame  # run, seed, activation, sigma_v, epoch, probe, unit, k, out, score
    metrics: pd.DataFrame  # run, seed, activation, sigma_v, epoch, split, metric, value
    summary: pd.DataFrame  # run, seed, activation, sigma_v, best_epoch, dev_accuracy, test_accuracy
    params: dict[str, torch.Tensor]
    spec: ModelSpec
    seconds: float = 0.0  # wall time of the training loop (kept out of the tables, which are byte-identical)


# ------------------------------------------------------------------------------------------- helpers
def _spec(settings: Settings, vocab_size: int, n_out: int) -> ModelSpec:
    bos = settings.kind == "mv" and settings.mv_bos
    return ModelSpec(settings.kind, vocab_size + int(bos), d=settings.d, n_out=n_out, kernel=settings.kernel,
                     ffn=settings.ffn, sa_variant=settings.sa_variant, bos_id=vocab_size if bos else None)


def _prepare_tokens(spec: ModelSpec, tokens: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if spec.bos_id is not None:
        tokens, lengths = with_bos(tokens, lengths, spec.bos_id)
    return tokens, lengths_to_mask(lengths, tokens.shape[-1])


def evaluate(spec: ModelSpec, params: dict[str, torch.Tensor], activations: list[str], enc: Encoded,
             eval_batch: int, device: str = "cpu") -> tuple[np.ndarray, np.ndarray]:
    """(accuracy [R], mean loss [R]) of every run on a split, in evaluation mode (no dropout)."""
    order = torch.argsort(enc.lengths, stable=True)
    R = params["v"].shape[0]
    correct = torch.zeros(R, dtype=torch.float64)
    loss = torch.zeros(R, dtype=torch.float64)
    with torch.no_grad():
        for a in range(0, len(enc), eval_batch):
            idx = order[a:a + eval_batch]
            tokens, lengths = pad_batch(enc, idx)
            tokens, mask = _prepare_tokens(spec, tokens, lengths)
            labels = enc.labels[idx].to(device)
            s = forward(spec, params, tokens.to(device), mask.to(device), activations)
            correct += (predictions(s) == labels).sum(1).double().cpu()
            loss += example_losses(s, labels).sum(1).double().cpu()
    return (correct / len(enc)).numpy(), (loss / len(enc)).numpy()


def probe_scores(spec: ModelSpec, params: dict[str, torch.Tensor], activations: list[str], probes: Probes,
                 device: str = "cpu") -> list[tuple[str, str, int, np.ndarray]]:
    """[(probe, unit, k, scores [R, n_out])] for every probe unit."""
    out = []
    if probes.tokens:
        ids = torch.tensor(list(probes.tokens.values()), device=device)
        s = token_scores(spec, params, ids, activations).cpu().numpy()
        out += [("token", u, -1, s[:, i]) for i, u in enumerate(probes.tokens)]
    if probes.bigrams:
        a = torch.tensor([p[0] for p in probes.bigrams.values()], device=device)
        b = torch.tensor([p[1] for p in probes.bigrams.values()], device=device)
        s = bigram_scores(spec, params, a, b).cpu().numpy()
        out += [("bigram", u, -1, s[:, i]) for i, u in enumerate(probes.bigrams)]
    if probes.positions:
        ids = torch.tensor(list(probes.positions.values()), device=device)
        s = position_scores(spec, params, ids, probes.ks, activations).cpu().numpy()
        out += [("position", u, k, s[:, i, j]) for i, u in enumerate(probes.positions) for j, k in enumerate(probes.ks)]
    if probes.phrases:
        seqs = list(probes.phrases.values())
        lengths = torch.tensor([len(q) for q in seqs])
        tokens = torch.full((len(seqs), int(lengths.max())), PAD_ID, dtype=torch.long)
        for i, q in enumerate(seqs):
            tokens[i, : len(q)] = torch.tensor(q)
        tokens, mask = _prepare_tokens(spec, tokens, lengths)
        with torch.no_grad():
            s = forward(spec, params, tokens.to(device), mask.to(device), activations).cpu().numpy()
        out += [("phrase", u, -1, s[:, i]) for i, u in enumerate(probes.phrases)]
    return out


# ------------------------------------------------------------------------------------------- training
def train(settings: Settings, runs: list[Run], splits: dict[str, Encoded], vocab_size: int, probes: Probes,
          n_classes: int = 2, progress: bool = True, label: str = "", capture: bool = True,
          work_dir: str | None = None, checkpoint_seconds: float = CHECKPOINT_SECONDS) -> Result:
    """Train every run for ``settings.epochs`` epochs on ``splits["train"]``; evaluate on ``dev`` and
    ``test`` (when present) and log the probes after every epoch (epoch 0 included).

    With ``settings.cuda_graphs`` on a CUDA device the step is captured as a CUDA graph and replayed; with
    ``capture=False`` the same graph-safe step runs uncaptured on any device (the CPU test of that step).

    With ``work_dir`` (a compute job's resume folder) the loop keeps a checkpoint there at the end of an epoch once
    ``checkpoint_seconds`` have passed since the last one (``featlearn.training.save_part``: parameters, optimiser
    state, the seeds' data and dropout streams, the step count and the logs so far, under the run identity), and a
    rerun of a killed job starts after the epoch it saved; the tables equal an uninterrupted run's. Outside a
    compute job the checkpoint is removed once the last epoch is done; inside one it stays until the workflow has
    accepted the job's tables (:mod:`featlearn.keptwork`)."""
    if settings.threads > 0:
        torch.set_num_threads(settings.threads)
    dev = torch.device(settings.device)
    dtype = getattr(torch, settings.dtype)
    R = len(runs)
    acts = [r.activation for r in runs]
    spec = _spec(settings, vocab_size, 1 if n_classes == 2 else n_classes)
    params = init_params(spec, [r.seed for r in runs], [r.sigma_v for r in runs],
                         InitScales(settings.sigma_e, settings.sigma_w, settings.sigma_h), dtype)
    params = {k: p.to(dev) for k, p in params.items()}
    sparse = settings.optimizer == "adagrad"
    dense_names = [k for k in params if not (sparse and k == "E")]
    state = {k: {"sum": torch.zeros_like(p), "m": torch.zeros_like(p), "v": torch.zeros_like(p)} for k, p in params.items()}

    seeds = sorted({r.seed for r in runs})
    run_of_seed = torch.tensor([seeds.index(r.seed) for r in runs])
    data_gen = {s: torch.Generator().manual_seed(derived_seed(s, 11)) for s in seeds}
    # one dropout stream per seed, drawn at that seed's own batch shape: a run's masks do not depend on the
    # other runs of the job (runs of one seed share their masks, as they share their batches)
    drop_gen = {s: torch.Generator(device=dev).manual_seed(derived_seed(s, 13)) for s in seeds}
    train_enc = splits["train"]
    meta = pd.DataFrame({"run": range(R), "seed": [r.seed for r in runs], "activation": acts,
                         "sigma_v": [r.sigma_v for r in runs]})
    score_logs: list[tuple[int, list]] = []
    metric_rows: list[tuple[int, str, str, np.ndarray]] = []
    start = time.perf_counter()

    def log_epoch(epoch: int, train_loss: np.ndarray | None) -> None:
        score_logs.append((epoch, probe_scores(spec, params, acts, probes, settings.device)))
        if train_loss is not None:
            metric_rows.append((epoch, "train", "loss", train_loss))
        for split in ("dev", "test"):
            if split in splits:
                acc, loss = evaluate(spec, params, acts, splits[split], settings.eval_batch, settings.device)
                metric_rows.append((epoch, split, "accuracy", acc))
                metric_rows.append((epoch, split, "loss", loss))

    graph_safe = graph_safe_step(settings.cuda_graphs, dev, capture)
    if graph_safe:
        graph_step = _GraphSafeStep(settings, spec, params, state, acts, seeds, run_of_seed, dev, dtype)
        stepper = GraphedSteps(graph_step, shared_pool=True) if captured(capture, dev) else graph_step
    step = first = 0
    key = {"features checkpoint": dataclasses.asdict(settings), "runs": [dataclasses.asdict(r) for r in runs],
           "vocab": vocab_size, "n_classes": n_classes, "train": len(train_enc)}
    saved = load_part(work_dir, key, log=lambda m: _log(label, m)) if work_dir else None
    if saved is None:
        log_epoch(0, None)
    else:  # a killed run of this job saved its state after epoch ``first``: go on from there
        first, step = saved["epoch"], saved["step"]
        for k, p in params.items():
            p.copy_(saved["params"][k])
            for slot, t in state[k].items():
                t.copy_(saved["state"][k][slot])
        for s in seeds:
            data_gen[s].set_state(saved["data_gen"][s])
            drop_gen[s].set_state(saved["drop_gen"][s])
        if graph_safe:
            graph_step.t.fill_(saved["graph_t"])
        score_logs[:], metric_rows[:] = saved["score_logs"], saved["metric_rows"]
        _log(label, f"resuming at epoch {first} of {settings.epochs} from {work_dir}")
    saved_at = time.perf_counter()
    for epoch in range(first + 1, settings.epochs + 1):
        plans = {s: epoch_batches(train_enc.lengths, settings.batch, settings.bucket_pool, data_gen[s]) for s in seeds}
        n_steps = len(plans[seeds[0]])
        epoch_loss = torch.zeros(R, dtype=torch.float64)
        if graph_safe:
            graph_step.loss_sum.zero_()
        for t in range(n_steps):
            idxs = [plans[s][t] for s in seeds]
            L = max(int(train_enc.lengths[i].max()) for i in idxs)
            if graph_safe:  # padded to (batch, a rounded length): a few shapes, each captured once
                toks, lens, labels, weights = _host_batch(train_enc, idxs, padded_length(L), settings.batch, dtype)
                toks, mask = _prepare_tokens(spec, toks, lens)
                if len(seeds) == 1:
                    toks, mask, labels, weights = toks[0], mask[0], labels[0], weights[0]
                keep = _dropout_masks(settings, spec, [train_enc.lengths[i] for i in idxs], seeds, drop_gen, toks.shape[-1],
                                      graph_step.seed_of_run, dtype, dev, batch=settings.batch)
                stepper(*(to_device(x, dev) for x in (toks, mask, labels, weights)), keep)
                continue
            B = max(len(i) for i in idxs)
            toks, lens, labels, weights = _host_batch(train_enc, idxs, L, B, dtype)
            if len(seeds) == 1:
                toks, lens, labels, weights = toks[0], lens[0], labels[0], weights[0]
            else:
                toks, lens, labels, weights = toks[run_of_seed], lens[run_of_seed], labels[run_of_seed], weights[run_of_seed]
            toks, mask = _prepare_tokens(spec, toks, lens)
            toks, mask, labels, weights = toks.to(dev), mask.to(dev), labels.to(dev), weights.to(dev)
            keep = _dropout_masks(settings, spec, [train_enc.lengths[i] for i in idxs], seeds, drop_gen, toks.shape[-1],
                                  run_of_seed, dtype, dev)

            leaves = {k: params[k].detach().requires_grad_(True) for k in dense_names}
            if sparse:
                uniq, inv = torch.unique(toks, return_inverse=True)
                E_sub = params["E"][:, uniq].detach().requires_grad_(True)
                s = forward(spec, {**params, **leaves}, inv, mask, acts, dropout=settings.dropout, training=True,
                            E=E_sub, keep=keep)
            else:
                s = forward(spec, {**params, **leaves}, toks, mask, acts, dropout=settings.dropout, training=True,
                            keep=keep)
            losses = example_losses(s, labels)
            w = weights.expand_as(losses)
            run_loss = (losses * w).sum(1) / w.sum(1)
            wrt = list(leaves.values()) + ([E_sub] if sparse else [])
            grads = torch.autograd.grad(run_loss.sum(), wrt)
            step += 1
            with torch.no_grad():
                for name, g in zip(dense_names, grads):
                    _update(settings, params[name], g, state[name], 1 - 0.9**step, math.sqrt(1 - 0.999**step))
                if sparse:
                    g = grads[-1]
                    acc = state["E"]["sum"][:, uniq] + g * g
                    state["E"]["sum"][:, uniq] = acc
                    params["E"][:, uniq] -= settings.lr * g / (acc.sqrt() + 1e-10)
            epoch_loss += run_loss.detach().double().cpu()
        if graph_safe:
            epoch_loss = graph_step.loss_sum.to("cpu", copy=True)  # the same float64 sum, kept on the device
        log_epoch(epoch, (epoch_loss / max(n_steps, 1)).numpy())
        if progress:
            accs = next((v for e, sp, m, v in reversed(metric_rows) if sp == "dev" and m == "accuracy"), None)
            msg = "" if accs is None else (f" dev acc {np.round(accs, 3).tolist()}" if R <= 8
                                           else f" mean dev acc {accs.mean():.3f}")
            print(f"[features] {label or spec.kind} R={R} epoch {epoch}/{settings.epochs} "
                  f"loss {float(epoch_loss.mean() / max(n_steps, 1)):.4f}{msg} "
                  f"({progress_line(epoch - first, settings.epochs - epoch, time.perf_counter() - start, 'epochs')})",
                  file=sys.stderr, flush=True)
        if work_dir and epoch < settings.epochs and time.perf_counter() - saved_at >= checkpoint_seconds:
            save_part(work_dir, key, {
                "epoch": epoch, "step": step, "graph_t": float(graph_step.t) if graph_safe else 0.0,
                "params": {k: p.detach().cpu() for k, p in params.items()},
                "state": {k: {slot: t.cpu() for slot, t in st.items()} for k, st in state.items()},
                "data_gen": {s: g.get_state() for s, g in data_gen.items()},
                "drop_gen": {s: g.get_state() for s, g in drop_gen.items()},
                "score_logs": score_logs, "metric_rows": metric_rows})
            saved_at = time.perf_counter()
    if work_dir and not run_identity():  # inside a compute job, the workflow removes it (featlearn.keptwork)
        remove_part(work_dir, key)
    seconds = time.perf_counter() - start
    return Result(_scores_table(meta, score_logs, spec.n_out), _metrics_table(meta, metric_rows),
                  _summary(meta, metric_rows), {k: p.detach().cpu() for k, p in params.items()}, spec, seconds)


def _host_batch(enc: Encoded, idxs: list[torch.Tensor], L: int, B: int, dtype: torch.dtype
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One step's batches of every distinct seed, on the host, padded to [S, B, L]: tokens, lengths, labels and
    weights (1 for an instance, 0 for a filler row: one pad token)."""
    toks = torch.full((len(idxs), B, L), PAD_ID, dtype=torch.long)
    lens = torch.ones(len(idxs), B, dtype=torch.long)  # filler rows: one pad token, weight 0
    labels = torch.zeros(len(idxs), B, dtype=torch.long)
    weights = torch.zeros(len(idxs), B, dtype=dtype)
    for j, i in enumerate(idxs):
        tk, ln = pad_batch(enc, i, L)
        toks[j, : len(i)], lens[j, : len(i)] = tk, ln
        labels[j, : len(i)], weights[j, : len(i)] = enc.labels[i], 1.0
    return toks, lens, labels, weights


def padded_length(n: int) -> int:
    """The length a graph-safe step pads a batch of longest instance ``n`` to: a multiple of 8, and above 127 of
    2^(bits - 4), at most 1/8 longer (8 lengths per doubling: a job of lengths up to 2,500 needs about 50 graphs)."""
    q = 8 if n < 128 else 1 << (n.bit_length() - 4)
    return -(-n // q) * q


def _dropout_masks(settings: Settings, spec: ModelSpec, lengths: list[torch.Tensor], seeds: list[int],
                   gens: dict[int, torch.Generator], L: int, run_of_seed: torch.Tensor, dtype: torch.dtype,
                   dev: torch.device, batch: int | None = None) -> torch.Tensor | None:
    """Dropout keep-masks of one step, [B, L, d] (one seed) or [R, B, L, d]: seed s draws (its batch size, its
    longest instance (+ BOS), d) from its own generator, padded with ones to the step's shape (B: the largest
    batch of the step, or ``batch``)."""
    if settings.dropout <= 0:
        return None
    bos = int(spec.bos_id is not None)
    B = max(len(n) for n in lengths) if batch is None else batch
    keep = torch.ones(len(seeds), B, L, spec.d, dtype=dtype, device=dev)
    for j, (s, n) in enumerate(zip(seeds, lengths)):
        Ls = int(n.max()) + bos
        keep[j, : len(n), :Ls] = (torch.rand(len(n), Ls, spec.d, generator=gens[s], device=dev, dtype=dtype)
                                  >= settings.dropout).to(dtype)
    return keep[0] if len(seeds) == 1 else keep[run_of_seed.to(dev)]


def _update(settings: Settings, p: torch.Tensor, g: torch.Tensor, st: dict, bc1, sqrt_bc2) -> None:
    """The optimiser's update of ``p`` given its gradient. Adam's bias corrections 1 - 0.9^t and sqrt(1 - 0.999^t)
    are Python numbers (the eager step) or device tensors (the graph-safe step)."""
    if settings.optimizer == "adagrad":  # torch.optim.Adagrad: sum += g^2; p -= lr g / (sqrt(sum) + eps)
        st["sum"].addcmul_(g, g)
        p.addcdiv_(g, st["sum"].sqrt().add_(1e-10), value=-settings.lr)
    elif settings.optimizer == "sgd":  # plain gradient descent, no momentum
        p.add_(g, alpha=-settings.lr)
    else:  # torch.optim.Adam
        st["m"].mul_(0.9).add_(g, alpha=0.1)
        st["v"].mul_(0.999).addcmul_(g, g, value=0.001)
        denom = (st["v"].sqrt() / sqrt_bc2).add_(1e-8)
        if isinstance(bc1, torch.Tensor):
            p.sub_(st["m"] / denom * (settings.lr / bc1))
        else:
            p.addcdiv_(st["m"], denom, value=-settings.lr / bc1)


class _GraphSafeStep:
    """The training step that a CUDA graph can hold (no host sync, no Python number that changes between steps),
    called with one step's tokens, mask, labels and weights ([B, L'] for one seed, else [S, B, L'] per distinct
    seed, taken per run on the device) and dropout keep-masks (None without dropout). It computes the eager
    step's losses and updates with every parameter dense (Adagrad's embedding table included), the runs of
    each activation through the model separately, Adam's step count ``t`` and bias corrections on the device,
    and adds the runs' losses (float64) to ``loss_sum``, which the loop reads at the end of each epoch."""

    def __init__(self, settings: Settings, spec: ModelSpec, params: dict, state: dict, acts: list[str], seeds: list[int],
                 run_of_seed: torch.Tensor, dev: torch.device, dtype: torch.dtype):
        self.settings, self.spec, self.params, self.state, self.acts = settings, spec, params, state, acts
        self.seed_of_run = run_of_seed.to(dev)  # (made once: a host-to-device copy inside the step would sync)
        self.seed_index = self.seed_of_run if len(seeds) > 1 else None
        self.t = torch.zeros((), dtype=torch.float64, device=dev)
        self.loss_sum = torch.zeros(len(acts), dtype=torch.float64, device=dev)
        self.dtype = dtype
        # runs of one activation: (activation, (first run, count)) where they are consecutive (the jobs' order),
        # else (activation, their indices); and the order that puts the concatenated scores back in run order
        self.groups: list[tuple[str, tuple[int, int] | torch.Tensor]] = []
        order: list[int] = []
        for name in sorted(set(acts), key=acts.index):
            idx = [r for r, a in enumerate(acts) if a == name]
            consecutive = idx == list(range(idx[0], idx[0] + len(idx)))
            self.groups.append((name, (idx[0], len(idx)) if consecutive else torch.tensor(idx, device=dev)))
            order += idx
        self.inverse = None if order == sorted(order) else torch.argsort(torch.tensor(order)).to(dev)

    def scores(self, leaves: dict[str, torch.Tensor], x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if len(self.groups) == 1:
            return forward_embedded(self.spec, leaves, x, mask, self.acts)
        parts = []
        for name, runs in self.groups:
            def take(t, runs=runs):
                return t.narrow(0, *runs) if isinstance(runs, tuple) else t.index_select(0, runs)

            weights = {k: take(p) for k, p in leaves.items() if k != "E"}
            m = take(mask) if mask.dim() == 3 else mask
            n = runs[1] if isinstance(runs, tuple) else len(runs)
            parts.append(forward_embedded(self.spec, weights, take(x), m, [name] * n))
        s = torch.cat(parts)
        return s if self.inverse is None else s.index_select(0, self.inverse)

    def __call__(self, toks, mask, labels, weights, keep) -> None:
        st = self.settings
        if self.seed_index is not None:
            toks, mask, labels, weights = (v.index_select(0, self.seed_index) for v in (toks, mask, labels, weights))
        leaves = {k: p.detach().requires_grad_(True) for k, p in self.params.items()}
        x = embed(leaves["E"], toks, mask)
        if keep is not None:  # dropout on the embeddings, as featlearn.features.models.forward applies it
            x = x * keep / (1.0 - st.dropout)
        losses = example_losses(self.scores(leaves, x, mask), labels)
        w = weights.expand_as(losses)
        run_loss = (losses * w).sum(1) / w.sum(1)
        grads = torch.autograd.grad(run_loss.sum(), list(leaves.values()))
        with torch.no_grad():
            bc1 = sqrt_bc2 = None
            if st.optimizer == "adam":
                self.t.add_(1)
                bc1 = (1 - torch.pow(torch.full_like(self.t, 0.9), self.t)).to(self.dtype)
                sqrt_bc2 = torch.sqrt(1 - torch.pow(torch.full_like(self.t, 0.999), self.t)).to(self.dtype)
            for name, g in zip(leaves, grads):
                _update(st, self.params[name], g, self.state[name], bc1, sqrt_bc2)
            self.loss_sum.add_(run_loss.detach().double())


def _log(label: str, message: str) -> None:
    print(f"[features {label}] {message}" if label else f"[features] {message}", file=sys.stderr, flush=True)


# -------------------------------------------------------------------------------------------- tables
def _scores_table(meta: pd.DataFrame, logs: list, n_out: int) -> pd.DataFrame:
    R = len(meta)
    frames = []
    for epoch, entries in logs:
        if not entries:
            continue
        probe = np.repeat([e[0] for e in entries], R * n_out)
        unit = np.repeat([e[1] for e in entries], R * n_out)
        k = np.repeat([e[2] for e in entries], R * n_out)
        vals = np.stack([e[3] for e in entries])  # [n_units, R, n_out]
        frames.append(pd.DataFrame({
            "run": np.tile(np.repeat(np.arange(R), n_out), len(entries)),
            "epoch": epoch, "probe": probe, "unit": unit, "k": k,
            "out": np.tile(np.arange(n_out), R * len(entries)), "score": vals.reshape(-1),
        }))
    cols = ["run", "seed", "activation", "sigma_v", "epoch", "probe", "unit", "k", "out", "score"]
    if not frames:
        return pd.DataFrame(columns=cols)
    return pd.concat(frames, ignore_index=True).merge(meta, on="run")[cols]


def _metrics_table(meta: pd.DataFrame, rows: list) -> pd.DataFrame:
    R = len(meta)
    df = pd.DataFrame([{"run": r, "epoch": e, "split": s, "metric": m, "value": float(v[r])}
                       for e, s, m, v in rows for r in range(R)])
    return df.merge(meta, on="run")[["run", "seed", "activation", "sigma_v", "epoch", "split", "metric", "value"]]


def _summary(meta: pd.DataFrame, rows: list) -> pd.DataFrame:
    out = meta.copy()
    dev = [(e, v) for e, s, m, v in rows if s == "dev" and m == "accuracy"]
    test = {e: v for e, s, m, v in rows if s == "test" and m == "accuracy"}
    best, dev_acc, test_acc = [], [], []
    for r in range(len(meta)):
        if dev:
            e, v = max(dev, key=lambda ev: (ev[1][r], -ev[0]))  # first epoch with the highest dev accuracy
            best.append(e)
            dev_acc.append(float(v[r]))
            test_acc.append(float(test[e][r]) if e in test else float("nan"))
        else:
            best.append(-1)
            dev_acc.append(float("nan"))
            test_acc.append(float("nan"))
    out["best_epoch"], out["dev_accuracy"], out["test_accuracy"] = best, dev_acc, test_acc
    return out


def write_tables(result: Result, scores: str | None = None, metrics: str | None = None, summary: str | None = None) -> None:
    """Write the tidy tables (atomically) to the given CSV paths."""
    for df, path in ((result.scores, scores), (result.metrics, metrics), (result.summary, summary)):
        if path:
            write_csv(df, path)
