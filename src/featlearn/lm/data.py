"""Batching of a token stream as in pytorch/examples word_language_model: the stream is cut into
``batch_size`` contiguous columns; batch i is rows [i*bptt, (i+1)*bptt) with targets shifted by one."""

from __future__ import annotations

import torch


def batchify(ids: torch.Tensor, batch_size: int) -> torch.Tensor:
    """[N] -> [N // batch_size, batch_size] (the remainder is dropped)."""
    n = ids.numel() // batch_size
    return ids[: n * batch_size].view(batch_size, n).t().contiguous()


def num_batches(columns: torch.Tensor, bptt: int) -> int:
    return (columns.shape[0] - 1) // bptt


def get_batch(columns: torch.Tensor, i: int, bptt: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Batch i as (inputs [B, bptt], targets [B, bptt]) in batch-first layout."""
    start = i * bptt
    x = columns[start : start + bptt]
    y = columns[start + 1 : start + 1 + bptt]
    return x.t().contiguous(), y.t().contiguous()
