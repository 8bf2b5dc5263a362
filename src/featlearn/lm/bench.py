"""Built language models and their timed training steps: what ``python -m featlearn lm-bench``
(:mod:`featlearn.lm_bench`) runs, and the sizes and probes of the estimate's LM cost models
(:mod:`featlearn.lm.cost`; the papers' ``cost`` modules name them).

A :class:`Built` is a model with its optimiser, loss and gradient clipping as its own training builds them;
:func:`tutorial_lm` builds the transformer of :mod:`featlearn.lm` (each paper builds its own LMs the same
way). :func:`time_steps` runs ``warmup`` steps, then times ``steps`` training steps of forward + backward +
optimiser step on random token ids, the device synchronised before and after (``median_step_seconds`` from
per-step CUDA events or clock readings); the host never waits for the device inside the timed loop. With
``cuda_graphs`` on a CUDA device the step is captured as a CUDA graph and replayed (``featlearn.cudagraphs``), as
the LM trainers do with their switch on: the warm-up then covers the 3 eager steps and the capture, so every timed
step is a replay.
:func:`size_of` counts a built model's parameters on the meta device; :func:`tutorial_size` and
:func:`tutorial_probe` are the tutorial transformer's size and probe in the estimate.
"""

from __future__ import annotations

import contextlib
import functools
import json
import statistics
import time
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn as nn

from featlearn.devices import device_label
from featlearn.cudagraphs import GraphedSteps, captured
from featlearn.lm.cost import LMSize, flops_per_token, probe_settings
from featlearn.lm.loss import next_token_loss


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


def tutorial_lm(settings: dict, vocab: int, optimizer: str) -> Built:
    """The transformer of ``featlearn.lm`` as ``featlearn.lm.train.train_lm`` builds and trains it, from the run's
    shape and optimiser settings (``n_layer``, ``n_head``, ``d_model``, ``d_ff``, ``dropout``, ``lr``, ``ffn_lr``
    where set, ``clip``, ``batch_size``, ``bptt``)."""
    from featlearn.lm.model import LMConfig, TransformerLM
    from featlearn.lm.train import make_optimizer

    s = settings
    net = TransformerLM(LMConfig(vocab, s["d_model"], s["d_ff"], s["n_head"], s["n_layer"], s["dropout"]))

    def loss(tokens):
        return next_token_loss(net(tokens[:, :-1])[0], tokens[:, 1:])

    return Built(net, make_optimizer(net, optimizer, s["lr"], s.get("ffn_lr")), loss, s["clip"], vocab, s["batch_size"],
                 s["bptt"], s["n_layer"], s["d_model"], net.decoder.weight)


def non_embedding_parameters(built: Built) -> int:
    """N of the FLOPs formula (:func:`featlearn.lm.cost.flops_per_token`): parameters less the embedding tables,
    plus a tied output layer."""
    embeddings = {id(m.weight) for m in built.net.modules() if isinstance(m, nn.Embedding)}
    n = sum(p.numel() for p in built.net.parameters() if id(p) not in embeddings)
    return n + (built.output_weight.numel() if id(built.output_weight) in embeddings else 0)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def device_name(device: torch.device) -> str:
    return device_label(device)


def timed(fn: Callable[[], object], repeats: int, device: torch.device) -> list[float]:
    """Seconds of each of ``repeats`` calls of ``fn``: CUDA events on a GPU, the clock on the CPU."""
    sync(device)
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


def autocast(device: torch.device, dtype: torch.dtype):
    if dtype == torch.float32:
        return contextlib.nullcontext()
    if device.type != "cuda":
        raise ValueError("bfloat16 is measured on CUDA only (torch.autocast); use --dtype float32 on the CPU")
    return torch.autocast(device_type="cuda", dtype=dtype)


def time_steps(built: Built, device: str, dtype: torch.dtype = torch.float32, steps: int = 10, warmup: int = 3,
               cuda_graphs: bool = False) -> dict:
    """Time ``steps`` training steps of ``built`` after ``warmup`` ones: the model's size, its throughput and the
    peak memory (CUDA only), one row of :func:`featlearn.lm_bench.benchmark` without the model's name. With
    ``cuda_graphs`` on a CUDA device the step is captured as a CUDA graph (float32; the optimiser must be
    capturable: :func:`featlearn.lm.train.make_optimizer` with ``graph_safe``); on a CPU it changes nothing."""
    dev = torch.device(device)
    graphs = captured(cuda_graphs, dev)
    if graphs and dtype != torch.float32:
        raise ValueError("a step captured as a CUDA graph is timed in float32 only")
    if graphs and not all(group.get("capturable", True) for group in built.optimizer.param_groups):
        raise ValueError(f"a step captured as a CUDA graph needs a capturable optimiser, not {type(built.optimizer).__name__}"
                         " with capturable=False")
    built.net.to(dev).train()
    # optimiser state is created lazily at the first step, on the parameters' device
    cast = autocast(dev, dtype)
    gen = torch.Generator(device=dev).manual_seed(0)
    pool = [torch.randint(built.vocab, (built.batch, built.seq + 1), device=dev, generator=gen) for _ in range(4)]
    parameters = list(built.net.parameters())
    state = {"i": 0, "loss": None}

    def train_on(tokens: torch.Tensor) -> None:
        with cast:
            loss = built.loss(tokens)
        built.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if built.clip is not None:
            torch.nn.utils.clip_grad_norm_(parameters, built.clip)
        built.optimizer.step()
        state["loss"] = loss.detach()  # (captured: the graph's own output, rewritten by every replay)

    run = GraphedSteps(train_on) if graphs else train_on

    def step() -> None:
        tokens = pool[state["i"] % len(pool)]
        state["i"] += 1
        run(tokens)

    if graphs:
        warmup = max(warmup, GraphedSteps.WARMUP + 1)  # every timed step a replay

    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    for _ in range(warmup):
        step()
    sync(dev)
    t0 = time.perf_counter()
    per_step = timed(step, steps, dev)
    sync(dev)
    seconds = (time.perf_counter() - t0) / steps
    tokens = built.batch * built.seq
    n = non_embedding_parameters(built)
    fpt = flops_per_token(n, built.n_layer, built.seq, built.d_model)
    return {
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
        "device_name": device_name(dev),
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


# ------------------------------------------------------------------------------ sizes and probes of the estimate


def size_of(build: Callable[[], Built], d_ff: int, n_head: int, optimizer_slots: int) -> LMSize:
    """The size of the model ``build()`` returns, built on PyTorch's meta device (shapes only: no memory, no
    initialisation)."""
    with torch.device("meta"):
        built = build()
    return LMSize(sum(p.numel() for p in built.net.parameters()), non_embedding_parameters(built), built.batch, built.seq,
                  built.n_layer, built.d_model, d_ff, n_head, optimizer_slots)


def probe_steps(built: Built, device: str, steps: int, warmup: int, cuda_graphs: bool = False) -> dict:
    """An estimate probe's record of a built model (:func:`time_steps`, its step captured as a CUDA graph with
    ``cuda_graphs``): the median step, robust to another process taking the device for a moment, and the CUDA peak
    memory."""
    row = time_steps(built, device, torch.float32, steps=steps, warmup=warmup, cuda_graphs=cuda_graphs)
    return {"seconds_per_step": row["median_step_seconds"], "peak_memory_bytes": (row["peak_memory_gib"] or 0) * 2**30 or None}


def tutorial_size(settings: dict, vocab: int, optimizer: str) -> LMSize:
    """The tutorial transformer at a job's settings (:func:`tutorial_lm`), trained with ``optimizer`` (Adam: 2
    state slots; SGD without momentum: none)."""
    return _tutorial_size(json.dumps(settings, sort_keys=True), vocab, optimizer)


@functools.lru_cache(maxsize=None)
def _tutorial_size(settings_json: str, vocab: int, optimizer: str) -> LMSize:
    s = json.loads(settings_json)
    return size_of(lambda: tutorial_lm(s, vocab, optimizer), s["d_ff"], s["n_head"], 2 if optimizer == "adam" else 0)


def tutorial_probe(shape: dict, dim_value: int, device: str, steps: int, warmup: int, optimizer: str) -> dict:
    """The tutorial transformer at an estimate probe's shape (batch ``dim_value``), trained with ``optimizer``; with
    the job's ``cuda_graphs`` switch (in the shape only when on) its step is captured as the job captures it, with
    the job's graph-safe optimiser (on a CUDA device)."""
    from featlearn.lm.train import make_optimizer

    settings = probe_settings(shape, "batch_size", dim_value)
    torch.manual_seed(int(settings["seed"]))
    built = tutorial_lm(settings, shape["vocab"], optimizer)
    graphs = captured(settings.get("cuda_graphs", False), device)
    if graphs:
        built.optimizer = make_optimizer(built.net, optimizer, settings["lr"], settings.get("ffn_lr"), graph_safe=True)
    return probe_steps(built, device, steps, warmup, cuda_graphs=graphs)
