"""The committed wall times of CPU jobs without a cost model (featlearn.pipeline.reference) and their use by the
estimate on a machine that has not run those jobs."""

import dataclasses
import json
from pathlib import Path

import pytest

import featlearn.pipeline.estimate as E
from featlearn.pipeline import reference as R

ROOT = Path(__file__).resolve().parents[1]
BENCH_HEAD = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time"


def _node(label: str, settings: dict | None, gpu: bool = False, cost_model: str | None = None,
          benchmark: str = "none.tsv") -> E.Node:
    rule = label.split("[")[0]
    return E.Node(label, rule, "x", {}, settings, gpu, 1, benchmark, cost_model=cost_model)


def _entry(label: str, settings: dict, wall: float = 12.5, **extra) -> dict:
    return {"label": label, "settings": settings, "wall_s": wall, "scale": "default", "date_utc": "2026-12-03 18:00:00",
            "host_cpus": 2, "host_cpu": "AMD EPYC", **extra}


def _write(path: Path, entries: list[dict]) -> Path:
    path.write_text(json.dumps({"jobs": entries}))
    return path


def test_a_reference_times_a_cpu_job_without_a_model_only_at_its_own_settings(tmp_path):
    """The entry is used for the same label and settings (``scale`` left out); other settings, a GPU job and a
    modelled job are not timed by it."""
    ref = R.read_reference(_write(tmp_path / "r.json", [_entry("joma_eq6", {"steps": 10, "scale": "default"})]))
    seconds, where = R.reference_seconds(_node("joma_eq6", {"scale": "paper", "steps": 10}), ref)
    assert seconds == 12.5
    assert "`default`-scale run of 2026-12-03, 2 CPUs (AMD EPYC)" in where
    assert R.reference_seconds(_node("joma_eq6", {"steps": 11}), ref) is None
    assert R.reference_seconds(_node("joma_eq6", {"steps": 10}, gpu=True), ref) is None
    assert R.reference_seconds(_node("joma_eq6", {"steps": 10}, cost_model="m:f"), ref) is None
    assert R.reference_seconds(_node("joma_hblt", {"steps": 10}), ref) is None


def test_the_same_job_at_two_settings_keeps_two_entries(tmp_path):
    path = _write(tmp_path / "r.json", [_entry("features_theory", {"epochs": 5}, wall=60.0)])
    R.write_reference(path, [_entry("features_theory", {"epochs": 200}, wall=700.0)])
    ref = R.read_reference(path)
    assert len(ref) == 2
    assert R.reference_seconds(_node("features_theory", {"epochs": 5}), ref)[0] == 60.0
    assert R.reference_seconds(_node("features_theory", {"epochs": 200}), ref)[0] == 700.0
    R.write_reference(path, [_entry("features_theory", {"epochs": 5}, wall=61.0)])  # replaces its own entry only
    ref = R.read_reference(path)
    assert len(ref) == 2 and R.reference_seconds(_node("features_theory", {"epochs": 5}), ref)[0] == 61.0


@pytest.mark.parametrize("text, needs", [("{not json", "bad JSON"), ('{"rows": []}', "no 'jobs' list"),
                                         ('{"jobs": [{"label": "a", "settings": {}}]}', "positive 'wall_s'"),
                                         ('{"jobs": [{"label": "a", "settings": {}, "wall_s": 0}]}', "positive 'wall_s'"),
                                         ('{"jobs": [{"label": "a", "wall_s": 3}]}', "'settings'")])
def test_a_corrupt_reference_is_an_error_naming_the_file(tmp_path, text, needs):
    path = tmp_path / "r.json"
    path.write_text(text)
    with pytest.raises(ValueError, match="r.json") as err:
        R.read_reference(path)
    assert needs in str(err.value)


def test_an_absent_reference_times_nothing(tmp_path):
    assert R.read_reference(tmp_path / "none.json") == {}


def _run(tmp_path: Path, record: dict | None) -> Path:
    results = tmp_path / "results"
    (results / "benchmarks" / "joma").mkdir(parents=True)
    (results / "logs" / "joma").mkdir(parents=True)
    if record is not None:
        (results / "run.json").write_text(json.dumps(record))
    return results


def test_entries_come_from_the_benchmark_files_of_a_committed_run(tmp_path):
    """Each unmodelled CPU job with a benchmark file gives an entry with the run's provenance; a modelled job, a GPU
    job, a job without a file and a job that resumed give none."""
    results = _run(tmp_path, {"scale": "default", "date_utc": "2026-12-03 18:00:00", "commit": "a" * 40,
                              "host_cpu": "AMD EPYC", "host_cpus": 2, "uncommitted_changes": False})
    bench = results / "benchmarks" / "joma"
    nodes = []
    for name in ("eq6", "hblt", "gpu", "model", "resumed"):
        (bench / f"{name}.tsv").write_text(f"{BENCH_HEAD}\n4.25\t0:00:04\t300.5\t1\t1\t1\t0\t0\t90\t3.9\n")
        nodes.append(_node(f"joma_{name}", {"k": name}, gpu=name == "gpu", cost_model="m:f" if name == "model" else None,
                           benchmark=str(bench / f"{name}.tsv")))
    (results / "logs" / "joma" / "resumed.log").write_text("resuming from step 100\n")
    nodes.append(_node("joma_nofile", {}, benchmark=str(bench / "nofile.tsv")))
    entries = R.entries_from_run(nodes, results)
    assert [e["label"] for e in entries] == ["joma_eq6", "joma_hblt"]
    e = entries[0]
    assert (e["wall_s"], e["cpu_s"], e["max_rss_mb"], e["settings"]) == (4.25, 3.9, 300.5, {"k": "eq6"})
    assert (e["scale"], e["commit"], e["host_cpu"], e["host_cpus"]) == ("default", "a" * 12, "AMD EPYC", 2)

    ref = R.write_reference(tmp_path / "ref" / "cpu_jobs.json", entries)
    assert [j["label"] for j in ref["jobs"]] == ["joma_eq6", "joma_hblt"]
    assert R.reference_seconds(nodes[1], R.read_reference(tmp_path / "ref" / "cpu_jobs.json"))[0] == 4.25


def test_a_run_without_a_record_or_with_uncommitted_changes_makes_no_reference(tmp_path):
    with pytest.raises(ValueError, match="no run record"):
        R.entries_from_run([], _run(tmp_path / "a", None))
    with pytest.raises(ValueError, match="uncommitted changes"):
        R.entries_from_run([], _run(tmp_path / "b", {"scale": "default", "uncommitted_changes": True}))


def test_the_estimate_takes_the_reference_after_the_benchmark_file_and_the_evidence(tmp_path):
    """A fresh machine (no benchmark files) gives a CPU job without a model the reference's time and says where it
    comes from; a benchmark file of a run at this scale still comes first."""
    ref = _write(tmp_path / "r.json", [_entry("joma_eq6", {"steps": 10}), _entry("joma_hblt", {"steps": 3}, wall=2.0)])
    results = tmp_path / "results"
    (results / "benchmarks").mkdir(parents=True)
    (results / "run.json").write_text(json.dumps({"scale": "default"}))
    (results / "benchmarks" / "hblt.tsv").write_text(f"{BENCH_HEAD}\n9.0\t0:00:09\t1\t1\t1\t1\t0\t0\t90\t8\n")
    hblt = str(results / "benchmarks" / "hblt.tsv")
    nodes = [_node("joma_eq6", {"steps": 10}), _node("joma_hblt", {"steps": 3}, benchmark=hblt), _node("joma_theorem2", {})]
    prober = E.Prober("cpu", tmp_path / "c.json", probe=False)
    out = E.estimate(nodes, prober, {"scale": "default"}, str(results), reference=ref)
    assert out[0].seconds == 12.5 and "the committed reference" in out[0].source
    assert out[1].seconds == 9.0 and "committed reference" not in out[1].source
    assert out[2].seconds is None
    bare = E.estimate([dataclasses.replace(n, seconds=None, source="") for n in nodes[:1]], prober, {"scale": "default"},
                      str(results))
    assert bare[0].seconds is None  # no reference given: as before


def test_the_committed_reference_is_well_formed_and_times_every_unmodelled_cpu_job_of_both_configs(tmp_path):
    """Every CPU job without a cost model of the default and the paper DAG (datasets assumed online) gets a time on a
    machine with an empty results folder: from the committed reference, the paper-scale evidence or, for a dataset
    absent offline, scaled by size from the same rule's referenced jobs."""
    from featlearn.pipeline.workflow import merged_config

    entries = R.read_reference(ROOT / R.REFERENCE_FILE)
    assert entries, "the committed reference is empty"
    prober = E.Prober("cpu", tmp_path / "c.json", probe=False)
    for overlays in ([], ["config/paper.yaml"]):
        config = merged_config([str(ROOT / o) for o in overlays], str(ROOT / "config"))
        nodes = [n for n in E.build_dag(config, str(tmp_path / "results"), online=True)
                 if n.cost_model is None and not n.gpu]
        E.estimate(nodes, prober, config, str(tmp_path / "results"), evidence=ROOT / "evidence" / "paper",
                   config_dir=str(ROOT / "config"), reference=ROOT / R.REFERENCE_FILE)
        untimed = [n.label for n in nodes if n.seconds is None]
        assert untimed == [], f"{config['scale']}: without a time: {untimed}"
