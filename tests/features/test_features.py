"""features paper: models against their equations, single-unit scores, padding, extraction, theory, NTK."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from featlearn.features import extract, theory
from featlearn.features.models import (
    KINDS,
    InitScales,
    ModelSpec,
    bigram_scores,
    forward,
    init_params,
    lengths_to_mask,
    position_scores,
    run_losses,
    scores_of,
    token_scores,
)

F64 = torch.float64
ACTS = ["relu", "tanh", "gelu"]  # three runs with different activations and sigma_v
SIGMA_V = [0.1, 0.5, 0.001]
PHI = {"relu": lambda z: np.maximum(z, 0), "tanh": np.tanh,
       "gelu": lambda z: z * 0.5 * (1 + np.vectorize(math.erf)(z / math.sqrt(2)))}
# The models' sizes and initial scales of these tests: the paper's (as config features.cls.train), widths d per test.
SHAPE = {"kernel": 3, "ffn": 64, "sa_variant": "paper"}
SCALES = InitScales(sigma_e=0.1, sigma_w=0.1, sigma_h=0.1)


def make(kind: str, V: int = 7, d: int = 4, n_out: int = 1, **kw):
    spec = ModelSpec(kind, V, d=d, n_out=n_out, bos_id=V - 1 if kind == "mv" else None, **{**SHAPE, "ffn": 5, **kw})
    params = init_params(spec, [3, 4, 5], SIGMA_V if n_out == 1 else [0.3] * 3, SCALES, dtype=F64)
    if kind == "tr":  # non-trivial biases and LayerNorm affine, so the reference check covers them
        g = torch.Generator().manual_seed(0)
        for name in ("bq", "bk", "bv", "bo", "b1", "b2", "ln1_b", "ln2_b"):
            params[name] = torch.randn(params[name].shape, generator=g, dtype=F64) * 0.3
        for name in ("ln1_g", "ln2_g"):
            params[name] = 1 + torch.randn(params[name].shape, generator=g, dtype=F64) * 0.3
    return spec, params


def positions(L: int, d: int) -> np.ndarray:
    P = np.zeros((L, d))
    for i in range(L):
        for m in range(0, d, 2):
            P[i, m] = math.sin(i / 10000 ** (m / d))
            if m + 1 < d:
                P[i, m + 1] = math.cos(i / 10000 ** (m / d))
    return P


def reference_score(kind: str, spec: ModelSpec, params, r: int, seq: list[int], act: str) -> np.ndarray:
    """The model's equation written out position by position for run r (float64 numpy)."""
    p = {k: t[r].numpy() for k, t in params.items()}
    d, phi = spec.d, PHI[act]
    xs = [p["E"][w] for w in seq]
    v = p["v"]
    l = len(seq)
    if kind == "mlp":  # Eq. 6
        return sum(v.T @ phi(p["W"] @ x / math.sqrt(d)) for x in xs) / math.sqrt(d)
    if kind == "cnn":  # Eq. 9-10 with K-1 zero vectors on both sides
        K = spec.kernel
        padded = [np.zeros(d)] * (K - 1) + xs + [np.zeros(d)] * (K - 1)
        total = 0
        for j in range(l + K - 1):
            c = sum(p["Wc"][k] @ padded[j + k] for k in range(K)) / math.sqrt(d)
            total = total + v.T @ phi(c) / math.sqrt(d)
        return total
    if kind in ("sa", "sa_mlp"):  # Eq. 13-16 (paper variant)
        P = positions(l, d)
        out = 0
        for i in range(l):
            a = np.array([(xs[i] + P[i]) @ (xs[j] + P[j]) / d for j in range(l)])
            alpha = np.exp(a - a.max()) / np.exp(a - a.max()).sum()
            mixed = sum(alpha[j] * xs[j] for j in range(l))
            if kind == "sa":
                out = out + v.T @ mixed / math.sqrt(d)
            else:
                out = out + v.T @ phi(p["W"] @ mixed / math.sqrt(d)) / math.sqrt(d)
        return out
    if kind == "mv":  # Eq. 19
        return (sum(v.T @ (np.diag(p["W"] @ xs[j]) @ xs[j + 1]) for j in range(l - 1)) / (d * math.sqrt(d)) if l > 1
                else np.zeros(v.shape[1]))
    if kind == "lrnn":  # Eq. 75, 77
        h = np.zeros(d)
        for x in xs:
            h = p["Wh"] @ h / math.sqrt(d) + p["W"] @ x / d
        return v.T @ h
    raise AssertionError(kind)


SEQS = [[0, 1, 2, 3, 1], [4, 2], [5], [1, 1, 3]]


@pytest.mark.parametrize("kind", ["mlp", "cnn", "sa", "sa_mlp", "mv", "lrnn"])
def test_forward_matches_equation(kind):
    spec, params = make(kind)
    s = scores_of(spec, params, SEQS, ACTS)
    assert s.shape == (3, len(SEQS), 1)
    for r, act in enumerate(ACTS):
        for b, seq in enumerate(SEQS):
            ref = reference_score(kind, spec, params, r, seq, act)
            assert s[r, b].numpy() == pytest.approx(np.atleast_1d(ref), rel=1e-10, abs=1e-15)


def test_hand_computed_mlp_and_sa():
    # d = 2, vocabulary {a, b}; embeddings, W and v chosen so every number can be checked by hand.
    for kind in ("mlp", "sa"):
        spec = ModelSpec(kind, 2, d=2, **SHAPE)
        params = init_params(spec, [0], [0.1], SCALES, dtype=F64)
        params["E"][0] = torch.tensor([[2.0, 0.0], [0.0, 2.0]], dtype=F64)  # x_a = (2, 0), x_b = (0, 2)
        params["v"][0] = torch.tensor([[1.0], [-1.0]], dtype=F64)
        if kind == "mlp":
            params["W"][0] = torch.tensor([[1.0, 0.0], [1.0, -1.0]], dtype=F64)
            # a: W x/sqrt2 = (sqrt2, sqrt2) -> relu -> v^T = 0;  b: (0, -sqrt2) -> relu (0, 0) -> 0;
            # so s(a b) = 0 and s(a) = 0; use tanh for a non-zero value: b -> tanh(-sqrt2) on unit 2
            s = scores_of(spec, params, [[0, 1]], ["tanh"])
            expected = (math.tanh(math.sqrt(2)) - math.tanh(math.sqrt(2)) + 0 - math.tanh(-math.sqrt(2))) / math.sqrt(2)
            assert float(s[0, 0, 0]) == pytest.approx(expected, rel=1e-12)
            assert float(scores_of(spec, params, [[0, 1]], ["relu"])[0, 0, 0]) == 0.0
        else:
            # positions P_0 = (0, 1), P_1 = (sin 1, cos 1); a_ij = (x_i + P_i).(x_j + P_j) / 2
            P = np.array([[0.0, 1.0], [math.sin(1), math.cos(1)]])
            q = np.array([[2.0, 0.0], [0.0, 2.0]]) + P
            a = q @ q.T / 2
            alpha = np.exp(a) / np.exp(a).sum(1, keepdims=True)
            token_value = np.array([2.0, -2.0]) / math.sqrt(2)  # v^T x_j / sqrt(d)
            expected = float((alpha @ token_value).sum())
            assert float(scores_of(spec, params, [[0, 1]], ["relu"])[0, 0, 0]) == pytest.approx(expected, rel=1e-12)


def test_transformer_matches_torch_encoder_layer():
    spec, params = make("tr", d=4)
    r = 1
    layer = torch.nn.TransformerEncoderLayer(4, 1, dim_feedforward=5, dropout=0.0, batch_first=True, dtype=F64)
    with torch.no_grad():
        layer.self_attn.in_proj_weight.copy_(torch.cat([params["Wq"][r], params["Wk"][r], params["Wv"][r]]))
        layer.self_attn.in_proj_bias.copy_(torch.cat([params["bq"][r], params["bk"][r], params["bv"][r]]))
        layer.self_attn.out_proj.weight.copy_(params["Wo"][r])
        layer.self_attn.out_proj.bias.copy_(params["bo"][r])
        layer.linear1.weight.copy_(params["W1"][r])
        layer.linear1.bias.copy_(params["b1"][r])
        layer.linear2.weight.copy_(params["W2"][r])
        layer.linear2.bias.copy_(params["b2"][r])
        layer.norm1.weight.copy_(params["ln1_g"][r])
        layer.norm1.bias.copy_(params["ln1_b"][r])
        layer.norm2.weight.copy_(params["ln2_g"][r])
        layer.norm2.bias.copy_(params["ln2_b"][r])
    layer.eval()
    s = scores_of(spec, params, SEQS, ACTS)
    for b, seq in enumerate(SEQS):
        x = params["E"][r][seq] + torch.tensor(positions(len(seq), 4))
        with torch.no_grad():
            z = layer(x.unsqueeze(0))[0]
        expected = float(params["v"][r][:, 0] @ z.sum(0)) / 2.0
        assert float(s[r, b, 0]) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("kind", KINDS)
def test_single_token_score_is_output_on_one_token_input(kind):
    spec, params = make(kind, n_out=2 if kind == "sa" else 1)
    ids = torch.arange(spec.vocab_size - 1)
    ts = token_scores(spec, params, ids, ACTS)
    one = [[spec.bos_id, int(i)] if kind == "mv" else [int(i)] for i in ids]
    out = scores_of(spec, params, one, ACTS)
    assert ts.shape == out.shape
    assert torch.allclose(ts, out, rtol=1e-10, atol=1e-15)
    assert ts.abs().max() > 0


def test_mv_and_lrnn_scores_decompose_into_units():
    spec, params = make("mv")
    seq = [0, 3, 1, 2]
    a, b = torch.tensor(seq[:-1]), torch.tensor(seq[1:])
    assert torch.allclose(scores_of(spec, params, [seq], ACTS)[:, 0], bigram_scores(spec, params, a, b).sum(1), rtol=1e-10)
    assert torch.allclose(scores_of(spec, params, [[0, 3]], ACTS)[:, 0], bigram_scores(spec, params, a[:1], b[:1])[:, 0])
    # L-RNN (Eq. 77): s = sum_j s^{e_j}_[T - j] with position scores of Eq. 86
    spec, params = make("lrnn")
    ps = position_scores(spec, params, torch.tensor(seq), list(range(len(seq))), ACTS)  # [R, n, k, 1]
    T = len(seq)
    total = sum(ps[:, j, T - 1 - j] for j in range(T))
    assert torch.allclose(scores_of(spec, params, [seq], ACTS)[:, 0], total, rtol=1e-10)
    # CNN: the token score is the sum of its K position scores (Eq. 66)
    spec, params = make("cnn")
    ids = torch.arange(4)
    assert torch.allclose(position_scores(spec, params, ids, [0, 1, 2], ACTS).sum(2), token_scores(spec, params, ids, ACTS))


@pytest.mark.parametrize("kind", KINDS)
def test_padding_never_changes_a_score(kind):
    spec, params = make(kind)
    alone = torch.stack([scores_of(spec, params, [s], ACTS)[:, 0] for s in SEQS], 1)
    # the same sequences in one batch, padded to 9 with junk ids (not the pad id) and a per-run batch layout
    lengths = torch.tensor([len(s) for s in SEQS])
    tokens = torch.full((len(SEQS), 9), 3, dtype=torch.long)
    for i, s in enumerate(SEQS):
        tokens[i, : len(s)] = torch.tensor(s)
    mask = lengths_to_mask(lengths, 9)
    with torch.no_grad():
        shared = forward(spec, params, tokens, mask, ACTS)
        per_run = forward(spec, params, tokens.expand(3, -1, -1), mask.expand(3, -1, -1), ACTS)
    assert torch.allclose(shared, alone, rtol=1e-10, atol=1e-14)
    assert torch.allclose(per_run, alone, rtol=1e-10, atol=1e-14)


def test_runs_are_independent_of_the_batch():
    spec = ModelSpec("mlp", 6, d=4, **SHAPE)
    both = init_params(spec, [7, 8], [0.1, 0.001], SCALES, dtype=F64)
    alone = init_params(spec, [8], [0.001], SCALES, dtype=F64)
    assert all(torch.equal(both[k][1], alone[k][0]) for k in both)
    s_both = scores_of(spec, both, SEQS[:2], ["relu", "gelu"])
    s_alone = scores_of(spec, alone, SEQS[:2], ["gelu"])
    assert torch.allclose(s_both[1], s_alone[0], rtol=1e-12)
    assert float(both["v"][1].std()) < 0.01 < float(both["v"][0].std())


def test_losses():
    s = torch.tensor([[[2.0], [-1.0]]], dtype=F64)
    y = torch.tensor([1, 0])
    expected = (math.log1p(math.exp(-2.0)) + math.log1p(math.exp(-1.0))) / 2
    assert float(run_losses(s, y)[0]) == pytest.approx(expected)
    s3 = torch.tensor([[[1.0, 0.0, 0.0]]], dtype=F64)
    assert float(run_losses(s3, torch.tensor([0]))[0]) == pytest.approx(-math.log(math.e / (math.e + 2)))


# ------------------------------------------------------------------------------------------ extraction
FIXTURE = [
    (1, "good film good fun"), (1, "good acting"), (1, "great film"), (1, "good great"), (1, "fun great plot"),
    (0, "bad film"), (0, "bad plot not good"), (0, "dull bad"), (0, "bad bad acting"), (0, "film plot"),
]


def test_token_extraction_counts():
    counts = extract.token_counts(FIXTURE)
    assert counts["good"].tolist() == [1, 4] and counts["bad"].tolist() == [5, 0] and counts["film"].tolist() == [2, 2]
    df = extract.extract(counts, ratio=3, min_count=2)
    # pos: good 4 > 3*1 and > 2; great 3 > 0 and > 2. neg: bad 5 > 0. fun 2 is not > 2; film/plot mixed.
    assert df["unit"].tolist() == ["bad", "good", "great"]
    assert df["polarity"].tolist() == [-1, 1, 1]
    assert extract.class_sizes(df) == {0: 1, 1: 2}
    assert df.set_index("unit").loc["good", "log_odds"] == pytest.approx(math.log(5 / 2))
    # the paper's non-strict rule (>= ratio, >= floor) admits "fun" (2 >= 2) as well
    loose = extract.extract(counts, ratio=3, min_count=2, strict=False)
    assert sorted(loose["unit"]) == ["bad", "fun", "good", "great"]


def test_bigram_position_and_multiclass_extraction():
    bi = extract.bigram_counts(FIXTURE)
    assert bi["good film"].tolist() == [0, 1] and bi["bad bad"].tolist() == [1, 0] and "fun good" not in bi
    df = extract.extract(bi, ratio=3, min_count=0)
    assert set(df[df["cls"] == 0]["unit"]) >= {"bad film", "bad plot", "not good"}
    pos = extract.position_counts(FIXTURE, max_distance=1)
    assert pos[("great", 0)].tolist() == [0, 1] and pos[("plot", 0)].tolist() == [1, 1]
    assert pos[("bad", 0)].tolist() == [1, 0] and pos[("bad", 1)].tolist() == [2, 0]
    assert pos[("good", 0)].tolist() == [1, 0] and pos[("good", 1)].tolist() == [0, 3] and ("good", 2) not in pos
    multi = [(0, "a a x"), (1, "b b b b x"), (2, "c x"), (2, "c c c a")]
    mdf = extract.extract(extract.token_counts(multi, 3), ratio=3, min_count=1)
    assert dict(zip(mdf["unit"], mdf["cls"])) == {"b": 1, "c": 2}
    assert (mdf["polarity"] == 0).all() and mdf["log_odds"].isna().all()


def test_adjectives_negation_phrases_and_synthetic_positions():
    adj = extract.extract_adjectives(FIXTURE, lambda w: w in {"good", "great", "bad", "dull"}, ratio=3, min_count=0)
    assert sorted(adj["unit"]) == ["bad", "dull", "good", "great"]
    rows = FIXTURE + [(0, "not good at all"), (1, "never dull"), (0, "not good at all"), (1, "hardly"), (1, "not " + "x " * 10)]
    assert extract.negation_phrases(rows) == [(0, "not good at all"), (1, "never dull")]


def test_negation_nodes_keep_negations_that_flip_their_sub_phrase():
    from featlearn.data.parsers import parse_tree

    trees = [parse_tree(t) for t in (
        "(1 (2 It) (1 (1 (2 not) (3 good)) (2 .)))",  # "not good" (negative) over "good" (positive): kept
        "(3 (2 not) (1 bad))",  # "not bad" (positive) over "bad" (negative): kept
        "(1 (2 not) (1 awful))",  # "awful" is only ever negative: no flip
        "(1 (2 Not) (3 nice))",  # cased: "Not" is not a negator
        "(1 (2 never) (3 (3 a) (3 (3 good) (3 film))))",  # 4 words, over max_words = 3
        "(3 (2 not) (1 bad))",  # a repeat keeps the first
    )]
    assert extract.negation_nodes(trees, max_words=3) == [(0, "not good"), (1, "not bad")]
    assert (0, "never a good film") in extract.negation_nodes(trees + [parse_tree("(3 (3 a) (3 (3 good) (3 film)))")],
                                                              max_words=4)


def test_inclusive_ratio_keeps_the_strict_floor():
    counts = {"x": np.array([2, 6]), "y": np.array([1, 4]), "z": np.array([0, 3])}
    assert set(extract.extract(counts, 3.0, 3)["unit"]) == {"y"}  # 6 = 3 x 2 fails "> 3 x", 3 fails "> 3"
    assert set(extract.extract(counts, 3.0, 3, inclusive_ratio=True)["unit"]) == {"x", "y"}
    syn = extract.synthetic_position_rows(n_per_class=50, seed=3)
    assert len(syn) == 100 and sum(y for y, _ in syn) == 50
    pdf = extract.extract(extract.position_counts(syn, 4), ratio=3, min_count=2)
    counts = extract.position_counts(syn, 4)
    assert all(k == 2 for (w, k) in counts if not w.startswith("f"))  # markers sit at distance 2 only
    markers = pdf[[not w.startswith("f") for w, _ in pdf["unit"]]]
    assert len(markers) >= 15  # of the 20 markers (about 5 occurrences each)
    assert all(w.startswith("pos") == (c == 1) for (w, _), c in zip(markers["unit"], markers["cls"]))


# ---------------------------------------------------------------------------------------------- theory
def test_mlp_constants_match_the_reference_values():
    rho, mu = theory.relu_mlp_constants(0.1, 0.1, 0.1)
    assert rho == pytest.approx(1.3408e-4, rel=1e-4) and mu == pytest.approx(1.5915e-5, rel=1e-4)
    rho2, mu2 = theory.relu_mlp_constants(0.1, 0.1, 0.001)
    assert rho2 == pytest.approx(3.4095e-5, rel=1e-4) and mu2 == mu
    for sv in (0.1, 0.001):  # the general Gaussian-integral form reproduces the ReLU closed form
        assert theory.mlp_constants("relu", 0.1, 0.1, sv) == pytest.approx(theory.relu_mlp_constants(0.1, 0.1, sv), rel=1e-8)
    # tanh is odd: no bias; GELU/SiLU: a bias four orders of magnitude below ReLU's at this scale
    assert theory.mlp_constants("tanh", 0.1, 0.1, 0.001)[1] == pytest.approx(0.0, abs=1e-20)
    for act in ("gelu", "silu"):
        r, m = theory.mlp_constants(act, 0.1, 0.1, 0.001)
        assert 0 < m < 1e-4 * mu and r > 0
    # identity map (Eq. 94): rho = s^2 + sigma_e^2 sigma_v^2 + sigma_w^2 sigma_v^2, mu = 0
    assert theory.mlp_constants("identity", 0.1, 0.2, 0.3) == pytest.approx((0.01 * 0.04 + 0.01 * 0.09 + 0.04 * 0.09, 0.0),
                                                                            abs=1e-15)


def test_cnn_sa_mv_lrnn_constants():
    s2 = 1e-4
    F = [theory.cnn_F(n, 3, s2) for n in range(4)]
    H = [theory.cnn_H(n, 3) for n in range(4)]
    assert F[0] == pytest.approx(3 * s2 / (2 * math.pi)) and F[3] == pytest.approx(3 * s2 / 2)
    assert H[0] == 0.25 and H[3] == 0.5
    assert all(a < b for a, b in zip(F, F[1:])) and all(a < b for a, b in zip(H, H[1:]))  # Proposition A.1
    for n in range(4):  # closed forms against the integral forms of Eq. 57-59
        assert theory.cnn_F_integral(n, 3, s2) == pytest.approx(F[n], rel=1e-8)
        assert theory.cnn_H_integral(n, 3) == pytest.approx(H[n], rel=1e-8)
    assert theory.cnn_rho(0.1, 0.1, 0.1) == pytest.approx(2e-4)
    assert theory.sa_rho(0.1, 0.1) == pytest.approx(0.02) and theory.sa_rho(0.1, 0.001) == pytest.approx(0.010001)
    assert not hasattr(theory, "mv_rho")  # the printed MV constant lacks a 1/d; unused, so removed
    base = 3e-4
    assert theory.lrnn_rho(0, 0.1, 0.1, 0.1, 0.1) == pytest.approx(base)
    assert theory.lrnn_rho(2, 0.1, 0.1, 0.1, 0.5) == pytest.approx(0.5**4 * base + 2 * 0.5**2 * 1e-6)


def test_ntk_flow_is_the_kernel_dynamics_and_shows_the_relu_bias():
    seqs = [[0, 2], [0, 0, 3], [1, 2], [1, 3, 3], [0, 3]]
    labels = np.array([1, 1, 0, 0, 1])
    lengths = np.array([len(s) for s in seqs])
    C = theory.count_matrix(seqs, 4)
    assert C.toarray()[1].tolist() == [2, 0, 0, 1]
    rho, mu, eta = 0.7, 0.2, 0.5
    flow = theory.ntk_flow(C, labels, lengths, rho, mu, eta, steps=3, probe_ids=np.arange(4))
    # the same three steps with the explicit kernel Theta(x', x) = rho c(x')^T c(x) + mu l(x') l(x)
    probes = np.eye(4)
    feats = np.vstack([probes, C.toarray()])
    lens = np.concatenate([np.ones(4), lengths])
    Theta = rho * feats @ C.toarray().T + mu * np.outer(lens, lengths)
    s_train, s_probe = np.zeros(5), np.zeros(4)
    for _ in range(3):
        s_train, s_probe = theory.kernel_step(Theta, s_train, s_probe, labels, eta)
    assert flow["scores"][-1] == pytest.approx(s_probe, rel=1e-12)
    # token 0 only in positive instances, token 1 only in negative ones
    assert flow["scores"][-1][0] > 0 > flow["scores"][-1][1]
    assert flow["loss"][-1] < flow["loss"][0]
    # more positive mass: the shared term is positive and makes the bias index positive; mu = 0 removes it
    assert flow["bias"][-1] > 0
    no_bias = theory.ntk_flow(C, labels, lengths, rho, 0.0, eta, steps=3, probe_ids=np.arange(4))
    pol = [1, -1]
    assert theory.bias_index(flow["scores"][-1][:2], pol) > theory.bias_index(no_bias["scores"][-1][:2], pol)
    assert theory.bias_index([1.0, 3.0, -1.0, -3.0], [1, 1, -1, -1]) == 0.0
    assert math.isnan(theory.bias_index([1.0], [1]))


def test_sa_expected_attention_rows_sum_to_one():
    A = theory.sa_expected_attention(5, 16, 0.1, samples=16)
    assert A.shape == (5, 5) and np.allclose(A.sum(1), 1.0)
    assert np.all(np.diag(A) >= A.max(1) - 1e-12)  # positions attend most to themselves at initialisation


def _empirical_ntk(spec: ModelSpec, R: int, seqs: list[list[int]], sigma_v: float) -> np.ndarray:
    """Theta(x_a, x_b) = <ds(x_a)/dtheta, ds(x_b)/dtheta> for every pair, averaged over R initialisations."""
    params = init_params(spec, list(range(100, 100 + R)), [sigma_v] * R, SCALES, dtype=F64)
    for p in params.values():
        p.requires_grad_(True)
    grads = []
    for s in seqs:
        tokens = torch.tensor([s])
        out = forward(spec, params, tokens, torch.ones_like(tokens, dtype=torch.bool), ["relu"] * R)
        g = torch.autograd.grad(out.sum(), list(params.values()))  # runs are independent: per-run gradients
        grads.append([t.reshape(R, -1) for t in g])
    n = len(seqs)
    K = np.zeros((n, n))
    for a in range(n):
        for b in range(n):
            K[a, b] = float(sum((ga * gb).sum(1) for ga, gb in zip(grads[a], grads[b])).mean())
    return K


def test_empirical_ntk_approaches_the_closed_form_as_width_grows():
    sv = 0.1
    rho, mu = theory.relu_mlp_constants(0.1, 0.1, sv)
    mlp_target = np.array([[rho + mu, mu], [mu, rho + mu]])  # Eq. 39 on tokens a, b
    sa_target = np.diag([theory.sa_rho(0.1, sv)] * 2)  # one-token inputs: alpha = 1
    errors = {}
    for d in (8, 512):
        mlp = _empirical_ntk(ModelSpec("mlp", 2, d=d, **SHAPE), 12, [[0], [1]], sv)
        sa = _empirical_ntk(ModelSpec("sa", 2, d=d, **SHAPE), 12, [[0], [1]], sv)
        errors[d] = (np.abs(mlp - mlp_target).max() / (rho + mu), np.abs(sa - sa_target).max() / sa_target[0, 0])
    assert errors[512][0] < errors[8][0] and errors[512][1] < errors[8][1]
    assert errors[512][0] < 0.1 and errors[512][1] < 0.1


# ---------------------------------------------------------------------------------------------- training
from featlearn.features import train as T  # noqa: E402

TINY_VOCAB = ["<pad>", "unk", "<eos>", "good", "bad", "film", "plot", "fun", "dull", "great", "acting", "not"]
TINY_INDEX = {w: i for i, w in enumerate(TINY_VOCAB)}


def tiny_splits():
    enc = T.encode(FIXTURE, TINY_INDEX)
    return {"train": enc, "dev": T.encode(FIXTURE[::2], TINY_INDEX), "test": T.encode(FIXTURE[1::2], TINY_INDEX)}


def test_encode_pad_and_bucketed_batches():
    enc = T.encode([(1, "good film zzz"), (0, ""), (0, "bad")], TINY_INDEX, max_len=2)
    assert enc.lengths.tolist() == [2, 1, 1] and enc.ids.tolist() == [3, 5, 1, 4]
    tokens, lengths = T.pad_batch(enc, torch.tensor([2, 0]), 4)
    assert tokens.tolist() == [[4, 0, 0, 0], [3, 5, 0, 0]] and lengths.tolist() == [1, 2]
    lens = torch.tensor([5, 1, 3, 2, 8, 1, 1, 4, 2, 6])
    batches = T.epoch_batches(lens, 3, 2, torch.Generator().manual_seed(0))
    assert sorted(len(b) for b in batches) == [1, 3, 3, 3]
    assert sorted(torch.cat(batches).tolist()) == list(range(10))
    assert all(torch.all(lens[b][1:] >= lens[b][:-1]) for b in batches)  # length-sorted inside a pool


@pytest.mark.parametrize("n,batch,pool", [(10, 3, 2), (1000, 64, 5), (997, 16, 0), (64, 64, 1), (5, 8, 3)])
def test_epoch_batch_maxima_are_the_longest_of_each_epoch_batch_in_order(n, batch, pool):
    """The cost estimate's shortcut: the same draws as epoch_batches, so the same batches' longest lengths in the
    same order, and the generator left in the same state (an epoch after it draws the same)."""
    lens = torch.randint(1, 60, (n,), generator=torch.Generator().manual_seed(n))
    gen_a, gen_b = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    batches = T.epoch_batches(lens, batch, pool, gen_a)
    assert T.epoch_batch_maxima(lens, batch, pool, gen_b).tolist() == [int(lens[b].max()) for b in batches]
    assert torch.equal(gen_a.get_state(), gen_b.get_state())


def _manual_training(settings, runs, splits, opt_cls):
    """The same epochs with torch.optim on dense parameters (reference for the trainer's updates)."""
    spec = T._spec(settings, len(TINY_VOCAB), 1)
    params = init_params(spec, [r.seed for r in runs], [r.sigma_v for r in runs],
                         InitScales(settings.sigma_e, settings.sigma_w, settings.sigma_h), dtype=F64)
    leaves = [p.requires_grad_(True) for p in params.values()]
    opt = opt_cls(leaves, lr=settings.lr)
    enc = splits["train"]
    gen = torch.Generator().manual_seed(1_000_003 * runs[0].seed + 11)
    for _ in range(settings.epochs):
        for idx in T.epoch_batches(enc.lengths, settings.batch, settings.bucket_pool, gen):
            tokens, lengths = T.pad_batch(enc, idx)
            s = forward(spec, params, tokens, lengths_to_mask(lengths, tokens.shape[1]), [r.activation for r in runs])
            opt.zero_grad()
            run_losses(s, enc.labels[idx]).sum().backward()
            opt.step()
    return {k: p.detach() for k, p in params.items()}


def _settings(**kw) -> T.Settings:
    """Training settings of these tests: the paper's Adagrad and initial scales, widths, kernel, attention variant,
    <bos>, pools of 50 batches and evaluation batches of 256 (as config features.cls.train), with each test's own."""
    shared = dict(optimizer="adagrad", sigma_e=0.1, sigma_w=0.1, sigma_h=0.1, kernel=3, ffn=64, sa_variant="paper", mv_bos=True,
                  bucket_pool=50, eval_batch=256)
    return T.Settings(**{**shared, **kw})


@pytest.mark.parametrize("optimizer", ["adagrad", "adam", "sgd"])
def test_trainer_updates_match_torch_optimizers(optimizer):
    settings = _settings(kind="mlp", epochs=2, batch=3, lr=0.05, optimizer=optimizer, dropout=0.0, d=8,
                         bucket_pool=2, dtype="float64", threads=0)
    runs = [T.Run(5, "relu", 0.1), T.Run(5, "tanh", 0.001)]
    splits = tiny_splits()
    res = T.train(settings, runs, splits, len(TINY_VOCAB), T.Probes(), progress=False)
    ref = _manual_training(settings, runs, splits,
                           {"adagrad": torch.optim.Adagrad, "adam": torch.optim.Adam, "sgd": torch.optim.SGD}[optimizer])
    for k in ref:
        assert torch.allclose(res.params[k], ref[k], rtol=1e-9, atol=1e-12), k
    assert not torch.allclose(res.params["E"], init_params(res.spec, [5, 5], [0.1, 0.001], SCALES, dtype=F64)["E"])


def test_training_tables_and_group_independence():
    settings = _settings(kind="mv", epochs=3, batch=4, lr=0.5, dropout=0.0, d=8, dtype="float64", threads=0)
    splits = tiny_splits()
    probes = T.Probes(tokens={"good": 3, "bad": 4}, bigrams={"not good": (11, 3)},
                      phrases={"not good": [11, 3], "good film": [3, 5]})
    runs = [T.Run(1, "relu", 0.1), T.Run(2, "relu", 0.1)]
    res = T.train(settings, runs, splits, len(TINY_VOCAB), probes, progress=False)
    assert res.spec.bos_id == len(TINY_VOCAB) and res.params["E"].shape[1] == len(TINY_VOCAB) + 1
    sc = res.scores
    assert list(sc.columns) == ["run", "seed", "activation", "sigma_v", "epoch", "probe", "unit", "k", "out", "score"]
    assert sorted(sc["epoch"].unique()) == [0, 1, 2, 3] and len(sc) == 4 * 2 * 5
    # the logged token score is the model's output on (<bos>, token) with the final parameters
    final = sc[(sc.epoch == 3) & (sc.probe == "token") & (sc.unit == "good")].sort_values("run")["score"].to_numpy()
    direct = scores_of(res.spec, res.params, [[res.spec.bos_id, 3]], ["relu"] * 2)[:, 0, 0].numpy()
    assert final == pytest.approx(direct, rel=1e-10)
    m = res.metrics
    assert set(m["split"]) == {"train", "dev", "test"} and set(m[m.split == "train"]["epoch"]) == {1, 2, 3}
    dev = m[(m.split == "dev") & (m.metric == "accuracy")]
    for r, row in res.summary.set_index("run").iterrows():
        accs = dev[dev.run == r].sort_values("epoch")["value"].to_numpy()
        assert row["best_epoch"] == int(np.argmax(accs)) and row["dev_accuracy"] == accs.max()
        test = m[(m.split == "test") & (m.metric == "accuracy") & (m.run == r) & (m.epoch == row["best_epoch"])]
        assert row["test_accuracy"] == float(test["value"].iloc[0])
    # without dropout a run trained in a group of seeds equals the run trained alone
    alone = T.train(settings, runs[1:], splits, len(TINY_VOCAB), probes, progress=False)
    assert torch.allclose(alone.params["E"][0], res.params["E"][1], rtol=1e-10, atol=1e-13)



@pytest.mark.parametrize("kind", ["mv", "mlp"])
def test_dropout_masks_do_not_depend_on_the_group(kind):
    """Each seed draws its dropout masks from its own stream at its own batch shape: a run trained with other
    seeds equals the run trained alone (issue 18: one generator used to be shared by the job's runs)."""
    settings = _settings(kind=kind, epochs=2, batch=4, lr=0.5, dropout=0.3, d=8, dtype="float64", threads=0)
    splits, probes = tiny_splits(), T.Probes(tokens={"good": 3, "bad": 4})
    group = [T.Run(1, "relu", 0.1), T.Run(2, "relu", 0.1), T.Run(2, "tanh", 0.5)]
    together = T.train(settings, group, splits, len(TINY_VOCAB), probes, progress=False)
    for r in (0, 1):
        alone = T.train(settings, [group[r]], splits, len(TINY_VOCAB), probes, progress=False)
        assert torch.allclose(alone.params["E"][0], together.params["E"][r], rtol=1e-10, atol=1e-13)
    # the masks act: the same run without dropout ends elsewhere
    plain = T.train(T.Settings(**{**settings.__dict__, "dropout": 0.0}), group[:1], splits, len(TINY_VOCAB), probes,
                    progress=False)
    assert not torch.allclose(plain.params["E"][0], together.params["E"][0], rtol=1e-6)


@pytest.mark.parametrize("optimizer,dropout,graph_safe", [("adagrad", 0.3, False), ("adam", 0.3, False),
                                                        ("adagrad", 0.3, True), ("adam", 0.0, True)])
def test_a_killed_training_resumes_from_its_checkpoint_and_gives_the_same_tables(tmp_path, monkeypatch, optimizer,
                                                                                 dropout, graph_safe, interrupt_after):
    """With a resume folder the loop keeps its state at the end of an epoch (here after every epoch): a run killed in
    its fourth epoch and rerun starts after the third and gives the uninterrupted run's tables and parameters exactly
    (two seeds' data and dropout streams, the sparse Adagrad and Adam states, the graph-safe step's count run
    uncaptured); the checkpoint is removed once the last epoch is done."""
    from featlearn.training import PARTS_DIR

    settings = _settings(kind="mlp", epochs=5, batch=3, lr=0.05, optimizer=optimizer, dropout=dropout, d=8,
                         bucket_pool=2, dtype="float64", threads=0, cuda_graphs=graph_safe)
    runs = [T.Run(1, "relu", 0.1), T.Run(2, "relu", 0.1), T.Run(2, "tanh", 0.5)]
    splits, probes = tiny_splits(), T.Probes(tokens={"good": 3, "bad": 4})

    def train(**kw):
        return T.train(settings, runs, splits, len(TINY_VOCAB), probes, progress=False, capture=False, **kw)

    clean = train()
    work = tmp_path / "resume"
    restore = interrupt_after(T, "epoch_batches", 3 * 2)  # killed in the fourth epoch: two seeds draw batches each epoch
    with pytest.raises(KeyboardInterrupt):
        train(work_dir=str(work), checkpoint_seconds=0.0)
    assert len(list((work / PARTS_DIR).glob("*.pt"))) == 1
    restore()
    logged = []
    monkeypatch.setattr(T, "_log", lambda label, message: logged.append(message))
    resumed = train(work_dir=str(work), checkpoint_seconds=0.0)
    assert logged == [f"resuming at epoch 3 of 5 from {work}"]
    for name in ("scores", "metrics", "summary"):
        pd.testing.assert_frame_equal(getattr(resumed, name), getattr(clean, name), check_exact=True)
    for k in clean.params:
        assert torch.equal(resumed.params[k], clean.params[k]), k
    assert not list((work / PARTS_DIR).glob("*.pt"))  # outside a compute job: removed at the end


def test_training_learns_token_polarity():
    settings = _settings(kind="sa", epochs=30, batch=5, lr=0.3, dropout=0.0, d=16, threads=0)
    res = T.train(settings, [T.Run(0, "relu", 0.1)], tiny_splits(), len(TINY_VOCAB),
                  T.Probes(tokens={"good": 3, "great": 9, "bad": 4}), progress=False)
    last = res.scores[res.scores.epoch == 30].set_index("unit")["score"]
    assert last["good"] > 0 and last["great"] > 0 and last["bad"] < 0
    loss = res.metrics[(res.metrics.split == "train")].sort_values("epoch")["value"].to_numpy()
    assert loss[-1] < loss[0]


def test_cnn_kernel_counts_position_aligned_tokens():
    """Lemma A.2 at finite width: E[relu(a) relu(b)] of two windows' pre-activations (random embeddings and one
    kernel matrix per position) matches F(n) with n the aligned matches, not the tokens shared in any position."""
    assert theory.cnn_shared((1, 2, 3), (3, 1, 2)) == 0 and theory.cnn_shared((1, 2, 3), (1, 5, 3)) == 2
    with pytest.raises(ValueError):
        theory.cnn_shared((1, 2), (1, 2, 3))
    gen = torch.Generator().manual_seed(0)
    K, d, hidden, vocab, se, sw = 3, 256, 20000, 6, 1.0, 1.0
    E = torch.randn(vocab, d, generator=gen, dtype=F64) * se
    W = torch.randn(K, hidden, d, generator=gen, dtype=F64) * sw / math.sqrt(d)

    def pre(window):
        return sum(W[k] @ E[t] for k, t in enumerate(window))

    s2 = se**2 * sw**2
    for a, b in (((1, 2, 3), (3, 1, 2)), ((1, 2, 3), (1, 5, 3)), ((1, 2, 3), (1, 2, 3))):
        empirical = float((torch.relu(pre(a)) * torch.relu(pre(b))).mean())
        n = theory.cnn_shared(a, b)
        assert empirical == pytest.approx(theory.cnn_F(n, K, s2), rel=0.1, abs=0.02)
        shared_anywhere = len(set(a) & set(b))
        if shared_anywhere != n:  # the printed "regardless of positions" count predicts another value
            assert abs(empirical - theory.cnn_F(shared_anywhere, K, s2)) > 0.2
