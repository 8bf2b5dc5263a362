"""Counts on the real datasets of the mirror (skipped when there is none)."""

from __future__ import annotations

import csv
import collections

import pytest

from featlearn.data import parsers
from featlearn.data.fetch import fetch, match_checksum
from featlearn.data.prepare import prepare, read_classification
from featlearn.data.registry import DATASETS, PREPARED

pytestmark = pytest.mark.shared_data

EXPECTED = {
    "sst": {"train": 6_920, "dev": 872, "test": 1_821},
    "sstwsub": {"train": 98_794, "dev": 872, "test": 1_821},
    "imdb": {"train": 39_877, "dev": 5_016, "test": 5_107},
    "wikitext2": {"train": 2_088_628, "valid": 217_646, "test": 245_569},
    "ptb": {"train": 929_589, "valid": 73_760, "test": 82_430},
    "tinyshakespeare": {"train": 1_003_854, "valid": 111_540},
}
VOCAB = {"wikitext2": 33_278, "ptb": 10_000, "tinyshakespeare": 65}


@pytest.fixture(scope="module")
def raw_root(shared_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("raw")
    for name in {PREPARED[n].raw for n in EXPECTED}:
        ds = DATASETS[name]
        for f in ds.files:
            fetch(f, root / name / f.name, mirror=shared_data, mirror_dir=ds.mirror_dir, offline=True)
    return root


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_split_sizes(raw_root, tmp_path, name):
    stats = prepare(name, raw_root / PREPARED[name].raw, tmp_path / name)  # verifies checksums too
    key = "n" if PREPARED[name].kind == "classification" else "n_tokens"
    assert {s: v[key] for s, v in stats["splits"].items()} == EXPECTED[name]
    if name in VOCAB:
        assert stats["vocab_size"] == VOCAB[name]
    if name == "sst":
        assert stats["n_trees"] == {"train": 8_544, "dev": 1_101, "test": 2_210}
    if name == "imdb":
        assert stats["n_pooled"] == 50_000
        again = prepare(name, raw_root / "imdb", tmp_path / "again")
        assert again == stats
        assert read_classification(tmp_path / name / "dev.tsv") == read_classification(tmp_path / "again" / "dev.tsv")


def test_ag_news_test_split(shared_data):
    rows = parsers.read_ag_news_csv(shared_data / "ag_news" / "test.csv")
    assert len(rows) == 7_600
    assert collections.Counter(y for y, _ in rows) == {0: 1_900, 1: 1_900, 2: 1_900, 3: 1_900}
    train = shared_data / "ag_news" / "train.csv"
    if train.exists():
        assert len(parsers.read_ag_news_csv(train)) == 120_000


def test_every_mirror_file_of_the_registry_verifies(shared_data):
    checked = 0
    for ds in DATASETS.values():
        for f in ds.files:
            for accepted in f.accepted:
                path = shared_data / ds.mirror_dir / accepted.mirror_name
                if path.is_file():
                    assert match_checksum(path, f) == accepted
                    checked += 1
    manifest = list(csv.DictReader(open(shared_data / "MANIFEST.tsv"), delimiter="\t")) if (shared_data / "MANIFEST.tsv").exists() else []
    assert checked >= 10 and (not manifest or checked <= len(manifest))
