"""benchmarks/estimate_transfer.py: another device's records scaled, checked against probes the ratio did not use."""

import json

import pytest


def _key(device, torch, kind, i):
    return json.dumps({"device": device, "kind": kind, "rule": "r", "shape": {"i": i}, "torch": torch, "version": 1},
                      sort_keys=True)


def test_held_out_probes_are_predicted_by_the_calibrations_median_ratio(benchmark_script):
    """Planted: six sweep probes on A, B taking 2x each but one (3x); the calibration (A's fastest, slowest and a
    middle step) gives ratio 2, the held-out 3x probe is predicted a third low and the others exactly; a probe
    that only one device holds is not a pair, and a probe that took over 30 s on A is never in the calibration."""
    mod = benchmark_script("estimate_transfer")
    cache = {}
    for i in range(6):
        cache[_key("A", "t1", "sweep", i)] = {"seconds_per_step": 0.1 * (i + 1), "probe_seconds": 60.0 if i == 5 else 1.0}
        cache[_key("B", "t2", "sweep", i)] = {"seconds_per_step": (3.0 if i == 3 else 2.0) * 0.1 * (i + 1)}
    cache[_key("A", "t1", "sweep", 9)] = {"seconds_per_step": 1.0}
    cache[_key("A", "t1", "table1", 0)] = {"seconds_per_step": 1.0, "probe_seconds": 1.0}
    pairs = mod.pairs(cache, "A", "B")
    assert set(pairs) == {"sweep"} and len(pairs["sweep"]) == 6
    res = mod.check(pairs, 3)["sweep"]
    # calibration: steps 0.1, 0.5 (slowest under 30 s), 0.3 (the middle): ratios 2, 2, 2
    assert res["ratio"] == pytest.approx(2.0) and res["calibration"] == 3 and res["held_out"] == 3
    assert res["largest_abs_error"] == pytest.approx(1 / 3) and res["median_abs_error"] == pytest.approx(0.0)
    held = [0.2, 0.4, 0.6]  # A's steps of the held-out probes (i 1, 3, 5); B took 2x, 3x, 2x
    assert res["summed_time_error"] == pytest.approx(2 * sum(held) / (2 * 0.2 + 3 * 0.4 + 2 * 0.6) - 1)


def test_a_device_the_cache_lacks_is_named(benchmark_script):
    mod = benchmark_script("estimate_transfer")
    with pytest.raises(SystemExit, match="no probe in the cache was measured on 'C'; its devices: A"):
        mod.pairs({_key("A", "t", "sweep", 0): {"seconds_per_step": 1.0}}, "C", "A")
