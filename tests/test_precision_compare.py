"""benchmarks/precision_compare.py: two runs' figures claim by claim and table by table, on planted run folders."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def pc(benchmark_script):
    return benchmark_script("precision_compare")


def _run(root: Path, measured: float, verdict: str, ncorr: float, seconds: float) -> Path:
    """A run folder with JoMA Table 1's claims table, one cell's table and their benchmark files."""
    res = root / "results"
    (res / "joma" / "claims").mkdir(parents=True)
    (res / "joma" / "table1").mkdir()
    (res / "benchmarks" / "joma" / "table1").mkdir(parents=True)
    pd.DataFrame([{"claim_id": "table1_s0", "measured": measured, "verdict": verdict}]).to_csv(
        res / "joma" / "claims" / "table1.csv", index=False)
    pd.DataFrame([{"C": 20, "seed": 1, "ncorr": ncorr}]).to_csv(res / "joma" / "table1" / "cell_C20.csv", index=False)
    for bench in ("table1.tsv", "table1/cell_C20.tsv"):  # the figure's and the cell's
        (res / "benchmarks" / "joma" / bench).write_text(f"s\th:m:s\n{seconds}\t0:00:01\n")
    return root


def test_a_table_stem_finds_its_claims_by_the_tables_benchmark_file(pc, tmp_path):
    ref = _run(tmp_path / "ref", 0.8879, "not reproduced", 0.999, 47.0)
    cand = _run(tmp_path / "cand", 0.9501, "reproduced", 0.998, 50.0)
    claims, curves, times = pc.compare(ref, cand, None, pc.select(pc.GRAPH_FIGURES, ["joma:table1"]))
    assert [c["claim"] for c in claims] == ["table1_s0"]
    assert claims[0]["verdict_fp32"] == "not reproduced" and claims[0]["verdict_candidate"] == "reproduced"
    assert claims[0]["gap"] == pytest.approx(0.0622)
    assert curves == []  # a figure without LMs
    assert times == [{"figure": "JoMA Table 1", "job": "cell_C20.tsv", "fp32_s": 47.0, "candidate_s": 50.0}]
    text = pc.report(claims, curves, times, "graph-safe", "eager", seeded=False)
    assert "**Verdicts: 0 of 1 claims the same in graph-safe as in eager.**" in text


def test_the_tables_of_one_figure_are_compared_number_by_number(pc, tmp_path):
    ref = _run(tmp_path / "ref", 0.9, "reproduced", 0.75, 47.0)
    cand = _run(tmp_path / "cand", 0.9, "reproduced", 0.60, 50.0)
    gaps = pc.table_gaps(ref, cand, pc.tables_of(["joma:table1"]))
    assert [g["table"] for g in gaps] == ["joma/table1/cell_C20.csv"]
    assert gaps[0]["abs"] == pytest.approx(0.15) and gaps[0]["rel"] == pytest.approx(0.2)
    assert pc.tables_of(["joma:table1"]) == ("joma/table1/cell_*.csv",)
    assert len(pc.tables_of(None)) == sum(len(g) for g in pc.GRAPH_TABLES.values())


def test_only_keeps_the_named_figures_in_their_order_and_refuses_an_unknown_one(pc):
    chosen = pc.select(pc.FIGURES, ["features:5", "joma:6"])
    assert [f[2] for f in chosen] == ["features Fig. 5", "JoMA Fig. 6"]
    assert pc.select(pc.FIGURES, None) == pc.FIGURES
    with pytest.raises(SystemExit, match="unknown figure joma:table9"):
        pc.select(pc.GRAPH_FIGURES, ["joma:table9"])
