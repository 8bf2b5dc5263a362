"""The PyTorch word_language_model tutorial's transformer, written out so attention maps can be read.

x_0 = E[w] * sqrt(d) + PE (sinusoidal), dropout
x_{l+1} = LN2(y + FFN(y)),  y = LN1(x_l + Attn(x_l))      (post-LN, as nn.TransformerEncoderLayer)
logits = W_dec x_L + b_dec                                  (untied decoder)
Attention is causal with 1/sqrt(d_head) scaling; FFN is Linear(d, d_ff) -> ReLU -> Linear(d_ff, d).
Init as the tutorial: embedding and decoder weights U(-0.1, 0.1), decoder bias 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass(frozen=True)
class LMConfig:
    vocab: int
    d_model: int
    d_ff: int
    n_head: int
    n_layer: int
    dropout: float
    max_len: int = 5000  # rows of the sinusoidal position table (longer than any window trained here)


def sinusoidal_positions(max_len: int, d: int) -> torch.Tensor:
    pos = torch.arange(max_len).unsqueeze(1)
    div = torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))
    pe = torch.zeros(max_len, d)
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)
    return pe


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: LMConfig):
        super().__init__()
        self.n_head = cfg.n_head
        self.in_proj = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.out_proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        B, T, D = x.shape
        q, k, v = self.in_proj(x).split(D, dim=-1)
        q, k, v = (t.view(B, T, self.n_head, D // self.n_head).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(D // self.n_head)
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        attn = torch.softmax(scores.masked_fill(causal, float("-inf")), dim=-1)  # [B, H, T, T]
        y = (self.dropout(attn) @ v).transpose(1, 2).reshape(B, T, D)
        return self.out_proj(y), attn


class EncoderLayer(nn.Module):
    def __init__(self, cfg: LMConfig):
        super().__init__()
        self.attn = CausalSelfAttention(cfg)
        self.linear1 = nn.Linear(cfg.d_model, cfg.d_ff)
        self.linear2 = nn.Linear(cfg.d_ff, cfg.d_model)
        self.norm1 = nn.LayerNorm(cfg.d_model)
        self.norm2 = nn.LayerNorm(cfg.d_model)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a, attn = self.attn(x)
        x = self.norm1(x + self.dropout(a))
        x = self.norm2(x + self.dropout(self.linear2(self.dropout(F.relu(self.linear1(x))))))
        return x, attn


class TransformerLM(nn.Module):
    def __init__(self, cfg: LMConfig):
        super().__init__()
        self.cfg = cfg
        self.embedding = nn.Embedding(cfg.vocab, cfg.d_model)
        self.register_buffer("pe", sinusoidal_positions(cfg.max_len, cfg.d_model), persistent=False)
        self.dropout = nn.Dropout(cfg.dropout)
        self.layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.n_layer))
        self.decoder = nn.Linear(cfg.d_model, cfg.vocab)
        nn.init.uniform_(self.embedding.weight, -0.1, 0.1)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)

    def forward(self, idx: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """idx [B, T] -> logits [B, T, vocab] and each layer's attention [B, H, T, T]."""
        T = idx.shape[1]
        x = self.dropout(self.embedding(idx) * math.sqrt(self.cfg.d_model) + self.pe[:T])
        maps = []
        for layer in self.layers:
            x, attn = layer(x)
            maps.append(attn)
        return self.decoder(x), maps

    def ffn_parameters(self) -> list[nn.Parameter]:
        """The feed-forward weights (Scan and Snap trains them with their own learning rate)."""
        return [p for layer in self.layers for p in (*layer.linear1.parameters(), *layer.linear2.parameters())]
