"""Null draws by shuffled condition labels (featlearn.nulls)."""

import numpy as np
import pandas as pd
import pytest

from featlearn.nulls import shuffle_null, shuffled_labels
from featlearn.pipeline.claims import check


def _runs(effect: float, seeds: int = 10) -> pd.DataFrame:
    """Final values of two learning rates per seed; lr 1 is higher by ``effect`` plus noise."""
    rng = np.random.default_rng(1)
    rows = [{"seed": s, "lr": lr, "value": rng.normal(0, 1) + effect * lr} for s in range(seeds) for lr in (0, 1)]
    return pd.DataFrame(rows)


def _higher(df: pd.DataFrame) -> float:
    """The fraction of seeds where lr 1 ends above lr 0."""
    w = df.pivot(index="seed", columns="lr", values="value")
    return float((w[1] > w[0]).mean())


def test_shuffles_permute_within_blocks_only():
    df = _runs(0.0)
    for d in shuffled_labels(df, "lr", ["seed"], draws=20):
        assert sorted(d["lr"]) == sorted(df["lr"])
        assert (d.groupby("seed")["lr"].apply(sorted) == df.groupby("seed")["lr"].apply(sorted)).all()
        assert (d["value"] == df["value"]).all()
    # seeded: the same draws each time
    a = shuffle_null(df, "lr", ["seed"], _higher, draws=30)
    assert a == shuffle_null(df, "lr", ["seed"], _higher, draws=30)
    # a run's whole history keeps one label: steps of a run move together
    hist = pd.DataFrame([{"seed": s, "lr": lr, "run": f"{s}-{lr}", "step": t} for s in range(3) for lr in (0, 1, 2)
                         for t in range(4)])
    for d in shuffled_labels(hist, "lr", ["seed"], draws=20):
        assert (d.groupby("run")["lr"].nunique() == 1).all()
        assert (d[d["step"] == 3].groupby("seed")["lr"].apply(sorted) == [[0, 1, 2]] * 3).all()
        assert (d.groupby(["seed", "lr"])["step"].apply(list) == [[0, 1, 2, 3]] * 9).all()
    with pytest.raises(ValueError, match="cannot also define"):
        shuffled_labels(df, "lr", ["lr"])


def test_a_real_effect_beats_its_shuffles_and_no_effect_does_not():
    # planted pass: a large effect orders every seed; shuffles order all 10 in about 2**-10 of draws
    strong = _runs(10.0)
    c = check("scan_snap", "x", "", "", "fraction", _higher(strong), "==", 1.0, "default",
              baseline=("shuffled lr", shuffle_null(strong, "lr", ["seed"], _higher)))
    assert c.passed and c.verdict == "reproduced" and c.baseline_pass_rate <= 0.05
    # planted fail of the null: with 2 seeds the real order is one of 4 relabellings, so a quarter of shuffles pass
    two = _runs(10.0, seeds=2)
    c = check("scan_snap", "x", "", "", "fraction", _higher(two), "==", 1.0, "default",
              baseline=("shuffled lr", shuffle_null(two, "lr", ["seed"], _higher)))
    assert c.passed and c.verdict == "not discriminating" and 0.1 < c.baseline_pass_rate < 0.45


def test_sign_flips_null():
    from featlearn.nulls import sign_flips

    gaps = np.full(20, 1.0)
    count = sign_flips(gaps, lambda v: int((v > 0).sum()), draws=500)
    assert sign_flips(gaps, lambda v: int((v > 0).sum()), draws=500) == count  # seeded
    assert 7 <= np.mean(count) <= 13  # about half the signs survive
    assert np.mean(np.array(count) >= 18) <= 0.01  # 18 of 20 positive: P = 211 / 2**20
