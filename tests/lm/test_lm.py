"""Shared transformer LM: causality, attention entropy, batching, and resume after SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pandas as pd
import pytest
import torch

from featlearn.lm.attention import attention_entropy, uniform_causal_entropy
from featlearn.lm.data import batchify, get_batch, num_batches
from featlearn.lm.model import LMConfig, TransformerLM
from featlearn.lm.train import LMRun, train_lm


def test_forward_shapes_and_causality():
    torch.manual_seed(0)
    model = TransformerLM(LMConfig(vocab=50, d_model=16, d_ff=16, n_head=2, n_layer=2, dropout=0.0)).eval()
    x = torch.randint(50, (3, 7))
    logits, maps = model(x)
    assert logits.shape == (3, 7, 50) and len(maps) == 2 and maps[0].shape == (3, 2, 7, 7)
    assert torch.all(maps[0].triu(1) == 0)
    assert torch.allclose(maps[1].sum(-1), torch.ones(3, 2, 7))
    x2 = x.clone()
    x2[:, -1] = (x2[:, -1] + 1) % 50  # changing the last token changes nothing before it
    logits2, _ = model(x2)
    assert torch.allclose(logits[:, :-1], logits2[:, :-1], atol=1e-6)
    assert not torch.allclose(logits[:, -1], logits2[:, -1])


def test_tutorial_initialisation():
    model = TransformerLM(LMConfig(vocab=1000, d_model=200, d_ff=200, n_head=1, n_layer=1, dropout=0.2))
    assert model.embedding.weight.abs().max() <= 0.1 and model.decoder.weight.abs().max() <= 0.1
    assert torch.all(model.decoder.bias == 0)
    assert len(model.ffn_parameters()) == 4  # linear1/linear2 weights and biases of the one layer


def test_attention_entropy():
    assert uniform_causal_entropy(35) == pytest.approx(2.632, abs=5e-4)  # JoMA's bound at bptt 35
    T = 35
    uniform = torch.tril(torch.ones(T, T)) / torch.arange(1, T + 1).unsqueeze(1)
    assert attention_entropy(uniform).mean().item() == pytest.approx(uniform_causal_entropy(T), abs=1e-5)
    one_hot = torch.eye(T)
    assert attention_entropy(one_hot).abs().max().item() < 1e-6


def test_attention_entropy_never_exceeds_the_causal_bound():
    """JoMA's Fig. 6 bound holds by definition: row i attends over i positions, so its entropy is <= ln i."""
    T = 35
    logits = torch.randn(200, T, T, generator=torch.Generator().manual_seed(0)) * 3
    attn = logits.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf")).softmax(-1)
    assert attention_entropy(attn).mean(dim=-1).max().item() <= uniform_causal_entropy(T) + 1e-6


def test_batching_follows_the_word_language_model_layout():
    ids = torch.arange(103)
    cols = batchify(ids, 4)  # 25 rows, 4 columns; the last 3 tokens are dropped
    assert cols.shape == (25, 4) and cols[:, 1].tolist() == list(range(25, 50))
    assert num_batches(cols, 5) == 4
    x, y = get_batch(cols, 1, 5)
    assert x.shape == (4, 5) and x[0].tolist() == [5, 6, 7, 8, 9] and y[0].tolist() == [6, 7, 8, 9, 10]


def _tiny_data():
    g = torch.Generator().manual_seed(0)
    # a learnable stream: mostly a fixed cycle, with noise
    base = torch.arange(6000) % 23
    noise = torch.randint(40, (6000,), generator=g)
    mask = torch.rand(6000, generator=g) < 0.2
    stream = torch.where(mask, noise, base)
    return stream[:5000], stream[5000:]


TINY = dict(d_model=16, d_ff=16, n_head=1, n_layer=2, dropout=0.1, optimizer="sgd", lr=1.0, clip=0.5, batch_size=4, bptt=8,
            log_every=10, val_windows=3, eval_batch_size=2, seed=3)


def test_training_lowers_the_loss(tmp_path):
    tr, va = _tiny_data()
    out = train_lm(LMRun(**TINY, iterations=60, checkpoint_every=1000), tr, va, 40, tmp_path / "w")
    val = out["log"].query("metric == 'val_loss'")["value"].to_numpy()
    assert val[-1] < val[0] - 0.5
    assert set(out["maps"]["layer"]) == {0, 1} and len(out["maps"]) == 7 * 2 * 8 * 8  # 7 logged steps
    assert not (tmp_path / "w" / "resume.pt").exists()  # removed once finished
    rank = out["log"].query("metric == 'stable_rank'")
    assert set(rank["layer"]) == {0, 1} and len(rank) == 7 * 2
    assert ((rank["value"] >= 1) & (rank["value"] <= 16)).all()  # 1 <= stable rank <= min(n, m)


@pytest.mark.parametrize("kept_by", ["steps", "time"])
def test_resume_after_sigkill_equals_uninterrupted_run(tmp_path, kept_by):
    """Killed with SIGKILL and rerun, the tables equal an uninterrupted run's: from a checkpoint of the
    checkpoint_every grid, or (kept_by time: featlearn.keptwork.CHECKPOINT_SECONDS set to 0, so that every step is
    kept by time and none by the grid) from whatever step it was killed after."""
    tr, va = _tiny_data()
    torch.save(tr, tmp_path / "train.pt")
    torch.save(va, tmp_path / "valid.pt")
    if kept_by == "steps":
        settings, seconds = {**TINY, "iterations": 400, "checkpoint_every": 50}, "None"
    else:
        settings, seconds = {**TINY, "iterations": 150, "checkpoint_every": 1000}, "0.0"
    script = textwrap.dedent(
        f"""
        import torch, sys
        import featlearn.training
        if {seconds} is not None:
            featlearn.training.CHECKPOINT_SECONDS = {seconds}
        from featlearn.io import write_csv
        from featlearn.lm.train import LMRun, train_lm
        out = train_lm(LMRun(**{settings!r}), torch.load({str(tmp_path / 'train.pt')!r}),"""
        f""" torch.load({str(tmp_path / 'valid.pt')!r}),
                       40, sys.argv[1])
        write_csv(out["log"], sys.argv[2])
        """
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    work = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-c", script, str(work), str(tmp_path / "resumed.csv")], env=env,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not (work / "resume.pt").exists():
        assert proc.poll() is None, "training ended before its first checkpoint"
        assert time.time() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (tmp_path / "resumed.csv").exists()
    state = torch.load(work / "resume.pt", weights_only=True)
    assert 0 < state["step"] < settings["iterations"]
    if kept_by == "steps":
        assert state["step"] % settings["checkpoint_every"] == 0
    subprocess.run([sys.executable, "-c", script, str(work), str(tmp_path / "resumed.csv")], env=env, check=True,
                   stderr=subprocess.DEVNULL)
    subprocess.run([sys.executable, "-c", script, str(tmp_path / "clean"), str(tmp_path / "clean.csv")], env=env, check=True,
                   stderr=subprocess.DEVNULL)
    resumed, clean = pd.read_csv(tmp_path / "resumed.csv"), pd.read_csv(tmp_path / "clean.csv")
    pd.testing.assert_frame_equal(resumed, clean)


def test_resume_discards_a_checkpoint_of_other_settings(tmp_path):
    tr, va = _tiny_data()
    run = LMRun(**TINY, iterations=20, checkpoint_every=10)
    work = tmp_path / "w"
    work.mkdir()
    torch.save({"run": {"other": 1}, "step": 10}, work / "resume.pt")
    discarded = train_lm(run, tr, va, 40, work)["log"]
    clean = train_lm(run, tr, va, 40, tmp_path / "clean")["log"]
    pd.testing.assert_frame_equal(discarded, clean)


def test_epoch_budget_and_whole_validation_split(tmp_path):
    from featlearn.lm.train import run_length

    tr, va = _tiny_data()
    per_epoch = num_batches(batchify(tr, TINY["batch_size"]), TINY["bptt"])  # 1,250 rows -> 156 windows of 8
    assert per_epoch == 156
    assert run_length(7, None, per_epoch) == 7
    assert run_length(7, 2.5, per_epoch) == 390  # epochs win over iterations
    with pytest.raises(ValueError, match="positive"):
        run_length(7, 0, per_epoch)
    settings = {**TINY, "log_every": 39, "checkpoint_every": 1000}
    half = train_lm(LMRun(**{**settings, "epochs": 0.5, "iterations": 5}), tr, va, 40, tmp_path / "a")["log"]
    assert half["step"].max() == 78
    # val_windows None reads every validation window: the same loss as naming all of them, not as naming 3
    n_valid = num_batches(batchify(va, TINY["eval_batch_size"]), TINY["bptt"])
    loss = {}
    for name, windows in (("all", None), ("named", n_valid), ("three", 3)):
        log = train_lm(LMRun(**{**settings, "iterations": 2, "val_windows": windows}), tr, va, 40, tmp_path / name)["log"]
        loss[name] = log.query("metric == 'val_loss' and step == 2")["value"].item()
    assert loss["all"] == loss["named"] and loss["all"] != loss["three"]


def test_optimizer_reset_at_each_epoch(tmp_path):
    tr, va = _tiny_data()
    settings = {**TINY, "optimizer": "adam", "lr": 1e-3, "epochs": 2, "iterations": 1, "log_every": 52, "checkpoint_every": 1000}
    kept = (train_lm(LMRun(**settings), tr, va, 40, tmp_path / "kept")["log"]
            .query("metric == 'val_loss'").set_index("step")["value"])
    reset = train_lm(LMRun(**settings, reset_optimizer_each_epoch=True), tr, va, 40, tmp_path / "reset")["log"]
    reset = reset.query("metric == 'val_loss'").set_index("step")["value"]
    assert list(kept.index) == [0, 52, 104, 156, 208, 260, 312]
    assert kept.loc[:156].equals(reset.loc[:156])  # the first epoch is the same run
    assert (kept.loc[208:] != reset.loc[208:]).all()  # a fresh Adam from step 157 on
