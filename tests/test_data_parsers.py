"""Parsers on tiny files in the real on-disk formats (SST zip, aclImdb tar.gz, AG News CSV, LM text)."""

from __future__ import annotations

import tarfile
import zipfile

import pytest

import datafixtures as fx
from featlearn.data import parsers
from featlearn.data.fetch import DataError


@pytest.mark.parametrize(
    "raw, expected",
    [("It is n't bad .", "it is n t bad"), ("Wall St. Bears", "wall st bears"), ("André's café", "andré s café"), ("a_b--c", "a b c"), ("  ", "")],
)
def test_normalise_text(raw, expected):
    assert parsers.normalise_text(raw) == expected


def test_parse_tree_and_leaf_with_space():
    t = parsers.parse_tree("(4 (3 Great) (4 (2 8 1\\/2) (3 fun)))")
    assert t.label == 4 and t.leaves() == ["Great", "8 1\\/2", "fun"]
    assert [n.label for n in t.nodes()] == [4, 3, 4, 2, 3]


@pytest.mark.parametrize("bad", ["(3 (2 a)", "(7 a)", "(2 a) extra", "", "(2 )"])
def test_malformed_trees_raise(bad):
    with pytest.raises(ValueError):
        parsers.parse_tree(bad)


def test_sst_sentences_and_phrases(tmp_path):
    trees = parsers.read_sst_trees(fx.make_sst_zip(tmp_path))
    assert {k: len(v) for k, v in trees.items()} == {"train": 5, "dev": 3, "test": 3}
    assert parsers.sst_sentences(trees["train"]) == [(1, "The good film"), (0, "It is n't bad"), (1, "Great 8 1\\/2 fun"), (0, "Awful ,")]
    phrases = parsers.sst_phrases(trees["train"])
    # non-neutral nodes counted by hand in datafixtures.SST_TREES["train"]
    assert len(phrases) == 3 + 5 + 0 + 4 + 2
    assert (1, "good") in phrases and (0, "n't bad") in phrases and (0, "Awful") in phrases


def test_truncated_or_foreign_sst_archive(tmp_path):
    path = fx.truncate(fx.make_sst_zip(tmp_path), 0.6)
    with pytest.raises(DataError, match=str(path)):
        parsers.read_sst_trees(path)
    other = tmp_path / "x.zip"
    with zipfile.ZipFile(other, "w") as zf:
        zf.writestr("readme.txt", "no trees")
    with pytest.raises(DataError, match="not a complete SST tree archive"):
        parsers.read_sst_trees(other)


def test_imdb_tar(tmp_path):
    reviews = parsers.read_imdb_tar(fx.make_imdb_tar(tmp_path))
    assert len(reviews) == 24
    assert [r.split for r in reviews[:12]] == ["train"] * 12 and reviews[0].label == 1 and reviews[6].label == 0
    assert [r.review_id for r in reviews[:6]] == list(range(6))
    assert reviews[1].rating == 8 and reviews[7].rating == 2
    assert "<br />" not in parsers.clean_imdb_review(reviews[0].text)


def test_truncated_and_empty_imdb_tar(tmp_path):
    path = fx.truncate(fx.make_imdb_tar(tmp_path), 0.5)
    with pytest.raises(DataError, match="not a complete aclImdb archive"):
        parsers.read_imdb_tar(path)
    empty = tmp_path / "empty.tar.gz"
    with tarfile.open(empty, "w:gz"):
        pass
    with pytest.raises(DataError, match="holds no"):
        parsers.read_imdb_tar(empty)


def test_ag_news_csv(tmp_path):
    rows = parsers.read_ag_news_csv(fx.make_ag_news_csv(tmp_path))
    assert [y for y, _ in rows] == [2, 0, 1, 3]
    assert rows[1][1] == 'Leaders meet Talks "resume" in the capital.'
    assert rows[3][1] == "New chip Faster chips and more cores."  # literal backslash-n becomes a space


@pytest.mark.parametrize("row", [("5", "t", "d"), ("1", "only two")])
def test_bad_ag_news_rows(tmp_path, row):
    path = fx.make_ag_news_csv(tmp_path, rows=[("1", "ok", "fine"), row])
    with pytest.raises(DataError, match=r"train\.csv:2"):
        parsers.read_ag_news_csv(path)


def test_lm_tokens_and_vocab(tmp_path):
    assert parsers.lm_tokens(" a b \n\n c \n") == ["a", "b", "<eos>", "<eos>", "c", "<eos>"]
    assert parsers.build_vocab(["b", "a", "b", "c"]) == ["b", "a", "c"]
    zpath = fx.make_wikitext_zip(tmp_path)
    with parsers.open_lm_text(zpath, "wiki.valid.tokens") as lines:
        assert [t for toks in parsers.lm_lines(lines) for t in toks] == ["the", "cat", "sat", ".", "<eos>"]
    with pytest.raises(DataError, match="no member"):
        with parsers.open_lm_text(zpath, "wiki.nothing.tokens"):
            pass
