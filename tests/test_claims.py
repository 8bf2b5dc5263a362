"""Claims helper and scorecard."""

import math

import pytest

from featlearn.pipeline.claims import COLUMNS, Claim, check, merge_claims, read_claims, unchecked, write_claims
from featlearn.pipeline.scorecard import build_scorecard, render_markdown


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
            check("joma", "j2", "Fig. 4", "rebound", "nats", 0.1, ">=", 0.2, "smoke", note="too few steps"),
            check("joma", "t1", "Thm. 1", "an invariant", "rel. drift", 1e-4, "<=", 1e-3, "smoke", kind="paper-theory"),
            check("joma", "t2", "Thm. 2", "a limit", "rel. error", 0.5, "<=", 1e-3, "smoke", kind="paper-theory"),
        ],
    )
    write_claims(tmp_path / "scan.csv", [check("scan_snap", "s1", "Fig. 4", "a|b", "loss", 0.0, "<", 1e-3, "smoke")])
    claims = build_scorecard([tmp_path / "joma.csv", tmp_path / "scan.csv"], tmp_path / "sc.csv", tmp_path / "sc.md",
                             {"dataset x": "offline"})
    assert len(claims) == 5
    md = (tmp_path / "sc.md").read_text()
    # issue 37: the theory numerics stay out of the empirical count and get their own
    assert ("All papers: reproduced 2 of 3 empirical paper claims (0 unchecked, 0 inconclusive, 0 not discriminating); 3 of "
            "the 3 are "
            "not yet audited (no threshold reason or baseline recorded); theory numerics: 1 of 2 hold.") in md
    assert "| `joma` | 1 | 1 | 0 | 0 | 0 | 1/2 | 0/0 |" in md and "| `scan_snap` | 1 | 0 | 0 | 0 | 0 | 0/0 | 0/0 |" in md
    assert "**not reproduced**" in md and "a\\|b" in md
    assert "- `j2` (not reproduced): too few steps" in md
    assert "- dataset x: offline" in md
    assert md.count("No claims checked in this run.") == 2
    assert read_claims(tmp_path / "sc.csv") == claims


def test_render_markdown_without_claims():
    md = render_markdown([])
    assert "reproduced 0 of 0 empirical paper claims" in md and md.count("No claims checked in this run.") == 4


def test_verdicts_from_the_claim_and_its_baseline():
    untrained = ("untrained network", 0.9)
    # passes and the untrained network fails: reproduced
    assert check("joma", "a", "", "", "", 0.1, "<", 0.5, "smoke", baseline=untrained).verdict == "reproduced"
    # passes, but so does the untrained network: the claim cannot tell them apart
    c = check("joma", "b", "", "", "", 0.1, "<", 0.95, "smoke", baseline=untrained)
    assert c.passed and c.baseline_passed and c.verdict == "not discriminating" and not c.counts
    # fails: not reproduced, whatever the baseline does
    assert check("joma", "c", "", "", "", 0.7, "<", 0.5, "smoke", baseline=untrained).verdict == "not reproduced"
    # no baseline applies (e.g. a theory number): decided by the claim alone
    assert check("joma", "d", "", "", "", 0.5, "", 0.5, "smoke", within=1e-3, kind="paper-theory").verdict == "reproduced"
    # sanity checks never count
    s = check("joma", "e", "", "", "", 0.1, "<", 0.5, "smoke", kind="sanity")
    assert s.verdict == "sanity ok" and not s.counts
    assert check("joma", "e", "", "", "", 0.9, "<", 0.5, "smoke", kind="sanity").verdict == "sanity failed"
    with pytest.raises(ValueError, match="unknown kind"):
        check("joma", "f", "", "", "", 0.1, "<", 0.5, "smoke", kind="tautology")


def test_unchecked_claims_say_why_and_stay_out_of_the_count(tmp_path):
    u = unchecked("templates", "4-nstar", "Fig. 8", "n* ratio >= 4", "the grid stops at n = 1024, before the transition",
                  "default")
    assert u.verdict == "unchecked" and not u.counts and math.isnan(u.measured)
    r = check("templates", "5", "Fig. 5", "s", "m", 1.0, ">", 0.0, "default", reason="sign", paper_value=0.83, spread=0.1,
              seeds=5)
    write_claims(tmp_path / "t.csv", [u, r])
    assert read_claims(tmp_path / "t.csv") == [u, r]
    md = render_markdown([u, r])
    assert "reproduced 1 of 1 empirical paper claims (1 unchecked, 0 inconclusive, 0 not discriminating)" in md
    assert "1 ± 0.1 (5 seeds)" in md and "| 0.83 |" in md and "before the transition" in md


def test_a_verdict_that_does_not_follow_from_the_result_is_rejected(tmp_path):
    c = check("joma", "a", "", "", "", 0.7, "<", 0.5, "smoke")
    write_claims(tmp_path / "c.csv", [c])
    text = (tmp_path / "c.csv").read_text().replace("not reproduced", "reproduced")
    (tmp_path / "c.csv").write_text(text)
    with pytest.raises(ValueError, match="does not follow"):
        read_claims(tmp_path / "c.csv")


def test_sanity_checks_are_listed_apart(tmp_path):
    claims = [check("scan_snap", "loss_falls", "Fig. 4", "loss falls", "loss", 0.1, "<", 1.0, "smoke", kind="sanity"),
              check("scan_snap", "p1", "Fig. 4", "paper", "m", 1.0, ">", 0.0, "smoke")]
    md = render_markdown(claims)
    assert "reproduced 1 of 1" in md and "(1 of 1 ok)" in md
    paper_table, sanity_table = md.split("Sanity checks (this project's setup; not counted):")
    assert "loss_falls" not in paper_table and "loss_falls" in sanity_table


def test_every_claim_that_does_not_count_as_reproduced_gets_a_line_saying_what_differs():
    untrained = ("untrained network", 0.9)
    failing = check("features", "a", "", "", "m", 0.3, ">=", 0.8, "smoke", paper_value="18 of 20", spread=0.05, seeds=3)
    nd = check("features", "b", "", "", "m", 0.1, "<", 0.95, "smoke", baseline=untrained)
    noted = check("features", "c", "", "", "m", 0.3, ">=", 0.8, "smoke", note="the grid is too coarse")
    md = render_markdown([failing, nd, noted])
    assert "- `a` (not reproduced): measured 0.3 ± 0.05 (3 seeds), the claim needs >= 0.8 (the paper: 18 of 20)" in md
    assert "- `b` (not discriminating): the untrained network scores 0.9, which passes < 0.95 too" in md
    assert "- `c` (not reproduced): the grid is too coarse" in md


def test_merge_lists_the_claims_of_skipped_figures_as_unchecked(tmp_path):
    from featlearn.pipeline.claims import UNCHECKED, check, merge_claims, read_claims, write_claims

    part = tmp_path / "part.csv"
    write_claims(part, [check("features", "2-sst-mlp-means", "Fig. 2", "s", "m", 1.0, ">", 0.0, "test")])
    out = tmp_path / "claims.csv"
    claims = merge_claims([part], out, paper="features", unchecked_claims={"6-agnews-sa": ["Fig. 4", "statement", "no AG News"]},
                          scale="test")
    assert [c.claim_id for c in read_claims(out)] == ["2-sst-mlp-means", "6-agnews-sa"]
    skipped = claims[-1]
    assert (skipped.verdict == UNCHECKED and skipped.note == "no AG News" and skipped.figure == "Fig. 4"
            and skipped.scale == "test")
    import pytest

    with pytest.raises(ValueError, match="both measured and listed as unchecked"):
        merge_claims([part], out, paper="features", unchecked_claims={"2-sst-mlp-means": ["Fig. 2", "s", "why"]})


def test_merge_gates_claims_on_their_failed_prerequisites(tmp_path):
    """Issue 37: a paper-level gate (claim pattern -> sanity checks) makes the claims unchecked when a check failed,
    and leaves them when it holds."""
    write_claims(tmp_path / "a.csv", [
        check("features", "2-imdb-sa-means", "Fig. 13", "s", "m", 7.8, ">", 0.0, "smoke"),
        check("features", "2-sst-sa-means", "Fig. 2", "s", "m", 7.8, ">", 0.0, "smoke"),
        check("features", "1-imdb-vocab", "Table 2", "s", "rel. diff", 0.31, "<=", 0.05, "smoke", kind="sanity"),
    ])
    gates = {"2-imdb-*": ["1-imdb-vocab"]}
    claims = {c.claim_id: c for c in merge_claims([tmp_path / "a.csv"], tmp_path / "m.csv", paper="features", gates=gates)}
    gated = claims["2-imdb-sa-means"]
    assert gated.verdict == "unchecked" and "prerequisite 1-imdb-vocab failed" in gated.note
    assert claims["2-sst-sa-means"].verdict == "reproduced"
    write_claims(tmp_path / "b.csv", [
        check("features", "2-imdb-sa-means", "Fig. 13", "s", "m", 7.8, ">", 0.0, "smoke"),
        check("features", "1-imdb-vocab", "Table 2", "s", "rel. diff", 0.01, "<=", 0.05, "smoke", kind="sanity"),
    ])
    held = merge_claims([tmp_path / "b.csv"], tmp_path / "n.csv", paper="features", gates=gates)
    assert held[0].verdict == "reproduced"


def test_a_claim_within_its_seed_spread_of_the_threshold_is_inconclusive():
    """Issue 37: a pass (or a fail) by less than the seeds' spread could be noise: inconclusive, outside D."""
    clear = check("joma", "c", "Fig. 4", "s", "m", 0.50, ">=", 0.30, "test", spread=0.05, seeds=3)
    near = check("joma", "c", "Fig. 4", "s", "m", 0.33, ">=", 0.30, "test", spread=0.05, seeds=3)
    near_fail = check("joma", "c", "Fig. 4", "s", "m", 0.28, ">=", 0.30, "test", spread=0.05, seeds=3)
    far_fail = check("joma", "c", "Fig. 4", "s", "m", 0.10, ">=", 0.30, "test", spread=0.05, seeds=3)
    assert clear.verdict == "reproduced" and clear.counts
    assert near.verdict == "inconclusive" and near.passed and not near.counts and "within the seed spread" in near.note
    assert near_fail.verdict == "inconclusive" and not near_fail.passed
    assert far_fail.verdict == "not reproduced"
    # one seed (no spread), a theory or sanity check, and an exact count are not put to the margin test
    assert check("joma", "c", "Fig. 4", "s", "m", 0.33, ">=", 0.30, "test").verdict == "reproduced"
    theory = check("joma", "c", "Fig. 4", "s", "m", 0.33, ">=", 0.30, "test", spread=0.05, kind="paper-theory")
    assert theory.verdict == "reproduced"
    assert check("joma", "c", "Fig. 4", "s", "m", 3, "==", 3, "test", spread=1.0).verdict == "reproduced"
    # a band claim: the distance to its edge
    band = check("joma", "c", "Fig. 4", "s", "m", 0.58, "", 0.5, "test", within=0.1, spread=0.05, seeds=3)
    assert band.verdict == "inconclusive"
    # a claim its baseline passes too stays not discriminating; a typed-in inconclusive needs a spread
    assert check("joma", "c", "Fig. 4", "s", "m", 0.33, ">=", 0.30, "test", spread=0.05,
                 baseline=("untrained network", 0.9)).verdict == "not discriminating"
    with pytest.raises(ValueError, match="does not follow"):
        Claim("joma", "c", "Fig. 4", "s", "m", 0.5, ">= 0.3", True, "test", verdict="inconclusive")


def test_an_inconclusive_claim_survives_the_claims_table(tmp_path):
    near = check("joma", "c", "Fig. 4", "s", "m", 0.33, ">=", 0.30, "test", spread=0.05, seeds=3)
    write_claims(tmp_path / "c.csv", [near])
    assert read_claims(tmp_path / "c.csv") == [near]


def test_the_scorecard_counts_inconclusive_claims_apart(tmp_path):
    write_claims(tmp_path / "j.csv", [
        check("joma", "a", "Fig. 4", "s", "m", 0.50, ">=", 0.30, "test", spread=0.05, seeds=3, reason="r"),
        check("joma", "b", "Fig. 4", "s", "m", 0.33, ">=", 0.30, "test", spread=0.05, seeds=3, reason="r"),
    ])
    build_scorecard([tmp_path / "j.csv"], tmp_path / "sc.csv", tmp_path / "sc.md")
    md = (tmp_path / "sc.md").read_text()
    assert "reproduced 1 of 1 empirical paper claims (0 unchecked, 1 inconclusive, 0 not discriminating)" in md
    assert "| `joma` | 1 | 0 | 1 | 0 | 0 | 0/0 | 0/0 |" in md and "- `b` (inconclusive): within the seed spread" in md


def test_a_null_of_several_draws_passes_when_more_than_alpha_of_them_pass():
    from featlearn.pipeline.claims import NULL_ALPHA

    kw = dict(scale="default")
    # planted pass: no untrained draw reaches the threshold
    c = check("features", "n1", "", "", "rho", 0.8, ">", 0.5, baseline=("untrained network", [0.1, -0.2, 0.3]), **kw)
    assert c.baseline_draws == 3 and c.baseline_pass_rate == 0 and not c.baseline_passed
    assert c.verdict == "reproduced" and c.counts and c.null == "3 draws"
    assert math.isclose(c.baseline_measured, (0.1 - 0.2 + 0.3) / 3)
    # planted fail: one draw of three passes, a rate of 1/3 > alpha, although the draws' mean fails
    c = check("features", "n2", "", "", "rho", 0.8, ">", 0.5, baseline=("untrained network", [0.6, 0.0, 0.0]), **kw)
    assert c.baseline_pass_rate == pytest.approx(1 / 3) and c.baseline_measured < 0.5
    assert c.baseline_passed and c.verdict == "not discriminating" and not c.counts
    # one draw of forty passes: below alpha, the claim still discriminates
    draws = [0.6] + [0.0] * 39
    c = check("features", "n3", "", "", "rho", 0.8, ">", 0.5, baseline=("untrained network", draws), **kw)
    assert c.baseline_pass_rate == 1 / 40 < NULL_ALPHA and c.verdict == "reproduced"
    # a NaN draw fails the comparison and stays out of the mean
    c = check("features", "n4", "", "", "rho", 0.8, ">", 0.5, baseline=("untrained network", [float("nan"), 0.1]), **kw)
    assert c.baseline_pass_rate == 0 and c.baseline_measured == pytest.approx(0.1)
    # a single value is one draw, as before
    c = check("features", "n5", "", "", "rho", 0.8, ">", 0.5, baseline=("unigram model", 0.7), **kw)
    assert c.baseline_draws == 1 and c.baseline_pass_rate == 1 and c.verdict == "not discriminating"
    with pytest.raises(ValueError, match="no draws"):
        check("features", "n6", "", "", "rho", 0.8, ">", 0.5, baseline=("untrained network", []), **kw)


def test_a_null_rate_that_does_not_match_its_verdict_is_rejected():
    with pytest.raises(ValueError, match="draws passes exactly when"):
        Claim("joma", "x", "", "", "m", 1.0, "> 0", True, "default", baseline="untrained network", baseline_draws=3,
              baseline_pass_rate=0.0, baseline_passed=True)


def test_a_claim_without_a_baseline_says_why(tmp_path):
    c = check("scan_snap", "w", "Fig. 10", "", "m", 1.0, ">", 0.0, "default",
              no_baseline="the untrained curve is flat, so an ordering claim cannot pass on it")
    assert c.baseline.startswith("no baseline: the untrained curve") and c.null == "none"
    assert c.verdict == "reproduced" and c.baseline_passed is None
    with pytest.raises(ValueError, match="a baseline and a reason"):
        check("scan_snap", "w", "", "", "m", 1.0, ">", 0.0, "default", baseline=("x", 0.0), no_baseline="why")
    write_claims(tmp_path / "c.csv", [c])
    assert read_claims(tmp_path / "c.csv") == [c]


def test_the_scorecard_shows_null_draws_and_counts_how_claims_were_tested(tmp_path):
    claims = [
        check("features", "n1", "Fig. 2", "s", "rho", 0.8, ">", 0.5, "default",
              baseline=("untrained network", [0.1, 0.2, 0.3])),
        check("features", "n2", "Fig. 2", "s", "rho", 0.8, ">", 0.5, "default",
              baseline=("untrained network", [0.6, 0.1, 0.2])),
        check("features", "n3", "Fig. 2", "s", "m", 1.0, ">", 0.0, "default", no_baseline="flat by construction"),
        check("features", "n4", "Fig. 2", "s", "m", 1.0, ">", 0.0, "default", baseline=("unigram model", 0.0)),
    ]
    write_claims(tmp_path / "claims.csv", claims)
    assert read_claims(tmp_path / "claims.csv") == claims
    text = render_markdown(claims)
    assert "untrained network, 3 draws: mean 0.2, 0 of 3 pass (fails)" in text
    assert "`n2` (not discriminating): 1 of 3 draws of the untrained network pass > 0.5 too" in text
    assert "no baseline: flat by construction" in text
    # n2 does not count; of n1, n3, n4: one against several draws, one against one draw, one with none
    assert "Of the 3 empirical claims decided, 1 were tested against a null of several draws" in text
    assert "1 against one draw of a trivial model, and 1 have no baseline" in text


def test_claims_on_few_seeds_carry_their_registry_reason(tmp_path):
    one = check("joma", "fig6_drop_wikitext2", "Fig. 6", "s", "m", 1.0, ">", 0.0, "default", baseline=("u", 0.0))
    three = check("joma", "fig3_grow", "Fig. 3", "s", "m", 1.0, ">", 0.0, "default", seeds=3, spread=0.1,
                  baseline=("u", 0.0))
    sanity = check("joma", "fig6_step0", "Fig. 6", "s", "m", 1.0, ">", 0.0, "default", kind="sanity")
    write_claims(tmp_path / "a.csv", [one, three, sanity])
    merged = merge_claims([tmp_path / "a.csv"], tmp_path / "m.csv", paper="joma",
                          few_seeds={"fig6_*": "one seed: the LMs are the longest jobs at this scale", "fig3_*": "never"})
    by = {c.claim_id: c for c in merged}
    assert by["fig6_drop_wikitext2"].seeds_reason.startswith("one seed: the LMs")
    # the most specific pattern wins, whatever the order (the workflow passes them sorted, "*" first)
    again = merge_claims([tmp_path / "a.csv"], tmp_path / "m2.csv", paper="joma",
                         few_seeds={"*": "generic", "fig6_*": "specific", "fig6_drop_*": "most specific"})
    assert {c.claim_id: c for c in again}["fig6_drop_wikitext2"].seeds_reason == "most specific"
    assert by["fig3_grow"].seeds_reason == "" and by["fig6_step0"].seeds_reason == ""  # 3 seeds; a sanity check
    assert read_claims(tmp_path / "m.csv") == merged
    text = render_markdown(merged)
    assert "- `fig6_drop_wikitext2` (1 seed): one seed: the LMs are the longest jobs" in text
    assert "1 of the 2 rest on fewer than 3 seeds" in text
    # without a reason the scorecard says so
    bare = render_markdown([one, three])
    assert "- `fig6_drop_wikitext2` (1 seed): no reason given" in bare and "(1 give no reason)" in bare


def test_a_baseline_fixed_by_construction_that_fails_is_no_baseline():
    from featlearn.pipeline.claims import fixed_baseline

    # zero initialisation: every untrained network scores 0, which fails "< 0": no baseline, with the value
    kw = fixed_baseline("untrained network", [0.0, 0.0, 0.0], "<", 0.0, "zero initialisation")
    c = check("scan_snap", "3a", "", "", "m", -1.0, "<", 0.0, "default", **kw)
    assert c.null == "none" and "zero initialisation: it scores 0 on every draw" in c.baseline and c.verdict == "reproduced"
    # the same fixed value passing: a real baseline, and the claim does not discriminate
    kw = fixed_baseline("untrained network", [2.15] * 3, ">", 1.0, "zero initialisation")
    c = check("scan_snap", "5a", "", "", "m", 2.0, ">", 1.0, "default", **kw)
    assert c.baseline_draws == 3 and c.verdict == "not discriminating"
    # draws that differ are a null as before; NaN everywhere counts as fixed
    assert "baseline" in fixed_baseline("u", [0.0, 0.5], "<", 0.0, "why")
    assert "no_baseline" in fixed_baseline("constant predictor", float("nan"), ">", 0.0, "never learns")
