"""CUDA graphs of fixed-shape training steps (issue 34): capture a step once, replay it for every later step.

The vectorised trainers of small models (the templates sweep engine, Scan and Snap's synthetic runs, JoMA
Table 1, the features classifiers) and the small tutorial LMs and character GPT run a few dozen small kernels per
step; on a GPU such a step is bound by kernel launches and Python, not by arithmetic. A trainer that has a switch for it
(``templates.sweeps.cuda_graphs``, ``scan_snap.cuda_graphs``, ``joma.table1.cuda_graphs``,
``features.cls.train.cuda_graphs``, and for the LMs of ``featlearn.lm.train`` ``joma.wikitext.cuda_graphs``,
``scan_snap.wikitext.cuda_graphs`` and ``features.lm.word.cuda_graphs``, and the character GPT's
``features.lm.char.cuda_graphs``) runs a graph-safe version of its step
through :class:`GraphedSteps`: no host sync and no Python number that changes between steps (step counts and
Adam's bias corrections are device tensors), its inputs copied into the graph's own tensors before each replay.
Values the loop reads (losses to log, the parameters at logged steps) are read between replays, never inside the
captured region.

Inputs sampled on the host by seeded generators (Scan and Snap's batches, JoMA's class counts) are drawn
ahead, many steps at a time and in the order the eager loop draws them, and moved to the device in one copy
(:class:`StagedBatches`), so the loop does not wait for a host-to-device copy each step; inputs made on the host
step by step (the features classifiers' padded batches) go through pinned memory (:func:`to_device`).

Nothing here runs on a CPU: there the trainers keep their eager step and their tables are unchanged. The
graph-safe steps are tested on the CPU run uncaptured (they compute what the eager steps compute up to float
rounding); capture and replay are tested only where a CUDA device is present (docs/gpu.md).

A diagnostic, for measuring what the graph-safe arithmetic does to a figure's verdicts on a machine without a GPU:
with ``FEATLEARN_GRAPH_SAFE_UNCAPTURED=1`` in the environment, every trainer whose switch is on runs its graph-safe
step uncaptured, on any device (:func:`graph_safe_step`, :func:`captured`). The job's settings do not hold this
input, so use it in a results folder of its own; each training it changes says so in its log (docs/gpu.md, "The
graph-safe steps' verdicts on a CPU").
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

import torch

# The environment variable of the diagnostic above ("1": on).
UNCAPTURED_ENV = "FEATLEARN_GRAPH_SAFE_UNCAPTURED"

# Bytes of staged host-sampled inputs moved to the device at a time (:class:`StagedBatches`).
STAGE_BYTES = 128 * 2**20


def uncaptured_requested() -> bool:
    """Whether the environment asks every switched-on trainer for its graph-safe step uncaptured (``UNCAPTURED_ENV``)."""
    value = os.environ.get(UNCAPTURED_ENV, "")
    if value not in ("", "0", "1"):
        raise ValueError(f"{UNCAPTURED_ENV} must be 1 (on) or 0 / unset (off), got {value!r}")
    return value == "1"


def graph_safe_step(switch: bool, device: torch.device | str, capture: bool = True) -> bool:
    """Whether a trainer whose CUDA-graph switch is ``switch`` runs its graph-safe step: on a CUDA device, or anywhere
    when its caller asks for the step uncaptured (``capture=False``, the CPU tests) or the environment does
    (``UNCAPTURED_ENV``)."""
    if not switch:
        return False
    if uncaptured_requested():
        print(f"featlearn: {UNCAPTURED_ENV}=1: the graph-safe step runs uncaptured on {torch.device(device)} (a diagnostic: "
              "these tables are not the eager step's)", file=sys.stderr, flush=True)
        return True
    return not capture or torch.device(device).type == "cuda"


def captured(switch: bool, device: torch.device | str) -> bool:
    """Whether a trainer captures its step: its switch is on, it trains on a CUDA device and the environment does not
    ask for the graph-safe step uncaptured (``UNCAPTURED_ENV``)."""
    return bool(switch) and torch.device(device).type == "cuda" and not uncaptured_requested()


def to_device(x: torch.Tensor, device: torch.device | str) -> torch.Tensor:
    """``x`` (on the host) on ``device``: on CUDA through pinned memory, a copy the host does not wait for."""
    device = torch.device(device)
    if device.type == "cuda":
        return x.pin_memory().to(device, non_blocking=True)
    return x.to(device)


class GraphedSteps:
    """``step(*inputs)`` captured as one CUDA graph per shape of its inputs and replayed. An input is a tensor or
    None (always None at that position for one graph). The first ``WARMUP`` calls of a shape run eagerly on a
    side stream (real steps: CUDA graphs need warmed-up autograd and allocator state), the next one captures
    the graph and replays it; later calls copy their inputs into the graph's own input tensors and replay.

    Each graph keeps its own memory pool, unless ``shared_pool``: then the graphs of all shapes draw their
    intermediate tensors from one pool, so a step of many shapes (the features classifiers' padded lengths) holds
    the memory of its largest graph rather than the sum. That is safe only for a step that keeps nothing it
    allocates past its own replay: its state (parameters, optimiser state, outputs the loop reads) lives in
    tensors allocated outside the graphs, and the graphs replay one after another on one stream."""

    WARMUP = 3

    def __init__(self, step: Callable[..., None], shared_pool: bool = False):
        self.step = step
        self.seen: dict = {}
        self.graphs: dict = {}
        self.shared_pool = shared_pool
        self.pool = None  # the shared pool, made at the first capture

    def __call__(self, *inputs: torch.Tensor | None) -> None:
        key = tuple(None if x is None else (tuple(x.shape), x.dtype) for x in inputs)
        if key in self.graphs:
            graph, static = self.graphs[key]
            for buffer, x in zip(static, inputs):
                if buffer is not None:
                    buffer.copy_(x)
            graph.replay()
            return
        count = self.seen.get(key, 0)
        if count < self.WARMUP:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                self.step(*inputs)
            torch.cuda.current_stream().wait_stream(side)
            self.seen[key] = count + 1
            return
        static = tuple(None if x is None else x.clone() for x in inputs)
        graph = torch.cuda.CUDAGraph()
        if self.shared_pool and self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        with torch.cuda.graph(graph, pool=self.pool):
            self.step(*static)
        self.graphs[key] = (graph, static)
        graph.replay()


class StagedBatches:
    """The host-sampled inputs of ``steps`` consecutive training steps, on ``device``. ``sample()`` returns one
    step's inputs (a tuple of CPU tensors of fixed shapes) and is called once per step, in step order, so seeded
    generators draw exactly what they draw when the loop samples step by step. Steps are drawn ahead, as many as
    fit in ``max_bytes`` (``STAGE_BYTES`` when None), stacked and moved in one copy (pinned memory, asynchronous on
    CUDA); ``staged[step]`` is that step's inputs on the device, for steps asked for in increasing order."""

    def __init__(self, sample: Callable[[], tuple[torch.Tensor, ...]], steps: int, device: torch.device | str,
                 max_bytes: int | None = None):
        self.sample, self.steps, self.device = sample, steps, torch.device(device)
        self.max_bytes = STAGE_BYTES if max_bytes is None else max_bytes
        self.start, self.chunk, self.drawn = 0, (), 0

    def __getitem__(self, step: int) -> tuple[torch.Tensor, ...]:
        if not self.chunk or step >= self.start + self.chunk[0].shape[0]:
            if step != self.drawn:
                raise IndexError(f"staged steps are read in order: step {step} asked for, {self.drawn} is next")
            self._stage()
        if step < self.start:
            raise IndexError(f"step {step} is no longer staged (steps from {self.start})")
        return tuple(x[step - self.start] for x in self.chunk)

    def _stage(self) -> None:
        first = self.sample()
        per_step = sum(x.numel() * x.element_size() for x in first)
        n = max(1, min(self.steps - self.drawn, self.max_bytes // max(1, per_step)))
        rows = [first] + [self.sample() for _ in range(n - 1)]
        self.chunk = tuple(to_device(torch.stack(column), self.device) for column in zip(*rows))
        self.start, self.drawn = self.drawn, self.drawn + n
