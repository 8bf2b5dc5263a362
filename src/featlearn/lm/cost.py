"""The cost of training a language model, as ``python -m featlearn estimate`` models it (docs/estimate.md).

Shared by every LM job: the FLOPs and peak-memory formulas (:class:`LMSize`), the evaluations of the shared
training loop (:func:`evaluations`), the settings that change a run's budget but not the cost of a step
(:data:`BUDGET_KEYS`, :func:`probe_settings`), and the budget of the tutorial transformer of
:mod:`featlearn.lm`, which Scan and Snap, JoMA and features Fig. 7 train (:func:`tutorial_budget`; its size
and probe need the built model: :mod:`featlearn.lm.bench`). Plain numbers: the estimate
(:func:`featlearn.pipeline.estimate.lm_cost`) turns them into its records; each paper's ``cost`` module names
the model it trains. Standard library only at import time.
"""

from __future__ import annotations

from dataclasses import dataclass

FLOAT32 = 4  # bytes

# settings that change the budget or logging, not the cost of a step (left out of the probe's shape)
BUDGET_KEYS = ("iterations", "epochs", "steps", "log_every", "checkpoint_every", "val_windows", "eval_every",
               "val_blocks_log", "val_blocks", "n_frequent", "top_k", "map_steps", "lr", "ffn_lr", "seed", "eval_batches",
               "warmup", "lr_decay_iters", "min_lr", "dataset", "reset_optimizer_each_epoch", "kq_mask_diag", "tokenizer",
               "eval_batch_size")

FORMULA = ("FLOPs = (6 N + 6 L T d) B T per step [Kaplan 2020]; "
           "memory = 4 B x [P (2 + slots) + B T (L (9d + 2d_ff + 2HT) + 3V)]")


def flops_per_token(non_embedding: int, n_layer: int, seq: int, d_model: int) -> int:
    """Training FLOPs per token: 6 N + 6 n_layer T d_model (forward 2 N + 2 n_layer T d_model, backward twice that;
    Kaplan et al. 2020). N: the parameters less the embedding tables, plus the output layer."""
    return 6 * non_embedding + 6 * n_layer * seq * d_model


def flops_per_step(non_embedding: int, n_layer: int, seq: int, d_model: int, batch: int) -> int:
    """Training FLOPs of one step of a transformer LM: (6 N + 6 n_layer T d) x batch x T."""
    return flops_per_token(non_embedding, n_layer, seq, d_model) * batch * seq


def memory_bytes(parameters: int, optimizer_slots: int, batch: int, seq: int, n_layer: int, d_model: int, d_ff: int,
                 n_head: int, vocab: int, bytes_per_float: int = FLOAT32) -> int:
    """Peak training memory of a transformer LM, in bytes: parameters, gradients and optimiser state
    (P x (2 + slots); Adam/AdamW 2 slots, plain SGD 0) plus the activations kept for the backward pass,
    B T [n_layer (9 d + 2 d_ff + 2 H T) + 3 V] floats [D: per layer the inputs of the four linear maps, q, k,
    v, the two layer norms and dropout masks (~9 d), the feed-forward hidden and its mask (2 d_ff), the
    attention weights and their dropout mask (2 H T); the logits, their softmax and its gradient (3 V)]."""
    state = parameters * (2 + optimizer_slots)
    acts = batch * seq * (n_layer * (9 * d_model + 2 * d_ff + 2 * n_head * seq) + 3 * vocab)
    return (state + acts) * bytes_per_float


def evaluations(total: int, every: int) -> int:
    """How many times ``featlearn.training.resumable_training`` evaluates: at step 0, every ``every`` steps and
    at the last step."""
    return 1 + total // every + (1 if total % every else 0)


@dataclass(frozen=True)
class LMSize:
    """An LM at a job's settings: all its ``parameters``, the ``non_embedding`` ones of the FLOPs formula, its
    batch and sequence, layers, width, feed-forward width, heads and optimiser state slots."""

    parameters: int
    non_embedding: int
    batch: int
    seq: int
    n_layer: int
    d_model: int
    d_ff: int
    n_head: int
    optimizer_slots: int

    @property
    def flops_per_step(self) -> int:
        return flops_per_step(self.non_embedding, self.n_layer, self.seq, self.d_model, self.batch)

    def memory_bytes(self, vocab: int) -> int:
        return memory_bytes(self.parameters, self.optimizer_slots, self.batch, self.seq, self.n_layer, self.d_model,
                            self.d_ff, self.n_head, vocab)


@dataclass(frozen=True)
class LMBudget:
    """A run's training ``steps`` and its evaluations, counted in training steps (``eval_steps``) and stated."""

    steps: int
    eval_steps: float
    eval_note: str


def probe_settings(shape: dict, batch_key: str, batch: int) -> dict:
    """The settings a probe builds its model with: the shape's, at ``batch``; seed and learning rate are left out
    of the shape (they do not change a step's cost), so any value builds the model."""
    return {"seed": 1, "lr": 1e-3, **shape["settings"], batch_key: batch}


# ------------------------------------------------------------------------------ the tutorial transformer


def tutorial_budget(settings: dict, data: dict, size: LMSize) -> LMBudget:
    """Steps of a tutorial-LM job (``iterations``, or ``epochs`` x the steps per epoch of the prepared train split,
    ``featlearn.lm.train.run_length``) and its validation passes: at step 0, every ``log_every`` steps and at the
    end, ``val_windows`` windows (the whole validation split when null) of ``eval_batch_size`` streams, each
    window forward 1/3 of a training step [D]. ``data``: the train and validation tokens (None: unknown)."""
    from featlearn.lm.train import run_length

    s, dataset = settings, settings.get("dataset")
    B, T, eval_batch = s["batch_size"], s["bptt"], s["eval_batch_size"]
    if s.get("epochs") is not None and data["train"] is None:
        raise ValueError(f"epochs budget but no train size of {dataset}")
    per_epoch = 0 if data["train"] is None else (data["train"] // B - 1) // T
    total = run_length(s["iterations"], s.get("epochs"), per_epoch)
    if s["val_windows"] is None:
        if not data["valid"]:
            raise ValueError(f"whole-split evaluation but no validation size of {dataset}")
        windows = (data["valid"] // eval_batch - 1) // T
    else:
        windows = s["val_windows"]
    n_ev = evaluations(total, s["log_every"])
    eval_steps = n_ev * windows * eval_batch / B / 3
    return LMBudget(total, eval_steps, f"{n_ev} evaluations x {windows} windows of {eval_batch} streams forward "
                                       f"(1/3 of a step of {B} streams each) [D]")
