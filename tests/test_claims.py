"""Claims helper and scorecard."""

import math

import pytest

from featlearn.claims import COLUMNS, Claim, check, merge_claims, read_claims, write_claims
from featlearn.scorecard import build_scorecard, render_markdown


def test_check_computes_pass_from_the_measurement():
    c = check("joma", "c1", "Fig. 4", "entropy drops", "drop (nats)", 0.42, ">=", 0.3, "smoke")
    assert c.passed and c.target == ">= 0.3"
    c = check("joma", "c1", "Fig. 4", "entropy drops", "drop (nats)", 0.12, ">=", 0.3, "smoke")
    assert not c.passed
    assert check("joma", "c2", "", "", "", 1.0, "<", 1.0, "smoke").passed is False
    assert check("joma", "c3", "", "", "", 2.0, "==", 2.0, "smoke").passed is True


def test_within_tolerance_and_nan_fails():
    assert check("scan_snap", "x", "", "", "", math.log(34) + 5e-4, "", math.log(34), "smoke", within=1e-3).passed
    assert not check("scan_snap", "x", "", "", "", math.log(34) + 5e-3, "", math.log(34), "smoke", within=1e-3).passed
    assert not check("scan_snap", "x", "", "", "", float("nan"), ">", 0.0, "smoke").passed
    assert not check("scan_snap", "x", "", "", "", float("nan"), "", 0.0, "smoke", within=1.0).passed


def test_bad_claims_are_rejected():
    with pytest.raises(ValueError, match="unknown paper"):
        check("nope", "x", "", "", "", 1.0, ">", 0.0, "smoke")
    with pytest.raises(ValueError, match="unknown comparison"):
        check("joma", "x", "", "", "", 1.0, "=>", 0.0, "smoke")
    with pytest.raises(ValueError, match="claim_id"):
        Claim("joma", "", "", "", "", 1.0, "", True, "smoke")


def test_roundtrip_and_merge(tmp_path):
    a = [check("joma", "a1", "Fig. 2", "s, with comma", "m", 0.123456789, ">", 0.1, "default")]
    b = [check("joma", "b1", "Fig. 3", 'quote "q"', "m", -2.0, "<", 0.0, "default")]
    write_claims(tmp_path / "a.csv", a)
    write_claims(tmp_path / "b.csv", b)
    assert read_claims(tmp_path / "a.csv") == a
    header = (tmp_path / "a.csv").read_text().splitlines()[0]
    assert tuple(header.split(",")) == COLUMNS
    merged = merge_claims([tmp_path / "a.csv", tmp_path / "b.csv"], tmp_path / "claims.csv", paper="joma")
    assert merged == a + b
    assert read_claims(tmp_path / "claims.csv") == a + b


def test_merge_rejects_duplicates_and_wrong_paper(tmp_path):
    c = [check("joma", "a1", "", "", "", 1.0, ">", 0.0, "smoke")]
    write_claims(tmp_path / "a.csv", c)
    with pytest.raises(ValueError, match="duplicate claim joma/a1"):
        merge_claims([tmp_path / "a.csv", tmp_path / "a.csv"], tmp_path / "out.csv")
    with pytest.raises(ValueError, match="belongs to joma"):
        merge_claims([tmp_path / "a.csv"], tmp_path / "out.csv", paper="templates")
    assert not (tmp_path / "out.csv").exists()


def test_read_rejects_foreign_tables(tmp_path):
    (tmp_path / "x.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="not the claims columns"):
        read_claims(tmp_path / "x.csv")


def test_merge_of_nothing_is_an_empty_table(tmp_path):
    assert merge_claims([], tmp_path / "claims.csv", paper="features") == []
    assert (tmp_path / "claims.csv").read_text().strip() == ",".join(COLUMNS)


def test_scorecard_counts_per_paper(tmp_path):
    write_claims(
        tmp_path / "joma.csv",
        [
            check("joma", "j1", "Fig. 4", "drop", "nats", 0.5, ">=", 0.3, "smoke"),
            check("joma", "j2", "Fig. 4", "rebound", "nats", 0.1, ">=", 0.2, "smoke"),
        ],
    )
    write_claims(tmp_path / "scan.csv", [check("scan_snap", "s1", "Fig. 4", "a|b", "loss", 0.0, "<", 1e-3, "smoke")])
    claims = build_scorecard([tmp_path / "joma.csv", tmp_path / "scan.csv"], tmp_path / "sc.csv", tmp_path / "sc.md", {"dataset x": "offline"})
    assert len(claims) == 3
    md = (tmp_path / "sc.md").read_text()
    assert "2/3 claims pass." in md
    assert "| `joma` | 1 | 2 |" in md and "| `scan_snap` | 1 | 1 |" in md and "| `features` | 0 | 0 |" in md
    assert "**FAIL**" in md and "a\\|b" in md
    assert "- dataset x: offline" in md
    assert md.count("No claims checked yet.") == 2
    assert read_claims(tmp_path / "sc.csv") == claims


def test_render_markdown_without_claims():
    md = render_markdown([])
    assert "0/0 claims pass." in md and md.count("No claims checked yet.") == 4
