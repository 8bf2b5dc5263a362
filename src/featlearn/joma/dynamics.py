"""Low-dimensional dynamics of JoMA (Sec. 4).

Eq. 6 (nonlinear MLP, simplified):  dv/dt = (mu - v) * exp(v^2 / 2),  v(0) = 0 (element-wise).
  Exact check (Theorem 4's proof): every component satisfies F(v_j / mu_j, mu_j) = t with
  F(r, mu) = int_0^r exp(-mu^2 x^2 / 2) / (1 - x) dx.
  Discrete variant of the authors' Fig. 4 code (facts only): v <- v + eta (mu - v) * softmax(v^2 / 3),
  whose attention softmax(v^2 / 3) first sharpens (salient components grow first), then flattens.
Theorem 2 (linear MLP, exp attention, one node):  dv/dt = Delta * exp(v^2 / 2) / A.
  Invariant (the printed erf(v/2) is a typo): erf(v_l / sqrt 2) / Delta_l is the same for all l;
  the largest |Delta| blows up at t* = A sqrt(pi / 2) / |Delta_max|, the others converge to
  sqrt(2) erfinv(Delta_l / |Delta_max|).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.integrate import quad, solve_ivp
from scipy.special import erf, erfinv


def entropy(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-300, None)
    return -(p * np.log(p)).sum(axis=-1)


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def eq6_discrete(mu: np.ndarray, v0: float, eta: float, steps: int, attention: bool = True) -> np.ndarray:
    """Trajectory [steps + 1, n] of v <- v + eta (mu - v) * softmax(v^2/3) (or without the attention
    factor: the no-attention control)."""
    v = np.full_like(mu, v0, dtype=float)
    out = np.empty((steps + 1, mu.size))
    out[0] = v
    for t in range(steps):
        gate = softmax(v**2 / 3) if attention else 1.0
        v = v + eta * (mu - v) * gate
        out[t + 1] = v
    return out


def eq6_exact(mu: np.ndarray, t_eval: np.ndarray) -> np.ndarray:
    """Solve dv/dt = (mu - v) exp(v^2/2), v(0) = 0, with a stiff solver; returns [len(t_eval), n]."""
    sol = solve_ivp(lambda t, v: (mu - v) * np.exp(v**2 / 2), (0.0, float(t_eval[-1])), np.zeros_like(mu, dtype=float),
                    method="Radau", t_eval=t_eval, rtol=1e-10, atol=1e-12)
    if not sol.success:
        raise RuntimeError(f"Eq. 6 integration failed: {sol.message}")
    return sol.y.T


def F(r: float, mu: float) -> float:
    """F(r, mu) = int_0^r exp(-mu^2 x^2 / 2) / (1 - x) dx, for 0 <= r < 1."""
    return quad(lambda x: math.exp(-(mu**2) * x**2 / 2) / (1 - x), 0.0, r, limit=200, epsabs=1e-12, epsrel=1e-12)[0]


# Theorem 4: |lambda_jk(t)| <= sqrt(2 pi) + 2 in Lambda(t) = lambda_jk(t) exp(mu_k^2/2) / ln(1/delta_k(t)).
THM4_LAMBDA = math.sqrt(2 * math.pi) + 2


def eq6_log_convergence(mu: np.ndarray, t_end: float, attention: bool = True) -> np.ndarray:
    """u_j(t_end) = ln(1/delta_j), delta_j = 1 - v_j/mu_j, of Eq. 6 from v(0) = 0, integrated in u itself
    (du/dt = exp(mu^2 (1 - e^-u)^2 / 2), u(0) = 0), so that delta far below float precision stays exact. Without
    attention (dv/dt = mu - v) every u_j is t."""
    mu = np.asarray(mu, dtype=float)
    if not attention:
        return np.full_like(mu, float(t_end))
    sol = solve_ivp(lambda t, u: np.exp(mu**2 * (-np.expm1(-u)) ** 2 / 2), (0.0, float(t_end)), np.zeros_like(mu),
                    method="LSODA", rtol=1e-10, atol=1e-10)
    if not sol.success:
        raise RuntimeError(f"Eq. 6 (log form) integration failed: {sol.message}")
    return sol.y[:, -1]


def theorem4_lambda(mu: np.ndarray, u: np.ndarray) -> tuple[float, float]:
    """Theorem 4 at one time: the largest |Lambda| = |(u_j/u_k) exp(-(mu_j^2 - mu_k^2)/2) - 1| over pairs with
    mu_j > mu_k, and the theorem's bound on it, max over k of (sqrt(2 pi) + 2) exp(mu_k^2/2) / u_k."""
    mu, u = np.asarray(mu, dtype=float), np.asarray(u, dtype=float)
    worst = 0.0
    for j in range(mu.size):
        for k in range(mu.size):
            if mu[j] > mu[k]:
                worst = max(worst, abs(u[j] / u[k] * math.exp(-(mu[j] ** 2 - mu[k] ** 2) / 2) - 1))
    bound = float(np.max(THM4_LAMBDA * np.exp(mu**2 / 2) / u))
    return worst, bound


def theorem2_ode(delta: np.ndarray, A: float, t_eval: np.ndarray) -> np.ndarray:
    """Solve dv/dt = Delta exp(v^2/2) / A from v(0) = 0 up to t_eval[-1] (< t*)."""
    sol = solve_ivp(lambda t, v: delta * np.exp(v**2 / 2) / A, (0.0, float(t_eval[-1])), np.zeros_like(delta, dtype=float),
                    method="Radau", t_eval=t_eval, rtol=1e-11, atol=1e-13)
    if not sol.success:
        raise RuntimeError(f"Theorem 2 integration failed: {sol.message}")
    return sol.y.T


def theorem2_blowup_time(delta: np.ndarray, A: float) -> float:
    return A * math.sqrt(math.pi / 2) / np.abs(delta).max()


def theorem2_limits(delta: np.ndarray) -> np.ndarray:
    """Limits sqrt(2) erfinv(Delta_l / |Delta_max|) (infinite for the largest component)."""
    return math.sqrt(2) * erfinv(delta / np.abs(delta).max())


def theorem2_invariant(v: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """erf(v_l / sqrt 2) / Delta_l, per time and component."""
    return erf(v / math.sqrt(2)) / delta
