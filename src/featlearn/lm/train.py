"""Train a transformer LM with logged validation loss, per-layer attention entropy, per-layer stable rank
of the feed-forward up-projection (``linear1``, JoMA Fig. 7's measure on our own checkpoints) and
attention maps.

Tables (long format) are written when training ends; a resume checkpoint is written atomically every
``checkpoint_every`` iterations, so a killed job continues from there when rerun (same result on CPU:
the model, optimiser, data position and random state are all restored).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd
import torch
import torch.nn.functional as F

from featlearn.io import atomic_open, atomic_path
from featlearn.lm.attention import attention_entropy
from featlearn.lm.data import batchify, get_batch, num_batches
from featlearn.lm.model import LMConfig, TransformerLM
from featlearn.lm.rank import stable_rank


@dataclass(frozen=True)
class LMRun:
    n_layer: int = 1
    n_head: int = 1
    d_model: int = 200
    d_ff: int = 200
    dropout: float = 0.2
    optimizer: str = "sgd"  # sgd (no momentum) or adam
    lr: float = 5.0
    ffn_lr: float | None = None  # SGD only: learning rate of the feed-forward weights (default: lr)
    clip: float = 0.5
    batch_size: int = 20
    bptt: int = 35
    iterations: int = 1500
    log_every: int = 100
    checkpoint_every: int = 500
    val_windows: int = 20
    eval_batch_size: int = 10
    probe_window: int = 0  # index of the fixed validation window whose attention maps are recorded
    seed: int = 0


def _optimizer(model: TransformerLM, run: LMRun) -> torch.optim.Optimizer:
    if run.optimizer == "adam":
        return torch.optim.Adam(model.parameters(), lr=run.lr)
    if run.optimizer != "sgd":
        raise ValueError(f"unknown optimizer {run.optimizer!r}")
    ffn = {id(p) for p in model.ffn_parameters()}
    groups = [{"params": [p for p in model.parameters() if id(p) not in ffn], "lr": run.lr}]
    groups.append({"params": model.ffn_parameters(), "lr": run.ffn_lr if run.ffn_lr is not None else run.lr})
    return torch.optim.SGD(groups, lr=run.lr)


@torch.no_grad()
def _evaluate(model: TransformerLM, valid: torch.Tensor, run: LMRun) -> tuple[float, torch.Tensor, list[torch.Tensor]]:
    """Validation loss and per-layer mean attention entropy over the first ``val_windows`` windows, and
    the attention maps of the probe window (first column)."""
    model.eval()
    losses, ents, probe = [], [], None
    n = min(run.val_windows, num_batches(valid, run.bptt))
    for i in range(n):
        x, y = get_batch(valid, i, run.bptt)
        logits, maps = model(x)
        losses.append(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).item())
        ents.append(torch.stack([attention_entropy(a).mean() for a in maps]))
        if i == run.probe_window:
            probe = [a[0].mean(dim=0).cpu() for a in maps]  # first sequence, mean over heads: [T, T]
    model.train()
    return sum(losses) / len(losses), torch.stack(ents).mean(dim=0).cpu(), probe


def train_lm(run: LMRun, train_ids: torch.Tensor, valid_ids: torch.Tensor, vocab: int, work_dir: str | os.PathLike, device: str = "cpu", tag: str = "") -> dict[str, pd.DataFrame]:
    work = Path(work_dir)
    work.mkdir(parents=True, exist_ok=True)
    resume_path = work / "resume.pt"
    dev = torch.device(device)
    torch.manual_seed(run.seed)
    model = TransformerLM(LMConfig(vocab, run.d_model, run.d_ff, run.n_head, run.n_layer, run.dropout)).to(dev)
    opt = _optimizer(model, run)
    train = batchify(train_ids, run.batch_size).to(dev)
    valid = batchify(valid_ids, run.eval_batch_size).to(dev)
    per_epoch = num_batches(train, run.bptt)
    log_rows: list[dict] = []
    map_rows: list[pd.DataFrame] = []
    start = 0
    if resume_path.exists():
        state = torch.load(resume_path, weights_only=True, map_location=dev)
        if state["run"] != asdict(run):
            raise RuntimeError(f"{resume_path} belongs to different settings; delete it to start afresh")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["rng"])
        start, log_rows = state["step"], state["log_rows"]
        map_rows = [pd.DataFrame(m) for m in state["map_rows"]]
        print(f"[lm{tag}] resuming at iteration {start} from {resume_path}", file=sys.stderr, flush=True)

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
                map_rows.append(pd.DataFrame({"step": step, "layer": layer, "i": ii.reshape(-1).numpy(), "j": jj.reshape(-1).numpy(), "a": a.reshape(-1).numpy()}))
        print(f"[lm{tag}] iteration {step}/{run.iterations} val loss {val_loss:.3f} entropy {[round(e, 3) for e in ents.tolist()]}", file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    if start == 0:
        record(0, None)
    model.train()
    running, seen = 0.0, 0
    for step in range(start + 1, run.iterations + 1):
        x, y = get_batch(train, (step - 1) % per_epoch, run.bptt)
        logits, _ = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), run.clip)
        opt.step()
        running, seen = running + loss.item(), seen + 1
        if step % run.log_every == 0 or step == run.iterations:
            record(step, running / seen)
            running, seen = 0.0, 0
        if step % run.checkpoint_every == 0 and step < run.iterations:
            with atomic_path(resume_path) as tmp:
                torch.save(
                    {"run": asdict(run), "step": step, "model": model.state_dict(), "optimizer": opt.state_dict(), "rng": torch.get_rng_state(),
                     "log_rows": log_rows, "map_rows": [m.to_dict("list") for m in map_rows]},
                    tmp,
                )
    resume_path.unlink(missing_ok=True)  # finished: the tables are the result
    seconds = time.perf_counter() - t0
    print(f"[lm{tag}] done: {run.iterations - start} iterations in {seconds:.0f}s", file=sys.stderr, flush=True)
    return {"log": pd.DataFrame(log_rows), "maps": pd.concat(map_rows, ignore_index=True) if map_rows else pd.DataFrame(), "model": model, "resume": resume_path}


def train_from_files(settings: dict, train_pt: str, valid_pt: str, vocab_json: str, work_dir: str, device: str, tag: str = "") -> dict:
    """Train on a prepared LM dataset (token tensors and vocabulary written by ``data-prepare``)."""
    import json

    from featlearn.io import load_tensor

    with open(vocab_json, encoding="utf-8") as fh:
        vocab = len(json.load(fh))
    print(f"[lm{tag}] settings {settings}", file=sys.stderr, flush=True)
    return train_lm(LMRun(**settings), load_tensor(train_pt), load_tensor(valid_pt), vocab, work_dir, device=device, tag=tag)


def write_table(df: pd.DataFrame, path: str | os.PathLike) -> None:
    with atomic_open(path, newline="") as fh:
        df.to_csv(fh, index=False, float_format="%.7g")
