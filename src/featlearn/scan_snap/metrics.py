"""Attention-composition metrics: distinct-token entropy, common-token mass, recall vs threshold."""

from __future__ import annotations

import torch

from featlearn.scan_snap.data import N_COMMON, SequenceClasses


def distinct_share(composition: torch.Tensor, spec: SequenceClasses) -> torch.Tensor:
    """c renormalised over each class's own distinct tokens: [..., K, M] -> [..., K, 10]."""
    ids = torch.stack([spec.distinct_ids(n) for n in range(spec.K)])  # [K, 10]
    idx = ids.expand(*composition.shape[:-2], -1, -1)
    c = torch.gather(composition, -1, idx)
    return c / c.sum(dim=-1, keepdim=True)


def entropy(p: torch.Tensor) -> torch.Tensor:
    """Shannon entropy in nats over the last axis (0 ln 0 = 0)."""
    return -(torch.where(p > 0, p * torch.log(p), torch.zeros_like(p))).sum(dim=-1)


def distinct_entropy(composition: torch.Tensor, spec: SequenceClasses) -> torch.Tensor:
    """Entropy of the distinct-token share, averaged over classes: [..., K, M] -> [...].
    ln 10 = 2.303 for uniform attention; 2.151 at zero init (c = P)."""
    return entropy(distinct_share(composition, spec)).mean(dim=-1)


def common_mass(composition: torch.Tensor) -> torch.Tensor:
    """Attention mass on the 10 common tokens, averaged over classes (10/15.5 = 0.645 at zero init)."""
    return composition[..., :N_COMMON].sum(dim=-1).mean(dim=-1)


def recall(composition: torch.Tensor, spec: SequenceClasses, thresholds: torch.Tensor) -> torch.Tensor:
    """Recall of Figs. 11-12 as App. G defines it: every attention entry of a query is tagged 1 when its softmax
    value exceeds the threshold, and the recall is the proportion of the query's distinct tokens tagged 1,
    averaged over the queries (classes). The threshold applies to the attention weight itself (normalised over
    all M tokens, common ones included), not to the share among the distinct tokens: [..., K, M], [S] -> [..., S]."""
    ids = torch.stack([spec.distinct_ids(n) for n in range(spec.K)])  # [K, 10]
    weight = torch.gather(composition, -1, ids.expand(*composition.shape[:-2], -1, -1))  # [..., K, 10]
    above = weight.unsqueeze(-1) > thresholds.to(weight.dtype)  # [..., K, 10, S]
    return above.to(weight.dtype).mean(dim=-2).mean(dim=-2)
