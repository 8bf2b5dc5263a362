"""Models for template tasks: the transformer with trainable identity scalings and its baselines.

Transformer [C] (facts of the authors' experiments/models.py): token embedding E (N(0, 1) init), learned
positional embedding, a learned CLS vector appended after the k tokens (readout 'cls'); pre-LN blocks

    x <- x + Attn(LN x),    x <- x + MLP(LN x),    MLP = Linear -> GELU -> Linear,

with bias-free q/k/v/out projections and no dropout. Regression head: LN (no affine) -> Linear(d, 1) at
the readout position, MSE loss. Next-token head: LN (no affine) at the readout position, logits h E^T
tied to the input embedding over the whole vocabulary, cross-entropy. The readout is the CLS position by
default, for next-token tasks too [D]: read at the last input token (readout 'last', the authors' other
option), the residual stream hands E[x] to the tied unembedding, so the copy task (Fig. 5) is solved at
init without attention, against the premise of Thm. 4.1 (the answer must come through W_V W_O^T).

Attention of head h on the LN'd block input x ∈ R^{T×d} (Eq. 3 [P], per head):

    logits_h = (x W_Q,h)(x W_K,h)^T · attn_mult / sqrt(d_head)  +  kq_mult · a_h · x x^T     (+KQ)
    A_h      = softmax(logits_h)  (row-wise, bidirectional: the model is an encoder [C])
    out      = Σ_h A_h x W_V,h W_O,h  +  vo_mult · Σ_h b_h · A_h x                             (+VO)

i.e. W_K W_Q^T is replaced by W_K W_Q^T + a_h I [P Sec. 3.3] and W_V W_O^T by W_V W_O^T + b_h I
[P Thm. 4.2]; the identity term of the logits is not divided by sqrt(d_head) [C]. a_h and b_h are
trainable scalars initialised at 0, so the model equals the vanilla one at init; +KQ and +VO add L·H
parameters each. kq_mult and vo_mult are the authors' constant multipliers of these terms [C: knobs
wkwq_id_mult / wvwo_id_mult; the values used for the figures are not published; default 1]: under Adam a
scalar moves about lr per step, so the multiplier sets how fast the identity term can grow.

Baselines: MLP on concatenated one-hots (ReLU, ``depth`` linear layers counting the output layer [C]);
MLP on [one-hots, vec(X X^T)] (the k² equality features, App. B.3 [P][C]); Elman RNN with ReLU
(h <- relu(W [e(x_t); h]) [C]); LSTM (PyTorch gate layout; zero initial state [D]: the authors draw a
random initial state at every forward). RNN and LSTM read the last hidden state.

Every model maps tokens [B, k] (int64) to [B] (regression) or [B, V] logits (next-token), and is written
with plain tensor ops so that ``torch.func.vmap`` over stacked parameters works (see ``sweep``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

ARCHS = ("transformer", "mlp", "mlp_xxt", "rnn", "lstm")


# Whether the last query's slice is copied to contiguous memory before its linear maps (``attention``): None, on a
# GPU only (the engine's tables on a CPU stay as they were); True forces the copy on a CPU too, to measure the GPU's
# path there (``benchmarks/group_memory.py``).
LAST_QUERY_COPY: bool | None = None


class IdentityScaledAttention(nn.Module):
    """Multi-head attention with optional per-head trainable identity scalings a_h (KQ) and b_h (VO)."""

    def __init__(
        self,
        d_emb: int,
        heads: int,
        d_head: int,
        kq: bool = False,
        vo: bool = False,
        attn_mult: float = 1.0,
        kq_mult: float = 1.0,
        vo_mult: float = 1.0,
    ):
        super().__init__()
        self.heads, self.d_head = heads, d_head
        self.kq_mult, self.vo_mult = kq_mult, vo_mult
        self.scale = attn_mult / math.sqrt(d_head)
        inner = heads * d_head
        self.to_qk = nn.Linear(d_emb, 2 * inner, bias=False)
        self.to_v = nn.Linear(d_emb, inner, bias=False)
        self.to_out = nn.Linear(inner, d_emb, bias=False)
        # zeros draw nothing from the RNG: a model with scalings has the vanilla model's weights at init
        self.kq_scale = nn.Parameter(torch.zeros(heads)) if kq else None
        self.vo_scale = nn.Parameter(torch.zeros(heads)) if vo else None

    def _split(self, t: torch.Tensor) -> torch.Tensor:  # [B, T, H*dh] -> [B, H, T, dh]
        B, T, _ = t.shape
        return t.view(B, T, self.heads, self.d_head).transpose(1, 2)

    def attention(self, x: torch.Tensor, last_query: bool = False) -> torch.Tensor:
        """Attention weights A [B, H, T, T] of the LN'd input x [B, T, d]; with ``last_query`` only the
        last position's row, [B, H, 1, T]."""
        xq = x[:, -1:] if last_query else x
        if last_query and (xq.is_cuda if LAST_QUERY_COPY is None else LAST_QUERY_COPY):
            # Under vmap (the sweep engine), a linear map of this strided slice with per-run weights takes a slow
            # path that materialises the weights per sample: 10x the time at d_emb 64 and 100x at 2048 (one CPU
            # core, 2 runs, batch 1024), 32 GiB at d_emb 4096, and out of memory on a 141 GB GPU in the paper
            # estimate (benchmarks/device/h200-2026-11-28). A contiguous copy avoids it. It changes the last bits
            # of the product, so the CPU keeps the strided slice and its tables stay as they were, until a
            # comparison of the verdicts moves it too.
            xq = xq.contiguous()
        inner = self.heads * self.d_head
        W_q, W_k = self.to_qk.weight[:inner], self.to_qk.weight[inner:]
        q, k = F.linear(xq, W_q), F.linear(x, W_k)
        logits = self._split(q) @ self._split(k).transpose(-1, -2) * self.scale
        if self.kq_scale is not None:  # W_K W_Q^T + a_h I: adds a_h x x^T
            logits = logits + (self.kq_mult * self.kq_scale).view(1, -1, 1, 1) * (xq @ x.transpose(-1, -2)).unsqueeze(1)
        return logits.softmax(dim=-1)

    def forward(self, x: torch.Tensor, last_query: bool = False) -> torch.Tensor:
        """Attention output [B, T, d]; with ``last_query`` only the last position's, [B, 1, d] (the same
        values: every position attends to all keys, so its row does not depend on the other queries)."""
        A = self.attention(x, last_query)
        B, Tq = x.shape[0], A.shape[-2]
        heads = (A @ self._split(self.to_v(x))).transpose(1, 2).reshape(B, Tq, self.heads * self.d_head)
        out = self.to_out(heads)
        if self.vo_scale is not None:  # W_V W_O^T + b_h I: adds Σ_h b_h A_h x
            out = out + (A * (self.vo_mult * self.vo_scale).view(1, -1, 1, 1)).sum(dim=1) @ x
        return out


class Block(nn.Module):
    def __init__(
        self,
        d_emb: int,
        heads: int,
        d_head: int,
        d_mlp: int,
        kq: bool,
        vo: bool,
        attn_mult: float,
        kq_mult: float,
        vo_mult: float,
    ):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_emb)
        self.attn = IdentityScaledAttention(d_emb, heads, d_head, kq, vo, attn_mult, kq_mult, vo_mult)
        self.norm2 = nn.LayerNorm(d_emb)
        self.mlp = nn.Sequential(nn.Linear(d_emb, d_mlp), nn.GELU(), nn.Linear(d_mlp, d_emb))

    def forward(self, x: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        """The block's output [B, T, d]; with ``last_only`` only the last position's, [B, 1, d]."""
        x = (x[:, -1:] if last_only else x) + self.attn(self.norm1(x), last_query=last_only)
        return x + self.mlp(self.norm2(x))


class TemplateTransformer(nn.Module):
    """Pre-LN transformer; ``head`` 'regression' (CLS readout, scalar) or 'next_token' (tied logits)."""

    def __init__(
        self,
        vocab_size: int,
        length: int,
        head: str = "regression",
        d_emb: int = 128,
        depth: int = 2,
        heads: int = 16,
        d_head: int = 64,
        d_mlp: int = 256,
        kq: bool = False,
        vo: bool = False,
        attn_mult: float = 1.0,
        readout: str = "cls",
        kq_mult: float = 1.0,
        vo_mult: float = 1.0,
    ):
        super().__init__()
        if head not in ("regression", "next_token"):
            raise ValueError(f"head must be 'regression' or 'next_token', got {head!r}")
        if readout not in ("cls", "last"):
            raise ValueError(f"readout must be 'cls' or 'last', got {readout!r}")
        self.head_kind = head
        self.embed = nn.Embedding(vocab_size, d_emb)
        positions = length + 1 if readout == "cls" else length
        self.pos = nn.Parameter(torch.randn(1, positions, d_emb))
        self.cls = nn.Parameter(torch.randn(1, 1, d_emb)) if readout == "cls" else None
        self.blocks = nn.ModuleList(Block(d_emb, heads, d_head, d_mlp, kq, vo, attn_mult, kq_mult, vo_mult) for _ in range(depth))
        if head == "regression":
            self.head_norm = nn.LayerNorm(d_emb, elementwise_affine=False)
            self.head = nn.Linear(d_emb, 1)
        else:
            self.final_norm = nn.LayerNorm(d_emb, elementwise_affine=False)

    def features(self, tokens: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        """Residual stream after the last block [B, T', d] (T' = k + 1 with the CLS); with ``last_only``
        only its last position, [B, 1, d]."""
        x = self.embed(tokens)
        if self.cls is not None:
            x = torch.cat([x, self.cls.expand(x.shape[0], -1, -1)], dim=1)
        x = x + self.pos
        for i, block in enumerate(self.blocks):
            x = block(x, last_only=last_only and i == len(self.blocks) - 1)
        return x

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        # Only the readout position (the CLS, or the last token) reaches the head, so the last block
        # computes that position alone: its queries, attention row and MLP (keys and values still come
        # from every position). Measured on a depth-2 group: about a quarter less time; the values are the same.
        h = self.features(tokens, last_only=True)[:, -1]
        if self.head_kind == "regression":
            return self.head(self.head_norm(h)).squeeze(-1)
        return self.final_norm(h) @ self.embed.weight.T  # tied embedding / unembedding [C]


class TemplateMLP(nn.Module):
    """MLP on concatenated one-hots [e_{x_1}, ..., e_{x_k}] (optionally with vec(X X^T) appended).

    The first layer is Linear(k·V [+ k²], hidden) in nn.Linear's layout; its product with the one-hot
    concatenation is computed exactly as a sum of the k selected columns, so a token that never occurs in
    training gets an exactly zero gradient in its columns.
    """

    def __init__(
        self,
        vocab_size: int,
        length: int,
        hidden: int = 256,
        depth: int = 3,
        out_dim: int = 1,
        xxt: bool = False,
        xxt_scale: float = 1.0,
    ):
        super().__init__()
        if depth < 2:
            raise ValueError("depth counts the output layer; it must be >= 2")
        self.vocab_size, self.length, self.xxt, self.xxt_scale = vocab_size, length, xxt, xxt_scale
        in_dim = vocab_size * length + (length**2 if xxt else 0)
        self.layers = nn.ModuleList([nn.Linear(in_dim, hidden)] + [nn.Linear(hidden, hidden) for _ in range(depth - 2)])
        self.out = nn.Linear(hidden, out_dim)
        self.out_dim = out_dim

    def first_layer(self, tokens: torch.Tensor) -> torch.Tensor:
        W, b = self.layers[0].weight, self.layers[0].bias
        k, V = self.length, self.vocab_size
        offsets = torch.arange(k, device=tokens.device) * V
        # one-hot concat @ W^T: rows of W^T, whose first k V rows are the one-hot inputs' (the whole of W^T is looked
        # up, not a slice of it: the same rows, and no copy of a slice where the engine stores W input-major)
        if not self.xxt:
            return F.embedding(tokens + offsets, W.T).sum(dim=1) + b
        # With the pair inputs, their k² rows of W^T (the last ones) come from the same lookup as the tokens' rows, so
        # that W's gradient is one embedding backward, laid out as W is kept. Taken as a slice W[:, kV:], their
        # gradient was a second full-size tensor in the other layout, added to the first: the update then read it
        # across the engine's input-major layout (a paper-scale group of n 8,192: twice the step time of the MLP's).
        # The same rows, products and sums, so the same bits (tests/templates/test_templates.py).
        B = tokens.shape[0]
        pairs = torch.arange(k * V, k * V + k * k, device=tokens.device)
        rows = F.embedding(torch.cat([(tokens + offsets).flatten(), pairs]), W.T)
        h = rows[: B * k].view(B, k, -1).sum(dim=1) + b
        eq = (tokens.unsqueeze(1) == tokens.unsqueeze(2)).to(W.dtype).flatten(1) * self.xxt_scale
        return h + eq @ rows[B * k :]

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.first_layer(tokens))
        for layer in self.layers[1:]:
            h = F.relu(layer(h))
        out = self.out(h)
        return out.squeeze(-1) if self.out_dim == 1 else out


class TemplateRNN(nn.Module):
    """Elman RNN [C]: h_t = relu(W [e(x_t); h_{t-1}] + c), h_0 = 0, output Linear(h_k)."""

    def __init__(self, vocab_size: int, hidden: int = 128, out_dim: int = 1):
        super().__init__()
        self.hidden, self.out_dim = hidden, out_dim
        self.embed = nn.Embedding(vocab_size, hidden)
        self.i2h = nn.Linear(2 * hidden, hidden)
        self.h2o = nn.Linear(hidden, out_dim)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        e = self.embed(tokens)
        h = e.new_zeros(tokens.shape[0], self.hidden)
        for t in range(tokens.shape[1]):
            h = F.relu(self.i2h(torch.cat([e[:, t], h], dim=-1)))
        out = self.h2o(h)
        return out.squeeze(-1) if self.out_dim == 1 else out


class TemplateLSTM(nn.Module):
    """LSTM with PyTorch's gate equations (i, f, g, o) written out so that it can be vmapped; the two
    Linear layers have nn.LSTM's init law U(-1/sqrt(h), 1/sqrt(h)) for weights and biases."""

    def __init__(self, vocab_size: int, hidden: int = 128, out_dim: int = 1):
        super().__init__()
        self.hidden, self.out_dim = hidden, out_dim
        self.embed = nn.Embedding(vocab_size, hidden)
        self.ih = nn.Linear(hidden, 4 * hidden)
        self.hh = nn.Linear(hidden, 4 * hidden)
        self.fc = nn.Linear(hidden, out_dim)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        e = self.embed(tokens)
        h = e.new_zeros(tokens.shape[0], self.hidden)
        c = torch.zeros_like(h)
        for t in range(tokens.shape[1]):
            i, f, g, o = (self.ih(e[:, t]) + self.hh(h)).chunk(4, dim=-1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
        out = self.fc(h)
        return out.squeeze(-1) if self.out_dim == 1 else out


def build_model(arch: str, vocab_size: int, length: int, kind: str = "regression", **cfg) -> nn.Module:
    """Model by name (``ARCHS``). ``cfg``: transformer d_emb, depth, heads, d_head, d_mlp, kq, vo, attn_mult, readout,
    kq_mult, vo_mult;
    mlp/mlp_xxt hidden, depth, xxt_scale; rnn/lstm hidden. Baselines are regression models (output 1)."""
    if arch == "transformer":
        keys = ("d_emb", "depth", "heads", "d_head", "d_mlp", "kq", "vo", "attn_mult", "readout", "kq_mult", "vo_mult")
        return TemplateTransformer(vocab_size, length, head=kind, **{k: cfg[k] for k in keys if k in cfg})
    if kind != "regression":
        raise ValueError(f"{arch} is a regression baseline; next-token tasks need the transformer")
    if arch in ("mlp", "mlp_xxt"):
        keys = ("hidden", "depth", "xxt_scale")
        return TemplateMLP(vocab_size, length, xxt=arch == "mlp_xxt", **{k: cfg[k] for k in keys if k in cfg})
    if arch == "rnn":
        return TemplateRNN(vocab_size, **{k: cfg[k] for k in ("hidden",) if k in cfg})
    if arch == "lstm":
        return TemplateLSTM(vocab_size, **{k: cfg[k] for k in ("hidden",) if k in cfg})
    raise ValueError(f"unknown architecture {arch!r}; expected one of {ARCHS}")


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def identity_scalings(model: nn.Module) -> dict[str, torch.Tensor]:
    """Named a_h (``...attn.kq_scale``) and b_h (``...attn.vo_scale``) parameters of a transformer."""
    return {n: p for n, p in model.named_parameters() if n.endswith(("kq_scale", "vo_scale"))}
