"""Training throughput of the project's language models at the sizes the configs train them.

``python -m featlearn lm-bench --scale paper --device cuda --dtype bfloat16 --out lm_bench.json`` builds
each model from random init (random token ids of its vocabulary: no data files), runs ``--warmup`` steps,
then times ``--steps`` training steps of forward + backward + optimiser step, each as the model's own
training does it (its optimiser and gradient clipping; left out: the features character GPT's learning-rate
schedule and the per-step ``loss.item()`` of the training loops, so the host never waits for the device
inside the timed loop), and reports one row per (model, dataset[, variant]):

- ``tokens_per_s`` = batch x sequence / ``seconds_per_step`` (wall clock over the timed steps, the device
  synchronised before and after; ``median_step_seconds`` from per-step CUDA events or clock readings);
- ``flops_per_token`` = 6 N + 6 n_layer T d_model, with N the non-embedding parameters and T the training
  sequence length (Kaplan et al. 2020: forward 2 N + 2 n_layer T d_model, backward twice the forward; the
  attention term counts the whole T x T score and mixing products, without halving for the causal mask).
  N counts every parameter that takes part in a matrix product per token: all parameters except the
  token and position embedding tables, plus the output layer (V x d) also where it is tied to the token
  embedding (the character GPT, GPT-2), since it is a V x d matrix product per token either way;
- ``achieved_tflops`` = flops_per_token x tokens_per_s, and ``mfu`` = achieved / ``peak_matmul_tflops``,
  the median throughput of a large square matrix product (2 n^3 FLOPs) in the same dtype on the same device.

Models: ``scan_snap_lm`` (the tutorial transformer of ``featlearn.lm`` with Scan and Snap's SGD, one row per
Fig. 7 variant: Fig. 10's runs are its 1-layer shape), ``features_word`` (the same transformer, features
Fig. 7's 2 layers and 2 heads, per dataset), ``features_char`` (the character GPT of features Fig. 5),
``templates_gpt2`` (transformers' GPT-2 with identity scalings, per dataset), ``joma_lm`` (the same
tutorial transformer with Adam, at each of JoMA Fig. 6's depths, per dataset).

``--dtype bfloat16`` runs forward and loss under ``torch.autocast`` (CUDA only; weights, gradients and
optimiser state stay float32). float32 matrix products follow ``torch.get_float32_matmul_precision()``
(PyTorch's default "highest": no TF32), as the project's training does; the row records it.
"""

from __future__ import annotations

import contextlib
import json
import platform
import statistics
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

MODELS = ("scan_snap_lm", "joma_lm", "features_word", "features_char", "templates_gpt2")
SCALES = ("smoke", "default", "paper")
CONFIG_DIR = Path(__file__).resolve().parents[2] / "config"

# Vocabulary sizes of the prepared datasets, as ``featlearn.data.registry.PREPARED`` expects them: WikiText-2
# 33,278 and WikiText-103 267,735 word types with <eos> (Merity et al. 2016; pytorch/examples
# word_language_model's Dictionary), PTB 10,000 words (Mikolov's PTB release), Tiny Shakespeare 65 characters
# (nanoGPT's shakespeare_char). The templates GPT-2 trains on the word-level WikiText vocabulary, not GPT-2's
# 50,257 BPE tokens, as featlearn.templates.gpt2 builds it today.
WIKITEXT2_VOCAB = 33_278
WIKITEXT103_VOCAB = 267_735
PTB_VOCAB = 10_000
TINYSHAKESPEARE_VOCAB = 65
VOCAB = {"wikitext2": WIKITEXT2_VOCAB, "wikitext103": WIKITEXT103_VOCAB, "ptb": PTB_VOCAB,
         "tinyshakespeare": TINYSHAKESPEARE_VOCAB}

# Which templates GPT-2 variant is timed (``vanilla`` or ``identity``; both use eager attention).
GPT2_VARIANT = "identity"
PEAK_REPEATS = 7


# --------------------------------------------------------------------------------------- configuration


def load_config(scale: str, config_dir: str | Path = CONFIG_DIR) -> dict:
    """config.yaml, merged with smoke.yaml or paper.yaml for those scales."""
    from featlearn.pipeline.workflow import scale_config

    return scale_config(scale, config_dir)


@dataclass(frozen=True)
class Spec:
    """One model at one setting: ``settings`` are the keys its training reads (shape, dropout, optimiser)."""

    model: str
    label: str
    dataset: str
    settings: dict


def specs(config: dict, models=MODELS) -> list[Spec]:
    """The settings of every model the configs train (one per dataset, and per variant for scan_snap)."""
    from featlearn.features.registry import LM_CHAR_DATASET, lm_char_settings, lm_word_settings
    from featlearn.scan_snap.registry import lm_runs

    out = []
    for model in models:
        if model == "scan_snap_lm":
            # Fig. 7's model variants (Fig. 10's runs are the 1-layer model at other learning rates)
            out += [Spec(model, f"{dataset} {name[len('fig7_'):]}", dataset, settings)
                    for name, (dataset, settings) in lm_runs(config["scan_snap"]).items() if name.startswith("fig7_")]
        elif model == "joma_lm":
            wiki = config["joma"]["wikitext"]
            common = {k: wiki[k] for k in ("dropout",)} | {"lr": wiki["fig6"]["lr"], "seed": wiki["seeds"][0]}
            out += [Spec(model, f"{d} {n}L", d, {**common, "n_layer": n})
                    for d in wiki["datasets"] for n in wiki["fig6"]["layers"]]
        elif model == "features_word":
            lm = config["features"]["lm"]
            out += [Spec(model, d, d, lm_word_settings(lm, d)) for d in lm["word"]["datasets"]]
        elif model == "features_char":
            out.append(Spec(model, LM_CHAR_DATASET, LM_CHAR_DATASET, lm_char_settings(config["features"]["lm"])))
        elif model == "templates_gpt2":
            wiki = config["templates"]["gpt2"]["wikitext"]
            out += [Spec(model, f"{d} {GPT2_VARIANT}", d, {**wiki, "variant": GPT2_VARIANT}) for d in wiki["datasets"]]
        else:
            raise ValueError(f"unknown model {model!r}; expected one of {MODELS}")
    return out


# --------------------------------------------------------------------------------------- models


@dataclass
class Built:
    """A model ready to train: ``loss(tokens)`` takes ids [batch, seq + 1] (inputs and shifted targets)."""

    net: nn.Module
    optimizer: torch.optim.Optimizer
    loss: Callable[[torch.Tensor], torch.Tensor]
    clip: float | None
    vocab: int
    batch: int
    seq: int
    n_layer: int
    d_model: int
    output_weight: nn.Parameter


def _next_token_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def _tutorial_lm(settings: dict, vocab: int, optimizer: str) -> Built:
    """The transformer of ``featlearn.lm`` as ``featlearn.lm.train.train_lm`` builds and trains it."""
    from featlearn.lm.model import LMConfig, TransformerLM
    from featlearn.lm.train import LMRun
    from featlearn.lm.train import _optimizer as lm_optimizer

    run = LMRun(optimizer=optimizer,
                **{k: v for k, v in settings.items() if k in LMRun.__dataclass_fields__ and k != "optimizer"})
    net = TransformerLM(LMConfig(vocab, run.d_model, run.d_ff, run.n_head, run.n_layer, run.dropout))

    def loss(tokens):
        return _next_token_loss(net(tokens[:, :-1])[0], tokens[:, 1:])

    return Built(net, lm_optimizer(net, run), loss, run.clip, vocab, run.batch_size, run.bptt, run.n_layer, run.d_model,
                 net.decoder.weight)


def _char_gpt(settings: dict, vocab: int) -> Built:
    """The character GPT of ``featlearn.features.gpt`` as ``featlearn.features.lm.train_char_gpt`` trains it."""
    from featlearn.features.gpt import GPT, GPTConfig
    from featlearn.features.lm import CharRun
    from featlearn.features.lm import _optimizer as char_optimizer

    run = CharRun(**{k: v for k, v in settings.items() if k in CharRun.__dataclass_fields__})
    net = GPT(GPTConfig(vocab, run.block_size, run.n_layer, run.n_head, run.n_embd, run.dropout))

    def loss(tokens):
        return _next_token_loss(net(tokens[:, :-1]), tokens[:, 1:])

    return Built(net, char_optimizer(net, run), loss, run.grad_clip, vocab, run.batch_size, run.block_size, run.n_layer,
                 run.n_embd, net.tok.weight)


def _gpt2(settings: dict, vocab: int) -> Built:
    """The templates GPT-2 of ``featlearn.templates.gpt2.experiments.train_wikitext`` (AdamW, no clipping)."""
    from featlearn.templates.gpt2.experiments import build_lm, lm_loss, small_config

    s = settings
    config = small_config(vocab, s["n_layer"], s["n_embd"], s["n_head"], s["block"], s["dropout"])
    net = build_lm(config, s["variant"], s["seed"])
    opt = torch.optim.AdamW(net.parameters(), lr=s["lr"], weight_decay=s["weight_decay"])

    def loss(tokens):
        return lm_loss(net, tokens[:, :-1])  # blocks of `block` tokens predicting their tokens 2..block

    return Built(net, opt, loss, None, vocab, s["batch"], s["block"], s["n_layer"], s["n_embd"], net.lm_head.weight)


def build(spec: Spec, vocab: int | None = None) -> Built:
    """The model, optimiser and loss of ``spec`` (vocabulary: ``VOCAB[spec.dataset]`` unless given), on the CPU."""
    vocab = VOCAB[spec.dataset] if vocab is None else vocab
    torch.manual_seed(int(spec.settings.get("seed", 1)))
    if spec.model in ("scan_snap_lm", "features_word"):  # both train with SGD (scan_snap: its own ffn_lr)
        return _tutorial_lm(spec.settings, vocab, "sgd")
    if spec.model == "joma_lm":
        return _tutorial_lm(spec.settings, vocab, "adam")
    if spec.model == "features_char":
        return _char_gpt(spec.settings, vocab)
    if spec.model == "templates_gpt2":
        return _gpt2(spec.settings, vocab)
    raise ValueError(f"unknown model {spec.model!r}; expected one of {MODELS}")


def non_embedding_parameters(built: Built) -> int:
    """N of the FLOPs formula (module docstring): parameters less the embedding tables, plus a tied output layer."""
    embeddings = {id(m.weight) for m in built.net.modules() if isinstance(m, nn.Embedding)}
    n = sum(p.numel() for p in built.net.parameters() if id(p) not in embeddings)
    return n + (built.output_weight.numel() if id(built.output_weight) in embeddings else 0)


def flops_per_token(non_embedding: int, n_layer: int, seq: int, d_model: int) -> int:
    """Training FLOPs per token: 6 N + 6 n_layer T d_model (forward 2 N + 2 n_layer T d_model, backward twice that)."""
    return 6 * non_embedding + 6 * n_layer * seq * d_model


# --------------------------------------------------------------------------------------- timing


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or platform.machine()


def _timed(fn: Callable[[], object], repeats: int, device: torch.device) -> list[float]:
    """Seconds of each of ``repeats`` calls of ``fn``: CUDA events on a GPU, the clock on the CPU."""
    _sync(device)
    if device.type == "cuda":
        events = [torch.cuda.Event(enable_timing=True) for _ in range(repeats + 1)]
        events[0].record()
        for i in range(repeats):
            fn()
            events[i + 1].record()
        torch.cuda.synchronize(device)
        return [a.elapsed_time(b) / 1000 for a, b in zip(events, events[1:])]
    times, t0 = [], time.perf_counter()
    for _ in range(repeats):
        fn()
        t1 = time.perf_counter()
        times.append(t1 - t0)
        t0 = t1
    return times


def matmul_peak(device: torch.device, dtype: torch.dtype, size: int, repeats: int = PEAK_REPEATS) -> float:
    """TFLOP/s of a size x size matrix product in ``dtype`` (median of ``repeats``, after two warm-up products)."""
    gen = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(size, size, device=device, dtype=dtype, generator=gen)
    b = torch.randn(size, size, device=device, dtype=dtype, generator=gen)
    for _ in range(2):
        a @ b
    seconds = statistics.median(_timed(lambda: a @ b, repeats, device))
    return 2 * size**3 / seconds / 1e12


def _autocast(device: torch.device, dtype: torch.dtype):
    if dtype == torch.float32:
        return contextlib.nullcontext()
    if device.type != "cuda":
        raise ValueError("bfloat16 is measured on CUDA only (torch.autocast); use --dtype float32 on the CPU")
    return torch.autocast(device_type="cuda", dtype=dtype)


def benchmark(spec: Spec, device: str, dtype: torch.dtype = torch.float32, steps: int = 10, warmup: int = 3,
              vocab: int | None = None) -> dict:
    """Time ``steps`` training steps of ``spec`` after ``warmup`` ones; one result row (module docstring)."""
    dev = torch.device(device)
    built = build(spec, vocab)
    built.net.to(dev).train()
    # optimiser state is created lazily at the first step, on the parameters' device
    autocast = _autocast(dev, dtype)
    gen = torch.Generator(device=dev).manual_seed(0)
    pool = [torch.randint(built.vocab, (built.batch, built.seq + 1), device=dev, generator=gen) for _ in range(4)]
    parameters = list(built.net.parameters())
    state = {"i": 0, "loss": None}

    def step() -> None:
        tokens = pool[state["i"] % len(pool)]
        state["i"] += 1
        with autocast:
            loss = built.loss(tokens)
        built.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if built.clip is not None:
            torch.nn.utils.clip_grad_norm_(parameters, built.clip)
        built.optimizer.step()
        state["loss"] = loss.detach()

    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    for _ in range(warmup):
        step()
    _sync(dev)
    t0 = time.perf_counter()
    per_step = _timed(step, steps, dev)
    _sync(dev)
    seconds = (time.perf_counter() - t0) / steps
    tokens = built.batch * built.seq
    n = non_embedding_parameters(built)
    fpt = flops_per_token(n, built.n_layer, built.seq, built.d_model)
    return {
        "model": spec.model,
        "label": spec.label,
        "dataset": spec.dataset,
        "vocab": built.vocab,
        "batch": built.batch,
        "seq": built.seq,
        "tokens_per_step": tokens,
        "n_layer": built.n_layer,
        "d_model": built.d_model,
        "parameters": sum(p.numel() for p in parameters),
        "non_embedding_parameters": n,
        "flops_per_token": fpt,
        "optimizer": type(built.optimizer).__name__,
        "clip": built.clip,
        "device": str(dev),
        "device_name": _device_name(dev),
        "dtype": str(dtype).replace("torch.", ""),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "warmup": warmup,
        "steps": steps,
        "seconds_per_step": seconds,
        "median_step_seconds": statistics.median(per_step),
        "tokens_per_s": tokens / seconds,
        "achieved_tflops": fpt * tokens / seconds / 1e12,
        "final_loss": float(state["loss"]),
        "peak_memory_gib": torch.cuda.max_memory_allocated(dev) / 2**30 if dev.type == "cuda" else None,
    }


def run_benchmark(models, scale: str, device: str, dtype: torch.dtype, steps: int, warmup: int,
                  peak_size: int | None = None, out: str | None = None, config_dir: str | Path = CONFIG_DIR) -> list[dict]:
    """Every (model, setting) of ``models`` at ``scale``, each row with the matmul peak and the model-FLOP
    utilisation; the rows are rewritten to ``out`` (JSON) after each model, so a killed run keeps its rows."""
    dev = torch.device(device)
    _autocast(dev, dtype)  # refuse bfloat16 on the CPU before building anything
    peak_size = peak_size or (8192 if dev.type == "cuda" else 1024)
    peak = matmul_peak(dev, dtype, peak_size)
    say(f"{_device_name(dev)} {str(dtype).replace('torch.', '')} matmul peak {peak:.2f} TFLOP/s (n = {peak_size})")
    rows = []
    for spec in specs(load_config(scale, config_dir), models):
        try:
            row = benchmark(spec, device, dtype, steps, warmup)
        except Exception as exc:  # one model's failure (out of memory above all) must not cost the others' rows
            traceback.print_exc()
            error = "out of memory" if isinstance(exc, torch.cuda.OutOfMemoryError) else type(exc).__name__
            row = {"model": spec.model, "label": spec.label, "dataset": spec.dataset, "device": str(dev),
                   "dtype": str(dtype).replace("torch.", ""), "error": f"{error}: {str(exc).splitlines()[0] if str(exc) else ''}"}
        row |= {"scale": scale, "peak_matmul_tflops": peak, "peak_matmul_size": peak_size}
        if "error" not in row:
            row["mfu"] = row["achieved_tflops"] / peak
            say(f"{spec.model} {spec.label}: {row['tokens_per_s']:.0f} tokens/s, {row['seconds_per_step'] * 1e3:.1f} ms/step, "
                f"{row['achieved_tflops']:.3f} TFLOP/s, MFU {row['mfu']:.1%}")
        else:
            say(f"{spec.model} {spec.label}: {row['error']}")
        rows.append(row)
        if dev.type == "cuda":
            torch.cuda.empty_cache()
        if out:
            from featlearn.io import write_text

            write_text(out, json.dumps(rows, indent=2) + "\n")
    return rows


def summary_table(rows: list[dict]) -> str:
    """A fixed-width text table of the rows."""
    head = f"{'model':<15} {'setting':<20} {'dtype':<9} {'params':>9} {'tokens/s':>11} {'ms/step':>9} {'TFLOP/s':>8} {'MFU':>6}"
    lines = [head]
    for r in rows:
        name = f"{r['model']:<15} {r['label']:<20} {r['dtype']:<9}"
        if "error" in r:
            lines.append(f"{name} {r['error']}")
            continue
        lines.append(f"{name} {r['parameters'] / 1e6:>8.2f}M {r['tokens_per_s']:>11.0f} {r['seconds_per_step'] * 1e3:>9.2f} "
                     f"{r['achieved_tflops']:>8.3f} {r['mfu']:>6.1%}")
    if rows:
        lines.append(f"matmul peak {rows[0]['peak_matmul_tflops']:.3g} TFLOP/s "
                     f"(n = {rows[0]['peak_matmul_size']}, {rows[0]['device']})")
    return "\n".join(lines)


def say(message: str) -> None:
    print(f"[lm-bench] {message}", file=sys.stderr, flush=True)


def register(sub) -> None:
    """``python -m featlearn lm-bench [--models ...] [--scale S] [--device D] [--dtype T] [--out JSON]``."""
    from featlearn.devices import resolve_device

    def run(args) -> None:
        torch.set_num_threads(args.threads)
        dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[args.dtype]
        rows = run_benchmark(args.models, args.scale, resolve_device(args.device), dtype, args.steps, args.warmup,
                             args.peak_size, args.out)
        print(summary_table(rows))
        if any("error" in r for r in rows):
            raise SystemExit(f"lm-bench: {sum('error' in r for r in rows)} of {len(rows)} models failed (rows with 'error')")

    p = sub.add_parser("lm-bench", help="training throughput (tokens/s, TFLOP/s, MFU) of the project's language models")
    p.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    p.add_argument("--scale", choices=SCALES, default="default", help="config.yaml, with smoke.yaml or paper.yaml merged in")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32", help="bfloat16: torch.autocast, CUDA only")
    p.add_argument("--steps", type=int, default=10, help="timed training steps per model")
    p.add_argument("--warmup", type=int, default=3, help="untimed training steps first")
    p.add_argument("--peak-size", type=int, default=None, help="matmul size of the peak (default 8192 on CUDA, 1024 on the CPU)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default=None, help="JSON file of the rows")
    p.set_defaults(func=run)
