"""CUDA graphs of the tutorial LMs' training step (issue 34): on a CPU the switch changes nothing; the graph-safe step
(fused capturable Adam, the optimiser reset in place, the loss read between steps) run uncaptured trains as the eager
step does, and resumes as it does; capture and replay only where a CUDA device is present."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from featlearn.lm import train as LT
from featlearn.lm.train import LMRun, train_lm

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _tiny_data():
    g = torch.Generator().manual_seed(0)
    base = torch.arange(3000) % 23  # a learnable stream: mostly a fixed cycle, with noise
    noise = torch.randint(40, (3000,), generator=g)
    stream = torch.where(torch.rand(3000, generator=g) < 0.2, noise, base)
    return stream[:2500], stream[2500:]


TINY = dict(d_model=16, d_ff=16, n_head=2, n_layer=2, dropout=0.1, clip=0.5, batch_size=4, bptt=8, log_every=5, val_windows=3,
            eval_batch_size=2, seed=3, checkpoint_every=1000)
SGD = dict(optimizer="sgd", lr=1.0, ffn_lr=2.0)
ADAM = dict(optimizer="adam", lr=3e-3)


def _train(tmp_path, name, device="cpu", capture=True, **kw) -> dict:
    tr, va = _tiny_data()
    return train_lm(LMRun(**{**TINY, "iterations": 12, **kw}), tr, va, 40, tmp_path / name, device=device, capture=capture)


@pytest.mark.parametrize("opt", [SGD, ADAM])
def test_the_cuda_graphs_switch_leaves_cpu_training_unchanged(tmp_path, opt):
    """On a CPU the switch does nothing: the eager step runs and the tables are the same, bit for bit."""
    eager = _train(tmp_path, "eager", **opt)
    switched = _train(tmp_path, "switched", **opt, cuda_graphs=True)
    pd.testing.assert_frame_equal(eager["log"], switched["log"], check_exact=True)
    pd.testing.assert_frame_equal(eager["maps"], switched["maps"], check_exact=True)


def test_the_graph_safe_step_is_the_eager_step_with_sgd(tmp_path):
    """With SGD the step a CUDA graph holds is the eager step itself (its loss copied to a buffer read between steps):
    run uncaptured on the CPU, the same tables bit for bit."""
    eager = _train(tmp_path, "eager", **SGD)
    graph_safe = _train(tmp_path, "graph_safe", capture=False, **SGD, cuda_graphs=True)
    pd.testing.assert_frame_equal(eager["log"], graph_safe["log"], check_exact=True)
    pd.testing.assert_frame_equal(eager["maps"], graph_safe["maps"], check_exact=True)


def test_the_environment_runs_the_graph_safe_step_uncaptured_on_a_cpu(tmp_path, monkeypatch, capsys):
    """With the diagnostic (featlearn.cudagraphs.UNCAPTURED_ENV) a switched-on LM trains with the graph-safe step on the
    CPU (Adam: fused and capturable): what ``capture=False`` gives, bit for bit."""
    from featlearn.cudagraphs import UNCAPTURED_ENV

    uncaptured = _train(tmp_path, "uncaptured", capture=False, **ADAM, cuda_graphs=True)
    monkeypatch.setenv(UNCAPTURED_ENV, "1")
    by_environment = _train(tmp_path, "by_environment", **ADAM, cuda_graphs=True)
    assert f"{UNCAPTURED_ENV}=1: the graph-safe step runs uncaptured" in capsys.readouterr().err
    pd.testing.assert_frame_equal(uncaptured["log"], by_environment["log"], check_exact=True)
    pd.testing.assert_frame_equal(uncaptured["maps"], by_environment["maps"], check_exact=True)


def _close(a: dict, b: dict, rtol: float, atol: float) -> None:
    pd.testing.assert_frame_equal(a["log"], b["log"], check_exact=False, rtol=rtol, atol=atol)
    # (maps logged before a resume's checkpoint come back from it as float64)
    pd.testing.assert_frame_equal(a["maps"], b["maps"], check_exact=False, rtol=rtol, atol=atol, check_dtype=False)


@pytest.mark.parametrize("reset", [False, True])
def test_the_graph_safe_step_is_the_eager_step_with_adam(tmp_path, reset):
    """With Adam the graph-safe step uses PyTorch's fused, capturable Adam (step counts on the device), and an epoch
    boundary with ``reset_optimizer_each_epoch`` zeroes its state in place: run uncaptured on the CPU, the eager
    step's tables up to float rounding, over 3 epochs of 78 steps."""
    kw = dict(**ADAM, epochs=3, log_every=39, reset_optimizer_each_epoch=reset)
    eager = _train(tmp_path, "eager", **kw)
    graph_safe = _train(tmp_path, "graph_safe", capture=False, **kw, cuda_graphs=True)
    assert list(eager["log"].query("metric == 'val_loss'")["step"]) == [0, 39, 78, 117, 156, 195, 234]
    _close(eager, graph_safe, rtol=1e-4, atol=1e-6)
    if reset:  # the in-place reset acts as the eager one does: the runs part at the first epoch boundary
        kept = _train(tmp_path, "kept", capture=False, **{**kw, "reset_optimizer_each_epoch": False}, cuda_graphs=True)
        val = {k: r["log"].query("metric == 'val_loss'").set_index("step")["value"] for k, r in (("kept", kept),
                                                                                                   ("reset", graph_safe))}
        assert val["kept"].loc[:78].equals(val["reset"].loc[:78]) and (val["kept"].loc[117:] != val["reset"].loc[117:]).all()


def test_zeroing_an_optimiser_in_place_is_a_fresh_optimiser():
    torch.manual_seed(0)
    net = torch.nn.Linear(3, 2)
    opt = LT.make_optimizer(net, "adam", 1e-2, graph_safe=True)
    for _ in range(3):
        net(torch.randn(4, 3)).square().sum().backward()
        opt.step()
    tensors = {id(v) for s in opt.state.values() for v in s.values()}
    LT.zero_optimizer_state(opt)
    fresh = LT.make_optimizer(torch.nn.Linear(3, 2), "adam", 1e-2, graph_safe=True)
    fresh.param_groups[0]["params"][0].grad = torch.zeros(2, 3)
    fresh.param_groups[0]["params"][1].grad = torch.zeros(2)
    fresh.step()  # its state made as at a first step: zeros, then advanced once
    assert {id(v) for s in opt.state.values() for v in s.values()} == tensors  # the same tensors, zeroed
    assert all(float(v.abs().sum()) == 0 for s in opt.state.values() for v in s.values())
    assert all(float(s["step"]) == 1 for s in fresh.state.values())


def _killed_after(steps: int, monkeypatch, train) -> None:
    """Run ``train`` with the training batches cut off after ``steps`` (the job killed there), then restore them."""
    batches = {"n": 0}
    get_batch = LT.get_batch

    def dies(columns, i, bptt):
        batches["n"] += columns.shape[1] == TINY["batch_size"]  # training windows (evaluations read 2 streams)
        if batches["n"] > steps:
            raise KeyboardInterrupt("killed")
        return get_batch(columns, i, bptt)

    monkeypatch.setattr(LT, "get_batch", dies)
    with pytest.raises(KeyboardInterrupt):
        train()
    monkeypatch.setattr(LT, "get_batch", get_batch)


@pytest.mark.parametrize("opt", [SGD, ADAM])
def test_a_resumed_graph_safe_run_equals_an_uninterrupted_one(tmp_path, monkeypatch, opt):
    """The graph-safe step resumes from a checkpoint as the eager one does (Adam's step counts back on the parameters'
    device): a run stopped after step 17, rerun from its checkpoint of step 15, gives the uninterrupted tables."""
    kw = dict(**opt, iterations=24, checkpoint_every=5, cuda_graphs=True)
    clean = _train(tmp_path, "clean", capture=False, **kw)
    _killed_after(17, monkeypatch, lambda: _train(tmp_path, "killed", capture=False, **kw))
    assert torch.load(tmp_path / "killed" / "resume.pt", weights_only=True)["step"] == 15
    resumed = _train(tmp_path, "killed", capture=False, **kw)
    pd.testing.assert_frame_equal(clean["log"], resumed["log"], check_exact=True)
    # (the maps logged before the checkpoint come back from it as float64: the same values, and the same CSV text)
    pd.testing.assert_frame_equal(clean["maps"], resumed["maps"], check_exact=True, check_dtype=False)


@needs_cuda
@pytest.mark.parametrize("opt", [SGD, ADAM])
def test_cuda_graphs_train_as_the_eager_step_does(tmp_path, opt):
    """On a GPU: the captured and replayed step (3 eager steps, then the graph) trains as the eager step does, up to
    float rounding (dropout draws from the same generator offsets), and logs the same steps."""
    kw = dict(**opt, iterations=40, log_every=10)
    eager = _train(tmp_path, "eager", "cuda", **kw)
    graphed = _train(tmp_path, "graphed", "cuda", **kw, cuda_graphs=True)
    assert list(graphed["log"].query("metric == 'val_loss'")["step"]) == [0, 10, 20, 30, 40]
    _close(eager, graphed, rtol=1e-4, atol=1e-5)


@needs_cuda
@pytest.mark.parametrize("opt", [SGD, ADAM])
def test_a_resumed_captured_run_equals_an_uninterrupted_one(tmp_path, monkeypatch, opt):
    """On a GPU: a captured run stopped after step 17 and resumed from its checkpoint of step 15 (3 eager steps, a new
    capture) gives the tables of the uninterrupted captured run, up to float rounding."""
    kw = dict(**opt, iterations=30, checkpoint_every=5, log_every=5, cuda_graphs=True)
    clean = _train(tmp_path, "clean", "cuda", **kw)
    _killed_after(17, monkeypatch, lambda: _train(tmp_path, "killed", "cuda", **kw))
    resumed = _train(tmp_path, "killed", "cuda", **kw)
    _close(clean, resumed, rtol=1e-5, atol=1e-6)


def test_the_lm_jobs_carry_the_switch_only_when_on(repo, tmp_path):
    """The WikiText runs of Scan and Snap and JoMA and the features word LM get ``cuda_graphs`` in their settings only
    when their section turns it on, so the estimate's probe shape (and cache key) of an eager run is unchanged; the
    tutorial LM's probe takes it (on a CPU: the eager step)."""
    from featlearn.features.registry import lm_word_settings
    from featlearn.joma import cost as joma_cost
    from featlearn.joma.registry import wikitext_settings
    from featlearn.lm.bench import tutorial_probe
    from featlearn.pipeline import estimate as E
    from featlearn.scan_snap.registry import lm_runs

    config = E.merged_config([str(repo / "config" / "smoke.yaml")], repo / "config")
    ss, joma, word = config["scan_snap"], config["joma"]["wikitext"], config["features"]["lm"]
    assert not (ss["wikitext"]["cuda_graphs"] or joma["cuda_graphs"] or word["word"]["cuda_graphs"])
    on = {"cuda_graphs": True}
    runs, runs_on = lm_runs(ss), lm_runs({**ss, "wikitext": {**ss["wikitext"], **on}})
    assert all("cuda_graphs" not in s for _, s in runs.values())
    assert all(runs_on[k][1] == {**runs[k][1], **on} for k in runs)
    assert "cuda_graphs" not in wikitext_settings(joma) and wikitext_settings({**joma, **on})["cuda_graphs"] is True
    assert "cuda_graphs" not in lm_word_settings(word, "ptb")
    assert lm_word_settings({**word, "word": {**word["word"], **on}}, "ptb")["cuda_graphs"] is True

    settings = {**wikitext_settings(joma), "dataset": "wikitext2", "n_layer": 1, "lr": 1e-4, "seed": 1}
    shapes = {}
    for graphs in (False, True):
        node = E.Node("joma_wikitext", "joma_wikitext", "x", {"dataset": "wikitext2"},
                      {**settings, **(on if graphs else {})}, True, 1, "none.tsv")
        shapes[graphs] = joma_cost.wikitext_cost(node, results=str(tmp_path)).parts[0].probe.shape
    assert shapes[True] == {**shapes[False], "settings": {**shapes[False]["settings"], **on}}
    small = {**shapes[True], "vocab": 50, "settings": {**shapes[True]["settings"], "d_model": 8, "d_ff": 8, "bptt": 4}}
    assert tutorial_probe(small, 2, "cpu", steps=2, warmup=1, optimizer="adam")["seconds_per_step"] > 0
