"""Time limits of the long language-model jobs come from their size: tokens trained over a measured GPU
throughput, with the stated margin, never below the rule's CPU-scale limit."""

from __future__ import annotations

import math

import pytest

from featlearn.pipeline import sizing
from featlearn.pipeline.sizing import gpu_rate, lm_tokens, runtime_minutes


def test_tokens_of_an_epoch_budget_and_of_a_step_budget():
    assert lm_tokens({"epochs": 5, "iterations": 300}, "wikitext103", 20, 35) == 5 * 103_227_021
    assert lm_tokens({"iterations": 300}, "wikitext2", 20, 35) == 300 * 20 * 35
    assert lm_tokens({"steps": 400, "epochs": None}, "wikitext2", 8, 128) == 400 * 8 * 128
    assert lm_tokens({"epochs": 1}, "wikitext2", 8, 1024, bpe=True) == 2_448_382


def test_runtime_is_the_sized_estimate_or_the_floor():
    # JoMA's 10-layer WikiText-103 run at the paper's 5 epochs: about 4.4 GPU-hours at the measured rate;
    # 3x margin and 10% for evaluations give about 14.5 hours, far beyond the old fixed 80 minutes
    minutes = runtime_minutes(5 * 103_227_021, gpu_rate("joma_lm", 10, "wikitext103"), floor=80)
    expected = sizing.START_MINUTES + math.ceil(sizing.MARGIN * sizing.EVAL * 5 * 103_227_021 / 32_691 / 60)
    assert minutes == expected and 14 * 60 < minutes < 15 * 60
    # a default-scale run (300 iterations) keeps its rule's limit
    assert runtime_minutes(300 * 20 * 35, gpu_rate("joma_lm", 2, "wikitext2"), floor=64) == 64


def test_an_unmeasured_depth_takes_the_next_deeper_measured_rate():
    assert gpu_rate("joma_lm", 3, "wikitext2") == gpu_rate("joma_lm", 5, "wikitext2")
    assert gpu_rate("joma_lm", 24, "wikitext2") == gpu_rate("joma_lm", 10, "wikitext2")
    with pytest.raises(KeyError):
        gpu_rate("joma_lm", 1, "ptb")


def test_paper_scale_dag_gives_the_wikitext103_jobs_their_hours():
    """The registries at paper scale: every WikiText-103 LM job's limit covers its measured GPU time."""
    from types import SimpleNamespace

    from featlearn.joma.registry import registry as joma_registry
    from featlearn.lm_bench import load_config
    from featlearn.pipeline.registry import Paths

    cfg = load_config("paper")
    reg = joma_registry(cfg, Paths("results"), dataset_on=lambda name: True)
    job = next(j for j in reg.jobs if j.name == "joma_wikitext")
    wc = SimpleNamespace(dataset="wikitext103", n_layer="10", lr="0.0001", seed="1")
    assert job.resources.runtime(wc) > 10 * 60  # 5 epochs of WikiText-103 at 10 layers: hours, not 80 minutes
    wc2 = SimpleNamespace(dataset="wikitext2", n_layer="1", lr="0.0001", seed="1")
    assert job.resources.runtime(wc2) < job.resources.runtime(wc)


def test_limits_from_the_estimate_never_undercut_the_rule():
    # a job estimated at 2 hours with a 3 GiB peak: 15 min + 3 x 120 min, and 1000 MB + 2 x 3 GiB
    assert sizing.estimated_limits(7200.0, 3 * 2**30) == {"runtime": 15 + 360, "mem_mb": 1000 + 6144}
    assert sizing.estimated_limits(None, None) == {}
    # a run's measured peak resident memory is a floor of mem_mb (x 1.25), where it is above the formula's
    assert sizing.estimated_limits(None, 2**30, rss_mb=4000.0) == {"mem_mb": 5000}
    assert sizing.estimated_limits(None, 2**30, rss_mb=100.0) == {"mem_mb": 1000 + 2048}
    assert sizing.estimated_limits(None, None, rss_mb=800.0) == {"mem_mb": 1000}
    assert sizing.estimated_limits(None, 2**30, rss_mb=float("nan")) == {"mem_mb": 1000 + 2048}
    key = sizing.resource_key("templates_sweep", '{"grid": "2c"}')
    assert key.startswith("templates_sweep:") and key != sizing.resource_key("templates_sweep", '{"grid": "3c"}')
    table = {key: {"runtime": 375, "mem_mb": 7144}}
    assert sizing.sized(table, "templates_sweep", '{"grid": "2c"}', "runtime", 120) == 375
    assert sizing.sized(table, "templates_sweep", '{"grid": "2c"}', "mem_mb", 16000) == 16000  # the rule's is larger
    assert sizing.sized(table, "templates_sweep", '{"grid": "3c"}', "runtime", 120) == 120  # another job: no entry
    # a job the estimate could not time has its memory only: the rule's runtime stays, the memory is the estimate's
    assert sizing.estimated_limits(None, 3 * 2**30) == {"mem_mb": 1000 + 6144}
    untimed = {key: sizing.estimated_limits(None, 3 * 2**30)}
    assert sizing.sized(untimed, "templates_sweep", '{"grid": "2c"}', "runtime", 120) == 120
    assert sizing.sized(untimed, "templates_sweep", '{"grid": "2c"}', "mem_mb", 4000) == 7144


def test_a_missing_or_broken_estimate_file_sizes_nothing(tmp_path):
    assert sizing.load_estimate(str(tmp_path / "absent.json")) == {}
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert sizing.load_estimate(str(bad)) == {}
    good = tmp_path / "good.json"
    good.write_text('{"device": "cpu", "jobs": {"a:1": {"runtime": 30}}}')
    assert sizing.load_estimate(str(good)) == {"a:1": {"runtime": 30}}


def test_gpu_memory_of_a_job_from_its_measured_peak_or_the_formula():
    """gpu_mem_mb: the CUDA context plus 1.25 x a measured CUDA peak, or 2 x the formula's peak; CPU jobs get none."""
    from featlearn.pipeline.sizing import GPU_CONTEXT_MB, estimated_limits, gpu_memory, resource_key

    gib = 2**30
    assert estimated_limits(60, 1 * gib, 2 * gib, gpu=True)["gpu_mem_mb"] == GPU_CONTEXT_MB + 2560
    assert estimated_limits(60, 1 * gib, None, gpu=True)["gpu_mem_mb"] == GPU_CONTEXT_MB + 2048
    assert "gpu_mem_mb" not in estimated_limits(60, 1 * gib, 2 * gib, gpu=False)
    table = {resource_key("r", "{}"): {"gpu_mem_mb": 900}}
    assert gpu_memory(table, "r", "{}", floor=4000) == 900  # may be below the host-memory floor
    assert gpu_memory(table, "r", '{"other": 1}', floor=4000) == 4000


def test_the_runtime_cap_is_the_longest_limit_of_a_partition_the_job_may_use(tmp_path):
    """Issue 35: a GPU job may only use partitions with GPUs; a CPU job any. No file, or a partition without a
    limit: no cap."""
    import yaml

    from featlearn.pipeline.sizing import partition_runtime_cap

    path = tmp_path / "partitions.yaml"
    path.write_text(yaml.safe_dump({"partitions": {"short": {"max_gpu": 0, "max_runtime": 240},
                                                   "long": {"max_gpu": 0, "max_runtime": 4320},
                                                   "gpu": {"max_gpu": 4, "max_runtime": 2880}}}))
    assert partition_runtime_cap(path, gpu=True) == 2880
    assert partition_runtime_cap(path, gpu=False) == 4320
    assert partition_runtime_cap(None, gpu=True) is None
    path.write_text(yaml.safe_dump({"partitions": {"gpu": {"max_gpu": 1}}}))
    assert partition_runtime_cap(path, gpu=True) is None
