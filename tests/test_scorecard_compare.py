"""benchmarks/scorecard_compare.py: two runs' verdicts claim by claim, on planted scorecards."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def sc(benchmark_script):
    return benchmark_script("scorecard_compare")


def _card(path: Path, rows: list[tuple]) -> Path:
    pd.DataFrame(rows, columns=["paper", "claim_id", "figure", "kind", "measured", "verdict", "note"]).to_csv(path, index=False)
    return path


REFERENCE = [
    ("joma", "fig6_top_drop", "6", "paper", 0.0926, "not reproduced", ""),
    ("joma", "fig3_sparse", "3", "paper", 0.8, "reproduced", ""),
    ("templates", "2c-kq", "2c", "paper", 0.01, "reproduced", ""),
    ("templates", "6-nstar", "6", "paper", float("nan"), "unchecked", ""),
]


def test_a_changed_verdict_is_counted_and_listed(sc, tmp_path):
    ref = _card(tmp_path / "ref.csv", REFERENCE)
    cand = _card(tmp_path / "cand.csv", [
        ("joma", "fig6_top_drop", "6", "paper", 0.1001, "reproduced", ""),  # flipped at its threshold
        ("joma", "fig3_sparse", "3", "paper", 0.81, "reproduced", ""),
        ("templates", "2c-kq", "2c", "paper", 0.01, "reproduced", ""),
        ("templates", "6-nstar", "6", "paper", float("nan"), "unchecked", ""),
        ("templates", "22-new", "22", "paper", 1.0, "reproduced", ""),  # a claim the reference did not make
    ])
    out = tmp_path / "out.md"
    assert sc.main([str(ref), str(cand), "--reference-name", "CPU", "--name", "GPU", "--out", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("**Verdicts: 3 of 4 claims the same in GPU as in CPU.**")
    changed = text.split("Changed verdicts:")[1].split("Every claim")[0]
    assert "`fig6_top_drop`" in changed and "`fig3_sparse`" not in changed
    assert "| 0.0926 | 0.1001 | 0.0075 | not reproduced | reproduced |" in changed
    assert "Claims only in GPU (1): `templates` `22-new`." in text
    assert "| — | — | — | unchecked | unchecked |" in text  # an unchecked claim has no value, only its verdict


def test_the_same_verdicts_list_no_change(sc, tmp_path):
    ref = _card(tmp_path / "ref.csv", REFERENCE)
    result = sc.compare(sc.read(ref), sc.read(ref))
    text = sc.report(result)
    assert text.startswith("**Verdicts: 4 of 4 claims the same") and "Changed verdicts" not in text
    assert "only in" not in text


def test_figures_keep_their_claims_only(sc, tmp_path):
    ref = _card(tmp_path / "ref.csv", REFERENCE)
    kept = sc.read(ref, ["templates:2c", "joma:6"])
    assert sorted(kept["claim_id"]) == ["2c-kq", "fig6_top_drop"]
    with pytest.raises(ValueError, match="PAPER:FIGURE"):
        sc.read(ref, ["2c"])
    with pytest.raises(ValueError, match="no claim of"):
        sc.read(ref, ["templates:99"])


def test_a_file_that_is_not_a_scorecard_or_repeats_a_claim_is_refused(sc, tmp_path):
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"paper": ["joma"], "claim_id": ["x"]}).to_csv(bad, index=False)
    with pytest.raises(ValueError, match="not a scorecard"):
        sc.read(bad)
    twice = _card(tmp_path / "twice.csv", REFERENCE + [REFERENCE[0]])
    with pytest.raises(ValueError, match="appears twice"):
        sc.read(twice)


def test_a_figure_is_found_with_or_without_its_fig_prefix(sc, tmp_path):
    fig7 = ("scan_snap", "wiki_freeze_1layer", "Fig. 7", "paper", 1.2, "not reproduced", "")
    ref = _card(tmp_path / "ref.csv", REFERENCE + [fig7])
    for name in ("scan_snap:Fig. 7", "scan_snap:7"):
        assert list(sc.read(ref, [name])["claim_id"]) == ["wiki_freeze_1layer"]
    with pytest.raises(ValueError, match="no claim of"):
        sc.read(ref, ["joma:Fig. 6"])  # a label without the prefix is not given one
