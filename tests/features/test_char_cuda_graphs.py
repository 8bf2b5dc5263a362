"""CUDA graphs of the character GPT's step (features Fig. 5, issue 34): on a CPU the switch changes nothing; the
graph-safe step (windows gathered on the device from starts drawn on the host, the learning rate a device tensor set
in place, fused capturable AdamW) run uncaptured trains as the eager step does and resumes as it does; capture and
replay only where a CUDA device is present."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from featlearn.features import lm as L

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

# warm-up over 3 steps and a cosine decay to step 20: the learning rate changes at every step the tests run
TINY = dict(n_layer=1, n_head=2, n_embd=16, block_size=8, dropout=0.1, batch_size=8, warmup=3, lr=1e-2, min_lr=1e-3,
            lr_decay_iters=20, weight_decay=0.1, beta2=0.99, grad_clip=0.5, eval_batches=2, seed=3)
STREAM = torch.tensor([0, 1, 2, 3, 1, 2, 0, 0, 3, 2] * 40)


def _train(tmp_path, name, device="cpu", capture=True, **kw):
    run = L.CharRun(**{**TINY, "iterations": 24, "eval_every": 6, "checkpoint_every": 1000, **kw})
    return L.train_char_gpt(run, STREAM, STREAM[:200], 4, tmp_path / name, device=device, capture=capture)


def _killed_at(step: int, monkeypatch, train) -> None:
    """Run ``train`` with the job killed as step ``step`` begins (its learning rate asked for), then undo the kill."""
    real = L.learning_rate

    def dies(i, run):
        if i == step:
            raise KeyboardInterrupt("killed")
        return real(i, run)

    monkeypatch.setattr(L, "learning_rate", dies)
    with pytest.raises(KeyboardInterrupt):
        train()
    monkeypatch.setattr(L, "learning_rate", real)


def test_the_cuda_graphs_switch_leaves_cpu_training_unchanged(tmp_path, one_thread):
    """On a CPU the switch does nothing: the eager step runs, the same model and log bit for bit."""
    eager_model, eager = _train(tmp_path, "eager")
    switched_model, switched = _train(tmp_path, "switched", cuda_graphs=True)
    pd.testing.assert_frame_equal(eager, switched, check_exact=True)
    for (name, a), b in zip(eager_model.state_dict().items(), switched_model.state_dict().values()):
        assert torch.equal(a, b), name


def test_the_graph_safe_step_trains_as_the_eager_step_does(tmp_path, one_thread):
    """The graph-safe step, run uncaptured on the CPU, follows the eager step up to float rounding (fused AdamW against
    the default one, a float32 learning rate against a Python float) through the warm-up and the cosine decay, with
    dropout on: the same windows, the same dropout draws, the same logged steps."""
    eager_model, eager = _train(tmp_path, "eager")
    graph_model, graph_safe = _train(tmp_path, "graph_safe", capture=False, cuda_graphs=True)
    assert list(graph_safe.query("metric == 'val_loss'")["step"]) == [0, 6, 12, 18, 24]
    pd.testing.assert_frame_equal(eager, graph_safe, check_exact=False, rtol=1e-4, atol=1e-6)
    for (name, a), b in zip(eager_model.state_dict().items(), graph_model.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=name)
    # the check could fail: a graph-safe step that kept its first learning rate trains to other weights
    _, constant = _train(tmp_path, "constant", capture=False, cuda_graphs=True, warmup=0, lr_decay_iters=1, min_lr=1e-2)
    assert not constant.equals(graph_safe)


def test_the_environment_runs_the_graph_safe_step_uncaptured_on_a_cpu(tmp_path, one_thread, monkeypatch, capsys):
    """With the diagnostic (featlearn.cudagraphs.UNCAPTURED_ENV) the switched-on character GPT trains with the
    graph-safe step on the CPU (fused AdamW, its learning rate in a tensor): what ``capture=False`` gives, bit for bit."""
    from featlearn.cudagraphs import UNCAPTURED_ENV

    uncaptured_model, uncaptured = _train(tmp_path, "uncaptured", capture=False, cuda_graphs=True)
    monkeypatch.setenv(UNCAPTURED_ENV, "1")
    env_model, by_environment = _train(tmp_path, "by_environment", cuda_graphs=True)
    assert f"{UNCAPTURED_ENV}=1: the graph-safe step runs uncaptured" in capsys.readouterr().err
    pd.testing.assert_frame_equal(uncaptured, by_environment, check_exact=True)
    for (name, a), b in zip(uncaptured_model.state_dict().items(), env_model.state_dict().values()):
        assert torch.equal(a, b), name


def test_the_learning_rate_tensor_is_shared_and_set_in_place():
    net = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.LayerNorm(2))
    opt = L.char_optimizer(net, 1e-3, 0.1, 0.99, graph_safe=True)
    first = opt.param_groups[0]["lr"]
    assert isinstance(first, torch.Tensor) and all(g["lr"] is first for g in opt.param_groups)
    L.set_learning_rate(opt, 5e-4, graph_safe=True)
    assert all(g["lr"] is first for g in opt.param_groups) and float(first) == pytest.approx(5e-4)
    # a group given a float (an optimiser loaded from an older checkpoint) gets the shared tensor back
    opt.param_groups[1]["lr"] = 1.0
    L.set_learning_rate(opt, 2e-4, graph_safe=True)
    assert all(g["lr"] is first for g in opt.param_groups) and float(first) == pytest.approx(2e-4)
    eager = L.char_optimizer(net, 1e-3, 0.1, 0.99)
    L.set_learning_rate(eager, 5e-4)
    assert all(g["lr"] == 5e-4 for g in eager.param_groups)


def test_a_resumed_graph_safe_run_equals_an_uninterrupted_one(tmp_path, one_thread, monkeypatch):
    """The graph-safe step resumes from a checkpoint as the eager one does (AdamW's step counts and the learning-rate
    tensor back on the parameters' device, the window generator at the eager loop's state): a run killed at step 17,
    rerun from its checkpoint of step 15, gives the uninterrupted run's model and log."""
    kw = dict(capture=False, cuda_graphs=True, checkpoint_every=5)
    clean_model, clean = _train(tmp_path, "clean", **kw)
    _killed_at(17, monkeypatch, lambda: _train(tmp_path, "killed", **kw))
    assert torch.load(tmp_path / "killed" / "resume.pt", weights_only=True)["step"] == 15
    resumed_model, resumed = _train(tmp_path, "killed", **kw)
    pd.testing.assert_frame_equal(clean, resumed, check_exact=True)
    for (name, a), b in zip(clean_model.state_dict().items(), resumed_model.state_dict().values()):
        assert torch.equal(a, b), name


def test_the_char_job_carries_the_switch_only_when_on(repo, tmp_path):
    """The switch is in the job's settings only when on, so the settings and the estimate's probe shape (its cache
    key) of an eager run are unchanged; the probe takes it (on a CPU: the eager step, timed)."""
    from featlearn.features.cost import lm_char_cost, lm_char_probe
    from featlearn.features.registry import lm_char_settings
    from featlearn.pipeline import estimate as E

    config = E.merged_config([str(repo / "config" / "smoke.yaml")], repo / "config")
    lm = config["features"]["lm"]
    assert lm["char"]["cuda_graphs"] is False and "cuda_graphs" not in lm_char_settings(lm)
    on = lm_char_settings({**lm, "char": {**lm["char"], "cuda_graphs": True}})
    assert on == {**lm_char_settings(lm), "cuda_graphs": True}
    shapes = {}
    for graphs, settings in ((False, lm_char_settings(lm)), (True, on)):
        node = E.Node("features_lm_char", "features_lm_char", "x", {}, settings, True, 1, "none.tsv")
        shapes[graphs] = lm_char_cost(node, results=str(tmp_path)).parts[0].probe.shape
    assert shapes[True] == {**shapes[False], "settings": {**shapes[False]["settings"], "cuda_graphs": True}}
    record = lm_char_probe({**shapes[True], "vocab": 5}, 2, "cpu", steps=2, warmup=1)
    assert record["seconds_per_step"] > 0 and record["peak_memory_bytes"] is None


@needs_cuda
def test_cuda_graphs_train_as_the_eager_step_does(tmp_path):
    """On a GPU: the captured and replayed step (3 eager steps, then the graph, its learning rate set before each
    replay) trains as the eager step does, up to float rounding, and logs the same steps."""
    _, eager = _train(tmp_path, "eager", "cuda")
    _, graphed = _train(tmp_path, "graphed", "cuda", cuda_graphs=True)
    assert list(graphed.query("metric == 'val_loss'")["step"]) == [0, 6, 12, 18, 24]
    pd.testing.assert_frame_equal(eager, graphed, check_exact=False, rtol=1e-4, atol=1e-5)


@needs_cuda
def test_a_resumed_captured_run_equals_an_uninterrupted_one(tmp_path, monkeypatch):
    """On a GPU: a captured run killed at step 17 and resumed from its checkpoint of step 15 (3 eager steps, a new
    capture) gives the uninterrupted captured run's log, up to float rounding."""
    kw = dict(cuda_graphs=True, checkpoint_every=5)
    _, clean = _train(tmp_path, "clean", "cuda", **kw)
    _killed_at(17, monkeypatch, lambda: _train(tmp_path, "killed", "cuda", **kw))
    _, resumed = _train(tmp_path, "killed", "cuda", **kw)
    pd.testing.assert_frame_equal(clean, resumed, check_exact=False, rtol=1e-5, atol=1e-6)
