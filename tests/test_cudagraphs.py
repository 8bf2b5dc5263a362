"""featlearn.cudagraphs (issue 34): host-sampled inputs staged on the device, and the capture and replay of a
training step (the replay only where a CUDA device is present)."""

from __future__ import annotations

import pytest
import torch

from featlearn.cudagraphs import UNCAPTURED_ENV, GraphedSteps, StagedBatches, captured, graph_safe_step

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _sampler(seed: int):
    gen = torch.Generator().manual_seed(seed)
    return lambda: (torch.randint(10, (3,), generator=gen), torch.rand(3, 2, generator=gen, dtype=torch.float64))


def test_staged_batches_draw_what_the_loop_draws_step_by_step():
    step_by_step = _sampler(0)
    expected = [step_by_step() for _ in range(7)]
    per_step = 3 * 8 + 3 * 2 * 8
    staged = StagedBatches(_sampler(0), 7, "cpu", max_bytes=3 * per_step)  # chunks of 3, 3 and 1 steps
    for step in range(7):
        got = staged[step]
        assert all(torch.equal(a, b) for a, b in zip(got, expected[step])), step
        assert staged.start == 3 * (step // 3)
    assert staged.drawn == 7


def test_staged_batches_are_read_in_order():
    staged = StagedBatches(_sampler(1), 10, "cpu", max_bytes=1)  # one step at a time
    staged[0]
    staged[0]  # the staged step again
    with pytest.raises(IndexError, match="in order"):
        staged[2]  # step 1 is next
    staged[1]
    with pytest.raises(IndexError, match="no longer staged"):
        staged[0]


def test_capture_only_with_the_switch_on_a_cuda_device():
    assert captured(True, "cuda") and captured(True, torch.device("cuda", 0))
    assert not captured(False, "cuda") and not captured(True, "cpu") and not captured(True, torch.device("cpu"))


def test_the_graph_safe_step_runs_on_a_gpu_when_asked_uncaptured_or_by_the_environment(monkeypatch, capsys):
    """Without the diagnostic: the graph-safe step on a CUDA device (captured) or where the caller asks for it
    uncaptured; with it, on any device and never captured, and the job's log says so. Off, the switch decides."""
    monkeypatch.delenv(UNCAPTURED_ENV, raising=False)
    assert graph_safe_step(True, "cuda") and graph_safe_step(True, "cpu", capture=False)
    assert not graph_safe_step(True, "cpu") and not graph_safe_step(False, "cuda") and not graph_safe_step(False, "cpu", False)
    assert capsys.readouterr().err == ""
    monkeypatch.setenv(UNCAPTURED_ENV, "1")
    assert graph_safe_step(True, "cpu") and graph_safe_step(True, torch.device("cuda", 0))
    assert not graph_safe_step(False, "cpu")  # a trainer whose switch is off keeps its eager step
    assert not captured(True, "cuda") and not captured(True, "cpu")
    err = capsys.readouterr().err
    assert err.count(f"{UNCAPTURED_ENV}=1: the graph-safe step runs uncaptured") == 2 and "on cpu" in err
    monkeypatch.setenv(UNCAPTURED_ENV, "0")
    assert not graph_safe_step(True, "cpu") and captured(True, "cuda")
    monkeypatch.setenv(UNCAPTURED_ENV, "yes")
    with pytest.raises(ValueError, match=UNCAPTURED_ENV):
        graph_safe_step(True, "cpu")


@needs_cuda
def test_graphed_steps_replay_the_step_on_each_call_s_inputs():
    """Three eager steps and a capture per input shape, then replays that read each call's inputs; None stays None."""
    total = torch.zeros(3, device="cuda")
    calls = []

    def step(x, nothing):
        assert nothing is None
        calls.append(x.shape)
        total.add_(2 * x[:3])

    graphed = GraphedSteps(step)
    for i in range(8):
        graphed(torch.full((3,), float(i), device="cuda"), None)
    for i in range(5):
        graphed(torch.full((4,), 100.0 * i, device="cuda"), None)  # a new shape: its own graph
    torch.cuda.synchronize()
    expected = 2 * (sum(range(8)) + 100.0 * sum(range(5)))
    assert torch.equal(total.cpu(), torch.full((3,), expected))
    assert len(graphed.graphs) == 2
    assert len(calls) == 2 * (GraphedSteps.WARMUP + 1)  # Python runs the step only to warm up and to capture
