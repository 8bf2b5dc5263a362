"""benchmarks/probe_plan.py: the probes a device would still measure, counted with every probe stubbed."""

import json

import pytest

FIGURES = ["fig_templates_2c", "fig_scan_snap_6"]  # a templates sweep and the Scan and Snap trainers


def _entry(device="NVIDIA H200", torch="2.11.0+cu130", kind="sweep", seconds=0.5):
    key = json.dumps({"device": device, "kind": kind, "rule": "none", "shape": {"x": 1}, "torch": torch, "version": 1},
                     sort_keys=True)
    return key, {"seconds_per_step": 1e-3, "probe_seconds": seconds}


def test_a_cached_probe_is_not_planned_and_the_rest_are(benchmark_script, tmp_path):
    plan = benchmark_script("probe_plan").plan
    cache = dict([_entry()])
    first = plan(cache, "NVIDIA H200", ["config/smoke.yaml"], 2, str(tmp_path / "results"), FIGURES)
    n = sum(first["measure"].values())
    assert n == len(first["keys"]) > 1 and first["untimed"] == []  # (these figures' jobs all have cost models)
    assert all(json.loads(k)["device"] == "NVIDIA H200" and json.loads(k)["torch"] == "2.11.0+cu130" for k in first["keys"])
    # keyed as the GPU keys its probes: no CPU probe method (a CPU-keyed plan matched none of a GPU cache's sweep
    # probes), an `auto` job in the GPU's bf16
    assert not any("method" in json.loads(k) for k in first["keys"])
    done = first["keys"][0]
    cache[done] = {"seconds_per_step": 1e-3, "probe_seconds": 2.0}
    second = plan(cache, "NVIDIA H200", ["config/smoke.yaml"], 2, str(tmp_path / "results"), FIGURES)
    assert done not in second["keys"] and sum(second["measure"].values()) == n - 1


def test_a_kind_is_timed_by_the_cache_median_and_longest(benchmark_script, tmp_path):
    plan = benchmark_script("probe_plan").plan
    cache = dict([_entry(seconds=0.5)])
    out = plan(cache, "NVIDIA H200", ["config/smoke.yaml"], 2, str(tmp_path / "results"), FIGURES)
    assert out["measure"].get("sweep"), "the smoke config has templates sweep probes"
    assert out["seconds"]["sweep"] == (0.5 * out["measure"]["sweep"], 0.5 * out["measure"]["sweep"])
    assert any(v is None for k, v in out["seconds"].items() if k != "sweep")  # kinds the cache lacks


def test_a_cache_with_two_torch_versions_of_the_device_is_refused(benchmark_script, tmp_path):
    plan = benchmark_script("probe_plan").plan
    cache = dict([_entry(torch="2.11.0+cu130"), _entry(torch="2.12.0+cu130")])
    with pytest.raises(SystemExit, match="2 torch versions"):
        plan(cache, "NVIDIA H200", ["config/smoke.yaml"], 2, str(tmp_path / "results"), FIGURES)


def test_an_auto_lm_is_planned_in_the_gpus_arithmetic(benchmark_script, tmp_path):
    """A language model of ``precision: auto`` computes in bf16 on the GPU (featlearn.precision), so the plan keys its
    probe so, whatever the machine that plans it computes in."""
    plan = benchmark_script("probe_plan").plan
    out = plan(dict([_entry()]), "NVIDIA H200", ["config/smoke.yaml"], 2, str(tmp_path / "results"), ["fig_scan_snap_7"])
    lm = [json.loads(k) for k in out["keys"] if json.loads(k)["kind"].startswith("lm:")]
    assert lm and all(k.get("precision") == "bf16" for k in lm)


def test_on_a_card_the_cache_has_not_seen_another_cards_records_stand_in_after_a_calibration(benchmark_script, tmp_path):
    """A cache holding every probe of these figures on the H200, planned for an H100 it has not seen: without
    --scale-from every probe comes before every job has a time; with it, at most CALIBRATION_PROBES of each kind do
    (the H200's records scaled stand in for the rest until they are measured), and the same probes are left to
    measure in all."""
    from featlearn.pipeline.estimate import CALIBRATION_PROBES

    plan = benchmark_script("probe_plan").plan
    results = str(tmp_path / "results")
    figures = ["fig_templates_17", "fig_scan_snap_6"]  # (grid 17: 8 distinct probes at the smoke scale)
    keys = plan(dict([_entry()]), "NVIDIA H200", ["config/smoke.yaml"], 2, results, figures)["keys"]
    cache = {k: {"seconds_per_step": 1e-3, "probe_seconds": 1.0} for k in keys}
    alone = plan(cache, "NVIDIA H100 80GB HBM3", ["config/smoke.yaml"], 2, results, figures, torch_version="2.11.0+cu130")
    scaled = plan(cache, "NVIDIA H100 80GB HBM3", ["config/smoke.yaml"], 2, results, figures, scale_from="NVIDIA H200")
    assert alone["untimed"] == [] and scaled["untimed"] == []
    assert sum(scaled["measure"].values()) == sum(alone["measure"].values()) == len(keys)
    assert alone["first"] > scaled["first"] and 0 < scaled["first"] <= CALIBRATION_PROBES * len(scaled["measure"])
    assert all(json.loads(k)["torch"] == "2.11.0+cu130" for k in scaled["keys"])  # under the H200's torch
