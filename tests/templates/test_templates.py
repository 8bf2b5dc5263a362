"""Templates paper: task generators and splits, identity-scaled transformer and baselines, the vectorised
sweep engine against single runs, and the random-features kernels."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from featlearn.templates.kernels import theory as K
from featlearn.templates import models as M
from featlearn.templates.sweeps import engine as S
from featlearn.templates import tasks as T

TINY = {"d_emb": 16, "depth": 2, "heads": 2, "d_head": 8, "d_mlp": 32}
# The sweeps' protocol in these tests, as config templates.sweeps sets it (the transformer, batch 1024, evaluation
# every epoch on 100 validation and 100 test samples, the eager step): each test sets its own sizes and schedule.
PROTOCOL = dict(arch="transformer", batch=1024, eval_every=1, n_val=100, n_test=100, cuda_graphs=False)


def _group(task, n: int, runs: list, **kw) -> "S.Group":
    """An engine group of the sweeps' protocol with the test's own settings."""
    return S.Group(task, n, runs, **{**PROTOCOL, **kw})


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny tensors: see conftest


ALL_TASKS = [
    T.program_regression(),
    T.program_next_token(),
    T.copy_task(),
    T.same_different(),
    T.aba_abb(),
    T.abab_aabb(),
    T.majority(4),
    T.majority(6),
    T.random_templates(5, 3, 2, 4, seed=1),
]


# --------------------------------------------------------------------------------------- tasks


@pytest.mark.parametrize("task", ALL_TASKS, ids=lambda t: t.name)
def test_every_sample_matches_its_template_and_alphabets_are_disjoint(task):
    data = T.make_datasets(task, 48, seed=5)
    c = T.check_data(data)
    assert c["match_fraction"] == 1.0
    assert c["alphabets_disjoint"] and c["used_tokens_disjoint"]
    assert c["train_heldout_tokens"] == 0
    assert (c["train_alphabet_size"], c["val_alphabet_size"], c["test_alphabet_size"]) == (48, 100, 100)
    assert all(c[f"{s}_in_own_alphabet"] for s in T.SPLITS)
    assert (len(data.train), len(data.val), len(data.test)) == (48, 100, 100)
    assert data.train.tokens.dtype == torch.int64 and data.train.tokens.shape == (48, task.length)
    assert data.vocab.size == len(task.wildcards) + len(task.regular_tokens) + 48 + 200
    # wildcard placeholder ids never occur in an input
    assert int(data.train.tokens.min()) >= data.vocab.n_special


def test_matcher_rejects_strings_that_break_the_template():
    task = T.aba_abb()
    data = T.make_datasets(task, 32, seed=0)
    x = data.train.tokens[data.train.template == 0]  # αβα
    assert T.matches_template(x, task.templates[0], task, data.vocab).all()
    assert not T.matches_template(x, task.templates[1], task, data.vocab).any()  # not αββ
    same = x.clone()
    same[:, 1] = same[:, 0]  # ααα: β must differ from α
    assert not T.matches_template(same, task.templates[0], task, data.vocab).any()
    prog = T.program_regression()
    d = T.make_datasets(prog, 16, seed=0)
    y = d.train.tokens.clone()
    assert T.matches_template(y[d.train.template == 0], prog.templates[0], prog, d.vocab).all()
    y[:, 0] = d.vocab.regular_id("print")  # a substituted token may not be one of the template's tokens
    assert not T.matches_template(y, prog.templates[0], prog, d.vocab).any()


def test_program_tasks_read_like_the_paper():
    prog = T.program_regression()
    d = T.make_datasets(prog, 64, seed=3)
    names = list(d.vocab.wildcards) + list(d.vocab.regular)
    row = d.train.tokens[0].tolist()
    text = [names[t] if t < len(names) else "v" for t in row]
    assert text == ["v", "=", "1", ";", "v", "=", "-1", ";", "print", "(", "v", ")"]
    printed_first = d.train.tokens[:, 10] == d.train.tokens[:, 0]
    assert torch.equal(d.train.targets, torch.where(printed_first, 1.0, -1.0))
    nt = T.program_next_token()
    d = T.make_datasets(nt, 64, seed=3)
    x, y = d.train.tokens, d.train.targets
    # the label is the value assigned to the printed variable: α="γ" (positions 0, 3), β="δ" (6, 9)
    want = torch.where(x[:, 14] == x[:, 0], x[:, 3], x[:, 9])
    assert torch.equal(y, want) and bool((x[:, 14] == x[:, 6]).any())
    c = T.make_datasets(T.copy_task(), 20, seed=1)
    assert torch.equal(c.train.targets, c.train.tokens[:, 0]) and torch.equal(c.test.targets, c.test.tokens[:, 0])


def test_majority_labels_and_template_count():
    t4 = T.majority(4)
    lab = dict(zip(("".join("a" if s == "α" else "b" for s in z) for z in t4.templates), t4.labels))
    assert len(t4.templates) == 8
    assert lab["aaaa"] == lab["aaab"] == lab["aaba"] == lab["abaa"] == 1.0
    assert lab["aabb"] == lab["abab"] == lab["abba"] == lab["abbb"] == -1.0
    t2 = T.majority(2)
    assert t2.templates == (("α", "α"), ("α", "β")) and t2.labels == (1.0, -1.0)
    for k in (2, 4, 6, 8):
        assert sum(T.majority(k).labels) == 0  # balanced: always-0 MSE is 1


def test_trivial_predictor_has_mse_one_for_pm1_tasks():
    for task in (
        T.program_regression(),
        T.same_different(),
        T.aba_abb(),
        T.abab_aabb(),
        T.majority(6),
        T.random_templates(6, 2, 0, 2, seed=3),
    ):
        assert task.trivial_mse() == pytest.approx(1.0)
        data = T.make_datasets(task, 40, seed=2)
        for split in T.SPLITS:
            assert float((data.split(split).targets.double() ** 2).mean()) == pytest.approx(1.0, abs=1e-6)
    g = T.random_templates(5, 2, 2, 6, seed=4)  # Gaussian labels, centred and scaled
    assert g.trivial_mse() == pytest.approx(1.0) and abs(sum(g.labels)) < 1e-9 and len(set(g.labels)) == 6


def test_templates_must_be_non_equivalent_and_random_ones_are():
    with pytest.raises(ValueError, match="equivalent"):
        T.TemplateTask("bad", (("α", "β"), ("β", "α")), (1.0, -1.0), ("α", "β"))
    task = T.random_templates(5, 3, 1, 8, seed=2)
    forms = {T.canonical(z, task.wildcards) for z in task.templates}
    assert len(forms) == 8 and all(len(z) == 5 for z in task.templates)
    sparse = T.random_templates(5, 7, 0, 2, seed=0)  # uses fewer than its 7 wildcards: n >= max_z |W_z| suffices
    assert sparse.max_wildcards < 7
    assert T.check_data(T.make_datasets(sparse, sparse.max_wildcards, seed=0))["match_fraction"] == 1.0
    with pytest.raises(ValueError, match="non-equivalent"):
        T.random_templates(2, 2, 0, 3, seed=0, max_tries=500)  # only αα and αβ exist


def test_injective_substitution_is_uniform_and_distinct():
    rng = np.random.default_rng(0)
    s = T.sample_injective(rng, 40000, 4, 10, 20)
    assert s.min() >= 10 and s.max() < 20
    assert all(len(set(row)) == 4 for row in s[:2000].tolist())
    assert (np.sort(s, axis=1)[:, 1:] != np.sort(s, axis=1)[:, :-1]).all()
    freq = np.bincount(s.ravel() - 10, minlength=10) / s.size
    assert np.abs(freq - 0.1).max() < 0.01
    assert np.abs(np.bincount(s[:, 3] - 10, minlength=10) / len(s) - 0.1).max() < 0.01  # every column uniform
    with pytest.raises(ValueError, match="distinct"):
        T.sample_injective(rng, 3, 5, 0, 4)


def test_generation_is_deterministic_and_seeded():
    a = T.make_datasets(T.aba_abb(), 128, seed=9)
    b = T.make_datasets(T.aba_abb(), 128, seed=9)
    c = T.make_datasets(T.aba_abb(), 128, seed=10)
    for split in T.SPLITS:
        assert torch.equal(a.split(split).tokens, b.split(split).tokens)
        assert torch.equal(a.split(split).targets, b.split(split).targets)
    assert not torch.equal(a.train.tokens, c.train.tokens)
    # validation/test streams do not depend on n (same templates, same positions of the alphabet)
    d = T.make_datasets(T.aba_abb(), 64, seed=9)
    assert torch.equal(d.val.template, a.val.template)
    assert torch.equal(d.val.tokens - d.vocab.ranges()["val"][0], a.val.tokens - a.vocab.ranges()["val"][0])
    assert T.diversity(T.aba_abb(), 128) == 64.0


# --------------------------------------------------------------------------------------- models


@pytest.mark.parametrize("head", ["regression", "next_token"])
def test_identity_scalings_equal_vanilla_at_init_and_add_2LH_parameters(head):
    L, H = 3, 4
    cfg = {"d_emb": 16, "depth": L, "heads": H, "d_head": 8, "d_mlp": 32}
    data = T.make_datasets(T.aba_abb(), 32, seed=1)
    x = data.val.tokens
    outs, counts = {}, {}
    for name, (kq, vo) in S.VARIANTS.items():
        torch.manual_seed(0)
        m = M.TemplateTransformer(data.vocab.size, 3, head=head, kq=kq, vo=vo, **cfg)
        outs[name], counts[name] = m(x), M.count_parameters(m)
        assert all(float(p.detach().abs().max()) == 0.0 for p in M.identity_scalings(m).values())
    for name in ("kq", "vo", "kq_vo"):
        assert (outs[name] - outs["vanilla"]).abs().max() < 1e-6
    assert counts["kq"] - counts["vanilla"] == L * H == counts["vo"] - counts["vanilla"]
    assert counts["kq_vo"] - counts["vanilla"] == 2 * L * H


def test_kq_and_vo_terms_follow_the_formulas():
    torch.manual_seed(1)
    att = M.IdentityScaledAttention(8, heads=2, d_head=4, kq=True, vo=True, kq_mult=2.0, vo_mult=3.0).double()
    x = torch.randn(3, 5, 8, dtype=torch.float64)
    with torch.no_grad():
        att.kq_scale.copy_(torch.tensor([0.7, -0.3]))
        att.vo_scale.copy_(torch.tensor([0.5, 2.0]))
    q, k = att.to_qk(x).chunk(2, dim=-1)
    v = att.to_v(x)
    out = torch.zeros(3, 5, 8, dtype=torch.float64)
    for h in range(2):
        sl = slice(4 * h, 4 * h + 4)
        logits = q[..., sl] @ k[..., sl].transpose(-1, -2) / 2.0 + 2.0 * att.kq_scale[h] * x @ x.transpose(-1, -2)
        A = logits.softmax(-1)
        assert torch.allclose(att.attention(x)[:, h], A, atol=1e-12)
        out = out + (A @ v[..., sl]) @ att.to_out.weight[:, sl].T + 3.0 * att.vo_scale[h] * A @ x
    assert torch.allclose(att(x), out, atol=1e-12)


@pytest.mark.parametrize("head,readout", [("regression", "cls"), ("next_token", "cls"), ("next_token", "last")])
def test_readout_only_last_block_equals_the_full_stream(head, readout):
    """forward computes only the readout position in the last block; it must equal the full stream's."""
    torch.manual_seed(2)
    m = M.TemplateTransformer(30, 5, head=head, kq=True, vo=True, readout=readout, **{**TINY, "depth": 3}).double()
    with torch.no_grad():  # non-zero scalings so the KQ and VO terms take part
        for p in M.identity_scalings(m).values():
            p.normal_()
    x = torch.randint(0, 30, (7, 5))
    full = m.features(x)
    last = m.features(x, last_only=True)
    assert last.shape == (7, 1, TINY["d_emb"])
    assert torch.allclose(last[:, 0], full[:, -1], atol=1e-12)
    block = m.blocks[-1]
    assert torch.allclose(block.attn.attention(full, last_query=True), block.attn.attention(full)[:, :, -1:], atol=1e-12)


def test_mlp_first_layer_is_the_one_hot_product():
    torch.manual_seed(0)
    V, k = 11, 3
    tokens = torch.randint(0, V, (7, k))
    for xxt in (False, True):
        mlp = M.TemplateMLP(V, k, hidden=5, depth=3, xxt=xxt).double()
        onehot = torch.nn.functional.one_hot(tokens, V).double().reshape(7, -1)
        if xxt:
            onehot = torch.cat([onehot, (tokens[:, :, None] == tokens[:, None, :]).double().reshape(7, -1)], 1)
        assert torch.allclose(mlp.first_layer(tokens), mlp.layers[0](onehot), atol=1e-12)


def test_lstm_matches_torch_lstm_and_rnn_runs():
    torch.manual_seed(0)
    ours = M.TemplateLSTM(13, hidden=6).double()
    ref = torch.nn.LSTM(6, 6, batch_first=True).double()
    with torch.no_grad():
        ref.weight_ih_l0.copy_(ours.ih.weight)
        ref.bias_ih_l0.copy_(ours.ih.bias)
        ref.weight_hh_l0.copy_(ours.hh.weight)
        ref.bias_hh_l0.copy_(ours.hh.bias)
    tokens = torch.randint(0, 13, (4, 5))
    out, _ = ref(ours.embed(tokens))
    assert torch.allclose(ours(tokens), ours.fc(out[:, -1]).squeeze(-1), atol=1e-12)
    rnn = M.build_model("rnn", 13, 5, hidden=6)
    assert rnn(tokens).shape == (4,)
    with pytest.raises(ValueError):
        M.build_model("mlp", 13, 5, kind="next_token")


# --------------------------------------------------------------------------------------- sweep


def _compare(group: S.Group, res: S.GroupResult, i: int, run: S.RunSpec) -> None:
    ref = S.train_reference(group, run)
    assert int(res.best_epoch[i]) == int(ref.best_epoch[0])
    for key in ("val_loss", "test_loss", "test_metric", "train_loss", "final_train_loss"):
        assert float(getattr(res, key)[i]) == pytest.approx(float(getattr(ref, key)[0]), abs=1e-9), key
    for name, p in ref.params.items():
        assert torch.allclose(res.params[name][i], p[0], atol=1e-9), name


@pytest.mark.parametrize("looped", [False, True], ids=["vmap", "looped"])
@pytest.mark.parametrize(
    "task,n,batch",
    [(T.aba_abb(), 12, 1024), (T.aba_abb(), 12, 5), (T.copy_task(), 10, 4)],
    ids=["full", "minibatch", "next_token"],
)
def test_vectorised_sweep_equals_single_runs(task, n, batch, looped):
    runs = [S.RunSpec(1, 1e-2, "vanilla"), S.RunSpec(2, 3e-3, "kq"), S.RunSpec(1, 1e-2, "vo"), S.RunSpec(3, 2e-2, "kq_vo")]
    group = _group(task, n, runs, model=TINY, epochs=4, batch=batch, dtype=torch.float64, progress=False, looped=looped)
    res = S.train_group(group)
    for i, run in enumerate(runs):
        _compare(group, res, i, run)
    # a vanilla run inside a mixed group keeps its scalings at exactly 0; a +KQ run moves its a_h
    a = res.params["blocks.0.attn.kq_scale"]
    assert float(a[0].abs().max()) == 0.0 and float(res.params["blocks.0.attn.vo_scale"][0].abs().max()) == 0.0
    if task.length > 1:
        assert float(a[1].abs().max()) > 0


def test_random_templates_are_drawn_per_run_and_stack():
    """A random task with seed "per_run" gives each run its own templates (template seed = run seed) over one
    vocabulary, names each run's templates in the table, and a run equals the same run trained alone."""
    task = {"name": "random", "length": 5, "n_wildcards": 2, "n_regular": 2, "r": 2, "seed": S.PER_RUN}
    (group,) = S.expand_groups(dict(PROTOCOL, task=task, model=TINY, variants=["vanilla"], n=[6], lrs=[1e-2], seeds=4,
                                    epochs=3, batch=4, max_group=64, device="cpu", dtype="float64", progress=False))
    assert group.per_run_templates and group.task.name == "random_L5_W2_X2_r2"
    tasks = [S.run_task(group, run) for run in group.runs]
    assert [t.templates for t in tasks] == [T.random_templates(5, 2, 2, 2, seed=s).templates for s in (1, 2, 3, 4)]
    assert len({t.templates for t in tasks}) > 1
    assert {len(d.vocab.regular) for d in S.group_data(group)} == {2}  # the whole alphabet X, used or not
    res = S.train_group(group)
    _compare(group, res, 2, group.runs[2])
    rows = S._group_frame(group, res)
    assert rows["templates"].tolist() == [S._templates(t) for t in tasks]
    assert rows["templates"].iloc[0].count(":") == 2
    with pytest.raises(ValueError, match="random templates"):
        S.expand_groups(dict(PROTOCOL, task={"name": "aba_abb", "seed": S.PER_RUN}, model=TINY, variants=["vanilla"], n=[6],
                             lrs=[1e-2], seeds=1, epochs=1, batch=4, max_group=64, device="cpu"))


def test_engine_loops_over_runs_only_for_large_cpu_transformer_groups():
    runs = [S.RunSpec(1, 1e-3)]
    big, small = S.LOOP_MIN_SAMPLES, S.LOOP_MIN_SAMPLES - 1
    kw = dict(model=TINY, epochs=1)
    assert S.auto_looped(_group(T.aba_abb(), big, runs, **kw))
    assert not S.auto_looped(_group(T.aba_abb(), small, runs, **kw))
    assert not S.auto_looped(_group(T.aba_abb(), 4 * big, runs, **kw, batch=small))  # samples per step count
    assert not S.auto_looped(_group(T.aba_abb(), big, runs, arch="mlp", model={"hidden": 8, "depth": 3}, epochs=1))
    assert not S.auto_looped(_group(T.aba_abb(), big, runs, **kw, device="cuda"))


def test_baselines_in_the_sweep_equal_single_runs():
    for arch, model in (("mlp_xxt", {"hidden": 8, "depth": 3}), ("lstm", {"hidden": 6})):
        runs = [S.RunSpec(1, 1e-2), S.RunSpec(2, 5e-3)]
        group = _group(T.aba_abb(), 8, runs, arch=arch, model=model, epochs=3, batch=3, dtype=torch.float64, progress=False)
        res = S.train_group(group)
        for i, run in enumerate(runs):
            _compare(group, res, i, run)


def test_mlp_weights_of_unseen_tokens_do_not_move_under_adam():
    task, n = T.aba_abb(), 16
    group = _group(task, n, [S.RunSpec(4, 1e-2)], arch="mlp", model={"hidden": 8, "depth": 3}, epochs=10, batch=4, progress=False)
    res = S.train_group(group)
    data = S.group_data(group)[0]
    init = S.init_model(group, group.runs[0], data.vocab.size)
    W0, W = init.layers[0].weight.detach(), res.params["layers.0.weight"][0]
    V, k = data.vocab.size, task.length

    def cols(ids):
        return torch.cat([torch.as_tensor(ids) + pos * V for pos in range(k)])

    lo, hi = data.vocab.ranges()["val"][0], data.vocab.ranges()["test"][1]
    unseen = cols(range(lo, hi))
    assert torch.equal(W[:, unseen], W0[:, unseen])  # exactly unchanged
    seen = cols(torch.unique(data.train.tokens))
    assert float((W[:, seen] - W0[:, seen]).abs().max()) > 1e-3
    assert float(res.final_train_loss[0]) < 1.0  # it did train


def test_best_epoch_selection_ignores_nan():
    sel = S._Selector(2)
    for epoch, val in ((1, [0.5, math.nan]), (2, [0.3, math.nan]), (3, [0.4, 0.9])):
        v = torch.tensor(val)
        sel.update(epoch, v, v, v * 10, v * 100, record=True)
    res = sel.result({}, 0.0)
    assert res.best_epoch.tolist() == [2, 3]
    assert res.test_loss.tolist() == pytest.approx([3.0, 9.0])
    assert res.final_val_loss.tolist() == pytest.approx([0.4, 0.9])
    assert sel.curves["epoch"] == [1, 2, 3]


def test_run_sweep_writes_one_row_per_run(tmp_path):
    settings = {
        "task": {"name": "same_different"},
        "model": TINY,
        "variants": ["vanilla", "kq"],
        "n": [4, 8],
        "lrs": [1e-2],
        "seeds": 2,
        "epochs": 3,
        "batch": 1024,
        "eval_every": 1,
        "n_val": 100,
        "n_test": 100,
        "arch": "transformer",
        "device": "cpu",
        "cuda_graphs": False,
        "dtype": "float32",
        "max_group": 3,
        "curve_every": 1,
        "progress": False,
    }
    groups = S.expand_groups(settings)
    assert [len(g.runs) for g in groups] == [3, 1, 3, 1]
    out, curves = tmp_path / "runs.csv", tmp_path / "curves.csv"
    S.run_sweep(settings, str(out), str(curves))
    df = pd.read_csv(out)
    assert len(df) == 8 and set(df["variant"]) == {"vanilla", "kq"} and set(df["n"]) == {4, 8}
    assert df["best_epoch"].between(1, 3).all() and df["test_metric"].notna().all() and (df["metric"] == "mse").all()
    assert len(pd.read_csv(curves)) == 8 * 3


def test_bench_reports_throughput():
    from featlearn.templates.sweeps.bench import benchmark

    row = benchmark({"task": {"name": "aba_abb"}, **PROTOCOL, "model": TINY, "runs": 4, "epochs": 2, "sequential_runs": 1,
                     "device": "cpu"}, n=8)
    assert row["vectorised_model_steps_per_s"] > 0 and row["sequential_model_steps_per_s"] > 0
    assert row["speedup"] == pytest.approx(row["sequential_seconds_per_run"] * 4 / row["vectorised_seconds"])
    assert row["engine_mode"] == "vmap" and row["vectorised_model_steps_per_s"] == row["vmap_model_steps_per_s"]
    assert row["looped_model_steps_per_s"] > 0


# --------------------------------------------------------------------------------------- kernels


def test_k_attn_at_beta_zero_equals_its_closed_form():
    task = T.majority(4)
    X, Y, cls = K.fresh_substitutions(task)
    Xc, Yc = K.with_cls(X, cls), K.with_cls(Y, cls)
    mc = K.k_attn(Xc, Yc, 0.0, 0.8, n_mc=64, seed=0)[0]
    exact = K.k_attn_beta0(Xc, Yc, 0.8)
    assert torch.allclose(mc, exact, atol=1e-12)
    # hand value: αααα+CLS against ββββ+CLS on fresh tokens shares only the CLS: (1 + γ² k) / k²
    assert float(exact[0, 0]) == pytest.approx((1 + 0.64 * 5) / 25)
    assert K.beta0_table({"tasks": [{"name": "aba_abb"}], "gamma": 1.0, "n_mc": 32, "seed": 0})["max_abs_diff"].max() < 1e-12


def test_cosine_closed_form_matches_sampling():
    g = torch.Generator().manual_seed(0)
    a, b, rho = 0.9, 0.6, 0.4
    L = torch.linalg.cholesky(torch.tensor([[a, rho], [rho, b]], dtype=torch.float64))
    z = torch.randn(400_000, 2, generator=g, dtype=torch.float64) @ L.T
    mc = (torch.cos(1.3 * z[:, 0] + 0.5) * torch.cos(1.3 * z[:, 1] + 0.5)).mean()
    exact = K.cos_expectation(torch.tensor(a), torch.tensor(b), torch.tensor(rho), 1.3, 0.5)
    assert float(mc) == pytest.approx(float(exact), abs=5e-3)


def test_n_matrix_mlp_rank_one_transformer_nonsingular():
    for task in (T.same_different(), T.aba_abb(), T.majority(4)):
        N, Nb = K.n_matrix(task, "mlp")
        c = K.conditioning(N, Nb)
        assert c["rank"] == 1 and torch.allclose(N, torch.full_like(N, float(K.relu_kappa(torch.tensor(0.0)))))
    for task in (T.same_different(), T.aba_abb()):
        N, Nb = K.n_matrix(task, "trans", n_mc=8000, batches=16)
        c = K.conditioning(N, Nb)
        assert c["rank"] == task.r and c["sigma_min"] > 3 * c["sigma_min_se"]


def test_kernel_ridge_regression_transformer_generalises_mlp_does_not():
    task = T.same_different()
    mlp = K.krr_unseen(task, 128, "mlp", seed=1)
    trans = K.krr_unseen(task, 256, "trans", seed=1, n_mc=500)
    assert mlp["train_mse"] < 0.01 and mlp["test_mse"] > 0.9
    assert trans["test_mse"] < 0.5


def test_lr_selection_and_n_star():
    df = pd.DataFrame(
        {
            "task": "t",
            "arch": "transformer",
            "variant": ["v"] * 6 + ["k"] * 6,
            "lr": [1e-3, 1e-3, 1e-3, 1e-2, 1e-2, 1e-2] * 2,
            "n": [4, 16, 64] * 4,
            "val_loss": [1.0, 0.5, 0.2, 1.0, 0.9, 0.8, 1.0, 1.0, 1.0, 0.5, 0.1, 0.0],
            "test_metric": [1.0, 0.5, 0.08, 1.0, 0.9, 0.8, 1.0, 1.0, 1.0, 0.5, 0.1, 0.0],
        }
    )
    sel = S.select_lr(df)
    assert sel.groupby("variant")["lr"].unique().apply(list).to_dict() == {"k": [1e-2], "v": [1e-3]}
    assert S.n_star(sel[sel.variant == "v"], 0.1) == 64 and S.n_star(sel[sel.variant == "k"], 0.1) == 16
    assert S.n_star(sel[sel.variant == "v"], 0.01) == math.inf


def test_readout_options():
    cls = M.TemplateTransformer(30, 4, head="next_token", readout="cls", **TINY)
    last = M.TemplateTransformer(30, 4, head="next_token", readout="last", **TINY)
    assert cls.pos.shape[1] == 5 and last.pos.shape[1] == 4 and last.cls is None
    assert M.count_parameters(cls) - M.count_parameters(last) == 2 * TINY["d_emb"]  # CLS vector + its position
    assert cls(torch.randint(0, 30, (3, 4))).shape == (3, 30)
    with pytest.raises(ValueError, match="readout"):
        M.TemplateTransformer(30, 4, readout="mean")


# ------------------------------------------------------------------ CUDA graphs of the sweep step (issue 34)


def test_the_cuda_graphs_switch_leaves_cpu_training_unchanged():
    """On a CPU the switch does nothing: the eager step runs and every number is the same, bit for bit."""
    runs = [S.RunSpec(1, 1e-2, "vanilla"), S.RunSpec(2, 3e-3, "kq")]
    results = [S.train_group(_group(T.aba_abb(), 12, runs, model=TINY, epochs=3, batch=5, dtype=torch.float64,
                                    progress=False, cuda_graphs=graphs)) for graphs in (False, True)]
    eager, switched = results
    assert torch.equal(eager.best_epoch, switched.best_epoch)
    for key in ("val_loss", "test_loss", "train_loss", "final_train_loss"):
        assert torch.equal(getattr(eager, key), getattr(switched, key)), key
    assert all(torch.equal(eager.params[k], switched.params[k]) for k in eager.params)


def test_the_graph_safe_step_is_the_eager_step():
    """The step a CUDA graph holds (step count and Adam's bias corrections on the device, the minibatch gathered
    with an index tensor) makes the eager step's update, run uncaptured on the CPU over several steps."""
    gen = torch.Generator().manual_seed(0)
    R, n, k, b = 3, 8, 4, 5
    X = torch.randn(R, n, k, generator=gen, dtype=torch.float64)
    Y = torch.randn(R, n, generator=gen, dtype=torch.float64)
    w0 = torch.randn(R, k, generator=gen, dtype=torch.float64)
    lr = torch.tensor([1e-2, 3e-3, 2e-2], dtype=torch.float64)
    masks = {"w": torch.tensor([True, True, False]).view(R, 1)}  # the third run's weights are frozen

    def batched_loss(p, x, y):
        return ((x * p["w"][:, None, :]).sum(-1) - y).pow(2).mean(-1)

    def fresh():
        moments = (torch.zeros(R, k, dtype=torch.float64), torch.zeros(R, k, dtype=torch.float64))  # Adam's m, v
        return {"w": w0.clone().requires_grad_(True)}, {"w": moments}

    eager_p, eager_s = fresh()
    graph_p, graph_s = fresh()
    t = torch.zeros((), dtype=torch.float64)
    train = torch.zeros(R, dtype=torch.float64)
    eager_train = torch.zeros(R, dtype=torch.float64)
    for step in range(1, 6):
        idx = torch.stack([torch.randperm(n, generator=gen)[:b] for _ in range(R)])
        xb, yb = torch.gather(X, 1, idx.unsqueeze(-1).expand(-1, -1, k)), torch.gather(Y, 1, idx)
        losses = batched_loss(eager_p, xb, yb)
        grads = torch.autograd.grad(losses.sum(), [eager_p["w"]])
        S._adam_step(eager_p, ["w"], grads, eager_s, masks, lr, step)
        eager_train += losses.detach() * (b / n)
        S._graph_step(batched_loss, graph_p, ["w"], graph_s, masks, lr, t, X, Y, idx, k, n, train)
    assert float(t) == 5
    assert torch.allclose(graph_p["w"], eager_p["w"], rtol=1e-12, atol=1e-15)
    assert torch.equal(graph_p["w"][2], w0[2])  # frozen: exactly no step
    assert torch.allclose(train, eager_train, rtol=1e-12)


def test_the_buffered_update_is_adams_formula_bit_for_bit():
    """The engine's Adam update, which writes into buffers kept across steps, makes exactly the bits of the plain
    formula p -= (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps): every run trained, one run frozen by a mask, and a
    parameter without a gradient (no step but Adam's decay of its moments)."""
    gen = torch.Generator().manual_seed(1)
    R, b1, b2 = 3, *S.BETAS
    lr = torch.tensor([1e-2, 3e-3, 2e-2])
    shapes = {"a": (R, 7, 5), "b": (R, 4), "c": (R, 6)}
    masks = {"a": None, "b": torch.tensor([True, False, True]).view(R, 1), "c": None}

    def fresh():
        return ({n: torch.randn(*sh, generator=torch.Generator().manual_seed(len(n))) for n, sh in shapes.items()},
                {n: (torch.zeros(sh), torch.zeros(sh)) for n, sh in shapes.items()})

    (fast_p, fast_s), (ref_p, ref_s) = fresh(), fresh()
    scratch = {}
    for t in range(1, 6):
        grads = [torch.randn(*shapes["a"], generator=gen), torch.randn(*shapes["b"], generator=gen), None]
        S._adam_step(fast_p, list(shapes), grads, fast_s, masks, lr, t, scratch)
        bc1, sqrt_bc2 = 1 - b1**t, math.sqrt(1 - b2**t)
        for name, g in zip(shapes, grads):  # the formula, one fresh tensor per operation
            g = torch.zeros(shapes[name]) if g is None else g
            g = g if masks[name] is None else torch.where(masks[name], g, torch.zeros_like(g))
            m, v = ref_s[name]
            m.lerp_(g, 1 - b1)
            v.mul_(b2).addcmul_(g, g, value=1 - b2)
            step_size = (lr / bc1).view(-1, *[1] * (g.dim() - 1))
            ref_p[name] = ref_p[name] - step_size * m / ((v.sqrt() / sqrt_bc2) + S.EPS)
        if t == 1:
            first = {name: tuple(map(id, bufs)) for name, bufs in scratch.items()}
    assert {name: tuple(map(id, bufs)) for name, bufs in scratch.items()} == first  # the same buffers every step
    for name in shapes:
        assert torch.equal(fast_p[name], ref_p[name]), name
        assert all(torch.equal(x, y) for x, y in zip(fast_s[name], ref_s[name])), name
    assert torch.equal(fast_p["b"][1], fresh()[0]["b"][1])  # the frozen run did not move


def test_the_mlps_input_major_first_layer_changes_no_bit(monkeypatch):
    """The engine stores the MLPs' stacked one-hot first layer input-major (the same values, transposed strides: no
    copy of it at each forward and backward under vmap). A group trained so, with and without the XX^T inputs, ends
    with exactly the parameters and losses of the same group stored as stacked."""
    w = torch.arange(24.0).view(2, 3, 4)
    stored = S._stacked_layout("mlp", "layers.0.weight", w)
    assert torch.equal(stored, w) and stored[0].T.is_contiguous()  # each run's W^T: rows of memory
    assert S._stacked_layout("transformer", "layers.0.weight", w).stride() == w.stride()
    runs = [S.RunSpec(1, 1e-2, "vanilla"), S.RunSpec(2, 3e-3, "vanilla")]
    for arch in ("mlp", "mlp_xxt"):
        group = _group(T.aba_abb(), 40, runs, arch=arch, model={"depth": 3, "hidden": 16}, epochs=4, batch=16,
                       progress=False)
        input_major = S.train_group(group)
        with monkeypatch.context() as m:
            m.setattr(S, "_stacked_layout", lambda arch, name, p: p)
            as_stacked = S.train_group(group)
        for name in as_stacked.params:
            assert torch.equal(input_major.params[name], as_stacked.params[name]), (arch, name)
        assert torch.equal(input_major.val_loss, as_stacked.val_loss)
        assert torch.equal(input_major.train_loss, as_stacked.train_loss)


def _first_layer_with_a_slice(self, tokens):
    """TemplateMLP.first_layer as it was: the pair inputs' rows taken as the slice W[:, kV:]."""
    W, b = self.layers[0].weight, self.layers[0].bias
    k, V = self.length, self.vocab_size
    h = torch.nn.functional.embedding(tokens + torch.arange(k) * V, W.T).sum(dim=1) + b
    if self.xxt:
        eq = (tokens.unsqueeze(1) == tokens.unsqueeze(2)).to(W.dtype).flatten(1) * self.xxt_scale
        h = h + eq @ W[:, k * V :].T
    return h


def test_the_pair_inputs_rows_come_from_the_tokens_lookup_with_the_same_bits(monkeypatch):
    """The MLP + XX^T model looks up its pair inputs' rows of W^T with its tokens' rows, so that W's gradient is one
    tensor in the engine's input-major layout (as a slice, it was a second full-size tensor in the other layout, which
    doubled a paper-scale group's step). A group trained so ends with exactly the parameters and losses of the slice."""
    runs = [S.RunSpec(1, 1e-2, "vanilla"), S.RunSpec(2, 3e-3, "vanilla")]
    group = _group(T.aba_abb(), 40, runs, arch="mlp_xxt", model={"depth": 3, "hidden": 16}, epochs=4, batch=16,
                   progress=False)
    looked_up = S.train_group(group)
    real = M.TemplateMLP.first_layer
    with monkeypatch.context() as m:
        m.setattr(M.TemplateMLP, "first_layer", _first_layer_with_a_slice)
        sliced = S.train_group(group)
        mlp = M.TemplateMLP(7, 3, hidden=5, depth=2, xxt=True)
        W = S._stacked_layout("mlp_xxt", "layers.0.weight", torch.stack([mlp.layers[0].weight.detach()] * 2))
        tokens = torch.tensor([[[0, 1, 0], [2, 2, 3]]] * 2)
        params = {name: torch.stack([p.detach()] * 2) for name, p in mlp.named_parameters()}

        def grad_of_w(first_layer):
            m.setattr(M.TemplateMLP, "first_layer", first_layer)
            w = W.clone().requires_grad_(True)
            out = torch.func.vmap(lambda p, x: torch.func.functional_call(mlp, p, (x,)))(
                {**params, "layers.0.weight": w}, tokens)
            return torch.autograd.grad(out.sum(), w)[0]

        old, new = grad_of_w(_first_layer_with_a_slice), grad_of_w(real)
    for name in sliced.params:
        assert torch.equal(looked_up.params[name], sliced.params[name]), name
    assert torch.equal(looked_up.val_loss, sliced.val_loss)
    assert torch.equal(looked_up.train_loss, sliced.train_loss)
    assert torch.equal(old, new)
    assert new.stride() == W.stride() != old.stride()  # one gradient, laid out as the engine keeps W


def test_the_environment_runs_the_graph_safe_step_uncaptured_on_a_cpu(monkeypatch):
    """With the diagnostic (featlearn.cudagraphs.UNCAPTURED_ENV) a switched-on group trains with the graph-safe step on
    the CPU: every step goes through it, and the group trains as the eager step does up to float rounding. A group
    whose switch is off keeps the eager step."""
    from featlearn.cudagraphs import UNCAPTURED_ENV

    runs = [S.RunSpec(1, 1e-2, "vanilla"), S.RunSpec(2, 3e-3, "kq")]
    calls = []
    real = S._graph_step
    monkeypatch.setattr(S, "_graph_step", lambda *a: calls.append(1) or real(*a))
    monkeypatch.setenv(UNCAPTURED_ENV, "1")
    graph_safe, eager = (S.train_group(_group(T.aba_abb(), 12, runs, model=TINY, epochs=3, batch=5, dtype=torch.float64,
                                             progress=False, cuda_graphs=g)) for g in (True, False))
    assert len(calls) == 3 * 3  # 3 epochs of 3 minibatches, all of the switched-on group's
    assert torch.equal(eager.best_epoch, graph_safe.best_epoch)
    for name in eager.params:
        assert torch.allclose(eager.params[name], graph_safe.params[name], rtol=1e-9, atol=1e-12), name
    assert torch.allclose(eager.train_loss, graph_safe.train_loss, rtol=1e-9)


@pytest.mark.parametrize("arch,model,graph_safe", [("transformer", TINY, False), ("transformer", TINY, True),
                                                   ("mlp", {"hidden": 8}, False)])
def test_a_group_killed_mid_training_resumes_from_its_checkpoint_bit_for_bit(tmp_path, monkeypatch, interrupt_after,
                                                                              arch, model, graph_safe):
    """With a resume folder a group keeps its state at the end of an epoch (here after every one): a group killed in
    its fifth epoch and trained again starts after the fourth and ends with the uninterrupted group's parameters,
    selection, final values and curves exactly (three runs' shuffles over three minibatches an epoch, frozen scalings,
    the graph-safe step's device-side count run uncaptured, the MLP's input-major first layer); its seconds count both
    runs' epochs. The checkpoint stays for the caller (``sweep_frames`` removes it once the group's frames are kept)."""
    from featlearn.cudagraphs import UNCAPTURED_ENV
    from featlearn.training import PARTS_DIR

    if graph_safe:
        monkeypatch.setenv(UNCAPTURED_ENV, "1")
    variants = ["vanilla", "kq", "kq_vo"] if arch == "transformer" else ["vanilla"] * 3
    runs = [S.RunSpec(seed, lr, v) for seed, lr, v in zip((1, 2, 3), (1e-2, 3e-2, 1e-1), variants)]
    group = _group(T.aba_abb(), 12, runs, arch=arch, model=model, epochs=7, batch=5, curve_every=2, dtype=torch.float64,
                   progress=False, cuda_graphs=graph_safe)
    clean = S.train_group(group)
    work, key = tmp_path / "resume", {"group": "test"}
    restore = interrupt_after(S._Selector, "update", 4)  # evaluated every epoch: killed in the fifth
    with pytest.raises(KeyboardInterrupt):
        S.train_group(group, str(work), key, checkpoint_seconds=0.0)
    assert len(list((work / PARTS_DIR).glob("*.pt"))) == 1
    restore()
    logged = []
    monkeypatch.setattr(S, "_log", logged.append)
    resumed = S.train_group(group, str(work), key, checkpoint_seconds=0.0)
    assert logged == [f"resuming: [templates] aba_abb {arch} n=12 R=3 at epoch 4 of 7 from {work}"]
    for name in ("best_epoch", "val_loss", "test_loss", "test_metric", "train_loss", "final_train_loss", "final_val_loss",
                 "final_test_metric"):
        assert torch.equal(getattr(resumed, name), getattr(clean, name)), name
    for name in clean.params:
        assert torch.equal(resumed.params[name], clean.params[name]), name
    assert resumed.curves["epoch"] == clean.curves["epoch"] == [2, 4, 6, 7]
    for name in ("train_loss", "val_loss", "test_loss", "test_metric"):
        assert all(torch.equal(a, b) for a, b in zip(resumed.curves[name], clean.curves[name], strict=True)), name
    assert resumed.seconds > 0
    assert len(list((work / PARTS_DIR).glob("*.pt"))) == 1  # the last checkpoint, after epoch 6, for the caller


def test_on_epoch_is_called_after_each_epoch_and_changes_nothing():
    """``train_group``'s ``on_epoch`` (the estimate's probe times a group's later epochs with it) is called once per
    epoch, in order, after the epoch's evaluation, ``before_eval`` before each evaluation, and the group trains to the
    same bits as without them."""
    group = _group(T.aba_abb(), 12, [S.RunSpec(1, 1e-2), S.RunSpec(2, 1e-1)], model=TINY, epochs=5, batch=5,
                   dtype=torch.float64, progress=False, eval_every=2)
    seen = []
    with_calls = S.train_group(group, on_epoch=lambda e: seen.append(("end", e)),
                               before_eval=lambda e: seen.append(("eval", e)))
    plain = S.train_group(group)
    # ``before_eval`` (the probe times steps and evaluations apart with it): after the steps of each evaluating epoch,
    # every eval_every epochs and at the last
    assert seen == [("end", 1), ("eval", 2), ("end", 2), ("end", 3), ("eval", 4), ("end", 4), ("eval", 5), ("end", 5)]
    for name in plain.params:
        assert torch.equal(with_calls.params[name], plain.params[name]), name
    assert torch.equal(with_calls.val_loss, plain.val_loss)


def test_a_group_prints_progress_every_tenth_and_at_least_every_progress_seconds_with_the_time_left(tmp_path,
                                                                                                  monkeypatch):
    """A group with progress lines prints one every tenth of its epochs, each with its rate and the time left in the
    group; with ``featlearn.training.PROGRESS_SECONDS`` passed after every epoch (a paper-scale epoch can take
    minutes), one every epoch. Each checkpoint kept in a resume folder says so. The lines change nothing that is
    computed."""
    import featlearn.training
    group = _group(T.aba_abb(), 12, [S.RunSpec(1, 1e-2), S.RunSpec(2, 1e-1)], model=TINY, epochs=20, batch=5,
                   dtype=torch.float64, progress=True)
    logged: list[str] = []
    monkeypatch.setattr(S, "_log", logged.append)
    tenths = S.train_group(group)
    epochs = [int(line.split(" epoch ")[1].split("/")[0]) for line in logged]
    assert epochs == list(range(2, 21, 2))
    assert all("epochs/s, about " in line and line.endswith(" left in this group)") for line in logged)
    assert logged[-1].split("progress: ")[1].startswith("20 epochs in ")
    assert "about 0s left" in logged[-1]

    logged.clear()
    monkeypatch.setattr(featlearn.training, "PROGRESS_SECONDS", 0.0)
    every = S.train_group(group, str(tmp_path / "resume"), {"group": "progress"}, checkpoint_seconds=0.0)
    lines = [line for line in logged if " epoch " in line and "checkpoint" not in line]
    kept = [line for line in logged if "checkpoint at epoch" in line]
    assert [int(line.split(" epoch ")[1].split("/")[0]) for line in lines] == list(range(1, 21))
    assert [int(line.split("checkpoint at epoch ")[1].split(",")[0]) for line in kept] == list(range(1, 20))
    assert all(line.endswith(" min after the last one") for line in kept)
    assert torch.equal(every.val_loss, tenths.val_loss) and torch.equal(every.test_loss, tenths.test_loss)


def test_a_group_checkpoint_needs_a_key_and_one_of_another_run_identity_is_discarded(tmp_path, monkeypatch,
                                                                                     interrupt_after):
    """A resume folder without the group's key is refused (a checkpoint must say what it belongs to). A checkpoint kept
    under another run identity (other code, inputs or threads) is discarded with a log line and the group trains from
    its first epoch, to the uninterrupted group's results."""
    from featlearn.training import IDENTITY_ENV

    group = _group(T.aba_abb(), 12, [S.RunSpec(1, 1e-2)], model=TINY, epochs=5, batch=5, dtype=torch.float64,
                   progress=False)
    with pytest.raises(ValueError, match="needs the group's key"):
        S.train_group(group, str(tmp_path))
    clean = S.train_group(group)
    monkeypatch.setenv(IDENTITY_ENV, '{"code": "a"}')
    restore = interrupt_after(S._Selector, "update", 3)
    with pytest.raises(KeyboardInterrupt):
        S.train_group(group, str(tmp_path), {"group": "a"}, checkpoint_seconds=0.0)
    restore()
    monkeypatch.setenv(IDENTITY_ENV, '{"code": "b"}')
    logged = []
    monkeypatch.setattr(S, "_log", logged.append)
    again = S.train_group(group, str(tmp_path), {"group": "a"}, checkpoint_seconds=0.0)
    assert len(logged) == 1 and "written under another run identity; training it again" in logged[0]
    for name in clean.params:
        assert torch.equal(again.params[name], clean.params[name]), name


def test_the_sync_free_selection_gives_the_host_selection_results(monkeypatch):
    """The GPU's sync-free epochs (selection on the device, the test split evaluated at every evaluation, results read
    once), forced on a CPU, give the host path's results exactly: best epochs, losses, final values and curves. The
    runs improve at some evaluations and not at others (the host path then skips the test split)."""
    runs = [S.RunSpec(1, 3e-2, "vanilla"), S.RunSpec(2, 1e-1, "vanilla"), S.RunSpec(3, 3e-1, "vanilla")]
    group = _group(T.aba_abb(), 12, runs, model=TINY, epochs=9, batch=5, curve_every=4, dtype=torch.float64,
                   device="cpu", progress=False)
    skipped = []
    update = S._Selector.update

    def spy(self, epoch, train_loss, val_loss, test_loss, *rest):
        skipped.append(bool(torch.isnan(test_loss).all()))
        return update(self, epoch, train_loss, val_loss, test_loss, *rest)

    monkeypatch.setattr(S._Selector, "update", spy)
    host = S.train_group(group)
    assert any(skipped) and not all(skipped)  # the host path skipped the test split at some evaluations
    skipped.clear()
    monkeypatch.setattr(S, "sync_free", lambda dev: True)
    free = S.train_group(group)
    for name in ("best_epoch", "val_loss", "test_loss", "test_metric", "train_loss", "final_train_loss", "final_val_loss",
                 "final_test_metric"):
        assert torch.equal(getattr(host, name), getattr(free, name)), name
    assert not any(skipped)  # sync-free: the test split at every evaluation
    assert host.curves["epoch"] == free.curves["epoch"] == [4, 8, 9]
    for key in ("train_loss", "val_loss", "test_loss", "test_metric"):
        assert all(torch.equal(a, b) for a, b in zip(host.curves[key], free.curves[key], strict=True)), key


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_graphs_train_as_the_eager_step_does():
    """On a GPU: the captured and replayed step trains the group as the eager step does, up to float rounding."""
    runs = [S.RunSpec(1, 1e-2, "vanilla"), S.RunSpec(2, 3e-3, "kq"), S.RunSpec(3, 2e-2, "kq_vo")]
    eager, graphed = (S.train_group(_group(T.aba_abb(), 12, runs, model=TINY, epochs=6, batch=5, dtype=torch.float64,
                                           device="cuda", progress=False, cuda_graphs=g)) for g in (False, True))
    assert torch.equal(eager.best_epoch, graphed.best_epoch)
    for name in eager.params:
        assert torch.allclose(eager.params[name], graphed.params[name], rtol=1e-9, atol=1e-12), name



@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_resumed_captured_group_trains_as_an_uninterrupted_captured_one(tmp_path, interrupt_after):
    """On a GPU, with the step captured: a group killed in its fifth epoch and resumed (its parameters, moments and
    device-side step count loaded before the capture) ends as the uninterrupted captured group, up to float rounding
    (the sync-free selection on the device, its state copied to the host and back)."""
    runs = [S.RunSpec(1, 1e-2, "vanilla"), S.RunSpec(2, 3e-3, "kq"), S.RunSpec(3, 2e-2, "kq_vo")]
    group = _group(T.aba_abb(), 12, runs, model=TINY, epochs=7, batch=5, curve_every=2, dtype=torch.float64,
                   device="cuda", progress=False, cuda_graphs=True)
    clean = S.train_group(group)
    work, key = tmp_path / "resume", {"group": "cuda"}
    restore = interrupt_after(S._Selector, "update", 4)
    with pytest.raises(KeyboardInterrupt):
        S.train_group(group, str(work), key, checkpoint_seconds=0.0)
    restore()
    resumed = S.train_group(group, str(work), key, checkpoint_seconds=0.0)
    assert torch.equal(clean.best_epoch, resumed.best_epoch)
    for name in clean.params:
        assert torch.allclose(clean.params[name], resumed.params[name], rtol=1e-9, atol=1e-12), name
    assert clean.curves["epoch"] == resumed.curves["epoch"] == [2, 4, 6, 7]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_wide_last_query_group_trains_without_per_sample_weights_on_a_gpu():
    """On a GPU: a copy-task group (its last layer attends from the last position only) of 2 runs at d_emb 1024 and
    batch 1024 trains in under 4 GiB (its memory formula: 0.22 GiB a run). A vmap'ed linear map of the strided
    last-position slice materialised the weights per sample, 8 GiB a run at this size (out of memory at d_emb 4096
    on a 141 GB card)."""
    runs = [S.RunSpec(1, 1e-3, "vo"), S.RunSpec(2, 1e-3, "vo")]
    group = _group(T.copy_task(), 1024, runs, model={**TINY, "d_emb": 1024, "heads": 16, "d_head": 64, "d_mlp": 256},
                   epochs=1, batch=1024, device="cuda", progress=False)
    torch.cuda.reset_peak_memory_stats()
    S.train_group(group)
    assert torch.cuda.max_memory_allocated() < 4 * 2**30, torch.cuda.max_memory_allocated() / 2**30


def test_a_memory_budget_splits_groups_of_wide_models():
    """With max_group_gb a group holds as many runs as fit by the run memory formula (at most max_group): every run
    is still trained, in the same order, and no group's formula exceeds the budget; a run alone larger than the budget
    is an error. Without the key the groups are those of max_group alone (default and smoke configs set none)."""
    settings = {"task": {"name": "aba_abb"}, **PROTOCOL, "model": {**TINY, "d_emb": 64}, "variants": ["vanilla", "kq"],
                "n": [8, 512], "lrs": [1e-3, 1e-2], "seeds": 3, "epochs": 1, "device": "cpu", "max_group": 64,
                "progress": False}
    plain = S.expand_groups(settings)
    assert [len(g.runs) for g in plain] == [12, 12]
    wide = S.expand_groups({**settings, "n": [512]})[0]
    vocab = S.group_vocab(wide)
    per_run = S.run_memory_bytes(wide, vocab)
    params = sum(p.numel() for p in S.init_model(wide, wide.runs[0], vocab, wide.structure).parameters())
    assert per_run == 4 * (6 * params + 8 * 512 * wide.task.length * 64 + 4 * 512)  # a regression: one output
    budget = 5.5 * per_run / 2**30  # room for 5 runs of n = 512
    split = S.expand_groups({**settings, "max_group_gb": budget})
    sizes = {n: [len(g.runs) for g in split if g.n == n] for n in (8, 512)}
    assert sizes[512] == [5, 5, 2] and sum(sizes[8]) == 12 and max(sizes[8]) > 5  # small n: smaller activations
    for n in (8, 512):
        assert [r for g in split if g.n == n for r in g.runs] == plain[0].runs  # every run, in order
    assert all(len(g.runs) * S.run_memory_bytes(g, S.group_vocab(g)) <= budget * 2**30 for g in split)
    with pytest.raises(ValueError, match="needs .* GiB by the memory formula, more than max_group_gb"):
        S.expand_groups({**settings, "max_group_gb": 0.5 * per_run / 2**30})


def test_the_memory_formula_counts_a_next_token_tasks_logits_and_a_regressions_one_output():
    """The run memory formula's output term: 4 x samples x outputs floats, outputs the vocabulary for a next-token task
    (a paper-scale grid 3c run at n 262,144: 4 GiB of its 8.2, which its width leaves out: benchmarks/group_memory.py
    measured 8.0 GiB) and one number for a regression."""
    wide = _group(T.program_next_token(), 262144, [S.RunSpec(1, 1e-3)], model={**TINY, "d_emb": 512, "depth": 4,
                                                                              "heads": 16, "d_head": 64, "d_mlp": 256},
                  epochs=1)
    vocab = S.group_vocab(wide)
    size = S.model_size(wide, vocab)
    logits = 4 * 4 * 1024 * vocab
    assert S.run_memory_bytes(wide, vocab) == 4 * (6 * size.parameters + 8 * 1024 * wide.task.length * size.width) + logits
    assert 8.1 < S.run_memory_bytes(wide, vocab) / 2**30 < 8.3 and 3.9 < logits / 2**30 < 4.1
    reg = _group(T.program_regression(), 64, [S.RunSpec(1, 1e-3)], model=TINY, epochs=1)
    v, size = S.group_vocab(reg), S.model_size(reg, S.group_vocab(reg))
    assert S.run_memory_bytes(reg, v) == 4 * (6 * size.parameters + 8 * 64 * reg.task.length * size.width + 4 * 64)


def test_the_sweep_settings_carry_a_memory_budget_only_where_the_config_sets_one(repo):
    from featlearn.pipeline.estimate import merged_config
    from featlearn.templates.sweeps.experiments import figure_curves

    cfg = merged_config([], repo / "config")["templates"]["sweeps"]
    assert all("max_group_gb" not in s for _, s in figure_curves("5", cfg))
    assert all(s["max_group_gb"] == 40.0 for _, s in figure_curves("5", {**cfg, "max_group_gb": 40}))


def test_the_paper_configs_memory_budget_fits_every_group_and_the_gpu_profiles_card(repo):
    """config/paper.yaml's max_group_gb: every paper-scale group of grids 3c and 5 (the widest models and the largest
    vocabulary) is within it by the run memory formula, grid 3c's n 262,144 is split (40 runs of 8.2 GiB would need
    330 GiB), and a group at the budget declares a gpu_mem_mb (800 MB + 2 x its formula, without a measured CUDA
    peak) that profiles/gpu's cap for one 80 GB card admits."""
    import yaml

    from featlearn.pipeline.estimate import merged_config
    from featlearn.pipeline.sizing import estimated_limits
    from featlearn.templates.sweeps.experiments import figure_curves

    cfg = merged_config([str(repo / "config" / "paper.yaml")], repo / "config")["templates"]["sweeps"]
    budget = float(cfg["max_group_gb"])
    for fig in ("3c", "5"):
        for _, settings in figure_curves(fig, cfg):
            for g in S.expand_groups({**settings, "progress": False}):
                if g.n in (2048, 262144):
                    assert len(g.runs) * S.run_memory_bytes(g, S.group_vocab(g)) <= budget * 2**30, (fig, g.n)
                    if g.n == 262144:
                        assert len(g.runs) < 40
    cap = yaml.safe_load((repo / "profiles" / "gpu" / "config.yaml").read_text())["resources"]["gpu_mem_mb"]
    assert estimated_limits(None, budget * 2**30, gpu=True)["gpu_mem_mb"] <= cap <= 80_000


def test_denormals_are_flushed_inside_the_block_only():
    """``denormals_flushed(True)``: a float32 denormal (1e-39) reads as zero inside the block and as itself after it;
    ``denormals_flushed(False)`` changes nothing."""
    tiny = torch.tensor([1e-39], dtype=torch.float32)
    assert float(tiny * 1.0) > 0  # a denormal survives arithmetic by default
    if not torch.set_flush_denormal(False):
        pytest.skip("this CPU cannot flush denormals (no SSE3)")
    with S.denormals_flushed(True):
        assert float(tiny * 1.0) == 0.0
    assert float(tiny * 1.0) > 0
    with S.denormals_flushed(False):
        assert float(tiny * 1.0) > 0


def test_a_group_that_flushes_denormals_trains_as_one_that_does_not_on_a_short_run():
    """The switch reaches the group and leaves the process as it found it; on a short training, before any Adam
    moment is near 1e-38, the two groups' results are bit-identical (the switch changes only denormal numbers)."""
    runs = [S.RunSpec(1, 1e-3, "vanilla"), S.RunSpec(2, 1e-2, "kq")]
    plain, flushed = (S.train_group(_group(T.aba_abb(), 12, runs, model=TINY, epochs=4, batch=5, progress=False,
                                           flush_denormal=f)) for f in (False, True))
    assert torch.equal(plain.best_epoch, flushed.best_epoch)
    for name in plain.params:
        assert torch.equal(plain.params[name], flushed.params[name]), name
    assert float(torch.tensor([1e-39]) * 1.0) > 0  # set back off after the group


def test_the_sweep_settings_carry_flush_denormal_only_where_the_config_turns_it_on(repo):
    """Off, the key is in no job's or group's settings, so the cached tables of a run from before the key stay valid;
    on, the job settings and every group carry it (the estimate's probes leave it out: tests/test_estimate.py)."""
    from featlearn.pipeline.estimate import merged_config
    from featlearn.templates.registry import shared_sweep_keys
    from featlearn.templates.sweeps.experiments import figure_curves

    cfg = {**merged_config([], repo / "config")["templates"]["sweeps"], "flush_denormal": False}
    assert "flush_denormal" not in shared_sweep_keys(cfg)
    assert all("flush_denormal" not in s for _, s in figure_curves("5", cfg))
    on = {**cfg, "flush_denormal": True}
    assert shared_sweep_keys(on)["flush_denormal"] is True
    curves = figure_curves("5", on)
    assert all(s["flush_denormal"] is True for _, s in curves)
    assert all(g.flush_denormal for _, s in curves for g in S.expand_groups(s))


def test_the_flush_denormal_benchmark_compares_tables_and_finds_a_difference(repo, tmp_path):
    """benchmarks/flush_denormal.py on smoke grid 9: off and on give the same table (a short training has no
    denormals); against a results folder whose table differs in one byte, it says NO."""
    import subprocess
    import sys

    script = [sys.executable, str(repo / "benchmarks" / "flush_denormal.py"), "--grids", "9", "--jobs", "1",
              "--configfile", str(repo / "config" / "smoke.yaml")]
    both = subprocess.run([*script, "--out", str(tmp_path / "both")], capture_output=True, text=True, cwd=tmp_path)
    assert both.returncode == 0, both.stderr
    assert (tmp_path / "both" / "summary.md").read_text().splitlines()[2].endswith("| yes |")
    planted = tmp_path / "results"
    (planted / "templates" / "sweeps").mkdir(parents=True)
    (planted / "benchmarks" / "templates").mkdir(parents=True)
    table = (tmp_path / "both" / "fig9_off.csv").read_text()
    (planted / "templates" / "sweeps" / "fig9_runs.csv").write_text(table.replace("1", "2", 1))
    (planted / "benchmarks" / "templates" / "sweep_fig9.tsv").write_text("s\th:m:s\n3.0\t0:00:03\n")
    against = subprocess.run([*script, "--against", str(planted), "--out", str(tmp_path / "against")],
                             capture_output=True, text=True, cwd=tmp_path)
    assert against.returncode == 0, against.stderr
    row = (tmp_path / "against" / "summary.md").read_text().splitlines()[2]
    assert row.startswith("| 9 | 3.0 |") and row.endswith("| NO |")
    # the folder as the "on" side: only the "off" job runs here, and the untouched table compares equal
    (planted / "templates" / "sweeps" / "fig9_runs.csv").write_text(table)
    on_side = subprocess.run([*script, "--against", str(planted), "--against-switch", "on", "--out", str(tmp_path / "on")],
                             capture_output=True, text=True, cwd=tmp_path)
    assert on_side.returncode == 0, on_side.stderr
    row = (tmp_path / "on" / "summary.md").read_text().splitlines()[2]
    assert row.split("|")[3].strip() == "3.0" and row.endswith("| yes |")
    assert (tmp_path / "on" / "fig9_off.csv").exists() and not (tmp_path / "on" / "fig9_on.csv").exists()


def test_the_flush_denormal_benchmark_runs_the_calibration_as_its_job_does(repo):
    """Its ``calibration`` is the registry's ``templates_calibration`` job: the same function and settings."""
    import json
    import sys

    sys.path.insert(0, str(repo / "benchmarks"))
    try:
        import flush_denormal as bench
    finally:
        sys.path.remove(str(repo / "benchmarks"))
    from featlearn.pipeline.estimate import merged_config
    from featlearn.pipeline.registry import Paths
    from featlearn.templates.registry import registry, shared_sweep_keys

    cfg = merged_config([], repo / "config")
    job = next(j for j in registry(cfg, Paths("results"), lambda name: False).jobs if j.name == "templates_calibration")
    cmd = bench.job_command(cfg, "calibration", True, repo / "out.csv")
    assert cmd[cmd.index("--run") + 1] == job.run
    sweeps = {**cfg["templates"]["sweeps"], "flush_denormal": True}
    assert json.loads(cmd[cmd.index("--settings") + 1]) == {"sweeps": {**shared_sweep_keys(sweeps),
                                                                       "calibration": sweeps["calibration"]}}
