"""Random-features kernels of Sec. 3 and App. H/I: when kernel ridge regression generalises to unseen symbols.

Strings are one-hot matrices X ∈ R^{k×m} (rows e_{x_i}); transformer strings end with a [CLS] token that
occurs nowhere else (App. H.2), appended here as one extra token id.

Attention kernel (Eq. 4 [P]):
    K_attn(X, Y) = E[ smax(β m(X))^T (X Y^T + γ² I) smax(β m(Y)) ],
    (m(X), m(Y)) ~ N(0, [[X X^T + γ² I, X Y^T + γ² I], [Y X^T + γ² I, Y Y^T + γ² I]]),
sampled jointly for all strings with one shared ζ ~ N(0, I_m) per token and p ~ N(0, I_k) per position:
m(X) = X ζ + γ p. The Monte Carlo estimate (1/M) Σ_s smax(β m_s(X))^T (X Y^T + γ² I) smax(β m_s(Y)) is itself a
PSD kernel. At β = 0 the softmax is uniform and K_attn(X, Y) = (1^T X Y^T 1 + γ² k) / k² exactly.
Transformer kernel (Eq. 4 [P]) with φ(t) = cos(b1 t + b2) (Thm. 3.4): for (u, v) centred Gaussian with
variances a, b and covariance ρ,
    E[cos(b1 u + b2) cos(b1 v + b2)] = ½ e^{-b1² (a + b)/2} (e^{-b1² ρ} cos 2 b2 + e^{b1² ρ}),
with a = K_attn(X, X), b = K_attn(Y, Y), ρ = K_attn(X, Y).
MLP kernel [D]: any inner-product kernel of one-hot concatenations is κ(Σ_i 1(x_i = y_i)) (Sec. 3.3);
here the one-hidden-layer ReLU (arc-cosine, order 1) kernel of the normalised concatenation,
κ(t) = (sqrt(1 - c²) + (π - arccos c) c) / π with c = t / k.
N matrix (Eq. 7-8 [P]): N_ij = K(sub(z_i, s), sub(z_j, s')) with s, s' injective onto fresh tokens,
s(W) ∩ s'(W) = ∅, both disjoint from the templates' tokens. Lemma 3.5: N nonsingular => kernel ridge
regression (Eq. 5: f(X) = y^T (K + λ I)^{-1} k(X)) generalises to unseen symbols. For the MLP kernel of
wildcard-only templates every entry is κ(0): N has rank 1.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from featlearn.templates.tasks import TemplateTask, Vocabulary, encode, make_datasets, make_task

DTYPE = torch.float64


# --------------------------------------------------------------------------------------- kernels


def softmax_samples(
    seqs: torch.Tensor, beta: float, gamma: float, n_mc: int, seed: int, vocab_size: int | None = None
) -> torch.Tensor:
    """[M, N, k] samples of smax(β m(X)) for every string (row of ``seqs``), with shared ζ and p."""
    seqs = torch.as_tensor(seqs, dtype=torch.int64)
    V = int(seqs.max()) + 1 if vocab_size is None else vocab_size
    g = torch.Generator().manual_seed(seed)
    zeta = torch.randn(n_mc, V, generator=g, dtype=DTYPE)
    p = torch.randn(n_mc, seqs.shape[1], generator=g, dtype=DTYPE)
    m = zeta[:, seqs] + gamma * p[:, None, :]
    return torch.softmax(beta * m, dim=-1)


def gram(A: torch.Tensor, B: torch.Tensor, gamma: float) -> torch.Tensor:
    """G[a, i, b, j] = 1(A_ai = B_bj) + γ² 1(i = j): the entries of X Y^T + γ² I for every pair."""
    eq = (A[:, :, None, None] == B[None, None, :, :]).to(DTYPE)
    k = A.shape[1]
    return eq + gamma**2 * torch.eye(k, dtype=DTYPE)[None, :, None, :]


def k_attn(A: torch.Tensor, B: torch.Tensor, beta: float, gamma: float, n_mc: int, seed: int, batches: int = 1) -> torch.Tensor:
    """Monte Carlo K_attn between the strings of A [N1, k] and B [N2, k] (token ids) -> [batches, N1, N2]:
    one estimate per batch of n_mc / batches samples (their mean is the full estimate)."""
    A, B = torch.as_tensor(A, dtype=torch.int64), torch.as_tensor(B, dtype=torch.int64)
    N1, k = A.shape
    S = softmax_samples(torch.cat([A, B]), beta, gamma, n_mc, seed)  # [M, N1 + N2, k]
    G = gram(A, B, gamma)  # [N1, k, N2, k]
    out = []
    for Sb in S.chunk(batches, dim=0):
        SA, SB = Sb[:, :N1].reshape(len(Sb), -1), Sb[:, N1:].reshape(len(Sb), -1)
        C = (SA.T @ SB / len(Sb)).view(N1, k, -1, k)  # E[s_a,i s_b,j]
        out.append((C * G).sum(dim=(1, 3)))
    return torch.stack(out)


def k_attn_beta0(A: torch.Tensor, B: torch.Tensor, gamma: float) -> torch.Tensor:
    """Closed form at β = 0: (1^T X Y^T 1 + γ² k) / k²."""
    A, B = torch.as_tensor(A, dtype=torch.int64), torch.as_tensor(B, dtype=torch.int64)
    k = A.shape[1]
    eq = (A[:, :, None, None] == B[None, None, :, :]).to(DTYPE).sum(dim=(1, 3))
    return (eq + gamma**2 * k) / k**2


def cos_expectation(a: torch.Tensor, b: torch.Tensor, rho: torch.Tensor, b1: float, b2: float) -> torch.Tensor:
    """E[cos(b1 u + b2) cos(b1 v + b2)] for centred Gaussians with Var u = a, Var v = b, Cov = ρ."""
    s = b1**2
    return 0.5 * torch.exp(-s * (a + b) / 2) * (torch.exp(-s * rho) * math.cos(2 * b2) + torch.exp(s * rho))


def k_trans_from_attn(Kab: torch.Tensor, Kaa: torch.Tensor, Kbb: torch.Tensor, b1: float, b2: float) -> torch.Tensor:
    """K_trans [.., N1, N2] from K_attn cross values and the diagonals K_attn(X, X) [.., N1], K_attn(Y, Y) [.., N2]."""
    return cos_expectation(Kaa[..., :, None], Kbb[..., None, :], Kab, b1, b2)


def k_trans(A, B, beta: float, gamma: float, b1: float, b2: float, n_mc: int, seed: int, batches: int = 1) -> torch.Tensor:
    """Monte Carlo K_trans [batches, N1, N2] (same random features for the cross and diagonal terms)."""
    A, B = torch.as_tensor(A, dtype=torch.int64), torch.as_tensor(B, dtype=torch.int64)
    N1 = A.shape[0]
    both = torch.cat([A, B])
    K = k_attn(both, both, beta, gamma, n_mc, seed, batches)
    d = torch.diagonal(K, dim1=-2, dim2=-1)
    return k_trans_from_attn(K[:, :N1, N1:], d[:, :N1], d[:, N1:], b1, b2)


def relu_kappa(c: torch.Tensor) -> torch.Tensor:
    """Arc-cosine (order 1) kernel of unit vectors with cosine c: (sqrt(1 - c²) + (π - arccos c) c) / π."""
    c = c.clamp(-1.0, 1.0)
    return (torch.sqrt(1 - c**2) + (math.pi - torch.arccos(c)) * c) / math.pi


def k_mlp(A, B) -> torch.Tensor:
    """MLP (inner-product) kernel κ(Σ_i 1(x_i = y_i)) [N1, N2] on one-hot concatenations."""
    A, B = torch.as_tensor(A, dtype=torch.int64), torch.as_tensor(B, dtype=torch.int64)
    t = (A[:, None, :] == B[None, :, :]).to(DTYPE).sum(-1)
    return relu_kappa(t / A.shape[1])


# --------------------------------------------------------------------------------------- N matrix


def fresh_substitutions(task: TemplateTask) -> tuple[torch.Tensor, torch.Tensor, int]:
    """sub(z_i, s) and sub(z_i, s') [r, k] on fresh tokens (Eq. 8), and the [CLS] id (unused by both)."""
    vocab = Vocabulary(task.wildcards, task.regular_tokens, 0, 0, 0)
    codes, _ = encode(task, vocab)
    W = len(task.wildcards)
    base = vocab.size
    s = base + np.arange(W)
    s2 = base + W + np.arange(W)
    X = np.where(codes >= 0, codes, s[np.maximum(-codes - 1, 0)])
    Y = np.where(codes >= 0, codes, s2[np.maximum(-codes - 1, 0)])
    return torch.from_numpy(X), torch.from_numpy(Y), base + 2 * W


def with_cls(seqs: torch.Tensor, cls_id: int) -> torch.Tensor:
    return torch.cat([seqs, torch.full((seqs.shape[0], 1), cls_id, dtype=torch.int64)], dim=1)


def n_matrix(
    task: TemplateTask,
    kernel: str,
    beta: float = 2.0,
    gamma: float = 1.0,
    b1: float = 1.0,
    b2: float = 0.5,
    n_mc: int = 20000,
    seed: int = 0,
    batches: int = 20,
) -> tuple[torch.Tensor, torch.Tensor]:
    """N [r, r] (Eq. 7) for ``kernel`` in {'mlp', 'attn', 'trans'}, and its per-batch Monte Carlo estimates
    [batches, r, r] (one copy of N for the exact MLP kernel)."""
    X, Y, cls = fresh_substitutions(task)
    if kernel == "mlp":
        N = k_mlp(X, Y)
        return N, N[None]
    Xc, Yc = with_cls(X, cls), with_cls(Y, cls)
    if kernel == "attn":
        Nb = k_attn(Xc, Yc, beta, gamma, n_mc, seed, batches)
    elif kernel == "trans":
        Nb = k_trans(Xc, Yc, beta, gamma, b1, b2, n_mc, seed, batches)
    else:
        raise ValueError(f"unknown kernel {kernel!r}; expected mlp, attn or trans")
    if kernel == "trans":  # K_trans is nonlinear in K_attn: the full estimate uses the pooled K_attn
        N = k_trans(Xc, Yc, beta, gamma, b1, b2, n_mc, seed, 1)[0]
    else:
        N = Nb.mean(0)
    return N, Nb


def conditioning(N: torch.Tensor, Nb: torch.Tensor, rtol: float = 1e-9) -> dict:
    """Smallest singular value of N with its batch-means Monte Carlo standard error, condition number and
    numerical rank (singular values above rtol · σ_max)."""
    sv = torch.linalg.svdvals(N)
    r = N.shape[0]
    out = {
        "r": r,
        "sigma_max": float(sv[0]),
        "sigma_min": float(sv[-1]),
        "cond": float(sv[0] / sv[-1]) if sv[-1] > 0 else math.inf,
        "rank": int((sv > rtol * sv[0]).sum()),
    }
    if Nb.shape[0] > 1:
        smin_b = torch.linalg.svdvals(Nb)[:, -1]
        out["sigma_min_se"] = float(smin_b.std(unbiased=True) / math.sqrt(Nb.shape[0]))
    else:
        out["sigma_min_se"] = 0.0
    return out


# --------------------------------------------------------------------------------------- ridge regression


def krr_fit_predict(K_train: torch.Tensor, y: torch.Tensor, K_test_train: torch.Tensor, lam: float) -> torch.Tensor:
    """Eq. 5: f(X) = y^T (K + λ I)^{-1} k(X) for every test row."""
    n = K_train.shape[0]
    alpha = torch.linalg.solve(K_train + lam * torch.eye(n, dtype=K_train.dtype), y.to(K_train.dtype))
    return K_test_train @ alpha


def krr_unseen(
    task: TemplateTask,
    n: int,
    kernel: str,
    seed: int,
    lam: float = 1e-3,
    beta: float = 2.0,
    gamma: float = 1.0,
    b1: float = 1.0,
    b2: float = 0.5,
    n_mc: int = 2000,
    n_test: int = 100,
) -> dict:
    """Kernel ridge regression trained on n samples (training alphabet of n tokens) and tested on n_test
    samples over a disjoint alphabet; returns train and test MSE."""
    data = make_datasets(task, n, seed, n_val=1, n_test=n_test)
    Xtr, Xte = data.train.tokens, data.test.tokens
    ytr, yte = data.train.targets.to(DTYPE), data.test.targets.to(DTYPE)
    if kernel == "mlp":
        K = k_mlp(Xtr, Xtr)
        Kt = k_mlp(Xte, Xtr)
    elif kernel == "trans":
        cls = data.vocab.size
        both = with_cls(torch.cat([Xtr, Xte]), cls)
        Ka = k_attn(both, both, beta, gamma, n_mc, seed + 7919, 1)[0]
        d = torch.diagonal(Ka)
        Kall = k_trans_from_attn(Ka, d, d, b1, b2)
        K, Kt = Kall[:n, :n], Kall[n:, :n]
    else:
        raise ValueError(f"kernel ridge regression uses the 'mlp' or 'trans' kernel, not {kernel!r}")
    f_tr = krr_fit_predict(K, ytr, K, lam)
    f_te = krr_fit_predict(K, ytr, Kt, lam)
    return {"train_mse": float(((f_tr - ytr) ** 2).mean()), "test_mse": float(((f_te - yte) ** 2).mean())}


# --------------------------------------------------------------------------------------- tables


def n_matrix_table(settings: dict) -> pd.DataFrame:
    """One row per (task, kernel): conditioning of N. ``settings``: tasks (list of {name, ...params}),
    kernels, beta, gamma, b1, b2, n_mc, batches, seed."""
    rows = []
    for spec in settings["tasks"]:
        task = make_task(**dict(spec))
        for kernel in settings["kernels"]:
            N, Nb = n_matrix(
                task,
                kernel,
                settings["beta"],
                settings["gamma"],
                settings["b1"],
                settings["b2"],
                settings["n_mc"],
                settings["seed"],
                settings["batches"],
            )
            rows.append({"task": task.name, "kernel": kernel, **conditioning(N, Nb)})
    return pd.DataFrame(rows)


def beta0_table(settings: dict) -> pd.DataFrame:
    """K_attn by Monte Carlo at β = 0 against its closed form on the N-matrix strings of each task."""
    rows = []
    for spec in settings["tasks"]:
        task = make_task(**dict(spec))
        X, Y, cls = fresh_substitutions(task)
        Xc, Yc = with_cls(X, cls), with_cls(Y, cls)
        mc = k_attn(Xc, Yc, 0.0, settings["gamma"], settings["n_mc"], settings["seed"])[0]
        exact = k_attn_beta0(Xc, Yc, settings["gamma"])
        rows.append({"task": task.name, "max_abs_diff": float((mc - exact).abs().max()), "max_exact": float(exact.abs().max())})
    return pd.DataFrame(rows)


def krr_table(settings: dict) -> pd.DataFrame:
    """Kernel ridge regression learning curves on unseen symbols: one row per (task, kernel, n, seed).
    ``settings``: tasks, kernels, n (list), seeds, lam, beta, gamma, b1, b2, n_mc, n_test."""
    rows = []
    for spec in settings["tasks"]:
        task = make_task(**dict(spec))
        for kernel in settings["kernels"]:
            for n in settings["n"]:
                for seed in range(1, int(settings["seeds"]) + 1):
                    res = krr_unseen(
                        task,
                        int(n),
                        kernel,
                        seed,
                        settings["lam"],
                        settings["beta"],
                        settings["gamma"],
                        settings["b1"],
                        settings["b2"],
                        settings["n_mc"],
                        settings["n_test"],
                    )
                    rows.append({"task": task.name, "kernel": kernel, "n": int(n), "seed": seed, **res})
    return pd.DataFrame(rows)


def compute(settings: dict, inputs: dict, outputs: dict, ctx) -> None:
    """Compute job ``templates_kernels``: the three tables (outputs ``n_matrix``, ``beta0``, ``krr``) from
    the ``templates.kernels`` settings."""
    write_tables(settings, outputs["n_matrix"], outputs["beta0"], outputs["krr"])


def write_tables(settings: dict, n_matrix_csv: str, beta0_csv: str, krr_csv: str) -> None:
    """The three kernel tables of Sec. 3 from the ``templates.kernels`` settings: kernel constants (beta, gamma,
    b1, b2), the N-matrix tasks with n_mc, batches and seed, beta0_n_mc, and ``krr`` (tasks, n, seeds, lam, n_mc,
    n_test)."""
    import sys
    import time

    from featlearn.io import write_csv

    consts = {k: settings[k] for k in ("beta", "gamma", "b1", "b2")}
    t0 = time.perf_counter()
    nm = n_matrix_table({**consts, "tasks": settings["tasks"], "kernels": ["mlp", "attn", "trans"], "n_mc": settings["n_mc"],
                         "batches": settings["batches"], "seed": settings["seed"]})
    print(f"[templates kernels] N matrices of {len(settings['tasks'])} tasks in {time.perf_counter() - t0:.1f}s",
          file=sys.stderr, flush=True)
    print(nm.to_string(index=False), file=sys.stderr, flush=True)
    b0 = beta0_table({"tasks": settings["tasks"], "gamma": settings["gamma"], "n_mc": settings["beta0_n_mc"],
                      "seed": settings["seed"]})
    kr = settings["krr"]
    t0 = time.perf_counter()
    krr = krr_table({**consts, **{k: kr[k] for k in ("tasks", "n", "seeds", "lam", "n_mc", "n_test")},
                     "kernels": ["mlp", "trans"]})
    print(f"[templates kernels] kernel ridge regression: {len(krr)} fits in {time.perf_counter() - t0:.1f}s",
          file=sys.stderr, flush=True)
    print(krr.groupby(["task", "kernel", "n"])["test_mse"].mean().to_string(), file=sys.stderr, flush=True)
    write_csv(nm, n_matrix_csv)
    write_csv(b0, beta0_csv)
    write_csv(krr, krr_csv)
