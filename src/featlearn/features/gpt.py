"""A small character-level GPT (decoder-only transformer, the shape of nanoGPT's quick start) for Fig. 5.

x_0 = E[c_t] + P[t], dropout                               (learned token and position embeddings)
x_{l+1} = y + MLP(LN2(y)),  y = x_l + Attn(LN1(x_l))        (pre-LN blocks)
logits = E LN_f(x_L)                                        (output layer tied to the token embedding)
Attention is causal multi-head with 1/sqrt(d_head) scaling; MLP is Linear(d, 4d) -> GELU -> Linear(4d, d).
No biases anywhere, LayerNorm without bias ([C] nanoGPT's training script sets bias=False).
Init N(0, 0.02), the two residual output projections N(0, 0.02/sqrt(2 n_layer)) ([C] GPT-2, nanoGPT).

It lives in ``features`` rather than the shared ``featlearn.lm`` package so that the code hash of
``featlearn.lm`` (which the scan_snap and joma rules use) stays unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass(frozen=True)
class GPTConfig:
    vocab: int
    block_size: int
    n_layer: int
    n_head: int
    n_embd: int
    dropout: float

    def __post_init__(self):
        for name in ("vocab", "block_size", "n_layer", "n_head", "n_embd"):
            if getattr(self, name) < 1:
                raise ValueError(f"GPTConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd ({self.n_embd}) must be a multiple of n_head ({self.n_head})")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")


def parameter_count(cfg: GPTConfig) -> int:
    """Number of parameters of :class:`GPT` for a shape (the tied output layer counted once):
    V d + T d (embeddings) + L (12 d^2 + 2 d) (attention 4 d^2, MLP 8 d^2, two LayerNorms) + d (final LN)."""
    d = cfg.n_embd
    return cfg.vocab * d + cfg.block_size * d + cfg.n_layer * (12 * d * d + 2 * d) + d


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=False)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=False)
        self.dropout = cfg.dropout
        self.resid_dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape
        q, k, v = self.qkv(x).split(D, dim=-1)
        q, k, v = (t.view(B, T, self.n_head, D // self.n_head).transpose(1, 2) for t in (q, k, v))
        # softmax(q k^T / sqrt(d_head) + causal mask) v
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0, is_causal=True)
        return self.resid_dropout(self.proj(y.transpose(1, 2).reshape(B, T, D)))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.n_embd, bias=False)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.n_embd, bias=False)
        self.fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=False)
        self.proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd, bias=False)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.dropout(self.proj(F.gelu(self.fc(self.ln2(x)))))


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab, cfg.n_embd)
        self.pos = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.dropout = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd, bias=False)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)
        for block in self.blocks:
            for proj in (block.attn.proj, block.proj):
                nn.init.normal_(proj.weight, 0.0, 0.02 / math.sqrt(2 * cfg.n_layer))

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """idx [B, T] (T <= block_size) -> next-character logits [B, T, vocab]."""
        T = idx.shape[1]
        if T > self.cfg.block_size:
            raise ValueError(f"sequence length {T} exceeds block_size {self.cfg.block_size}")
        x = self.dropout(self.tok(idx) + self.pos(torch.arange(T, device=idx.device)))
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x) @ self.tok.weight.t()  # tied output layer
