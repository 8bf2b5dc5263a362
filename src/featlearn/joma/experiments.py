"""Compute side of JoMA's figures: simulate, then write tidy tables."""

from __future__ import annotations

import numpy as np
import pandas as pd

from featlearn.io import write_csv
from featlearn.joma import dynamics as D


def eq6_tables(cfg: dict, inputs: dict, outputs: dict, ctx) -> None:
    """Fig. 4: the discrete variant with and without attention (every iteration; output ``discrete``), and
    the exact Eq. 6 solution with F(v_j/mu_j, mu_j) - t for each component (output ``exact``)."""
    mu = np.sort(np.random.default_rng(cfg["seed"]).uniform(cfg["mu_low"], cfg["mu_high"], cfg["n"]))
    rows = []
    for variant, attention in (("attention", True), ("no_attention", False)):
        traj = D.eq6_discrete(mu, cfg["v0"], cfg["eta"], cfg["steps"], attention=attention)
        H = D.entropy(D.softmax(traj**2 / 3))
        steps = np.arange(cfg["steps"] + 1)
        for j in range(cfg["n"]):
            rows.append(pd.DataFrame({"variant": variant, "step": steps, "component": j, "mu": mu[j], "v": traj[:, j],
                                      "entropy": H}))
    write_csv(pd.concat(rows, ignore_index=True), outputs["discrete"])

    t = np.linspace(0.0, cfg["exact_t_max"], cfg["exact_points"])
    V = D.eq6_exact(mu, t)
    rows = []
    for i, ti in enumerate(t):
        for j in range(cfg["n"]):
            r = V[i, j] / mu[j]
            resid = D.F(r, mu[j]) - ti if r < 1 - 1e-6 else np.nan  # F diverges at r = 1 (converged)
            rows.append({"t": ti, "component": j, "mu": mu[j], "v": V[i, j], "F_minus_t": resid})
    write_csv(pd.DataFrame(rows), outputs["exact"])


def theorem2_table(cfg: dict, inputs: dict, outputs: dict, ctx) -> None:
    """Theorem 2: the ODE solution up to ``fraction`` of the blow-up time t*, its invariant and limits
    (output ``table``)."""
    delta = np.asarray(cfg["delta"], dtype=float)
    t_star = D.theorem2_blowup_time(delta, cfg["A"])
    t = np.linspace(0.0, cfg["fraction"] * t_star, cfg["points"])
    V = D.theorem2_ode(delta, cfg["A"], t)
    inv = D.theorem2_invariant(V, delta)
    limits = D.theorem2_limits(delta)
    rows = [
        {"t": t[i], "t_star": t_star, "component": j, "delta": delta[j], "v": V[i, j], "invariant": inv[i, j], "limit": limits[j]}
        for i in range(len(t))
        for j in range(len(delta))
    ]
    write_csv(pd.DataFrame(rows), outputs["table"])
