"""Templates paper, kernel theory of Sec. 3: K_attn and its closed form at β = 0, the transformer kernel's cosine
formula, the N matrix, kernel ridge regression, the tables and the figure. The identities that were claims
11a-c are tests here; claim 11d on planted tables is in test_templates_claims.py."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
import torch

from featlearn.templates.kernels import theory as K
from featlearn.templates import tasks as T

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny tensors: see conftest

SMALL = {
    "tasks": [{"name": "same_different"}, {"name": "aba_abb"}, {"name": "majority", "k": 4}],
    "beta": 2.0,
    "gamma": 1.0,
    "b1": 1.0,
    "b2": 0.5,
    "n_mc": 4000,
    "batches": 8,
    "seed": 0,
    "beta0_n_mc": 16,
    "krr": {"tasks": [{"name": "aba_abb"}], "n": [8, 32], "seeds": 1, "lam": 1e-3, "n_mc": 100, "n_test": 50},
}


def test_k_attn_at_beta_zero_is_the_closed_form_on_random_strings():
    g = torch.Generator().manual_seed(3)
    A = torch.randint(0, 6, (5, 4), generator=g)
    B = torch.randint(0, 6, (7, 4), generator=g)
    for gamma in (0.0, 0.5, 2.0):
        mc = K.k_attn(A, B, 0.0, gamma, n_mc=50, seed=1)[0]
        exact = K.k_attn_beta0(A, B, gamma)
        assert torch.allclose(mc, exact, atol=1e-12)
        # by hand: (number of equal token pairs + γ² k) / k²
        same = sum(int(a == b) for a in A[2].tolist() for b in B[4].tolist())
        assert float(exact[2, 4]) == pytest.approx((same + gamma**2 * 4) / 16)


def test_k_attn_monte_carlo_converges_and_is_symmetric_psd():
    X = torch.tensor([[0, 1, 0], [2, 3, 3], [0, 0, 1]])
    K1 = K.k_attn(X, X, 1.5, 1.0, n_mc=20000, seed=0, batches=4)
    full = K1.mean(0)
    assert torch.allclose(full, full.T, atol=1e-12)
    assert float(torch.linalg.eigvalsh(full).min()) > -1e-10
    # batch estimates scatter around the pooled one by a Monte Carlo error that shrinks like 1/sqrt(M)
    assert float((K1 - full).abs().max()) < 0.05
    assert not torch.allclose(K1[0], K1[1])
    other_seed = K.k_attn(X, X, 1.5, 1.0, n_mc=20000, seed=1)[0]
    assert torch.allclose(other_seed, full, atol=0.03)


def test_transformer_kernel_is_the_cosine_expectation_of_gaussians_with_k_attn_covariance():
    X = torch.tensor([[0, 1, 0, 5], [2, 3, 3, 5]])
    Ka = K.k_attn(X, X, 2.0, 1.0, n_mc=4000, seed=0)[0]
    b1, b2 = 1.3, 0.4
    Kt = K.k_trans_from_attn(Ka, torch.diagonal(Ka), torch.diagonal(Ka), b1, b2)
    # Monte Carlo of E[cos(b1 u + b2) cos(b1 v + b2)] with (u, v) ~ N(0, K_attn)
    L = torch.linalg.cholesky(Ka + 1e-12 * torch.eye(2, dtype=Ka.dtype))
    z = torch.randn(400_000, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64) @ L.T
    phi = torch.cos(b1 * z + b2)
    mc = phi.T @ phi / len(z)
    assert torch.allclose(Kt, mc, atol=5e-3)
    # and through k_trans directly (same random features)
    direct = K.k_trans(X, X, 2.0, 1.0, b1, b2, n_mc=4000, seed=0)[0]
    assert torch.allclose(direct, Kt, atol=1e-12)


def test_mlp_kernel_is_an_inner_product_kernel_of_matches():
    A = torch.tensor([[0, 1, 2], [0, 1, 3]])
    Km = K.k_mlp(A, A)
    assert float(Km[0, 0]) == pytest.approx(1.0)  # κ(1) = 1 for the arc-cosine kernel
    assert float(Km[0, 1]) == pytest.approx(float(K.relu_kappa(torch.tensor(2 / 3, dtype=torch.float64))))
    assert float(K.relu_kappa(torch.tensor(0.0))) == pytest.approx(1 / math.pi)


@pytest.mark.parametrize("task", [T.same_different(), T.aba_abb(), T.abab_aabb(), T.majority(4), T.majority(6)],
                         ids=lambda t: t.name)
def test_mlp_kernel_n_matrix_has_rank_one(task):
    """Sec. 3.3 (formerly claim 11b_mlp_rank, an identity): every entry of the MLP kernel's N is κ(0)."""
    N, Nb = K.n_matrix(task, "mlp")
    c = K.conditioning(N, Nb)
    assert N.shape == (task.r, task.r) and c["rank"] == 1 and c["sigma_min_se"] == 0.0
    assert torch.allclose(N, torch.full_like(N, 1 / math.pi))


CLAIM_TASKS = [T.same_different(), T.aba_abb(), T.majority(4)]  # the kernel figure's tasks: T4, T5, T7 (k = 4)


def test_k_attn_monte_carlo_at_beta_zero_is_exact_on_the_n_matrix_strings():
    """Formerly claim 11a_beta0, an identity: at β = 0 the softmax is uniform whatever the Gaussian sample, so
    the Monte Carlo K_attn is its closed form (1'XY'1 + γ² k) / k² up to rounding, on the strings of every task."""
    table = K.beta0_table({"tasks": [{"name": "same_different"}, {"name": "aba_abb"}, {"name": "majority", "k": 4}],
                           "gamma": 1.0, "n_mc": 3, "seed": 5})
    assert list(table["task"]) == ["same_different", "aba_abb", "majority_4"]
    assert (table["max_abs_diff"] <= 1e-12).all() and (table["max_exact"] > 0).all()


@pytest.mark.parametrize("task", CLAIM_TASKS, ids=lambda t: t.name)
def test_mlp_kernel_ridge_regression_predicts_one_constant_on_unseen_symbols(task):
    """Sec. 3.3 (formerly claim 11c_mlp_krr, an identity): a test string over the disjoint test alphabet shares
    no token with any training string, so each of its kernel values is κ(0) and kernel ridge regression predicts
    the same value for every test string; its test MSE is that constant predictor's."""
    n, seed = 32, 3
    data = T.make_datasets(task, n, seed, n_val=1, n_test=50)
    Xtr, Xte = data.train.tokens, data.test.tokens
    ytr, yte = data.train.targets.to(K.DTYPE), data.test.targets.to(K.DTYPE)
    Kt = K.k_mlp(Xte, Xtr)
    assert torch.equal(Kt, torch.full_like(Kt, 1 / math.pi))
    pred = K.krr_fit_predict(K.k_mlp(Xtr, Xtr), ytr, Kt, lam=1e-3)
    assert torch.allclose(pred, pred[0].expand_as(pred), rtol=0, atol=1e-12)
    constant_mse = float(((pred[0] - yte) ** 2).mean())
    assert K.krr_unseen(task, n, "mlp", seed, lam=1e-3, n_test=50)["test_mse"] == pytest.approx(constant_mse, abs=1e-12)


def test_fresh_substitutions_are_disjoint_and_follow_the_templates():
    task = T.majority(4)
    X, Y, cls = K.fresh_substitutions(task)
    assert X.shape == Y.shape == (8, 4)
    assert not set(X.unique().tolist()) & set(Y.unique().tolist())
    assert cls > max(int(X.max()), int(Y.max()))
    for row, z in zip(X.tolist(), task.templates):
        assert [row[0] == r for r in row] == [s == z[0] for s in z]


def test_transformer_n_matrix_is_nonsingular_beyond_monte_carlo_error():
    N, Nb = K.n_matrix(T.aba_abb(), "trans", n_mc=8000, batches=16)
    c = K.conditioning(N, Nb)
    assert c["rank"] == 2 and c["sigma_min"] > 3 * c["sigma_min_se"] > 0
    with pytest.raises(ValueError, match="unknown kernel"):
        K.n_matrix(T.aba_abb(), "rbf")


def test_conditioning_of_planted_matrices():
    N = torch.diag(torch.tensor([4.0, 2.0, 0.0], dtype=torch.float64))
    c = K.conditioning(N, N[None])
    assert (c["rank"], c["sigma_max"], c["sigma_min"], c["cond"]) == (2, 4.0, 0.0, math.inf)
    Nb = torch.stack([torch.eye(2, dtype=torch.float64) * s for s in (1.0, 2.0, 3.0)])
    c = K.conditioning(Nb.mean(0), Nb)
    assert c["sigma_min"] == pytest.approx(2.0) and c["sigma_min_se"] == pytest.approx(1 / math.sqrt(3))


def test_kernel_ridge_regression_recovers_a_planted_function():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(40, 5, generator=g, dtype=torch.float64)
    Xt = torch.randn(20, 5, generator=g, dtype=torch.float64)
    w = torch.randn(5, generator=g, dtype=torch.float64)
    # linear kernel: y = X w lies in its RKHS, so ridge regression with a small λ predicts new points
    pred = K.krr_fit_predict(X @ X.T, X @ w, Xt @ X.T, lam=1e-8)
    assert torch.allclose(pred, Xt @ w, atol=1e-5)
    # a large ridge shrinks the prediction towards 0
    assert float(K.krr_fit_predict(X @ X.T, X @ w, Xt @ X.T, lam=1e6).abs().max()) < 0.05


def test_krr_unseen_mlp_fits_training_set_but_not_unseen_symbols():
    res = K.krr_unseen(T.aba_abb(), 64, "mlp", seed=2)
    assert res["train_mse"] < 0.01 and res["test_mse"] > 0.9
    with pytest.raises(ValueError, match="kernel ridge regression"):
        K.krr_unseen(T.aba_abb(), 8, "attn", seed=1)


def test_write_tables(tmp_path):
    paths = [tmp_path / f for f in ("nm.csv", "b0.csv", "krr.csv")]
    K.write_tables(SMALL, *map(str, paths))
    nm, b0, krr = (pd.read_csv(p) for p in paths)
    assert len(nm) == 9 and set(nm["kernel"]) == {"mlp", "attn", "trans"}
    assert set(nm["task"]) == {"same_different", "aba_abb", "majority_4"}
    assert b0["max_abs_diff"].max() < 1e-12
    assert len(krr) == 2 * 2 and set(krr["kernel"]) == {"mlp", "trans"}
    # same settings, same bytes
    again = tmp_path / "again.csv"
    K.write_tables(SMALL, str(again), str(tmp_path / "b.csv"), str(tmp_path / "k.csv"))
    assert again.read_bytes() == paths[0].read_bytes()


def _planted():
    """Kernel tables as the job writes them (every claim of them: test_templates_claims.py)."""
    rows = []
    for task, r in (("same_different", 2), ("aba_abb", 2), ("majority_4", 8)):
        rows.append({"task": task, "kernel": "mlp", "r": r, "sigma_max": 1.0, "sigma_min": 0.0, "cond": math.inf, "rank": 1,
                     "sigma_min_se": 0.0})
        rows.append({"task": task, "kernel": "trans", "r": r, "sigma_max": 1.0, "sigma_min": 1e-3, "cond": 1e3, "rank": r,
                     "sigma_min_se": 1e-4})
    nm = pd.DataFrame(rows)
    b0 = pd.DataFrame({"task": ["aba_abb"], "max_abs_diff": [1e-15], "max_exact": [0.5]})
    krr = pd.DataFrame({"task": "aba_abb", "kernel": ["mlp", "mlp", "trans", "trans"], "n": [8, 64, 8, 64], "seed": 1,
                        "train_mse": 0.0, "test_mse": [1.0, 1.0, 0.9, 0.2]})
    return nm, b0, krr


def test_figure_and_claims_from_tables(tmp_path):
    nm, b0, krr = _planted()
    paths = [tmp_path / f for f in ("nm.csv", "b0.csv", "krr.csv")]
    for df, p in zip((nm, b0, krr), paths):
        df.to_csv(p, index=False)
    from featlearn.pipeline.cli import main

    out = tmp_path / "fig.png"
    claims = tmp_path / "claims.csv"
    inputs = json.dumps(dict(zip(("n_matrix", "beta0", "krr"), map(str, paths))))
    assert main(["figure", "--draw", "featlearn.templates.kernels.figures:draw_kernels",
                 "--claims-fn", "featlearn.templates.kernels.figures:claims_kernels", "--inputs", inputs,
                 "--figures", str(out), "--claims", str(claims), "--scale", "test", "--dpi", "40"]) == 0
    written = pd.read_csv(claims)
    assert out.stat().st_size > 1000 and list(written["claim_id"]) == [
        f"11d_trans_{t}" for t in ("same_different", "aba_abb", "majority_4")] + [f"11e_krr_{t}" for t in krr["task"].unique()]
