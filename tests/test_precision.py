"""The precision setting (config key ``precision``): fp32 by default, tf32 and bf16 on request, applied once per
compute job to the trainings only, written in the job's log and the run record."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from featlearn import precision

SRC = Path(__file__).resolve().parents[1] / "src"


@pytest.fixture(autouse=True)
def _restore():
    before = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
    yield
    torch.set_float32_matmul_precision(before[0])
    torch.backends.cudnn.allow_tf32 = before[1]


def test_each_precision_sets_the_matmul_arithmetic():
    a = torch.randn(8, 8)
    with precision.apply("fp32", "cpu"):
        assert torch.get_float32_matmul_precision() == "highest" and not torch.backends.cuda.matmul.allow_tf32
        assert (a @ a).dtype == torch.float32
    with precision.apply("tf32", "cpu"):
        assert torch.get_float32_matmul_precision() == "high" and torch.backends.cudnn.allow_tf32
        assert (a @ a).dtype == torch.float32  # tensors stay float32
    with precision.apply("bf16", "cpu"):
        assert (a @ a).dtype == torch.bfloat16  # autocast: the product in bfloat16
        assert (a.double() @ a.double()).dtype == torch.float64  # float64 runs are left alone
    assert (a @ a).dtype == torch.float32  # outside the job's context


def test_an_unknown_precision_is_refused():
    with pytest.raises(ValueError, match="fp32, tf32, bf16"):
        precision.apply("fp16", "cpu")


JOB = '''
import json, torch
def job(settings, inputs, outputs, ctx):
    a = torch.ones(4, 4)
    with open(outputs["out"], "w") as f:
        json.dump({"dtype": str((a @ a).dtype), "matmul": torch.get_float32_matmul_precision(), "ctx": ctx.precision}, f)
'''


@pytest.mark.parametrize("name, dtype", [("fp32", "torch.float32"), ("bf16", "torch.bfloat16")])
def test_a_compute_job_runs_in_its_precision_and_says_so(tmp_path, name, dtype):
    (tmp_path / "prec_job.py").write_text(JOB)
    out = tmp_path / "out.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FEATLEARN_")}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), str(tmp_path)])
    res = subprocess.run([sys.executable, "-m", "featlearn", "compute", "--run", "prec_job:job", "--settings", "{}",
                          "--outputs", json.dumps({"out": str(out)}), "--threads", "1", "--device", "cpu",
                          "--precision", name], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    got = json.loads(out.read_text())
    assert got["dtype"] == dtype and got["ctx"] == name
    first = res.stdout.splitlines()[0]
    assert re.match(rf"featlearn: device cpu \(asked: cpu\); torch threads 1; precision {name}", first), first


def test_the_run_record_names_the_precision(tmp_path):
    from featlearn.pipeline.runrecord import provenance_line, run_record

    rec = run_record("smoke", "c" * 64, "d" * 12, "cpu", repo=tmp_path, precision="bf16")
    assert rec["precision"] == "bf16"
    assert "precision bf16" in provenance_line(rec)


def test_full_precision_computes_in_float32_inside_a_bf16_job():
    a = torch.randn(8, 8)
    with precision.apply("bf16", "cpu"):
        assert (a @ a).dtype == torch.bfloat16
        with precision.full_precision("cpu"):
            assert (a @ a).dtype == torch.float32
            assert torch.equal(a @ a, torch.mm(a, a))  # the float32 product itself
        with precision.full_precision(torch.device("cpu")):  # a torch.device works as well as its name
            assert (a @ a).dtype == torch.float32
        assert (a @ a).dtype == torch.bfloat16  # back to the job's arithmetic
    with precision.apply("fp32", "cpu"), precision.full_precision("cpu"):
        assert (a @ a).dtype == torch.float32  # nothing changes in a float32 job


def test_the_training_loop_steps_in_the_job_precision_and_evaluates_in_float32(tmp_path):
    """A bf16 job trains its LMs under bf16 autocast, but every evaluation the loop calls (validation loss, attention
    entropy and maps) computes in float32, so the measurements read the trained model without bf16 rounding."""
    from featlearn.training import resumable_training

    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(8, 4)
    seen = {"step": set(), "record": set()}

    def step(i):
        out = model(x)
        seen["step"].add(out.dtype)
        loss = out.float().pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    def record(i, train_loss):
        seen["record"].add(model(x).dtype)

    with precision.apply("bf16", "cpu"):
        resumable_training(model, opt, total=4, step=step, record=record, eval_every=2, checkpoint_every=100,
                           work_dir=tmp_path, settings={}, device="cpu", save_log=dict, load_log=lambda logged: None)
    assert seen == {"step": {torch.bfloat16}, "record": {torch.float32}}
    assert model.weight.dtype == torch.float32  # weights stay float32


def test_a_bf16_job_computes_with_the_weights_as_they_are_after_each_step():
    """The job's one autocast context spans its optimiser steps: a forward pass after a step must use the updated
    weights, not a bfloat16 copy cached at the first pass (autocast's weight cache would keep that copy until the
    context exits, and training would follow gradients taken at stale weights)."""
    lin = torch.nn.Linear(4, 4)
    x = torch.ones(2, 4)
    with precision.apply("bf16", "cpu"):
        before = lin(x)
        with torch.no_grad():
            lin.weight.add_(1.0)  # what an optimiser step does, in place
        after = lin(x)
        expected = torch.nn.functional.linear(x, lin.weight.detach().clone(), lin.bias.detach().clone())
    assert not torch.equal(before, after)
    assert torch.equal(after, expected)
