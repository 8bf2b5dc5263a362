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


@pytest.mark.parametrize("native", [False, True])
def test_auto_is_bf16_only_where_the_device_computes_bfloat16_natively(monkeypatch, native):
    """``auto``: bf16 on a CPU with AVX-512 BF16 and on a GPU with native bfloat16, fp32 elsewhere (a CPU that
    emulates bfloat16 matrix products ran a WikiText LM step 14-20x slower in bf16 than in fp32); the job's context is
    that arithmetic's, and the log line names the arithmetic first, then why."""
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: native)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: native or including_emulation)
    want = "bf16" if native else "fp32"
    assert precision.resolve("auto", "cpu") == precision.resolve("auto", "cuda:1") == want
    assert [precision.resolve(p, "cpu") for p in precision.ARITHMETICS] == ["fp32", "tf32", "bf16"]  # asked: kept
    a = torch.randn(4, 4)
    with precision.apply("auto", "cpu"):
        assert (a @ a).dtype == (torch.bfloat16 if native else torch.float32)
    line = precision.describe("auto", "cpu")
    assert line.startswith(precision.describe(want)) and ("has AVX-512 BF16" if native else "has no AVX-512 BF16") in line
    gpu = precision.describe("auto", "cuda")
    assert gpu.endswith("GPU supports bfloat16 natively" if native else "GPU does not support bfloat16 natively")
    with pytest.raises(ValueError, match="fp32, tf32, bf16, auto"):
        precision.resolve("fp8", "cpu")


@pytest.mark.parametrize("native", [False, True])
def test_bf16_asked_by_name_on_a_device_that_emulates_it_is_warned_about(monkeypatch, native):
    """Only ``bf16`` asked by name on a CPU without AVX-512 BF16 gets the warning (which points at auto); a native CPU,
    auto and the float32 arithmetics do not."""
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: native)
    warning = precision.emulated_warning("bf16", "cpu")
    assert (warning is None) == native
    if not native:
        assert "has no AVX-512 BF16" in warning and "`precision: auto` computes in fp32" in warning
    assert all(precision.emulated_warning(p, "cpu") is None for p in ("auto", "fp32", "tf32"))


def test_a_cpu_without_the_private_check_counts_as_not_native(monkeypatch):
    """A torch whose ``torch.cpu`` lacks the AVX-512 BF16 check: auto is fp32 (the arithmetic every result was
    checked in), not an error."""
    monkeypatch.delattr(torch.cpu, "_is_avx512_bf16_supported")
    assert precision.native_bf16("cpu") == (False, "this CPU has no AVX-512 BF16")
    assert precision.resolve("auto", "cpu") == "fp32"


JOB = '''
import json, torch
def job(settings, inputs, outputs, ctx):
    a = torch.ones(4, 4)
    with open(outputs["out"], "w") as f:
        json.dump({"dtype": str((a @ a).dtype), "matmul": torch.get_float32_matmul_precision(), "ctx": ctx.precision}, f)
'''


def _run_job(tmp_path, name: str) -> tuple[dict, subprocess.CompletedProcess]:
    """``python -m featlearn compute`` of JOB on the CPU in precision ``name``: what the job saw, and the process."""
    (tmp_path / "prec_job.py").write_text(JOB)
    out = tmp_path / "out.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FEATLEARN_")}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), str(tmp_path)])
    res = subprocess.run([sys.executable, "-m", "featlearn", "compute", "--run", "prec_job:job", "--settings", "{}",
                          "--outputs", json.dumps({"out": str(out)}), "--threads", "1", "--device", "cpu",
                          "--precision", name], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    got = json.loads(out.read_text())
    return got, res


@pytest.mark.parametrize("name, dtype", [("fp32", "torch.float32"), ("bf16", "torch.bfloat16")])
def test_a_compute_job_runs_in_its_precision_and_says_so(tmp_path, name, dtype):
    got, res = _run_job(tmp_path, name)
    assert got["dtype"] == dtype and got["ctx"] == name
    first = res.stdout.splitlines()[0]
    assert re.match(rf"featlearn: device cpu \(asked: cpu\); torch threads 1; precision {name}", first), first
    emulated = name == "bf16" and not precision.native_bf16("cpu")[0]
    assert ("featlearn: warning: bf16 asked" in res.stdout) == emulated, res.stdout


def test_an_auto_job_computes_in_and_logs_what_auto_resolves_to_on_its_device(tmp_path):
    """``--precision auto``: the job's context, its autocast and the precision its log line names (read by the results
    pages: featlearn.pipeline.benchfiles) are the arithmetic this machine's CPU resolves auto to."""
    from featlearn.pipeline.benchfiles import JOB_DEVICE_LINE

    want = precision.resolve("auto", "cpu")
    got, res = _run_job(tmp_path, "auto")
    assert got["ctx"] == want and got["dtype"] == f"torch.{'bfloat16' if want == 'bf16' else 'float32'}"
    first = res.stdout.splitlines()[0]
    assert JOB_DEVICE_LINE.match(first)["precision"] == want and "asked auto: this CPU has" in first, first


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
