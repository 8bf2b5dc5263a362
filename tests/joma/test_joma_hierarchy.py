"""JoMA Sec. 5 / Table 1: the hierarchy generator, Theorem 5, NCorr, the 3-layer model and its training."""

from __future__ import annotations

import itertools
import math

import pandas as pd
import pytest
import torch

from featlearn.pipeline.compute import Context
from featlearn.pipeline.figure import write_outputs
from featlearn.joma import hierarchy as Hy
from featlearn.joma import table1 as T1
from featlearn.joma import table1_figures as TF
from featlearn.plotting import save_figure

CPU = Context(device="cpu")


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny tensors: see conftest


# ----------------------------------------------------------------------------- code-mode generator


def test_generator_is_deterministic_given_seed():
    a = Hy.make_hierarchy([10, 20], 20, 2, generator=3)
    b = Hy.make_hierarchy([10, 20], 20, 2, generator=torch.Generator().manual_seed(3))
    c = Hy.make_hierarchy([10, 20], 20, 2, generator=4)
    assert a == b and a != c
    xa, ya, la = a.sample(64, torch.Generator().manual_seed(9))
    xb, yb, lb = b.sample(64, torch.Generator().manual_seed(9))
    assert torch.equal(xa, xb) and torch.equal(ya, yb) and all(torch.equal(p, q) for p, q in zip(la, lb))


@pytest.mark.parametrize("n_ch,sizes", [(2, (10, 20, 20)), (3, (20, 30, 50))])
def test_subsets_are_unique_sorted_and_in_range(n_ch, sizes):
    h = Hy.make_hierarchy(list(sizes[:2]), sizes[2], n_ch, generator=1)
    assert h.sizes == sizes and h.pad == 99
    below = [99, *sizes[:-1]]
    for level, kids in enumerate(h.children):
        assert len(set(kids)) == len(kids)  # unique
        for k in kids:
            assert len(k) == n_ch and list(k) == sorted(set(k)) and 0 <= k[0] and k[-1] < below[level]


def test_sequences_are_left_padded_and_increasing():
    h = Hy.make_hierarchy([20, 30], 50, 3, generator=2)
    x, y, _ = h.sample(200, torch.Generator().manual_seed(0))
    assert x.shape == (200, 30) and x.dtype == torch.int64
    for row in x.tolist():
        real = [t for t in row if t != h.pad]
        n_pad = len(row) - len(real)
        assert row[:n_pad] == [h.pad] * n_pad  # padding only on the left
        assert real == sorted(set(real)) and len(real) > 0  # each token once, increasing, right-aligned


def test_latents_are_consistent_with_tokens_and_label():
    h = Hy.make_hierarchy([10, 20], 30, 2, generator=5)
    x, y, latents = h.sample(100, torch.Generator().manual_seed(1))
    assert [tuple(l.shape) for l in latents] == [(100, 10), (100, 20), (100, 30)]
    for i in range(100):
        assert latents[2][i].nonzero().flatten().tolist() == [int(y[i])]  # top level = one-hot class
        for s in (2, 1):  # active latents one level down = union of the active ones' children
            below = set().union(*(h.children[s][j] for j in latents[s][i].nonzero().flatten().tolist()))
            assert set(latents[s - 1][i].nonzero().flatten().tolist()) == below
        tokens = set().union(*(h.children[0][j] for j in latents[0][i].nonzero().flatten().tolist()))
        assert set(x[i].tolist()) - {h.pad} == tokens


def test_to_sequences_small_example():
    present = torch.tensor([[0, 1, 0, 1, 1], [0, 0, 0, 0, 1]], dtype=torch.bool)
    assert Hy.to_sequences(present, 4, pad=9).tolist() == [[9, 1, 3, 4], [9, 9, 9, 4]]
    assert Hy.to_sequences(present, 7, pad=9).tolist() == [[9, 9, 9, 9, 1, 3, 4], [9, 9, 9, 9, 9, 9, 4]]
    with pytest.raises(ValueError):
        Hy.to_sequences(present, 2, pad=9)


def test_impossible_requests_fail_clearly():
    with pytest.raises(ValueError, match="distinct"):
        Hy.make_hierarchy([3, 5], 2, 2, M=5)  # only C(3, 2) = 3 pairs of level-0 latents
    with pytest.raises(ValueError, match="more than T"):
        Hy.make_hierarchy([20, 30], 20, 3, T=10)


# ----------------------------------------------------------------------------- HBLT and Theorem 5


def _exact_conditional(rho: float, L: int, D: int, p_on: float, p_off: float, l: int, m: int) -> float:
    """P[y_l = 1 | y_m = 1] in subtree 0 by summing over every assignment of the tree's nodes."""
    n_nodes = 2 ** (L - 1) - 1  # internal binary latents of subtree 0 (heap order, node 0 = y_1)
    n_leaves = 2 ** (L - 1)
    joint = marg = 0.0
    for y0 in range(D):
        p1 = p_on if y0 == 0 else p_off
        for bits in itertools.product((0, 1), repeat=n_nodes + n_leaves):
            p = (1 / D) * (p1 if bits[0] else 1 - p1)
            for child in range(1, n_nodes + n_leaves):
                parent = (child - 1) // 2
                p *= (1 + rho) / 2 if bits[child] == bits[parent] else (1 - rho) / 2
            leaves = bits[n_nodes:]
            if leaves[m]:
                marg += p
                joint += p * leaves[l]
    return joint / marg


@pytest.mark.parametrize("rho", [0.7, -0.4])
def test_theorem5_matches_exact_enumeration(rho):
    L, D, p_on, p_off = 3, 3, 0.8, 0.1
    rho0 = Hy.hblt_rho0(D, p_on, p_off)
    assert rho0 == pytest.approx(1 - 2 * (0.8 + 2 * 0.1) / 3)
    for H in (1, 2):
        l, m = Hy.hblt_pair(H)
        assert Hy.theorem5(rho, L, rho0, H) == pytest.approx(_exact_conditional(rho, L, D, p_on, p_off, l, m), abs=1e-12)


def test_theorem5_paper_rho0_definition_disagrees():
    # the printed rho_0 = P[y_1 = 0] (instead of 2 P[y_1 = 0] - 1) does not give the exact value
    L, D, p_on, p_off, rho = 3, 3, 0.8, 0.1, 0.7
    printed = 1 - (p_on + (D - 1) * p_off) / D
    exact = _exact_conditional(rho, L, D, p_on, p_off, *Hy.hblt_pair(1))
    assert abs(Hy.theorem5(rho, L, printed, 1) - exact) > 0.01


def test_edge_matrix_composes_like_scalars():
    assert torch.allclose(Hy.edge_matrix(0.6) @ Hy.edge_matrix(0.5), Hy.edge_matrix(0.3))
    assert torch.allclose(Hy.edge_matrix(0.6).sum(dim=0), torch.ones(2, dtype=torch.float64))


def test_monte_carlo_agrees_with_theorem5_and_is_deterministic():
    L, D, p_on, p_off, rho = 4, 4, 0.9, 0.05, 0.8
    leaves = Hy.sample_hblt(40_000, rho, L, D, p_on, p_off, generator=0)
    assert leaves.shape == (40_000, D, 8) and leaves.dtype == torch.bool
    assert torch.equal(leaves, Hy.sample_hblt(40_000, rho, L, D, p_on, p_off, generator=0))
    rho0 = Hy.hblt_rho0(D, p_on, p_off)
    for H in range(1, L):
        p, se, n = Hy.cooccurrence(leaves[:, 0], *Hy.hblt_pair(H))
        assert n > 1000 and 0 < se < 0.02
        assert abs(p - Hy.theorem5(rho, L, rho0, H)) < 4 * se


def test_hblt_table_and_claim(tmp_path):
    cfg = {"rhos": [0.5, 0.9], "L": 4, "n_classes": 3, "p_on": 0.9, "p_off": 0.05, "n_samples": 20_000, "seed": 0}
    T1.hblt_tables(cfg, {}, {"table": str(tmp_path / "hblt.csv")}, CPU)
    df = pd.read_csv(tmp_path / "hblt.csv")
    assert list(df.columns) == ["rho", "L", "H", "rho0", "empirical", "se", "theory", "n", "n_samples"]
    assert len(df) == 2 * 3 and (df["se"] > 0).all()
    inputs, fig_cfg = {"table": str(tmp_path / "hblt.csv")}, {"scale": "test"}
    save_figure(TF.draw_hblt(inputs, fig_cfg), str(tmp_path / "hblt.png"), dpi=50)
    claims = TF.claims_hblt(inputs, fig_cfg)
    assert (tmp_path / "hblt.png").stat().st_size > 0
    z = ((df["empirical"] - df["theory"]) / df["se"]).abs().max()
    assert [c.claim_id for c in claims] == ["thm5_hblt"] and claims[0].measured == pytest.approx(z)
    assert claims[0].passed == (z <= TF.hblt_bound(6)) and TF.hblt_bound(6) == pytest.approx(3.144, abs=0.001)
    # planted: the theory column shifted by 10 standard errors must fail
    df.assign(theory=df["theory"] + 10 * df["se"]).to_csv(tmp_path / "bad.csv", index=False)
    assert not TF.claims_hblt({"table": str(tmp_path / "bad.csv")}, fig_cfg)[0].passed


# ----------------------------------------------------------------------------- NCorr


def test_ncorr_planted_neuron_scores_one_and_independent_near_zero():
    g = torch.Generator().manual_seed(0)
    latents = torch.rand(4000, 3, generator=g) < 0.3
    planted = torch.cat([latents[:, :1].double() * 2.5 + 1.0, torch.rand(4000, 5, generator=g, dtype=torch.float64)], dim=1)
    corr = T1.centred_cosine(latents.double(), planted)
    assert corr[0, 0] == pytest.approx(1.0, abs=1e-9)  # an affine copy of latent 0's indicator
    assert corr[1:, :].abs().max() < 0.06 and corr[0, 1:].abs().max() < 0.06  # independent neurons
    value, n = T1.ncorr(planted, latents[:, :1])
    assert value == pytest.approx(1.0, abs=1e-9) and n == 1
    value, n = T1.ncorr(planted[:, 1:], latents)
    assert abs(value) < 0.06 and n == 3


def test_ncorr_leaves_out_constant_latents():
    g = torch.Generator().manual_seed(1)
    lat = torch.stack([torch.rand(500, generator=g) < 0.5, torch.zeros(500, dtype=torch.bool)], dim=1)
    value, n = T1.ncorr(lat[:, :1].double(), lat)
    assert n == 1 and value == pytest.approx(1.0)


# ----------------------------------------------------------------------------- model and training

CFG = {"d": 16, "d_hidden": 24, "layers": 3, "steps": 4, "batch": 32, "lr": 1e-3, "wd": 1e-4, "log_every": 2}


def test_model_shapes_and_causality():
    model = T1.build_model(12, 5, CFG, seed=0)
    x = torch.randint(12, (3, 7), generator=torch.Generator().manual_seed(0))
    logits, hiddens = model(x)
    assert logits.shape == (3, 5) and len(hiddens) == 3 and all(h.shape == (3, 7, 24) for h in hiddens)
    assert all((h >= 0).all() for h in hiddens)  # post-ReLU
    x2 = x.clone()
    x2[:, 4] = (x2[:, 4] + 1) % 12
    _, h2 = model(x2)
    for a, b in zip(hiddens, h2):
        assert torch.allclose(a[:, :4], b[:, :4], atol=1e-6)  # earlier positions do not see token 4
        assert not torch.allclose(a[:, 4:], b[:, 4:])


def test_model_init_is_deterministic_and_leaves_global_rng_alone():
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a = T1.build_model(12, 5, CFG, seed=7)
    after = torch.rand(1)
    b = T1.build_model(12, 5, CFG, seed=7)
    assert torch.equal(before, after)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


def test_count_weighted_loss_equals_batch_loss():
    h = Hy.make_hierarchy([4, 6], 5, 2, M=20, T=8, generator=0)
    model = T1.build_model(20, 5, CFG, seed=0)
    x, y, _ = h.sample(64, torch.Generator().manual_seed(2))
    with torch.no_grad():
        batch = torch.nn.functional.cross_entropy(model(x)[0], y)
        seq, _ = h.class_tables()
        weighted = T1._weighted_ce(model(seq)[0], torch.bincount(y, minlength=5).double())
    assert float(weighted) == pytest.approx(float(batch), rel=1e-5)


def test_vectorised_training_equals_separate_runs():
    seeds = [1, 2]
    hiers = [Hy.make_hierarchy([4, 6], 5, 2, M=20, T=8, generator=s) for s in seeds]
    single = [T1.build_model(20, 5, CFG, s) for s in seeds]
    batched = [T1.build_model(20, 5, CFG, s) for s in seeds]
    log_a = T1.train(single, hiers, seeds, CFG, vectorise=False)
    log_b = T1.train(batched, hiers, seeds, CFG, vectorise=True)
    assert len(log_a[0]) == 3  # steps 0, 2 and the last
    assert torch.allclose(torch.tensor(log_a), torch.tensor(log_b), atol=1e-5)
    for m, n in zip(single, batched):
        for (name, p), q in zip(m.named_parameters(), n.parameters()):
            assert torch.allclose(p, q, atol=1e-5), name
    assert not torch.equal(single[0].embed.weight, T1.build_model(20, 5, CFG, 1).embed.weight)  # it did train


# ------------------------------------------------------------------ CUDA graphs of the vectorised step (issue 34)


def _vectorised(device: str = "cpu", vectorise: bool = True, **kw) -> tuple[list, list]:
    """Three seeds trained together (or in a loop) for 7 steps, logged at steps 0, 3, 6: (their models, the logs)."""
    seeds = [1, 2, 3]
    hiers = [Hy.make_hierarchy([4, 6], 5, 2, M=20, T=8, generator=s) for s in seeds]
    models = [T1.build_model(20, 5, CFG, s).to(device) for s in seeds]
    logs = T1.train(models, hiers, seeds, {**CFG, "steps": 7, "log_every": 3}, vectorise=vectorise, **kw)
    return models, logs


def test_the_cuda_graphs_switch_leaves_cpu_training_unchanged():
    """On a CPU the switch does nothing: the eager vectorised step runs, bit for bit."""
    (eager, log_a), (switched, log_b) = _vectorised(), _vectorised(cuda_graphs=True)
    assert log_a == log_b and len(log_a[0]) == 3
    assert all(torch.equal(p, q) for m, n in zip(eager, switched) for p, q in zip(m.parameters(), n.parameters()))


def test_the_graph_safe_step_is_the_eager_step(monkeypatch):
    """The step a CUDA graph holds (fused, capturable Adam; class counts drawn ahead and staged; losses written to
    a buffer read at logged steps), run uncaptured on the CPU, trains as the eager vectorised step up to float
    rounding. Staged two steps at a time, so that several chunks are drawn."""
    from featlearn import cudagraphs

    monkeypatch.setattr(cudagraphs, "STAGE_BYTES", 2 * 3 * 5 * 8)  # two steps of 3 seeds' class counts (float64)
    (eager, log_a), (graph_safe, log_b) = _vectorised(), _vectorised(cuda_graphs=True, capture=False)
    assert len(log_b[0]) == 3
    assert torch.allclose(torch.tensor(log_a), torch.tensor(log_b), rtol=1e-5, atol=1e-6)
    for m, n in zip(eager, graph_safe):
        for (name, p), q in zip(m.named_parameters(), n.parameters()):
            assert torch.allclose(p, q, rtol=1e-4, atol=1e-6), name
    assert not torch.equal(eager[0].embed.weight, T1.build_model(20, 5, CFG, 1).embed.weight)  # it did train


def test_the_environment_runs_the_graph_safe_step_uncaptured_on_a_cpu(monkeypatch, capsys):
    """With the diagnostic (featlearn.cudagraphs.UNCAPTURED_ENV) a switched-on vectorised cell trains with the
    graph-safe step on the CPU: what ``capture=False`` gives, bit for bit."""
    from featlearn.cudagraphs import UNCAPTURED_ENV

    (uncaptured, log_a) = _vectorised(cuda_graphs=True, capture=False)
    monkeypatch.setenv(UNCAPTURED_ENV, "1")
    (by_environment, log_b) = _vectorised(cuda_graphs=True)
    assert f"{UNCAPTURED_ENV}=1: the graph-safe step runs uncaptured" in capsys.readouterr().err
    assert log_a == log_b
    assert all(torch.equal(p, q) for m, n in zip(uncaptured, by_environment) for p, q in zip(m.parameters(), n.parameters()))


def test_the_switch_leaves_a_vectorised_cell_table_unchanged_on_a_cpu(tmp_path):
    cfg = {"C": 20, "n_ch": 2, "n0": 10, "n1": 20, "M": 100, "T": 30, "d": 8, "d_hidden": 16, "layers": 3, "steps": 3,
           "batch": 16, "lr": 1e-3, "wd": 1e-4, "eval_samples": 64, "log_every": 2, "vectorise": True, "seeds": [1, 2]}
    for graphs in (False, True):
        T1.table1_cell({**cfg, "cuda_graphs": graphs}, {}, {"cell": str(tmp_path / f"{graphs}.csv")}, CPU)
    assert (tmp_path / "False.csv").read_bytes() == (tmp_path / "True.csv").read_bytes()


@pytest.mark.parametrize("mode", ["loop", "vectorised", "graph-safe"])
def test_a_killed_cell_resumes_from_its_kept_state_and_trains_as_an_uninterrupted_one(tmp_path, monkeypatch, capsys, mode,
                                                                                      interrupt_after):
    """With a resume folder the trainer keeps its state after a step (here after every one): killed while drawing the
    class counts of step 5 and rerun, it goes on from the last kept step and gives the uninterrupted run's logs and
    parameters exactly, in a loop over the seeds, vectorised, and with the graph-safe step run uncaptured (its counts
    staged two steps at a time); the kept state is removed at the end outside a compute job."""
    from featlearn import cudagraphs
    from featlearn.training import PARTS_DIR

    monkeypatch.setattr(cudagraphs, "STAGE_BYTES", 2 * 3 * 5 * 8)
    kw = {"vectorise": mode != "loop", "cuda_graphs": mode == "graph-safe", "capture": False}
    clean, clean_logs = _vectorised(**kw)
    work = tmp_path / "resume"
    restore = interrupt_after(T1, "_class_counts", 4 * 3)  # three seeds draw their counts each step
    with pytest.raises(KeyboardInterrupt):
        _vectorised(**kw, work_dir=str(work), checkpoint_seconds=0.0)
    assert len(list((work / PARTS_DIR).glob("*.pt"))) == 1
    restore()
    capsys.readouterr()
    resumed, logs = _vectorised(**kw, work_dir=str(work), checkpoint_seconds=0.0)
    # steps 0-3 trained (staged in pairs, the graph-safe step's pair 4-5 was being drawn), so step 4 goes on
    assert f"[joma table1] resuming at step 4 of 7 from {work}" in capsys.readouterr().err.splitlines()
    assert logs == clean_logs and len(logs[0]) == 3
    for m, n in zip(clean, resumed):
        for (name, p), q in zip(m.named_parameters(), n.parameters()):
            assert torch.equal(p, q), name
    assert not list((work / PARTS_DIR).glob("*.pt"))  # outside a compute job: removed at the end


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_graphs_train_as_the_eager_step_does():
    """On a GPU: the captured and replayed vectorised step (3 eager steps, then the graph; fused Adam) trains as the
    eager step (foreach Adam) does, up to float rounding, and logs the same steps."""
    (eager, log_a), (graphed, log_b) = _vectorised("cuda"), _vectorised("cuda", cuda_graphs=True)
    assert len(log_a[0]) == len(log_b[0]) == 3
    assert torch.allclose(torch.tensor(log_a), torch.tensor(log_b), rtol=1e-5, atol=1e-6)
    for m, n in zip(eager, graphed):
        for (name, p), q in zip(m.named_parameters(), n.parameters()):
            assert torch.allclose(p, q, rtol=1e-4, atol=1e-6), name


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_resumed_captured_cell_trains_as_an_uninterrupted_captured_one(tmp_path, monkeypatch, interrupt_after):
    """On a GPU: a cell trained with the captured step, killed while drawing step 5's class counts (staged two steps
    at a time) and rerun (its optimiser state loaded before the capture, the counts of the trained steps drawn again),
    logs and ends as the uninterrupted captured run does, up to float rounding."""
    from featlearn import cudagraphs
    from featlearn.training import PARTS_DIR

    monkeypatch.setattr(cudagraphs, "STAGE_BYTES", 2 * 3 * 5 * 8)
    clean, clean_logs = _vectorised("cuda", cuda_graphs=True)
    work = tmp_path / "resume"
    restore = interrupt_after(T1, "_class_counts", 4 * 3)
    with pytest.raises(KeyboardInterrupt):
        _vectorised("cuda", cuda_graphs=True, work_dir=str(work), checkpoint_seconds=0.0)
    assert len(list((work / PARTS_DIR).glob("*.pt"))) == 1  # steps 0-3 were kept
    restore()
    resumed, logs = _vectorised("cuda", cuda_graphs=True, work_dir=str(work), checkpoint_seconds=0.0)
    assert torch.allclose(torch.tensor(logs), torch.tensor(clean_logs), rtol=1e-5, atol=1e-6)
    for m, n in zip(clean, resumed):
        for (name, p), q in zip(m.named_parameters(), n.parameters()):
            assert torch.allclose(p, q, rtol=1e-4, atol=1e-6), name


def test_loss_floor_counts_indistinguishable_classes():
    # classes 0 and 1 expand to the same tokens {0, 1, 2, 3} through different level-0 latents
    h = Hy.Hierarchy(children=(((0, 1), (2, 3), (0, 2), (1, 3), (4, 5)), ((0, 1), (2, 3), (0, 4))), M=8, T=6)
    assert h.duplicate_classes() == 2
    assert T1.loss_floor(h) == pytest.approx(2 * math.log(2) / 3)


def test_table1_cell_and_table(tmp_path):
    base = {"M": 100, "T": 30, "d": 16, "d_hidden": 32, "layers": 3, "steps": 3, "batch": 32, "lr": 1e-3, "wd": 0.0,
            "eval_samples": 256, "log_every": 10, "vectorise": False, "cuda_graphs": False, "seeds": [1, 2]}
    paths = []
    for C, nch in ((20, 2), (30, 3)):
        p = str(tmp_path / f"cell_{C}_{nch}.csv")
        T1.table1_cell({**base, "C": C, "n_ch": nch, "n0": 10, "n1": 20}, {}, {"cell": p}, CPU)
        paths.append(p)
    df = pd.read_csv(paths[0])
    expected = {"C", "n_ch", "n0", "n1", "seed", "trained", "level", "ncorr", "n_latents", "final_loss", "loss_floor"}
    assert expected <= set(df.columns)
    assert len(df) == 2 * 2 * 3  # seeds x (untrained, trained) x levels
    assert df["ncorr"].between(-1, 1).all() and (df["n_latents"] > 0).all()
    inputs, fig_cfg = {"cells": paths}, {"scale": "test"}
    write_outputs(TF.draw_table1(inputs, fig_cfg), [str(tmp_path / f"t1.{ext}") for ext in ("csv", "md", "tex")], dpi=50)
    claims = TF.claims_table1(inputs, fig_cfg)
    assert [c.claim_id for c in claims] == ["table1_s0", "table1_s1_lower", "table1_gap_s0", "table1_gap_s1", "table1_loss"]
    summary = pd.read_csv(tmp_path / "t1.csv")
    assert len(summary) == 2 * 2
    assert claims[0].measured == pytest.approx(summary[summary["level"] == 0]["trained_mean"].min())
    assert summary["paper_mean"].notna().all()
    md, tex = (tmp_path / "t1.md").read_text(), (tmp_path / "t1.tex").read_text()
    assert "scale: test" in md and "0.99 ± 0.01" in md and "\\begin{tabular}" in tex


def _planted_cells(tmp_path, trained: tuple, untrained: tuple, excess_loss: float) -> dict:
    """Table 1 cells where every seed scores NCorr ``trained`` = (s0, s1) and ``untrained`` = (s0, s1)."""
    rows = []
    for C, nch in ((20, 2), (30, 3)):
        for seed in (1, 2):
            for is_trained, (v0, v1) in ((True, trained), (False, untrained)):
                for level, v in ((0, v0), (1, v1), (2, 0.1)):
                    rows.append({"C": C, "n_ch": nch, "n0": 10, "n1": 20, "seed": seed, "trained": is_trained, "level": level,
                                 "ncorr": v + 0.001 * seed, "n_latents": 5, "final_loss": 0.2 + excess_loss, "loss_floor": 0.2,
                                 "d": 16, "steps": 3, "lr": 1e-3})
    path = tmp_path / "cells.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return {"cells": [str(path)]}


def test_table1_claims_on_planted_cells(tmp_path):
    cfg = {"scale": "test"}
    good = {c.claim_id: c for c in TF.claims_table1(_planted_cells(tmp_path, (0.97, 0.7), (0.5, 0.3), 0.01), cfg)}
    assert all(c.passed for c in good.values())
    assert good["table1_s0"].verdict == "reproduced" and good["table1_s0"].baseline_measured == pytest.approx(0.5015)
    assert good["table1_loss"].kind == "sanity" and good["table1_s0"].paper_value == "0.94-1.00"
    # training changes nothing: s=0 still passes, but so does the untrained network; the gap fails
    same = {c.claim_id: c for c in TF.claims_table1(_planted_cells(tmp_path, (0.95, 0.8), (0.95, 0.8), 0.01), cfg)}
    assert same["table1_s0"].verdict == "not discriminating"
    assert not same["table1_gap_s0"].passed and not same["table1_gap_s1"].passed
    # an untrained network at the ceiling of level 0 fails that level's gap while level 1 can still show training
    ceiling = {c.claim_id: c for c in TF.claims_table1(_planted_cells(tmp_path, (0.99, 0.8), (0.99, 0.6), 0.01), cfg)}
    assert not ceiling["table1_gap_s0"].passed and ceiling["table1_gap_s1"].passed
    assert "untrained NCorr(s=0) 0.99" in ceiling["table1_gap_s0"].note
    # level 1 above level 0, low level-0 scores, a loss far above its floor
    bad = {c.claim_id: c for c in TF.claims_table1(_planted_cells(tmp_path, (0.6, 0.8), (0.5, 0.3), 1.0), cfg)}
    assert not bad["table1_s0"].passed and not bad["table1_s1_lower"].passed and not bad["table1_loss"].passed


def test_table1_cell_is_deterministic(tmp_path):
    cfg = {"C": 20, "n_ch": 2, "n0": 10, "n1": 20, "M": 100, "T": 30, "d": 8, "d_hidden": 16, "layers": 3, "steps": 2,
           "batch": 16, "lr": 1e-3, "wd": 1e-4, "eval_samples": 64, "log_every": 10, "vectorise": False, "cuda_graphs": False,
           "seeds": [3]}
    T1.table1_cell(cfg, {}, {"cell": str(tmp_path / "a.csv")}, CPU)
    T1.table1_cell(cfg, {}, {"cell": str(tmp_path / "b.csv")}, CPU)
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
