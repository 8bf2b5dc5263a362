"""Scan and Snap: generator, model (against an explicit per-position reference), training, metrics, theory."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from featlearn.scan_snap import metrics, theory
from featlearn.scan_snap.data import N_COMMON, SequenceClasses, sample_counts, sample_sequences
from featlearn.scan_snap.model import attention_features, class_composition, init_params, run_losses
from featlearn.scan_snap.train import RunSet, train

SEP = SequenceClasses(2, 1)  # Syn-Small, a separate query per class
SHARED = SequenceClasses(1, 2)


# ------------------------------------------------------------------------------------------ generator
def test_token_layout():
    assert (SEP.K, SEP.M) == (2, 34) and (SHARED.K, SHARED.M) == (2, 33)
    assert SEP.distinct_ids(0).tolist() == list(range(10, 20)) and SEP.distinct_ids(1).tolist() == list(range(20, 30))
    assert SEP.queries().tolist() == [30, 31] and SEP.labels().tolist() == [32, 33]
    assert SHARED.queries().tolist() == [30, 30] and SHARED.labels().tolist() == [31, 32]
    big = SequenceClasses(10, 2)
    assert big.M == 10 + 10 * 20 + 10 + 20


def test_class_probabilities():
    P = SEP.probabilities()
    assert torch.allclose(P.sum(1), torch.ones(2, dtype=torch.float64))
    assert torch.allclose(P[:, :N_COMMON], torch.full((2, 10), 1 / 15.5, dtype=torch.float64))
    d = P[0, 10:20]
    assert torch.allclose(d, torch.linspace(0.1, 1.0, 10, dtype=torch.float64) / 15.5)
    assert torch.all(torch.diff(d) > 0)
    assert P[0, 20:].sum() == 0 and P[1, 10:20].sum() == 0  # distinct tokens only in their own class
    assert float(P[0, :10].sum()) == pytest.approx(10 / 15.5)  # 0.645 common mass at zero init


def test_sequences_follow_the_layout():
    g = torch.Generator().manual_seed(0)
    seqs, labels = sample_sequences(SEP, 64, g)
    assert seqs.shape == (64, 128)
    for seq, label in zip(seqs, labels):
        n = int(label) - SEP.next_offset
        assert int(seq[-1]) == SEP.query_id(n)
        allowed = set(range(10)) | set(SEP.distinct_ids(n).tolist())
        assert set(seq[:-1].tolist()) <= allowed


def test_counts_match_probabilities_within_3_sigma():
    g = torch.Generator().manual_seed(1)
    P = SEP.probabilities()
    tot = torch.zeros(SEP.K, SEP.M, dtype=torch.float64)
    nseq = torch.zeros(SEP.K, dtype=torch.float64)
    for _ in range(10):
        classes, counts = sample_counts(SEP, 512, g)
        assert torch.all(counts.sum(1) == 127)
        tot.index_add_(0, classes, counts.double())
        nseq += torch.bincount(classes, minlength=SEP.K).double()
    draws = nseq.unsqueeze(1) * 127
    se = torch.sqrt(P * (1 - P) / draws)
    z = ((tot / draws - P).abs() / se)[P > 0]
    assert z.max() < 4.5  # 68 tokens: the max of |z| stays well inside this bound
    assert (z < 3).float().mean() > 0.97
    assert tot[P == 0].sum() == 0


# ------------------------------------------------------------------------------------------ model
def reference_loss(Y: torch.Tensor, Z: torch.Tensor, seq: torch.Tensor, label: int) -> torch.Tensor:
    """Sec. 3.1 written per position for one sequence: one-hot X, softmax over contextual positions."""
    M = Y.shape[0]
    X = F.one_hot(seq, M).to(Y.dtype)  # [T, M]
    ctx, query = X[:-1], X[-1]
    b = torch.softmax(ctx @ Z.T @ query, dim=0)  # b_t = softmax_t Z[x_T, x_t]
    v = ctx.T @ b
    f = v / v.norm()
    return F.cross_entropy((Y.T @ f).unsqueeze(0), torch.tensor([label]))


def test_model_equals_per_position_reference_and_its_gradient():
    g = torch.Generator().manual_seed(2)
    Y, Z = init_params(1, SEP.M, "default", [g])
    Y.requires_grad_(True)
    Z.requires_grad_(True)
    seqs, labels = sample_sequences(SEP, 8, torch.Generator().manual_seed(3))
    counts = torch.stack([torch.bincount(s[:-1], minlength=SEP.M) for s in seqs]).double().unsqueeze(0)
    loss = run_losses(Y, Z, seqs[:, -1].unsqueeze(0), counts, labels.unsqueeze(0))[0]
    ref = torch.stack([reference_loss(Y[0], Z[0], s, int(y)) for s, y in zip(seqs, labels)]).mean()
    assert loss.item() == pytest.approx(ref.item(), abs=1e-12)
    gY, gZ = torch.autograd.grad(loss, (Y, Z))
    rY, rZ = torch.autograd.grad(ref, (Y, Z))
    assert torch.allclose(gY, rY, atol=1e-12) and torch.allclose(gZ, rZ, atol=1e-12)

    # Lemma 1 (decoder): -dL/dY = mean_b f_b (e_{x_{T+1}} - softmax(Y^T f_b))^T
    with torch.no_grad():
        f = attention_features(Z, seqs[:, -1].unsqueeze(0), counts)[0]
        alpha = torch.softmax(f @ Y[0], dim=-1)
        lemma = f.T @ (F.one_hot(labels, SEP.M).double() - alpha) / len(labels)
    assert torch.allclose(-gY[0], lemma, atol=1e-12)


@pytest.mark.parametrize("spec", [SEP, SHARED, SequenceClasses(3, 2)])
def test_zero_init_loss_is_ln_M(spec):
    Y, Z = init_params(1, spec.M, "zero", [torch.Generator()])
    classes, counts = sample_counts(spec, 32, torch.Generator().manual_seed(0))
    loss = run_losses(Y, Z, spec.queries()[classes].unsqueeze(0), counts.double().unsqueeze(0),
                      spec.labels()[classes].unsqueeze(0))
    assert float(loss[0]) == pytest.approx(math.log(spec.M), abs=1e-12)


def test_composition_at_zero_init_is_P():
    _, Z = init_params(1, SEP.M, "zero", [torch.Generator()])
    c = class_composition(Z, SEP.probabilities(), SEP.queries())[0]
    assert torch.allclose(c, SEP.probabilities())


# ------------------------------------------------------------------------------------------ training
def _settings(optimizer: str, **kw) -> dict:
    """A RunSet's settings in these tests: SGD with the paper's momentum 0.9 (as config scan_snap.syn_small) or Adam,
    the eager step, and each test's own."""
    return dict(optimizer=optimizer, momentum=0.9 if optimizer == "sgd" else None, cuda_graphs=False, **kw)


@pytest.mark.parametrize("optimizer, init", [("sgd", "default"), ("adam", "zero")])
def test_vectorised_runs_equal_runs_trained_alone(optimizer, init):
    kw = _settings(optimizer, init=init, batch=32, iterations=15, log_every=5)
    seeds, ez, ey = [1, 2, 1], [0.5, 1.0, 2.0], [1.0, 10.0, 4.0]
    together = train(RunSet(SEP, seeds, ez, ey, **kw))
    for r in range(3):
        alone = train(RunSet(SEP, [seeds[r]], [ez[r]], [ey[r]], **kw))
        for s in range(len(alone.steps)):
            assert torch.allclose(together.composition[s][r], alone.composition[s][0], atol=1e-6, rtol=0)
            assert abs(float(together.loss[s][r] - alone.loss[s][0])) < 1e-6
        assert abs(float(together.final_loss[r] - alone.final_loss[0])) < 1e-6


def test_sgd_matches_torch_optimizer():
    """The stacked SGD-with-momentum update equals torch.optim.SGD on one run."""
    kw = _settings("sgd", init="default", batch=16, iterations=5, log_every=5)
    hist = train(RunSet(SEP, [3], [0.7], [2.1], **kw))
    # replay with torch.optim.SGD and the same data and init
    from featlearn.scan_snap.train import _data_seed, _init_seed

    Y, Z = init_params(1, SEP.M, "default", [torch.Generator().manual_seed(_init_seed(3))])
    Y, Z = Y[0].clone().requires_grad_(True), Z[0].clone().requires_grad_(True)
    opt = torch.optim.SGD([{"params": [Y], "lr": 2.1}, {"params": [Z], "lr": 0.7}], momentum=0.9)
    g = torch.Generator().manual_seed(_data_seed(3))
    for step in range(6):
        classes, counts = sample_counts(SEP, 16, g)
        loss = run_losses(Y[None], Z[None], SEP.queries()[classes][None], counts.double()[None], SEP.labels()[classes][None])[0]
        if step == 5:
            break
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert abs(loss.item() - float(hist.final_loss[0])) < 1e-10
    c = class_composition(Z.detach()[None], SEP.probabilities(), SEP.queries())
    assert torch.allclose(c, hist.composition[-1], atol=1e-10)


def test_syn_small_learns_and_keeps_attention_spread():
    hist = train(RunSet(SEP, [1], [1.0], [1.0], **_settings("sgd", init="zero", batch=128, iterations=60, log_every=60)))
    assert float(hist.final_loss[0]) < 0.05
    H = metrics.distinct_entropy(hist.composition[-1], SEP)
    assert 1.0 < float(H[0]) < 2.2


# ------------------------------------------------------------------------ CUDA graphs of the training step (issue 34)
def _logged(hist):
    return [*hist.composition, *hist.z_query, *hist.loss, hist.final_loss]


def _three_runs(**kw) -> RunSet:
    """Three runs, two of them on one seed's data."""
    return RunSet(SEP, [1, 2, 1], [0.5, 1.0, 2.0], [1.0, 10.0, 4.0], **kw)


@pytest.mark.parametrize("optimizer, init", [("sgd", "default"), ("adam", "zero")])
def test_the_cuda_graphs_switch_leaves_cpu_training_unchanged(optimizer, init):
    """On a CPU the switch does nothing: the eager step runs and every logged number is the same, bit for bit."""
    kw = _settings(optimizer, init=init, batch=16, iterations=7, log_every=3)
    eager, switched = (train(_three_runs(**{**kw, "cuda_graphs": g})) for g in (False, True))
    assert eager.steps == switched.steps == [0, 3, 6, 7]
    assert all(torch.equal(a, b) for a, b in zip(_logged(eager), _logged(switched)))


@pytest.mark.parametrize("optimizer, init", [("sgd", "default"), ("adam", "zero"), ("adam", "default")])
def test_the_graph_safe_step_is_the_eager_step(optimizer, init, monkeypatch):
    """The step a CUDA graph holds (step count and Adam's bias corrections on the device, batches drawn ahead and
    staged, losses written to a buffer read between steps), run uncaptured on the CPU, trains as the eager step:
    the same logged steps and values up to float rounding. Staged a few steps at a time, so that several chunks
    are drawn."""
    from featlearn import cudagraphs

    monkeypatch.setattr(cudagraphs, "STAGE_BYTES", 3 * 2 * 16 * (SEP.M * 4 + 8))  # 3 steps of 2 seeds' batches
    kw = _settings(optimizer, init=init, batch=16, iterations=10, log_every=4)
    eager = train(_three_runs(**kw))
    graph_safe = train(_three_runs(**{**kw, "cuda_graphs": True}), capture=False)
    assert graph_safe.steps == eager.steps == [0, 4, 8, 10]
    for a, b in zip(_logged(eager), _logged(graph_safe)):
        assert torch.allclose(a, b, rtol=1e-12, atol=1e-14)
    assert not torch.equal(eager.z_query[0], eager.z_query[-1])  # it did train


def test_the_environment_runs_the_graph_safe_step_uncaptured_on_a_cpu(monkeypatch):
    """With the diagnostic (featlearn.cudagraphs.UNCAPTURED_ENV) a switched-on RunSet trains with the graph-safe step
    on the CPU, every step of it: what ``capture=False`` gives, bit for bit. A RunSet whose switch is off keeps its
    eager step."""
    from featlearn.cudagraphs import UNCAPTURED_ENV
    from featlearn.scan_snap import train as train_module

    kw = _settings("adam", init="default", batch=16, iterations=6, log_every=3)
    uncaptured = train(_three_runs(**{**kw, "cuda_graphs": True}), capture=False)
    calls = []
    real = train_module._graph_step
    monkeypatch.setattr(train_module, "_graph_step", lambda *a: calls.append(1) or real(*a))
    monkeypatch.setenv(UNCAPTURED_ENV, "1")
    by_environment = train(_three_runs(**{**kw, "cuda_graphs": True}))
    assert len(calls) == 6
    assert all(torch.equal(a, b) for a, b in zip(_logged(uncaptured), _logged(by_environment)))
    train(_three_runs(**kw))  # the switch off
    assert len(calls) == 6


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("optimizer, init", [("sgd", "default"), ("adam", "zero")])
def test_cuda_graphs_train_as_the_eager_step_does(optimizer, init):
    """On a GPU: the captured and replayed step (3 eager steps, then the graph) trains as the eager step does, up to
    float rounding, and logs the same steps."""
    kw = _settings(optimizer, init=init, batch=16, iterations=12, log_every=5, device="cuda")
    eager, graphed = (train(_three_runs(**{**kw, "cuda_graphs": g})) for g in (False, True))
    assert eager.steps == graphed.steps == [0, 5, 10, 12]
    for a, b in zip(_logged(eager), _logged(graphed)):
        assert torch.allclose(a, b, rtol=1e-9, atol=1e-12)


def test_the_switch_leaves_the_synthetic_tables_unchanged_on_a_cpu(tmp_path):
    """syn_small, adam and syn_medium write the same CSV files, byte for byte, with the switch on and off on a CPU."""
    from featlearn.pipeline.compute import Context
    from featlearn.scan_snap import experiments

    base = {"seq_len": 16, "batch": 8, "iterations": 4, "log_every": 2, "seeds": 2}
    cfgs = {
        "syn_small": ({**base, "eta_z": 1.0, "ratios": [1, 10], "momentum": 0.9}, ("steps", "composition")),
        "adam": ({**base, "lrs": [0.1, 1.0]}, ("steps", "composition")),
        "syn_medium": ({**base, "num_last": [1], "num_next_per_last": 2, "eta_z": [0.5], "ratios": [2], "init": "default",
                        "momentum": 0.9, "recall_thresholds": {"start": 0.02, "stop": 0.3, "num": 3}}, ("final", "recall")),
    }
    for name, (cfg, outputs) in cfgs.items():
        written = []
        for graphs in (False, True):
            out = {k: str(tmp_path / f"{name}_{k}_{graphs}.csv") for k in outputs}
            getattr(experiments, name)({**cfg, "cuda_graphs": graphs}, {}, out, Context(device="cpu"))
            written.append([open(out[k], "rb").read() for k in outputs])
        assert written[0] == written[1], name


# ------------------------------------------------------------------------------------------ metrics
def test_entropy_and_mass_on_hand_made_compositions():
    P = SEP.probabilities().unsqueeze(0)
    assert float(metrics.distinct_entropy(P, SEP)[0]) == pytest.approx(2.1512, abs=1e-4)  # at zero init
    assert float(metrics.common_mass(P)[0]) == pytest.approx(10 / 15.5)
    uniform = torch.zeros(1, 2, SEP.M, dtype=torch.float64)
    uniform[0, 0, 10:20] = 0.1
    uniform[0, 1, 20:30] = 0.1
    assert float(metrics.distinct_entropy(uniform, SEP)[0]) == pytest.approx(math.log(10))
    one_hot = torch.zeros(1, 2, SEP.M, dtype=torch.float64)
    one_hot[0, 0, 15] = one_hot[0, 1, 25] = 1.0
    assert float(metrics.distinct_entropy(one_hot, SEP)[0]) == 0.0
    # recall: uniform weight 0.1 is above 0.05 and not above 0.1 or 0.2; one-hot has 1 of 10 above 0.5
    th = torch.tensor([0.05, 0.1, 0.5])
    assert metrics.recall(uniform, SEP, th)[0].tolist() == pytest.approx([1.0, 0.0, 0.0])
    assert metrics.recall(one_hot, SEP, th)[0].tolist() == pytest.approx([0.1, 0.1, 0.1])
    # the threshold is on the attention weight (App. G), not on the share among the distinct tokens: with 90% of
    # the mass on common tokens each distinct token has weight 0.01 (share 0.1), below a 0.05 threshold
    mostly_common = torch.zeros(1, 2, SEP.M, dtype=torch.float64)
    mostly_common[0, :, :10] = 0.09
    mostly_common[0, 0, 10:20] = mostly_common[0, 1, 20:30] = 0.01
    assert metrics.recall(mostly_common, SEP, th)[0].tolist() == pytest.approx([0.0, 0.0, 0.0])
    assert metrics.recall(mostly_common, SEP, torch.tensor([0.005]))[0].tolist() == pytest.approx([1.0])


# ------------------------------------------------------------------------------------------ theory
def test_h_continuous_solves_its_equation():
    M = 1000
    t = np.array([0.0, 0.5, 3.0, 100.0, 1e6])
    for eta in (0.5, 2.0, 10.0):
        h = theory.h_continuous(t, eta, M)
        residual = h + np.expm1(M * h / (M - 1)) / M - eta * t
        assert np.all(np.abs(residual) < 1e-8 * np.maximum(1, eta * t))
        assert h[0] == 0 and np.all(np.diff(h) > 0)
    # a value by hand: M = 2, h = 1 solves 1 + (e^2 - 1)/2 = t
    assert theory.h_continuous(np.array([1 + (math.e**2 - 1) / 2]), 1.0, 2)[0] == pytest.approx(1.0, abs=1e-12)


def test_discrete_h_tracks_continuous_within_eta():
    for eta in (0.5, 1.0, 5.0):
        h = theory.h_discrete(eta, 1000, 2000)
        hs = theory.h_continuous(np.arange(2001), eta, 1000)
        assert np.max(np.abs(h - hs)) <= eta
        assert h[1] == pytest.approx(eta * 999 / 1000)  # first step from h = 0


def test_snapping_curve_shape():
    t = theory.time_grid(1e5, 4000)
    B = theory.snapping_curve(t, 1.0, 0.5, 1000, 10)
    assert B[0] == 0 and np.all(np.diff(B) >= 0)
    g = theory.gamma(t, 1.0, 1000, 10)
    i = int(np.argmax(g))
    assert 0 < i < len(t) - 1  # rises, then falls


def _fig7_freeze_bench():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "fig7_freeze.py"
    spec = importlib.util.spec_from_file_location("fig7_freeze", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_the_fig7_freeze_benchmark_measures_planted_maps():
    """``benchmarks/fig7_freeze.py``'s measures on planted causal maps of 3 sequences: one-hot rows that sharpen from
    uniform by step 100 and then stay put freeze (ratio 0, no argmax moves); rows whose peak jumps to another key
    between the last two steps change as much late as early. The probe sequence's ratio is the claims' own
    ``freeze_ratio``."""
    import numpy as np

    from featlearn.scan_snap.figures import freeze_ratio

    bench = _fig7_freeze_bench()
    T = 6
    uniform = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
    first = np.eye(T)[[0] * T]  # every row on key 0
    last = np.eye(T)[list(range(T))]  # every row on its own position
    frozen = {0: np.stack([uniform] * 3), 100: np.stack([first] * 3), 200: np.stack([first] * 3)}
    moving = {0: np.stack([uniform] * 3), 100: np.stack([first] * 3), 200: np.stack([first, last, first])}
    steps = [0, 100, 200]
    assert bench.freeze_ratios(frozen, steps, 0)["all"] == 0.0
    assert bench.freeze_ratios(frozen, steps, 0)["share_below_0.25"] == 1.0
    assert bench.changes(frozen, 0)[1]["argmax_moved"] == 0.0 and bench.changes(frozen, 0)[1]["row_max"] == 1.0
    r = bench.freeze_ratios(moving, steps, 1)
    assert r["probe"] == freeze_ratio({s: m[1] for s, m in moving.items()}, steps) > 1.0
    assert r["share_below_0.25"] == 2 / 3 and r["sequences"] == 3
    late = bench.changes(moving, 1)[1]
    assert late["argmax_moved"] == 5 / 15  # sequence 1's rows 1-5 moved, of 3 x 5 rows
    assert late["probe_change"] > late["all_change"] > 0
