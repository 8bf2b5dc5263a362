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
