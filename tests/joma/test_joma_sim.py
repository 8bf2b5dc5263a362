"""JoMA joint MLP/attention simulations: Theorem 1 against the simulated dynamics, the model, the tables
and the figures of Figs. 2-3."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from featlearn.pipeline.compute import Context
from featlearn.joma import attention_sim as S
from featlearn.joma import attention_sim_figures as F
from featlearn.plotting import save_figure

CPU = Context(device="cpu")

@pytest.fixture(autouse=True)
def one_thread():
    """Tiny tensors: threads only add overhead (and the tables set one thread themselves)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


TINY = dict(settings=["smooth", "random"], seeds=2, m_distinct=4, m_common=3, K=5, d=9, tau=0.5, noise_high=0.5, width=30.0)


def _problem(attention: str, phi: str, readout: bool, init_std: float, seed: int = 0, tau: float = 0.5):
    rng = np.random.default_rng(seed)
    X = torch.from_numpy(np.stack([S.token_frequencies(s, rng, 4, 3, 5) for s in ("smooth", "random")]))
    R, m_c, K = X.shape
    U = S.embeddings(9, m_c)
    spec = S.Spec(attention=attention, tau=tau, A=1 / m_c, phi=phi, readout=readout)
    params = {
        "z": torch.from_numpy(rng.standard_normal((R, m_c)) * init_std).requires_grad_(),
        "W": torch.from_numpy(rng.standard_normal((R, 9, 6 if readout else K)) * init_std).requires_grad_(),
    }
    if readout:
        params["Y"] = torch.from_numpy(rng.standard_normal((R, K, 6))).requires_grad_()
    return params, X, U, spec


def _history(params, X, U, spec, lr, steps, log_every=1):
    zs, Vs = [], []

    def log(step, prm, loss):
        zs.append(prm["z"].detach().clone())
        Vs.append(U[:, :-1].T @ prm["W"].detach())

    S.gd(params, X, U, spec, lr, steps, log_every, log)
    return torch.stack(zs), torch.stack(Vs)  # [T, R, M_C], [T, R, M_C, K]


def test_nc_is_a_centred_cosine():
    a = np.array([0.3, -1.0, 2.0, 0.5])
    assert S.nc(a, a) == pytest.approx(1.0)
    assert S.nc(a, 3.0 * a - 7.0) == pytest.approx(1.0)  # invariant to shift and positive scale
    assert S.nc(a, -a) == pytest.approx(-1.0)
    b = np.array([1.0, 0.0, 0.0, 1.0])
    ac, bc = a - a.mean(), b - b.mean()
    assert S.nc(a, b) == pytest.approx(ac @ bc / np.linalg.norm(ac) / np.linalg.norm(bc))
    assert np.allclose(S.nc(np.stack([a, a]), np.stack([a, -a])), [1.0, -1.0])  # batched over the first axis
    assert np.isnan(S.nc(np.ones(4), a))


def test_token_frequencies_follow_the_fig2_recipe():
    rng = np.random.default_rng(1)
    X = S.token_frequencies("smooth", rng, 10, 10, 20)
    assert X.shape == (20, 20)
    assert np.allclose(X.sum(axis=0), 1.0)
    # distinct rows of column k peak at l = 10 k / K (the Gaussian bump, before column normalisation)
    assert X[:10, 0].argmax() == 0 and X[:10, 10].argmax() == 5
    R = S.token_frequencies("random", np.random.default_rng(1), 10, 10, 20)
    assert np.allclose(R.sum(axis=0), 1.0) and np.all(R >= 0)
    assert not np.allclose(R[:10], X[:10])
    with pytest.raises(ValueError, match="setting"):
        S.token_frequencies("other", rng, 2, 2, 2)


def test_attention_kinds():
    z = torch.tensor([[0.2, -0.1, 0.4]], dtype=torch.float64)
    X = torch.tensor([[[0.2, 0.5], [0.3, 0.25], [0.5, 0.25]]], dtype=torch.float64)
    soft = S.attention_scores(z, X, S.Spec("softmax", tau=0.5))
    ref = torch.softmax(z[:, :, None] / 0.5 + torch.log(X), dim=1)
    assert torch.allclose(soft, ref)
    ex = S.attention_scores(z, X, S.Spec("exp", tau=0.5, A=2.0))
    assert torch.allclose(ex, torch.exp(z / 0.5)[:, :, None] * X / 2.0)
    lin = S.attention_scores(z, X, S.Spec("linear", tau=1.0))
    assert torch.allclose(lin, z[:, :, None] * X)
    with pytest.raises(ValueError):
        S.attention_scores(z, X, S.Spec("relu"))
    with pytest.raises(ValueError, match="embedding dimension"):
        S.embeddings(3, 3)


def test_residual_query_is_orthogonal_and_v_is_the_contextual_part():
    U = S.embeddings(9, 7)
    assert torch.allclose(U.T @ U, torch.eye(8, dtype=torch.float64))
    params, X, U, spec = _problem("softmax", "linear", False, 0.1)
    b = S.attention_scores(params["z"], X, spec)
    f = U[:, :-1] @ b + U[:, -1][:, None]
    assert torch.allclose(U[:, :-1].T @ f, b)  # U_C^T f = b (the step of Theorem 1's proof)


@pytest.mark.parametrize("attention,phi,readout", [("exp", "tanh", True), ("exp", "linear", False), ("linear", "tanh", True)])
def test_gradient_identity_of_theorem1(attention, phi, readout):
    """Per sample and hence per batch: tau dL/dz = sum_k v_k o dL/dv_k (exp); z o dL/dz = sum_k v_k o dL/dv_k (linear)."""
    tau = 0.5 if attention == "exp" else 1.0
    params, X, U, spec = _problem(attention, phi, readout, 0.3, tau=tau)
    S.loss_per_run(params, X, U, spec).sum().backward()
    V = U[:, :-1].T @ params["W"].detach()
    gV = U[:, :-1].T @ params["W"].grad
    lhs = tau * params["z"].grad if attention == "exp" else params["z"].detach() * params["z"].grad
    assert torch.allclose(lhs, (V * gV).sum(dim=-1), atol=1e-13)
    assert params["z"].grad.abs().max() > 1e-4  # not a vacuous identity


def test_exp_invariant_drifts_exactly_by_the_discretisation_term():
    """One GD step changes tau z - sum_k v_k^2 / 2 by exactly -sum_k (dv_k)^2 / 2."""
    params, X, U, spec = _problem("exp", "tanh", True, 0.0)
    params["z"].data.zero_()
    params["W"].data.zero_()
    z, V = _history(params, X, U, spec, lr=0.05, steps=30)
    drift = spec.tau * z - (V**2).sum(-1) / 2
    expected = -0.5 * torch.cumsum(((V[1:] - V[:-1]) ** 2).sum(-1), dim=0)
    assert torch.allclose(drift[0], torch.zeros_like(drift[0]))
    assert torch.allclose(drift[1:], expected, atol=1e-14)
    assert z[-1].abs().max() > 1e-3


def test_exp_invariant_error_shrinks_with_lr_at_fixed_time():
    errs = []
    for lr in (0.04, 0.01):
        params, X, U, spec = _problem("exp", "tanh", True, 0.0)
        params["z"].data.zero_()
        params["W"].data.zero_()
        z, V = _history(params, X, U, spec, lr=lr, steps=round(4.0 / lr), log_every=round(4.0 / lr))
        errs.append(S.exp_invariant_error(z[-1], V[-1], spec.tau).max().item())
    assert errs[0] < 0.1
    assert errs[1] < errs[0] / 3  # O(lr): a quarter of the step, about a quarter of the error


def test_linear_attention_invariant_z2_minus_v2_is_conserved():
    drifts = []
    for lr in (0.02, 0.005):
        params, X, U, spec = _problem("linear", "tanh", True, 0.5, tau=1.0)
        z, V = _history(params, X, U, spec, lr=lr, steps=round(2.0 / lr), log_every=round(2.0 / lr))
        c = z**2 - (V**2).sum(-1)
        moved = (z[-1] - z[0]).abs().max().item()
        drifts.append((c[-1] - c[0]).abs().max().item())
        assert moved > 0.05  # z really changed, so the conservation is not trivial
    assert drifts[0] < 0.02
    assert drifts[1] < drifts[0] / 3


def test_slope_is_the_least_squares_slope():
    x = np.array([[0.0, 1.0, 2.0, 3.0], [1.0, 1.0, 1.0, 1.0]])
    y = np.array([[1.0, 3.0, 5.0, 7.0], [0.0, 1.0, 2.0, 3.0]])
    got = S.slope(x, y)
    assert got[0] == pytest.approx(2.0) and np.isnan(got[1])


def test_softmax_tables(tmp_path):
    cfg = dict(TINY, init_std=0.01, lr=0.1, steps=25, log_every=10)
    out = [str(tmp_path / n) for n in ("steps.csv", "mats.csv", "v0.csv")]
    S.softmax_tables(cfg, {}, dict(zip(("steps", "matrices", "v0"), out)), CPU)
    steps, mats, v0 = (pd.read_csv(p) for p in out)
    assert list(steps.columns) == ["setting", "seed", "step", "quantity", "value"]
    assert list(mats.columns) == ["setting", "seed", "matrix", "row", "col", "value"]
    assert list(v0.columns) == ["setting", "seed", "step", "component", "value"]
    assert sorted(steps["step"].unique()) == [0, 10, 20, 25]
    quantities = {"loss", "nc_full", "nc_part1", "nc_part2", "rel_err", "slope", "nc_path", "slope_path"}
    assert set(steps["quantity"]) == quantities
    assert len(steps) == 4 * 4 * len(quantities)  # steps x runs x quantities
    at0 = steps[steps["step"] == 0].set_index(["setting", "seed", "quantity"])["value"].unstack()
    assert np.allclose(at0["nc_full"], 1.0) and np.allclose(at0["nc_path"], 1.0)  # both estimates start at z(0)
    assert np.allclose(at0["slope"], 1.0) and np.allclose(at0["slope_path"], 1.0)
    assert set(mats["matrix"]) == {"X", "V_init", "V_final"}
    x = mats[(mats["matrix"] == "X") & (mats["setting"] == "smooth") & (mats["seed"] == 1)]
    assert len(x) == 7 * 5 and np.allclose(x.groupby("col")["value"].sum(), 1.0)
    loss = steps[steps["quantity"] == "loss"].groupby("step")["value"].mean()
    assert loss.iloc[-1] < loss.iloc[0]
    # v_0 at step 0 is column 0 of V_init
    vi = mats[(mats["matrix"] == "V_init") & (mats["col"] == 0) & (mats["setting"] == "random") & (mats["seed"] == 2)]
    v00 = v0[(v0["step"] == 0) & (v0["setting"] == "random") & (v0["seed"] == 2)]
    assert np.allclose(vi.sort_values("row")["value"], v00.sort_values("component")["value"])
    # deterministic: the same config gives the same table
    S.softmax_tables(cfg, {}, {"steps": str(tmp_path / "again.csv"), "matrices": str(tmp_path / "m2.csv"),
                               "v0": str(tmp_path / "v2.csv")}, CPU)
    assert pd.read_csv(tmp_path / "again.csv").equals(steps)


def test_exp_tables(tmp_path):
    cfg = dict(TINY, hidden=6, A=1 / 7, readout_std=1.0, lrs=[0.02, 0.01], steps=20, log_every=10)
    out = str(tmp_path / "exp.csv")
    S.exp_tables(cfg, {}, {"steps": out}, CPU)
    df = pd.read_csv(out)
    assert list(df.columns) == ["setting", "seed", "lr", "time", "step", "quantity", "value"]
    assert set(df["quantity"]) == {"loss", "rel_err", "nc", "z_norm"}
    fine = df[df["lr"] == 0.01]
    assert sorted(fine["step"].unique()) == [0, 20, 40]  # same time horizon, twice the steps
    assert np.allclose(fine["time"], fine["step"] * 0.01)
    rel = df[df["quantity"] == "rel_err"]
    assert rel[rel["step"] == 0]["value"].isna().all()  # z = 0 at zero init: undefined
    assert (rel[rel["step"] > 0]["value"] < 0.2).all()
    with pytest.raises(ValueError, match="whole number"):
        S.exp_tables(dict(cfg, lrs=[0.02, 0.015]), {}, {"steps": out}, CPU)


# Fig. 2's settings for the tiny tables: the grids they were simulated on
FIG2_CFG = {"softmax": {"settings": TINY["settings"], "seeds": TINY["seeds"]},
            "exp": {"settings": TINY["settings"], "seeds": TINY["seeds"], "lrs": [0.01, 0.005]}, "scale": "smoke"}


@pytest.fixture(scope="module")
def tiny_tables(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("joma_sim")
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # what `featlearn compute` sets for these one-thread jobs
    S.softmax_tables(dict(TINY, init_std=0.01, lr=0.1, steps=40, log_every=10), {},
                     {"steps": str(tmp_path / "s.csv"), "matrices": str(tmp_path / "m.csv"), "v0": str(tmp_path / "v.csv")}, CPU)
    S.exp_tables(dict(TINY, hidden=6, A=1 / 7, readout_std=1.0, lrs=[0.01, 0.005], steps=100, log_every=10), {},
                 {"steps": str(tmp_path / "e.csv")}, CPU)
    torch.set_num_threads(before)
    return [str(tmp_path / n) for n in ("s.csv", "m.csv", "v.csv", "e.csv")]


def test_figures_return_their_claims(tmp_path, tiny_tables):
    s, m, v, e = tiny_tables
    figs2 = [str(tmp_path / "fig2.png")]
    cfg = FIG2_CFG
    save_figure(F.draw_2({"steps": s, "matrices": m, "exp": e}, cfg), *figs2, dpi=60)
    claims = F.claims_2({"steps": s, "matrices": m, "exp": e}, cfg)
    assert [c.claim_id for c in claims] == [
        "fig2_nc_random", "fig2_nc_part2_random", "fig2_nc_smooth", "fig2_nc_part2_smooth",
        "thm1_exp_invariant", "thm1_exp_decreasing",
    ]
    assert all(c.paper == "joma" and c.scale == "smoke" for c in claims)
    by_id = {c.claim_id: c for c in claims}
    # in the linear regime the relative error is about 1/(t - 1): about 0.0101 at step 100
    assert by_id["thm1_exp_invariant"].measured == pytest.approx(1 / 99, rel=0.3)
    assert by_id["thm1_exp_invariant"].target == "<= 0.02"
    assert by_id["fig2_nc_smooth"].target == ">= 0.95" and by_id["fig2_nc_part2_smooth"].target == "<= 0.7"
    for p in figs2:
        assert (tmp_path / p).stat().st_size > 1000
    # Fig. 3: the paper's remark that only some components of v_0 keep growing (issue 17 added the claim)
    assert {c.claim_id for c in F.claims_3({"v0": v}, cfg)} == {f"fig3_few_grow_{x}" for x in set(pd.read_csv(v)["setting"])}
    save_figure(F.draw_3({"matrices": m, "v0": v}, cfg), str(tmp_path / "fig3.png"), dpi=60)
    assert (tmp_path / "fig3.png").stat().st_size > 1000


def test_exp_claims_fail_when_step_100_or_lr_is_missing(tmp_path, tiny_tables):
    s, m, v, e = tiny_tables
    df = pd.read_csv(e)
    df[df["step"] != 100].to_csv(tmp_path / "no100.csv", index=False)
    claims = {c.claim_id: c for c in F.claims_2({"steps": s, "matrices": m, "exp": str(tmp_path / "no100.csv")}, FIG2_CFG)}
    assert np.isnan(claims["thm1_exp_invariant"].measured) and not claims["thm1_exp_invariant"].passed
    # an error that rises is counted
    bumped = df.copy()
    sel = (bumped["quantity"] == "rel_err") & (bumped["step"] == 50) & np.isclose(bumped["lr"], 0.01)
    bumped.loc[sel, "value"] = 10.0
    bumped.to_csv(tmp_path / "bumped.csv", index=False)
    claims = {c.claim_id: c for c in F.claims_2({"steps": s, "matrices": m, "exp": str(tmp_path / "bumped.csv")}, FIG2_CFG)}
    assert claims["thm1_exp_decreasing"].measured == sel.sum() and not claims["thm1_exp_decreasing"].passed
