"""Reparameterised 1-layer transformer of Sec. 3.1, for R independent runs at once.

Parameters per run: Y in R^{M x M} (decoder: attention feature l -> logit of next token m) and
Z in R^{M x M} (attention logit of a contextual token l for query q). No biases, no positional encoding,
no residual, no feed-forward layer. For one sequence with query x_T and contextual tokens x_1..x_{T-1}:

    b_t    = softmax_t Z[x_T, x_t]            (t < T; the query itself is not attended)
    v      = sum_t b_t e_{x_t}                (attention mass per token id)
    f      = v / ||v||_2                      (l2 normalisation)
    logits = Y^T f                            (cross-entropy against x_{T+1})

Because Z[x_T, x_t] depends only on the id of x_t, b summed per id is softmax_l(Z[x_T, l] + ln n_l) with
n_l the count of id l in the context; the batch is therefore given as counts.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def init_params(
    R: int, M: int, how: str, generators: list[torch.Generator], dtype=torch.float64
) -> tuple[torch.Tensor, torch.Tensor]:
    """Y, Z of shape [R, M, M]: ``zero`` (Sec. 3, Fig. 4) or ``default`` (PyTorch nn.Linear default,
    U(-1/sqrt(M), 1/sqrt(M)), as the authors' Syn-Medium sweep used)."""
    if how == "zero":
        return torch.zeros(R, M, M, dtype=dtype), torch.zeros(R, M, M, dtype=dtype)
    if how != "default":
        raise ValueError(f"unknown init {how!r}; use 'zero' or 'default'")
    bound = 1.0 / math.sqrt(M)
    Y = torch.stack([(torch.rand(M, M, generator=g, dtype=dtype) * 2 - 1) * bound for g in generators])
    Z = torch.stack([(torch.rand(M, M, generator=g, dtype=dtype) * 2 - 1) * bound for g in generators])
    return Y, Z


def attention_features(Z: torch.Tensor, queries: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """l2-normalised attention output f, shape [R, B, M], from Z [R, M, M], queries [R, B], counts [R, B, M]."""
    zq = torch.gather(Z, 1, queries.unsqueeze(-1).expand(-1, -1, Z.shape[-1]))  # Z[r, q_rb, :]
    logits = zq + torch.log(counts)  # log 0 = -inf: absent ids get no attention
    v = torch.softmax(logits, dim=-1)
    return v / v.norm(dim=-1, keepdim=True)


def run_losses(
    Y: torch.Tensor, Z: torch.Tensor, queries: torch.Tensor, counts: torch.Tensor, labels: torch.Tensor
) -> torch.Tensor:
    """Mean cross-entropy of each run, shape [R]."""
    f = attention_features(Z, queries, counts)
    logits = torch.einsum("rbl,rlm->rbm", f, Y)
    R, B, M = logits.shape
    return F.cross_entropy(logits.reshape(R * B, M), labels.reshape(R * B), reduction="none").reshape(R, B).mean(dim=1)


def class_composition(Z: torch.Tensor, P: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """c_{l|n} = P(l|n) exp(Z[psi(n), l]) / sum_l' P(l'|n) exp(Z[psi(n), l']): the attention each class
    puts on each token id as T -> infinity. Z [R, M, M], P [K, M], queries [K] -> [R, K, M]."""
    zq = Z[:, queries, :]
    return torch.softmax(zq + torch.log(P.to(Z.dtype)).unsqueeze(0), dim=-1)
