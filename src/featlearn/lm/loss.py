"""The next-token cross-entropy of the language models' training steps.

Under a CPU's bfloat16 autocast the output layer returns bfloat16 logits ([tokens, vocabulary]: 700 x 33,278 for the
tutorial LMs, 1,016 x 50,257 for templates Fig. 6's GPT-2s), and ``F.cross_entropy`` converts them whole to float32,
takes a float32 log-softmax, fills a float32 gradient with zeros for its backward and converts the result back:
five passes over tensors of 93-204 MB, at memory speed, about half of the step (docs/performance.md, "The LM step's
cross-entropy and Adam"). :func:`next_token_loss` computes the same loss on bfloat16 logits of a CPU tensor a few rows
at a time, each block converted to float32 while it sits in the core's cache: each row's largest logit and log-sum-exp
in the forward pass; in the backward pass the float32 softmax less the target's one-hot, times the upstream gradient
over the row count, rounded to bfloat16. Same arithmetic as ``F.cross_entropy`` (float32 log-softmax of the same
bfloat16 values, mean over rows); only the order of the float32 sums differs, so the loss and gradient agree to
float32 rounding before the gradient's bfloat16 rounding (tests/lm/test_loss.py).

Every other case (float32 or float64 logits, which is every evaluation and every fp32 job, and any CUDA tensor, where
autocast already keeps the softmax in float32 and a Python loop of small blocks would cost launches) calls
``F.cross_entropy`` itself, so their tables are unchanged.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

# float32 elements per block: 2 MiB, about one core's L2 cache on the CPUs measured (docs/performance.md)
BLOCK_ELEMENTS = 1 << 19


def block_rows(vocab: int) -> int:
    """Rows of logits converted to float32 at a time: as many as fit :data:`BLOCK_ELEMENTS` (at least one)."""
    return max(1, BLOCK_ELEMENTS // max(1, vocab))


class _BlockedBF16CrossEntropy(torch.autograd.Function):
    """Mean cross-entropy of bfloat16 logits [N, V] against targets [N], float32 inside, a block of rows at a time."""

    @staticmethod
    def forward(ctx, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type="cpu", enabled=False):
            n, vocab = logits.shape
            rows = block_rows(vocab)
            top = torch.empty(n, dtype=torch.float32)  # each row's largest logit
            log_sum = torch.empty(n, dtype=torch.float32)  # log of the row's sum of exp(logit - top)
            for s in range(0, n, rows):
                block = logits[s : s + rows].float()
                top[s : s + rows] = block.amax(dim=1)
                log_sum[s : s + rows] = block.sub_(top[s : s + rows, None]).exp_().sum(dim=1).log_()
            # -log softmax at the target, as log_softmax forms it: log_sum - (target logit - top), with no cancellation
            target_logit = logits.gather(1, targets[:, None]).squeeze(1).float()
            ctx.save_for_backward(logits, targets, top, log_sum)
            return (log_sum - (target_logit - top)).mean()

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        logits, targets, top, log_sum = ctx.saved_tensors
        with torch.autocast(device_type="cpu", enabled=False):
            n, vocab = logits.shape
            rows = block_rows(vocab)
            scale = grad.float() / n
            out = torch.empty_like(logits)
            for s in range(0, n, rows):
                block = logits[s : s + rows].float().sub_(top[s : s + rows, None]).sub_(log_sum[s : s + rows, None])
                p = block.exp_()  # the rows' softmax
                p[torch.arange(p.shape[0]), targets[s : s + rows]] -= 1.0
                out[s : s + rows].copy_(p.mul_(scale))
        return out, None


def blocked(logits: torch.Tensor) -> bool:
    """Whether :func:`next_token_loss` takes the blocked path for these logits: bfloat16 on a CPU."""
    return logits.dtype == torch.bfloat16 and logits.device.type == "cpu"


def next_token_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of ``logits`` [..., V] against ``targets`` [...]: ``F.cross_entropy`` on the flattened
    rows, or its blocked form for bfloat16 logits on a CPU (module docstring). Every target is a real token: there is
    no ``ignore_index`` (no caller pads its targets), and a negative target fails in the blocked form's gather."""
    flat, flat_targets = logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
    if blocked(flat):
        return _BlockedBF16CrossEntropy.apply(flat.contiguous(), flat_targets.long())
    return F.cross_entropy(flat, flat_targets)
