"""Infinite-width NTK constants of the paper's models and the linear NTK flow they imply.

Weights are Gaussian with std sigma_e (embedding), sigma_w (hidden / kernel), sigma_v (final layer), sigma_h
(L-RNN recurrence); a pre-activation of one token is z ~ N(0, s^2), s^2 = sigma_e^2 sigma_w^2.

- MLP, Lemma 4.1 / Eq. 7: Theta(e, x) = rho omega(e, x) + mu l(x), ReLU closed form
      rho = (pi - 1) s^2 / (2 pi) + (sigma_e^2 sigma_v^2 + sigma_w^2 sigma_v^2) / 2,   mu = s^2 / (2 pi).
  Any activation phi (App. B, Eq. 95-98):
      rho_phi = Var phi(z) + (sigma_e^2 + sigma_w^2) sigma_v^2 E phi'(z)^2,   mu_phi = (E phi(z))^2.
- CNN, Lemma A.2 (K-token windows sharing n tokens, theta = arccos(n / K)):
      F(n) = E[relu(a) relu(b)] = K s^2 [sin theta + (pi - theta) cos theta] / (2 pi),
      H(n) = E[step(a) step(b)] = (pi - theta) / (2 pi);   rho_CNN = sigma_v^2 (sigma_e^2 + sigma_w^2) (Eq. 11).
  F(0) = K s^2 / (2 pi) is the bias term shared by all windows. The integral forms (Eq. 57-59, a
  conditional expectation psi of the shared part) are computed too, to check the closed forms.
- SA, Theorem 4.6: rho = sigma_e^2 + sigma_v^2, omega(e, x) = sum_i sum_j E(alpha_ij) [e_j = e], no bias.
- MV, Theorem 4.8: a kernel on bigram counts with no bias; no MV constant is defined here (none is used).
- L-RNN, Eq. 87: rho(k) = sigma_h^{2k} (s^2 + sigma_v^2 sigma_w^2 + sigma_v^2 sigma_e^2) + k sigma_h^{2k-2} sigma_v^2 s^2.

Linear NTK flow (Theorem 4.2 with a constant kernel): with token weights u (one per vocabulary entry) and a
scalar b, s(x) = rho c(x)^T u + mu l(x) b reproduces ds(x')/dt = (1/m) sum_x r_x Theta(x', x) with
r_x = y g(-y s(x)). Discretised with step eta:
      r = y . sigmoid(-y . s_train),   u += eta C^T r / m,   b += eta l^T r / m,
and a token's predicted label score is rho u_e + mu b (the shared part mu b is the induced feature bias).
The shared mode is fast (its kernel eigenvalue ~ mu mean(l^2) exceeds the token modes' ~ rho), so runs that
compare sigma_v use one absolute step and time for both; a trained network is matched to the flow time at
which the flow's training loss equals the network's.
C is the instance-by-token count matrix omega(e, x) (for SA weighted by E(alpha_ij)).

Deviations from the printed formulas (and why):
- CNN: the paper (Sec. 4, after Eq. 10) says omega_c counts the tokens c and c_j share "regardless of
  positions". With one kernel matrix W^c_k per window position k, two windows' pre-activations covary only
  through the positions where they hold the same token: n = #{k : c_k = c'_k} (:func:`cnn_shared`). A
  window and its rotation share every token but no aligned position, so their kernel is F(0), the bias
  term, not F(K) (tests/features/test_features.py checks this against a finite-width Monte Carlo).
- MV: Theorem 4.8's printed rho = (sigma_e^2 + 3 sigma_v^2) sigma_e^2 sigma_w^2 leaves out a factor 1/d
  that the model's 1/(d sqrt d) scaling puts in the kernel. The pipeline never used an MV constant (MV's
  bigram scores come from trained networks), so the function was removed rather than kept wrong.
- L-RNN (Eq. 87) as printed, ReLU/any-activation MLP constants (Lemma 4.1, App. B) as printed.

Bias index of a set of extracted tokens: beta = (mean_pos + mean_neg) / (mean_pos - mean_neg).
"""

from __future__ import annotations

import math
from typing import Callable, Iterable, Sequence

import numpy as np
from scipy import sparse
from scipy.integrate import quad
from scipy.special import expit, ndtr

SQRT_2PI = math.sqrt(2 * math.pi)


# ------------------------------------------------------------------------------- Gaussian integrals
def _npdf(t):
    return np.exp(-0.5 * np.asarray(t) ** 2) / SQRT_2PI


def _relu(z):
    return np.maximum(z, 0.0)


def _step(z):
    return (np.asarray(z) > 0).astype(float)


def _gelu(z):  # exact GELU z Phi(z), as torch.nn.functional.gelu
    return z * ndtr(z)


def _gelu_prime(z):
    return ndtr(z) + z * _npdf(z)


def _silu(z):
    return z * expit(z)


def _silu_prime(z):
    s = expit(z)
    return s * (1 + z * (1 - s))


# activation -> (phi, phi')
ACTIVATION_FUNCTIONS: dict[str, tuple[Callable, Callable]] = {
    "relu": (_relu, _step),
    "tanh": (np.tanh, lambda z: 1 - np.tanh(z) ** 2),
    "gelu": (_gelu, _gelu_prime),
    "silu": (_silu, _silu_prime),
    "identity": (lambda z: z, lambda z: np.ones_like(np.asarray(z, dtype=float))),
}


def gaussian_mean(f: Callable, var: float) -> float:
    """E f(z), z ~ N(0, var), by adaptive quadrature in t = z / sqrt(var) (split at 0 for kinks)."""
    s = math.sqrt(var)
    g = lambda t: float(f(s * t)) * math.exp(-0.5 * t * t) / SQRT_2PI  # noqa: E731
    left = quad(g, -np.inf, 0.0, epsabs=0.0, epsrel=1e-11, limit=200)[0]
    right = quad(g, 0.0, np.inf, epsabs=0.0, epsrel=1e-11, limit=200)[0]
    return left + right


# -------------------------------------------------------------------------------------- MLP (Lemma 4.1)
def relu_mlp_constants(sigma_e: float, sigma_w: float, sigma_v: float) -> tuple[float, float]:
    """(rho, mu) of Lemma 4.1 in closed form."""
    s2 = sigma_e**2 * sigma_w**2
    rho = (math.pi - 1) * s2 / (2 * math.pi) + (sigma_e**2 * sigma_v**2 + sigma_w**2 * sigma_v**2) / 2
    return rho, s2 / (2 * math.pi)


def mlp_constants(activation: str, sigma_e: float, sigma_w: float, sigma_v: float) -> tuple[float, float]:
    """(rho_phi, mu_phi) for any activation by Gaussian integrals (App. B)."""
    if activation not in ACTIVATION_FUNCTIONS:
        raise ValueError(f"unknown activation {activation!r}; expected one of {sorted(ACTIVATION_FUNCTIONS)}")
    phi, dphi = ACTIVATION_FUNCTIONS[activation]
    s2 = sigma_e**2 * sigma_w**2
    m1 = gaussian_mean(phi, s2)
    m2 = gaussian_mean(lambda z: phi(z) ** 2, s2)
    d2 = gaussian_mean(lambda z: dphi(z) ** 2, s2)
    rho = (m2 - m1**2) + (sigma_e**2 + sigma_w**2) * sigma_v**2 * d2
    return rho, m1**2


# ------------------------------------------------------------------------------------- CNN (Lemma A.2)
def _theta(n: int, K: int) -> float:
    if not 0 <= n <= K:
        raise ValueError(f"shared tokens n must lie in 0..K, got n={n}, K={K}")
    return math.acos(min(1.0, n / K))


def cnn_F(n: int, K: int, s2: float) -> float:
    """F(n) = K s^2 [sin theta + (pi - theta) cos theta] / (2 pi), theta = arccos(n / K)."""
    th = _theta(n, K)
    return K * s2 * (math.sin(th) + (math.pi - th) * math.cos(th)) / (2 * math.pi)


def cnn_H(n: int, K: int) -> float:
    """H(n) = (pi - theta) / (2 pi), theta = arccos(n / K)."""
    return (math.pi - _theta(n, K)) / (2 * math.pi)


def cnn_F_integral(n: int, K: int, s2: float) -> float:
    """F(n) as E[psi^2] (Eq. 57): psi(u) = E relu(u + w), u ~ N(0, n s^2) shared, w ~ N(0, (K-n) s^2)."""
    tau = math.sqrt((K - n) * s2)
    if n == 0:
        return gaussian_mean(_relu, K * s2) ** 2  # Eq. 59: F(0) = (E psi)^2
    if tau == 0:
        return gaussian_mean(lambda z: _relu(z) ** 2, K * s2)
    psi = lambda u: u * ndtr(u / tau) + tau * _npdf(u / tau)  # noqa: E731  E relu(u + w)
    return gaussian_mean(lambda u: psi(u) ** 2, n * s2)


def cnn_H_integral(n: int, K: int) -> float:
    """H(n) as E[P(a > 0 | u) P(b > 0 | u)] over the shared part u (same construction as F)."""
    if n == 0:
        return 0.25
    if n == K:
        return 0.5
    return gaussian_mean(lambda u: ndtr(u / math.sqrt(K - n)) ** 2, float(n))


def cnn_shared(window: tuple | list, other: tuple | list) -> int:
    """n of Lemma A.2 for two K-token windows: the positions holding the same token (position-aligned; the
    paper's text says "regardless of positions", which the kernel does not support: module docstring)."""
    if len(window) != len(other):
        raise ValueError(f"windows of different sizes: {len(window)} and {len(other)}")
    return sum(a == b for a, b in zip(window, other))


def cnn_rho(sigma_e: float, sigma_w: float, sigma_v: float) -> float:
    return sigma_v**2 * (sigma_e**2 + sigma_w**2)


# --------------------------------------------------------------------------------- SA, MV, L-RNN
def sa_rho(sigma_e: float, sigma_v: float) -> float:
    return sigma_e**2 + sigma_v**2


def lrnn_rho(k: int, sigma_e: float, sigma_w: float, sigma_v: float, sigma_h: float) -> float:
    """rho(k) of Eq. 87 (k = distance from the last token)."""
    base = sigma_e**2 * sigma_w**2 + sigma_v**2 * sigma_w**2 + sigma_v**2 * sigma_e**2
    extra = k * sigma_h ** (2 * k - 2) * sigma_v**2 * sigma_w**2 * sigma_e**2 if k > 0 else 0.0
    return sigma_h ** (2 * k) * base + extra


def sa_expected_attention(length: int, d: int, sigma_e: float, variant: str = "paper", samples: int = 256,
                          seed: int = 0) -> np.ndarray:
    """E(alpha_ij) [length, length] over W^e at initialisation, for distinct tokens (Monte Carlo at width d)."""
    import torch

    from featlearn.features.models import sinusoidal_positions

    g = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, length, d, generator=g, dtype=torch.float64) * sigma_e
    P = sinusoidal_positions(length, d, torch.float64)
    if variant == "paper":
        q = x + P
        logits = q @ q.transpose(-1, -2) / d
    else:
        logits = (x + P / 20) @ x.transpose(-1, -2) / math.sqrt(d)
    return torch.softmax(logits, -1).mean(0).numpy()


# ----------------------------------------------------------------------------------- linear NTK flow
def count_matrix(seqs: Sequence[Sequence[int]], vocab_size: int,
                 position_weights: Callable[[int], np.ndarray] | None = None) -> sparse.csr_matrix:
    """C[x, e] = omega(e, x): occurrences of token e in instance x, each occurrence weighted by
    ``position_weights(len(x))[j]`` when given (SA: column sums of E(alpha))."""
    rows, cols, vals = [], [], []
    cache: dict[int, np.ndarray] = {}
    for i, s in enumerate(seqs):
        n = len(s)
        rows.extend([i] * n)
        cols.extend(s)
        if position_weights is None:
            vals.extend([1.0] * n)
        else:
            if n not in cache:
                cache[n] = np.asarray(position_weights(n), dtype=float)
            vals.extend(cache[n].tolist())
    return sparse.csr_matrix((vals, (rows, cols)), shape=(len(seqs), vocab_size))


def ntk_flow(C: sparse.spmatrix, labels: np.ndarray, lengths: np.ndarray, rho: float, mu: float, eta: float,
             steps: int, probe_ids: np.ndarray, log_every: int = 1,
             log_steps: Iterable[int] = ()) -> dict[str, np.ndarray]:
    """Run the discretised linear NTK flow on full batches; return logged ``step``, predicted probe token
    scores ``scores`` [n_logs, n_probe] (rho u_e + mu b), the shared bias ``bias`` (mu b) and the mean
    training loss ``loss`` (before each logged step's update). Logged: every ``log_every``-th step, the
    last, and the steps in ``log_steps``."""
    extra = {int(t) for t in log_steps}
    y = 2.0 * np.asarray(labels, dtype=float) - 1.0
    lengths = np.asarray(lengths, dtype=float)
    m = C.shape[0]
    Ct = C.T.tocsr()
    u = np.zeros(C.shape[1])
    b = 0.0
    probe_ids = np.asarray(probe_ids)
    logs: dict[str, list] = {"step": [], "scores": [], "bias": [], "loss": []}
    for t in range(steps + 1):
        s = rho * (C @ u) + mu * lengths * b
        if t % log_every == 0 or t == steps or t in extra:
            logs["step"].append(t)
            logs["scores"].append(rho * u[probe_ids] + mu * b)
            logs["bias"].append(mu * b)
            logs["loss"].append(float(np.mean(np.logaddexp(0.0, -y * s))))
        if t == steps:
            break
        r = y * expit(-y * s)
        u = u + eta * (Ct @ r) / m
        b = b + eta * float(lengths @ r) / m
    return {k: np.asarray(v) for k, v in logs.items()}


def kernel_max_eigenvalue(C: sparse.spmatrix, lengths: np.ndarray, rho: float, mu: float, iters: int = 100,
                          seed: int = 0) -> float:
    """Largest eigenvalue of the training kernel (rho C C^T + mu l l^T) / m, by power iteration."""
    m = C.shape[0]
    lengths = np.asarray(lengths, dtype=float)
    Ct = C.T.tocsr()
    x = np.random.default_rng(seed).standard_normal(m)
    lam = 0.0
    for _ in range(iters):
        y = (rho * (C @ (Ct @ x)) + mu * lengths * float(lengths @ x)) / m
        lam = float(np.linalg.norm(y))
        if lam == 0:
            return 0.0
        x = y / lam
    return lam


def stable_step(C: sparse.spmatrix, lengths: np.ndarray, rho: float, mu: float) -> float:
    """A step eta for :func:`ntk_flow` well inside stability: the logistic loss has curvature <= 1/4, so
    explicit steps are stable below 8 / lambda_max; this returns 2 / lambda_max."""
    return 2.0 / kernel_max_eigenvalue(C, lengths, rho, mu)


def loss_matched_index(losses: np.ndarray, target: float) -> int:
    """First index at which a (decreasing) loss curve reaches ``target`` (the last index if it never does):
    the flow time that corresponds to a trained network with training loss ``target``."""
    hits = np.flatnonzero(np.asarray(losses) <= target)
    return int(hits[0]) if hits.size else len(losses) - 1


def kernel_step(Theta: np.ndarray, s_train: np.ndarray, s_probe: np.ndarray, labels: np.ndarray,
                eta: float) -> tuple[np.ndarray, np.ndarray]:
    """One explicit step of Eq. 5 with a given kernel: s' += eta/m sum_x r_x Theta(x', x).
    ``Theta`` is [n_probe + m, m] (probe rows first); returns the new (s_train, s_probe)."""
    y = 2.0 * np.asarray(labels, dtype=float) - 1.0
    r = y * expit(-y * s_train)
    delta = eta * Theta @ r / len(r)
    n_probe = len(s_probe)
    return s_train + delta[n_probe:], s_probe + delta[:n_probe]


# ------------------------------------------------------------------------------------------ metrics
def bias_index(scores: Iterable[float], polarity: Iterable[int]) -> float:
    """beta = (mean_pos + mean_neg) / (mean_pos - mean_neg); 0 when balanced, > 0 when positive tokens
    dominate. NaN without both groups."""
    s = np.asarray(list(scores), dtype=float)
    p = np.asarray(list(polarity))
    if not (p > 0).any() or not (p < 0).any():
        return float("nan")
    mp, mn = s[p > 0].mean(), s[p < 0].mean()
    return float((mp + mn) / (mp - mn))
