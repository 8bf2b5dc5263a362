"""JoMA dynamics: Theorem 2 closed form against its ODE, Eq. 6 exact solution, the discrete variant."""

from __future__ import annotations

import math

import numpy as np
import pytest

from featlearn.joma import dynamics as D


def test_theorem2_closed_form_against_ode():
    delta = np.array([1.0, 0.6, 0.3, -0.2])
    t_star = D.theorem2_blowup_time(delta, 1.0)
    assert t_star == pytest.approx(math.sqrt(math.pi / 2))
    t = np.linspace(0, 0.999 * t_star, 300)
    V = D.theorem2_ode(delta, 1.0, t)
    inv = D.theorem2_invariant(V[1:], delta)
    assert np.abs(inv - inv[:, :1]).max() < 1e-8  # erf(v_l/sqrt 2)/Delta_l equal across l
    assert np.allclose(D.theorem2_limits(delta)[1:], [0.842, 0.385, -0.253], atol=1e-3)  # the worked example
    assert np.allclose(V[-1, 1:], D.theorem2_limits(delta)[1:], atol=1e-2)
    assert V[-1, 0] > 3  # the largest component blows up near t*


def test_F_reduces_to_log_when_mu_is_zero():
    for r in (0.1, 0.5, 0.9):
        assert D.F(r, 0.0) == pytest.approx(-math.log(1 - r), rel=1e-10)


def test_eq6_exact_satisfies_F_equals_t():
    mu = np.array([1.0, 2.0, 3.5])
    t = np.linspace(0, 2, 11)
    V = D.eq6_exact(mu, t)
    for i in range(1, len(t)):
        for j in range(len(mu)):
            r = V[i, j] / mu[j]
            if r < 1 - 1e-6:
                assert D.F(r, mu[j]) == pytest.approx(t[i], abs=1e-6)
    assert np.all(np.diff(V, axis=0) >= -1e-12)  # v rises monotonically towards mu


def test_discrete_variant_entropy_drops_then_rebounds_and_control_does_not():
    mu = np.sort(np.random.default_rng(0).uniform(1, 4, 10))
    traj = D.eq6_discrete(mu, 0.05, 0.02, 3000)
    H = D.entropy(D.softmax(traj**2 / 3))
    assert H[0] == pytest.approx(math.log(10))
    i = int(H.argmin())
    assert 0 < i < len(H) - 1 and H[-1] - H[i] > 0.1
    ctrl = D.eq6_discrete(mu, 0.05, 0.02, 3000, attention=False)
    Hc = D.entropy(D.softmax(ctrl**2 / 3))
    assert np.all(np.diff(Hc) <= 1e-12)
