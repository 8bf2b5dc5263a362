"""The paper's models (Sec. 4, App. A), for R independent runs at once (a leading run dimension).

Notation as in the paper: x_j = W^e e_j is the embedding of the j-th token (stored row-wise: ``E[r, w]`` is
the column W^e e_w of run r), v the final layer (d x n_out; n_out = 1 binary, L for multi-class), d the width.
No biases (except inside the transformer). Padding positions carry zero vectors and are masked, so a
sequence scores the same whatever the batch pads it to.

- MLP (Eq. 6):      s = v^T/sqrt(d) sum_j phi(W x_j / sqrt(d))
- CNN (Eq. 9-10):   c_j = sum_k W^c_k x_{j+k-1} / sqrt(d) over windows of K tokens with K-1 zero vectors
                    padded on both sides; s = v^T/sqrt(d) sum_j phi(c_j)
- SA (Eq. 13-16):   a_ij = (x_i + P_i)^T (x_j + P_j) / d, alpha = softmax_j a_ij, h_i = sum_j alpha_ij x_j/sqrt(d),
                    s = v^T sum_i h_i; P fixed sinusoidal. Variant "code" (authors' code [C]): queries x_i + P_i/20,
                    keys x_j, a_ij scaled by 1/sqrt(d).
- SA+MLP (Fig. 2i): h~_i = sum_j alpha_ij x_j, s = v^T/sqrt(d) sum_i phi(W h~_i / sqrt(d))   [D]
- MV (Eq. 19):      s = v^T sum_{j<l} diag(W x_j) x_{j+1} / (d sqrt(d))
- L-RNN (Eq. 75-77): h_t = W^h h_{t-1}/sqrt(d) + W x_t / d, h_0 = 0, s = v^T h_T
- TR (Fig. 8) [D]:  one post-LN transformer encoder layer (one head, ffn width f, ReLU) on x_j + P_j,
                    sum-pooled, s = v^T sum_i z_i / sqrt(d).

Label scores of single units (Sec. 4): token e (the model's output on the one-token input),
CNN position scores s^e_[k] = v^T phi(W^c_k x_e / sqrt(d))/sqrt(d) (Eq. 66; the token score is their sum),
L-RNN position scores s^e_[k] = v^T (W^h/sqrt(d))^k W x_e / d (Eq. 86), MV bigram scores
s^{ab} = v^T [(W x_a) . x_b] / (d sqrt(d)). MV scores a one-token input 0: with a ``bos_id`` the token score is
that of the input (<bos>, e) [D].

Initialisation [P]: every weight Gaussian, std sigma_e = sigma_w = 0.1 (variance 0.01), v std sigma_v
(0.1 or 0.001), W^h std sigma_h (unstated, [D] 0.1); the CNN kernels N(0, sigma_w^2) as the paper says
([C] kept PyTorch's default).
"""

from __future__ import annotations

import math
from dataclasses import KW_ONLY, dataclass

import torch
import torch.nn.functional as F

KINDS = ("mlp", "cnn", "sa", "sa_mlp", "mv", "lrnn", "tr")
ACTIVATIONS = {
    "relu": torch.relu,
    "tanh": torch.tanh,
    "gelu": F.gelu,
    "silu": F.silu,
    "identity": lambda z: z,
}
SA_VARIANTS = ("paper", "code")


@dataclass(frozen=True)
class ModelSpec:
    """A model's shape. The sizes come from the training settings (config ``features.cls.train``: d, kernel, ffn,
    sa_variant); the fields with a default are structural: one output (a binary task), no <bos>."""

    kind: str
    vocab_size: int
    _: KW_ONLY
    d: int
    n_out: int = 1  # 1 (binary) or the number of classes
    kernel: int  # CNN window K
    ffn: int  # transformer feed-forward width
    sa_variant: str  # SA / SA+MLP attention logits: the paper's Eq. 15 or the authors' code
    bos_id: int | None = None  # MV: id prepended to every input, so that single tokens get a score [D]

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown model kind {self.kind!r}; expected one of {KINDS}")
        if self.sa_variant not in SA_VARIANTS:
            raise ValueError(f"unknown sa_variant {self.sa_variant!r}; expected one of {SA_VARIANTS}")
        if self.vocab_size < 1 or self.d < 1 or self.n_out < 1 or self.kernel < 1:
            raise ValueError("vocab_size, d, n_out and kernel must be positive")


@dataclass(frozen=True)
class InitScales:
    """Initial standard deviations (config ``features.cls.train``): embeddings, weights, L-RNN recurrence."""

    sigma_e: float
    sigma_w: float
    sigma_h: float


# ------------------------------------------------------------------------------------------------ init
def init_params(spec: ModelSpec, seeds: list[int], sigma_v: list[float], scales: InitScales,
                dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
    """Parameters of R = len(seeds) runs, each drawn from its own seeded generator (a run's values do not
    depend on the other runs in the batch). Shapes: E [R, V, d], v [R, d, n_out], W [R, d, d] (out x in),
    Wc [R, K, d, d], Wh [R, d, d]; transformer weights as named in :func:`_transformer_layer`."""
    if len(seeds) != len(sigma_v):
        raise ValueError("seeds and sigma_v need one entry per run")
    d, V, n_out = spec.d, spec.vocab_size, spec.n_out
    per_run: list[dict[str, torch.Tensor]] = []
    for seed, sv in zip(seeds, sigma_v):
        g = torch.Generator().manual_seed(int(seed))

        def normal(*shape, std):
            return torch.randn(*shape, generator=g, dtype=torch.float64).mul_(std).to(dtype)

        p = {"E": normal(V, d, std=scales.sigma_e), "v": normal(d, n_out, std=sv)}
        if spec.kind in ("mlp", "sa_mlp", "mv", "lrnn"):
            p["W"] = normal(d, d, std=scales.sigma_w)
        if spec.kind == "cnn":
            p["Wc"] = normal(spec.kernel, d, d, std=scales.sigma_w)
        if spec.kind == "lrnn":
            p["Wh"] = normal(d, d, std=scales.sigma_h)
        if spec.kind == "tr":  # [D] matrices N(0, sigma_w^2), biases 0, LayerNorm gain 1 / shift 0
            for name in ("Wq", "Wk", "Wv", "Wo"):
                p[name] = normal(d, d, std=scales.sigma_w)
            p["W1"] = normal(spec.ffn, d, std=scales.sigma_w)
            p["W2"] = normal(d, spec.ffn, std=scales.sigma_w)
            for name in ("bq", "bk", "bv", "bo", "b2", "ln1_b", "ln2_b"):
                p[name] = torch.zeros(d, dtype=dtype)
            p["b1"] = torch.zeros(spec.ffn, dtype=dtype)
            p["ln1_g"] = torch.ones(d, dtype=dtype)
            p["ln2_g"] = torch.ones(d, dtype=dtype)
        per_run.append(p)
    return {name: torch.stack([p[name] for p in per_run]) for name in per_run[0]}


# ------------------------------------------------------------------------------------------- helpers
def sinusoidal_positions(length: int, d: int, dtype: torch.dtype = torch.float32, device=None) -> torch.Tensor:
    """P[i, 2m] = sin(i / 10000^(2m/d)), P[i, 2m+1] = cos(i / 10000^(2m/d)), positions i = 0..length-1."""
    pos = torch.arange(length, dtype=torch.float64, device=device).unsqueeze(1)
    freq = torch.exp(torch.arange(0, d, 2, dtype=torch.float64, device=device) * (-math.log(10000.0) / d))
    P = torch.zeros(length, d, dtype=torch.float64, device=device)
    P[:, 0::2] = torch.sin(pos * freq)
    P[:, 1::2] = torch.cos(pos * freq)[:, : d // 2]
    return P.to(dtype)


def activate(z: torch.Tensor, activations: list[str]) -> torch.Tensor:
    """phi applied per run: z [R, ...], ``activations[r]`` names run r's function."""
    if len(activations) != z.shape[0]:
        raise ValueError(f"{len(activations)} activations for {z.shape[0]} runs")
    names = sorted(set(activations))
    for a in names:
        if a not in ACTIVATIONS:
            raise ValueError(f"unknown activation {a!r}; expected one of {sorted(ACTIVATIONS)}")
    if len(names) == 1:
        return ACTIVATIONS[names[0]](z)
    groups = [torch.tensor([r for r, a in enumerate(activations) if a == name], device=z.device) for name in names]
    out = torch.cat([ACTIVATIONS[name](z.index_select(0, idx)) for name, idx in zip(names, groups)])
    return out.index_select(0, torch.argsort(torch.cat(groups)))


def lengths_to_mask(lengths: torch.Tensor, max_len: int | None = None) -> torch.Tensor:
    """Boolean mask [..., L] that is True at the first ``lengths`` positions (right padding)."""
    L = int(lengths.max()) if max_len is None else max_len
    return torch.arange(L, device=lengths.device) < lengths.unsqueeze(-1)


def with_bos(tokens: torch.Tensor, lengths: torch.Tensor, bos_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Prepend ``bos_id`` to every (right-padded) sequence of ``tokens`` [..., L]."""
    bos = torch.full(tokens.shape[:-1] + (1,), bos_id, dtype=tokens.dtype, device=tokens.device)
    return torch.cat([bos, tokens], dim=-1), lengths + 1


def embed(E: torch.Tensor, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """x_j = W^e e_j as [R, B, L, d], zero at padding. ``tokens`` [B, L] (the same batch for every run)
    or [R, B, L] (one batch per run); ``mask`` of the same shape."""
    R, V, d = E.shape
    # index_select: its backward (index_add) is much faster on CPU than advanced indexing's
    if tokens.dim() == 2:
        x = E.index_select(1, tokens.reshape(-1)).view(R, *tokens.shape, d)
    elif tokens.dim() == 3:
        flat = tokens + V * torch.arange(R, device=tokens.device).view(-1, 1, 1)
        x = E.reshape(R * V, d).index_select(0, flat.reshape(-1)).view(*tokens.shape, d)
    else:
        raise ValueError("tokens must be [B, L] or [R, B, L]")
    return x * _mask4(mask, x)


def _mask4(mask: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    m = mask if mask.dim() == 3 else mask.unsqueeze(0)
    return m.unsqueeze(-1).to(x.dtype)


def _linear(x: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """x [R, ..., in] times W [R, out, in]^T, per run."""
    R = x.shape[0]
    return (x.reshape(R, -1, x.shape[-1]) @ W.transpose(1, 2)).reshape(*x.shape[:-1], W.shape[1])


def _readout(pooled: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """pooled [R, B, d] -> v^T pooled, [R, B, n_out]."""
    return torch.bmm(pooled, v)


def _attention(x: torch.Tensor, m: torch.Tensor, variant: str) -> torch.Tensor:
    """alpha [R, B, L, L] of Eq. 14-15 (or the authors' variant); keys at padding get no weight."""
    d, L = x.shape[-1], x.shape[2]
    P = sinusoidal_positions(L, d, x.dtype, x.device)
    if variant == "paper":
        q = k = x + P
        logits = q @ k.transpose(-1, -2) / d
    else:
        q, k = x + P / 20, x
        logits = q @ k.transpose(-1, -2) / math.sqrt(d)
    keys = m.squeeze(-1).bool().unsqueeze(-2)  # [R|1, B, 1, L]
    logits = logits.masked_fill(~keys, float("-inf"))
    return torch.softmax(logits, dim=-1)


def _layer_norm(z: torch.Tensor, g: torch.Tensor, b: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """LayerNorm over the last axis with each run's own gain and bias g, b [R, d].

    The normalisation is torch's fused kernel (without its affine, which is shared across runs): on a CPU its
    forward and backward take a fifth of the time of mean, ``var`` and the division written out, torch's ``var`` over
    64 features being about 10x slower than a two-pass reduction (docs/performance.md, "The features transformer's
    layer norm").
    """
    shape = (g.shape[0],) + (1,) * (z.dim() - 2) + (g.shape[-1],)
    return F.layer_norm(z, z.shape[-1:], eps=eps) * g.view(shape) + b.view(shape)


def _bias(b: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    return b.view((b.shape[0],) + (1,) * (z.dim() - 2) + (b.shape[-1],))


def _transformer_layer(p: dict[str, torch.Tensor], x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """Post-LN encoder layer: z1 = LN(x + Attn(x)), z2 = LN(z1 + W2 relu(W1 z1 + b1) + b2)."""
    d = x.shape[-1]
    q = _linear(x, p["Wq"]) + _bias(p["bq"], x)
    k = _linear(x, p["Wk"]) + _bias(p["bk"], x)
    val = _linear(x, p["Wv"]) + _bias(p["bv"], x)
    logits = q @ k.transpose(-1, -2) / math.sqrt(d)
    logits = logits.masked_fill(~m.squeeze(-1).bool().unsqueeze(-2), float("-inf"))
    att = _linear(torch.softmax(logits, dim=-1) @ val, p["Wo"]) + _bias(p["bo"], x)
    z1 = _layer_norm(x + att, p["ln1_g"], p["ln1_b"])
    hidden = torch.relu(_linear(z1, p["W1"]) + _bias(p["b1"], z1))
    z2 = _layer_norm(z1 + _linear(hidden, p["W2"]) + _bias(p["b2"], z1), p["ln2_g"], p["ln2_b"])
    return z2


# ------------------------------------------------------------------------------------------- forward
def forward(spec: ModelSpec, params: dict[str, torch.Tensor], tokens: torch.Tensor, mask: torch.Tensor,
            activations: list[str], *, dropout: float = 0.0, training: bool = False,
            generator: torch.Generator | None = None, E: torch.Tensor | None = None,
            keep: torch.Tensor | None = None) -> torch.Tensor:
    """Label scores s, shape [R, B, n_out], of right-padded ``tokens`` ([B, L] or [R, B, L]) with ``mask``.

    ``E`` replaces ``params["E"]`` (a gathered subset of rows whose ids ``tokens`` refers to; used by the
    trainer's sparse embedding update). ``dropout`` acts on the embeddings x_j in training ([C]'s knob; the
    theory has none); its masks are ``keep`` (0/1, broadcastable to [R, B, L, d]: the trainer draws each
    run's from its own stream) or else drawn from ``generator`` (on the tensors' device).
    """
    x = embed(params["E"] if E is None else E, tokens, mask)
    if training and dropout > 0:
        if keep is None:
            keep = torch.rand(x.shape, generator=generator, device=x.device, dtype=x.dtype) >= dropout
        x = x * keep / (1.0 - dropout)
    return forward_embedded(spec, params, x, mask, activations)


def forward_embedded(spec: ModelSpec, params: dict[str, torch.Tensor], x: torch.Tensor, mask: torch.Tensor,
                     activations: list[str]) -> torch.Tensor:
    """Scores from embedded inputs x [R, B, L, d] (zero at padding)."""
    m = _mask4(mask, x)  # [R|1, B, L, 1]
    d = spec.d
    v = params["v"]
    kind = spec.kind
    if kind == "mlp":  # Eq. 6
        h = activate(_linear(x, params["W"]) / math.sqrt(d), activations) * m
        return _readout(h.sum(2), v) / math.sqrt(d)
    if kind == "cnn":  # Eq. 9-10
        K = spec.kernel
        xp = F.pad(x, (0, 0, K - 1, K - 1))  # K-1 zero vectors on both sides
        n_win = x.shape[2] + K - 1
        c = sum(_linear(xp[:, :, k:k + n_win], params["Wc"][:, k]) for k in range(K)) / math.sqrt(d)
        # windows made only of padding are zero vectors and phi(0) = 0 for every activation offered
        return _readout(activate(c, activations).sum(2), v) / math.sqrt(d)
    if kind in ("sa", "sa_mlp"):  # Eq. 13-16
        alpha = _attention(x, m, spec.sa_variant)
        mixed = alpha @ x  # sum_j alpha_ij x_j, [R, B, L, d]
        if kind == "sa":
            return _readout((mixed * m).sum(2), v) / math.sqrt(d)
        h = activate(_linear(mixed, params["W"]) / math.sqrt(d), activations) * m
        return _readout(h.sum(2), v) / math.sqrt(d)
    if kind == "mv":  # Eq. 19
        pairs = _linear(x[:, :, :-1], params["W"]) * x[:, :, 1:] * m[:, :, 1:]
        return _readout(pairs.sum(2), v) / (d * math.sqrt(d))
    if kind == "lrnn":  # Eq. 75, 77
        z = _linear(x, params["W"]) / d
        h = torch.zeros_like(z[:, :, 0])
        WhT = params["Wh"].transpose(1, 2) / math.sqrt(d)
        for t in range(x.shape[2]):
            step = torch.bmm(h, WhT) + z[:, :, t]
            h = torch.where(m[:, :, t] > 0, step, h)  # past a sequence's end its state stays h_T
        return _readout(h, v)
    if kind == "tr":
        P = sinusoidal_positions(x.shape[2], d, x.dtype, x.device)
        z = _transformer_layer(params, x + P, m) * m
        return _readout(z.sum(2), v) / math.sqrt(d)
    raise AssertionError(kind)


def scores_of(spec: ModelSpec, params: dict[str, torch.Tensor], seqs: list[list[int]], activations: list[str]) -> torch.Tensor:
    """Scores [R, len(seqs), n_out] of explicit token-id sequences (padded here; evaluation mode)."""
    lengths = torch.tensor([len(s) for s in seqs])
    L = int(lengths.max())
    tokens = torch.zeros(len(seqs), L, dtype=torch.long)
    for i, s in enumerate(seqs):
        tokens[i, : len(s)] = torch.tensor(s, dtype=torch.long)
    device = params["E"].device
    with torch.no_grad():
        return forward(spec, params, tokens.to(device), lengths_to_mask(lengths, L).to(device), activations)


# ------------------------------------------------------------------------------- single-unit scores
def token_scores(spec: ModelSpec, params: dict[str, torch.Tensor], ids: torch.Tensor, activations: list[str]) -> torch.Tensor:
    """Label score of each token in ``ids`` by its closed form, [R, n, n_out]: the model's output on the
    one-token input (for MV with a ``bos_id``: on the input (<bos>, e); without one, 0)."""
    d = spec.d
    with torch.no_grad():
        x = params["E"][:, ids]  # [R, n, d]
        v = params["v"]
        if spec.kind in ("mlp", "sa_mlp"):  # s^e = v^T phi(W x_e / sqrt(d)) / sqrt(d)
            return _readout(activate(_linear(x, params["W"]) / math.sqrt(d), activations), v) / math.sqrt(d)
        if spec.kind == "cnn":  # sum_k s^e_[k]
            return position_scores(spec, params, ids, list(range(spec.kernel)), activations).sum(2)
        if spec.kind == "sa":  # s_e = v^T x_e / sqrt(d)
            return _readout(x, v) / math.sqrt(d)
        if spec.kind == "mv":
            if spec.bos_id is None:
                return torch.zeros(x.shape[0], x.shape[1], spec.n_out, dtype=x.dtype)
            bos = torch.full_like(ids, spec.bos_id)
            return bigram_scores(spec, params, bos, ids)
        if spec.kind == "lrnn":  # s^e_[0]
            return position_scores(spec, params, ids, [0], activations)[:, :, 0]
        if spec.kind == "tr":
            return scores_of(spec, params, [[int(i)] for i in ids], activations)
    raise AssertionError(spec.kind)


def position_scores(spec: ModelSpec, params: dict[str, torch.Tensor], ids: torch.Tensor, ks: list[int],
                    activations: list[str]) -> torch.Tensor:
    """[R, n, len(ks), n_out]. CNN (Eq. 66): k = 0..K-1 indexes the kernel slot W^c_{k+1}.
    L-RNN (Eq. 86): k = distance from the last token."""
    d = spec.d
    with torch.no_grad():
        x = params["E"][:, ids]
        v = params["v"]
        out = []
        if spec.kind == "cnn":
            for k in ks:
                c = _linear(x, params["Wc"][:, k]) / math.sqrt(d)
                out.append(_readout(activate(c, activations), v) / math.sqrt(d))
        elif spec.kind == "lrnn":
            z = _linear(x, params["W"]) / d  # W x_e / d
            WhT = params["Wh"].transpose(1, 2) / math.sqrt(d)
            powers = {0: z}
            for k in range(1, max(ks) + 1):
                powers[k] = torch.bmm(powers[k - 1], WhT)  # rows: ((W^h/sqrt d)^k W x_e / d)^T
            out = [_readout(powers[k], v) for k in ks]
        else:
            raise ValueError(f"position scores are defined for cnn and lrnn, not {spec.kind!r}")
        return torch.stack(out, dim=2)


def bigram_scores(spec: ModelSpec, params: dict[str, torch.Tensor], a_ids: torch.Tensor, b_ids: torch.Tensor) -> torch.Tensor:
    """MV bigram scores s^{ab} = v^T [(W x_a) . x_b] / (d sqrt(d)), [R, n, n_out]."""
    if spec.kind != "mv":
        raise ValueError("bigram scores are defined for the MV model")
    d = spec.d
    with torch.no_grad():
        E = params["E"]
        prod = _linear(E[:, a_ids], params["W"]) * E[:, b_ids]
        return _readout(prod, params["v"]) / (d * math.sqrt(d))


# -------------------------------------------------------------------------------------------- losses
def example_losses(scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Loss of each run and instance, [R, B]. Binary (n_out = 1, labels 0/1): -log sigmoid(y s) with
    y = 2 label - 1 (Eq. 3). Multi-class: softmax cross-entropy (Eq. 90). ``labels`` [B] or [R, B]."""
    R, B, n_out = scores.shape
    labels = labels.expand(R, B) if labels.dim() == 1 else labels
    if n_out == 1:
        y = 2.0 * labels.to(scores.dtype) - 1.0
        return F.softplus(-y * scores[..., 0])
    return F.cross_entropy(scores.reshape(R * B, n_out), labels.reshape(R * B), reduction="none").view(R, B)


def run_losses(scores: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """Mean loss of each run, [R]; with ``weights`` [B] or [R, B] a weighted mean (0 drops an instance)."""
    losses = example_losses(scores, labels)
    if weights is None:
        return losses.mean(1)
    w = weights.expand_as(losses).to(losses.dtype)
    return (losses * w).sum(1) / w.sum(1)


def predictions(scores: torch.Tensor) -> torch.Tensor:
    """Predicted class per run and instance, [R, B]: s > 0 (binary) or argmax (multi-class)."""
    return (scores[..., 0] > 0).long() if scores.shape[-1] == 1 else scores.argmax(-1)
