"""Theory of Scan and Snap (Sec. 4-5): decoder mean-field h, speed control gamma, snapping B_n(t).

- Discrete decoder dynamics (Lemmas 5-6): h_{t+1} = h_t + eta_Y (M-1) / ((M-1) + exp(M h_t / (M-1))).
- Its continuous counterpart h*(t): h* + (exp(M h* / (M-1)) - 1) / M = eta_Y t.
  With K classes each class is updated 1/K of the time: h(t) = h*(t / K).
- Speed-control coefficient (proxy): gamma(t) = h (1 - alpha), 1 - alpha = (M-1) / ((M-1) + exp(M h/(M-1))).
- Snapping (Theorem 4, one common token, z(0) = 0): B_n(t) = 1/4 ln(1 + 4 eta_Z / C0 * int_0^t gamma).
  Scanning: fast growth; snapping: B ~ 1/2 ln ln t + const after t0 ~ K ln M / eta_Y.
"""

from __future__ import annotations

import numpy as np


def h_discrete(eta_y: float, M: int, steps: int) -> np.ndarray:
    """h_0..h_steps of the discrete recursion (h_0 = 0)."""
    h = np.zeros(steps + 1)
    for t in range(steps):
        h[t + 1] = h[t] + eta_y * (M - 1) / ((M - 1) + np.exp(M * h[t] / (M - 1)))
    return h


def h_continuous(t: np.ndarray, eta_y: float, M: int) -> np.ndarray:
    """Solve h + (exp(M h/(M-1)) - 1)/M = eta_Y t for h >= 0 (Newton from a safe start; the left side is
    increasing and convex, so Newton from above converges monotonically)."""
    t = np.asarray(t, dtype=float)
    target = eta_y * t
    a = M / (M - 1)
    # start above the root: h <= target, and h <= ln(1 + M target)/a
    h = np.minimum(target, np.log1p(M * target) / a)
    for _ in range(200):
        g = h + np.expm1(a * h) / M - target
        dg = 1 + a * np.exp(a * h) / M
        step = g / dg
        h = np.maximum(h - step, 0.0)
        if np.all(np.abs(step) <= 1e-13 * np.maximum(1.0, np.abs(h))):
            break
    return h


def one_minus_alpha(h: np.ndarray, M: int) -> np.ndarray:
    return (M - 1) / ((M - 1) + np.exp(M * h / (M - 1)))


def gamma(t: np.ndarray, eta_y: float, M: int, K: int) -> np.ndarray:
    """Speed-control coefficient proxy h (1 - alpha) along the mean-field decoder trajectory."""
    h = h_continuous(np.asarray(t, dtype=float) / K, eta_y, M)
    return h * one_minus_alpha(h, M)


def snapping_curve(t: np.ndarray, eta_y: float, eta_z: float, M: int, K: int, C0: float = 1.0) -> np.ndarray:
    """B_n(t) on an increasing grid t (starting at 0), integrating gamma by the trapezoid rule."""
    t = np.asarray(t, dtype=float)
    g = gamma(t, eta_y, M, K)
    integral = np.concatenate([[0.0], np.cumsum(0.5 * (g[1:] + g[:-1]) * np.diff(t))])
    return 0.25 * np.log1p(4.0 * eta_z / C0 * integral)


def time_grid(t_max: float, points: int = 20000) -> np.ndarray:
    """0 followed by a log-spaced grid from 1e-3 to t_max (fine enough for the trapezoid rule)."""
    return np.concatenate([[0.0], np.logspace(-3, np.log10(t_max), points)])
