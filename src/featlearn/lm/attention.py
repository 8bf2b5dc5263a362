"""Attention analysis: entropy of causal attention rows, and maps of a fixed sequence."""

from __future__ import annotations

import math

import torch


def attention_entropy(attn: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """-sum_j a_ij log(a_ij + eps) per query row (JoMA's definition): [..., T, T] -> [..., T]."""
    return -(attn * torch.log(attn + eps)).sum(dim=-1)


def uniform_causal_entropy(T: int) -> float:
    """Mean over rows i = 1..T of ln i: the entropy of uniform causal attention (2.632 at T = 35)."""
    return sum(math.log(i) for i in range(1, T + 1)) / T


@torch.no_grad()
def layer_entropies(model, batches) -> torch.Tensor:
    """Mean attention entropy of each layer (over heads, rows and windows) on the given inputs."""
    model.eval()
    total, count = None, 0
    for x in batches:
        _, maps = model(x)
        ent = torch.stack([attention_entropy(a).mean() for a in maps])
        total = ent if total is None else total + ent
        count += 1
    return total / count
