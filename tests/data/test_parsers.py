"""Unit tests of featlearn.data.parsers on tiny files in the real on-disk formats.

Fixtures come from tests/datafixtures.py (SST zip, aclImdb tar.gz, AG News CSV, WikiText zip, LM text).
"""

from __future__ import annotations

import collections
import csv
import gzip
import io
import re
import tarfile
import zipfile
from pathlib import Path

import pytest

import datafixtures as fx
from featlearn.data import parsers
from featlearn.data.fetch import DataError


def raises_with_path(path: Path):
    """``pytest.raises(DataError)`` whose message must contain ``path`` literally."""
    return pytest.raises(DataError, match=re.escape(str(path)))


# --------------------------------------------------------------------------------------------------
# normalise_text


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("It is n't bad .", "it is n t bad"),
        ("is n't", "is n t"),
        ("Wall St.", "wall st"),
        ("Wall St. Bears Claw Back", "wall st bears claw back"),
        ("André", "andré"),
        ("André's café", "andré s café"),
        ("ÉCOLE Über naïve", "école über naïve"),
        ("snake_case_word", "snake case word"),
        ("a__b", "a b"),
        ("a_-_b", "a b"),
        ("8 1\\/2", "8 1 2"),
        ("R2-D2 in 1977!!!", "r2 d2 in 1977"),
        ("  leading and trailing  ", "leading and trailing"),
        ("tab\tand\nnewline", "tab and newline"),
        ("...", ""),
        ("", ""),
    ],
)
def test_normalise_text(raw, expected):
    assert parsers.normalise_text(raw) == expected


def test_normalise_text_single_spaces_only():
    out = parsers.normalise_text("A -- b ,, c ;;; d\t\t e")
    assert out == "a b c d e"
    assert "  " not in out and out == out.strip()


# --------------------------------------------------------------------------------------------------
# parse_tree


def test_parse_tree_labels_and_leaves():
    t = parsers.parse_tree("(3 (2 The) (4 (3 good) (2 film)))")
    assert t.label == 3 and t.word is None and len(t.children) == 2
    assert t.leaves() == ["The", "good", "film"]
    assert [n.label for n in t.nodes()] == [3, 2, 4, 3, 2]  # pre-order
    assert t.children[0].word == "The" and t.children[0].children == []
    assert t.children[1].leaves() == ["good", "film"]


def test_parse_tree_single_leaf():
    t = parsers.parse_tree("(0 awful)")
    assert t.label == 0 and t.word == "awful" and t.leaves() == ["awful"] and list(t.nodes()) == [t]


def test_parse_tree_leaf_with_space_is_one_leaf():
    t = parsers.parse_tree("(4 (3 Great) (4 (2 8 1\\/2) (3 fun)))")
    assert t.leaves() == ["Great", "8 1\\/2", "fun"]
    leaf = t.children[1].children[0]
    assert leaf.label == 2 and leaf.word == "8 1\\/2" and leaf.children == []
    assert [n.label for n in t.nodes()] == [4, 3, 4, 2, 3]


def test_parse_tree_tolerates_extra_whitespace():
    t = parsers.parse_tree("  (1   (2 a)\t(1  b ) )  ")
    assert t.leaves() == ["a", "b"] and [n.label for n in t.nodes()] == [1, 2, 1]


@pytest.mark.parametrize(
    "bad",
    [
        "(3 (2 a)",  # missing ")"
        "(3 (2 a) (2 b)",  # missing ")" at the end
        "(7 a)",  # label outside 0..4
        "(-1 a)",
        "(x a)",  # label not an integer
        "(2 a) extra",  # trailing tokens
        "(2 a) (2 b)",  # two trees on one line
        "",  # empty
        "   ",
        "(2 )",  # empty leaf
        "2 a)",  # no opening "("
        "(2 (2 a) b)",  # a word after children
        "(2 a))",
    ],
)
def test_malformed_trees_raise_value_error(bad):
    with pytest.raises(ValueError):
        parsers.parse_tree(bad)


def test_sentiment_to_binary():
    assert [parsers.sentiment_to_binary(y) for y in range(5)] == [0, 0, None, 1, 1]


# --------------------------------------------------------------------------------------------------
# SST zip

SST_TRAIN_SENTENCES = [(1, "The good film"), (0, "It is n't bad"), (1, "Great 8 1\\/2 fun"), (0, "Awful ,")]
SST_DEV_SENTENCES = [(1, "Nice work"), (0, "Dull .")]
SST_TEST_SENTENCES = [(1, "Brilliant !"), (0, "Terrible film"), (0, "Not that good")]

# Every non-neutral node of datafixtures.SST_TREES["train"], in pre-order, counted by hand:
# tree 1: 3 of 5 nodes, tree 2: 5 of 7, tree 3: 0 of 5, tree 4: 4 of 5, tree 5: 2 of 3 -> 14.
SST_TRAIN_PHRASES = [
    (1, "The good film"),
    (1, "good film"),
    (1, "good"),
    (0, "It is n't bad"),
    (0, "is n't bad"),
    (0, "n't bad"),
    (0, "n't"),
    (0, "bad"),
    (1, "Great 8 1\\/2 fun"),
    (1, "Great"),
    (1, "8 1\\/2 fun"),
    (1, "fun"),
    (0, "Awful ,"),
    (0, "Awful"),
]


@pytest.fixture
def sst_trees(tmp_path):
    return parsers.read_sst_trees(fx.make_sst_zip(tmp_path))


def test_read_sst_trees_counts(sst_trees):
    assert list(sst_trees) == ["train", "dev", "test"]
    assert {k: len(v) for k, v in sst_trees.items()} == {"train": 5, "dev": 3, "test": 3}
    assert [t.label for t in sst_trees["train"]] == [3, 1, 2, 4, 0]
    assert [t.label for t in sst_trees["dev"]] == [3, 1, 2]
    assert [t.label for t in sst_trees["test"]] == [4, 0, 1]


def test_sst_sentences_drop_neutral_and_binarise(sst_trees):
    assert parsers.sst_sentences(sst_trees["train"]) == SST_TRAIN_SENTENCES
    assert parsers.sst_sentences(sst_trees["dev"]) == SST_DEV_SENTENCES
    assert parsers.sst_sentences(sst_trees["test"]) == SST_TEST_SENTENCES


def test_sst_phrases_every_non_neutral_node(sst_trees):
    phrases = parsers.sst_phrases(sst_trees["train"])
    assert len(phrases) == 14
    assert phrases == SST_TRAIN_PHRASES
    # single words are included, and the sentences are a subset of the phrases
    assert (1, "good") in phrases and (0, "n't") in phrases
    assert set(SST_TRAIN_SENTENCES) <= set(phrases)
    assert len(parsers.sst_phrases(sst_trees["dev"])) == 2 + 2 + 0
    assert len(parsers.sst_phrases(sst_trees["test"])) == 2 + 2 + 3


def test_sst_phrases_keep_duplicates(tmp_path):
    trees = dict(fx.SST_TREES, train=["(4 (4 good) (4 good))"])
    phrases = parsers.sst_phrases(parsers.read_sst_trees(fx.make_sst_zip(tmp_path, trees))["train"])
    assert phrases == [(1, "good good"), (1, "good"), (1, "good")]


def test_read_sst_trees_skips_blank_lines(tmp_path):
    path = tmp_path / "blank" / "trainDevTestTrees_PTB.zip"
    path.parent.mkdir()
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("trees/train.txt", "\n(3 (2 a) (3 b))\n\n  \n(1 c)\n")
        zf.writestr("trees/dev.txt", "(2 d)\n")
        zf.writestr("trees/test.txt", "(0 e)")  # no final newline
    trees = parsers.read_sst_trees(path)
    assert {k: len(v) for k, v in trees.items()} == {"train": 2, "dev": 1, "test": 1}


@pytest.mark.parametrize("fraction", [0.3, 0.5, 0.9])
def test_truncated_sst_zip_raises_data_error_with_path(tmp_path, fraction):
    path = fx.truncate(fx.make_sst_zip(tmp_path), fraction)
    with raises_with_path(path) as exc:
        parsers.read_sst_trees(path)
    assert "not a complete SST tree archive" in str(exc.value)


def test_non_zip_sst_file_raises_data_error_with_path(tmp_path):
    path = tmp_path / "trainDevTestTrees_PTB.zip"
    path.write_text("(3 (2 not) (3 a zip))\n")
    with raises_with_path(path):
        parsers.read_sst_trees(path)


def test_sst_zip_without_trees_raises_data_error(tmp_path):
    path = tmp_path / "other.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("readme.txt", "no trees")
    with raises_with_path(path):
        parsers.read_sst_trees(path)


def test_malformed_tree_in_zip_names_member_and_line(tmp_path):
    trees = dict(fx.SST_TREES, dev=["(3 (2 Nice) (3 work))", "(3 (2 broken)"])
    path = fx.make_sst_zip(tmp_path, trees)
    with pytest.raises(DataError) as exc:
        parsers.read_sst_trees(path)
    assert f"{path}:trees/dev.txt:2" in str(exc.value)


# --------------------------------------------------------------------------------------------------
# IMDB tar.gz


def test_read_imdb_tar_fixture(tmp_path):
    reviews = parsers.read_imdb_tar(fx.make_imdb_tar(tmp_path))
    assert len(reviews) == 24
    # train before test, pos (1) before neg (0), ascending id
    assert [(r.split, r.label) for r in reviews] == (
        [("train", 1)] * 6 + [("train", 0)] * 6 + [("test", 1)] * 6 + [("test", 0)] * 6
    )
    assert [r.review_id for r in reviews] == list(range(6)) * 4
    assert [r.rating for r in reviews[:6]] == [7, 8, 9, 10, 7, 8]
    assert [r.rating for r in reviews[6:12]] == [1, 2, 3, 4, 1, 2]
    assert all((r.rating >= 7) == (r.label == 1) for r in reviews)
    assert collections.Counter(r.label for r in reviews) == {0: 12, 1: 12}
    assert reviews[0].text == "A wonderful movie, review train 0.<br /><br />Truly wonderful!"
    assert reviews[-1].text == "A dreadful movie, review test 5.<br /><br />Truly dreadful!"
    # README, imdb.vocab and urls_pos.txt are not reviews
    assert not any(r.text.startswith(("toy", "the", "http")) for r in reviews)
    expected = {(s, int(p == "pos"), i, rating, text) for s, p, i, rating, text in fx.imdb_reviews()}
    assert {(r.split, r.label, r.review_id, r.rating, r.text) for r in reviews} == expected


def test_read_imdb_tar_fixed_order_regardless_of_member_order(tmp_path):
    reviews = [
        ("test", "neg", 3, 2, "t n 3"),
        ("train", "neg", 10, 1, "tr n 10"),
        ("test", "pos", 0, 9, "t p 0"),
        ("train", "pos", 10, 8, "tr p 10"),
        ("train", "neg", 2, 4, "tr n 2"),
        ("train", "pos", 2, 7, "tr p 2"),  # numeric, not lexicographic, id order: 2 < 10
    ]
    out = parsers.read_imdb_tar(fx.make_imdb_tar(tmp_path, reviews))
    assert [r.text for r in out] == ["tr p 2", "tr p 10", "tr n 2", "tr n 10", "t p 0", "t n 3"]
    assert [(r.review_id, r.rating) for r in out] == [(2, 7), (10, 8), (2, 4), (10, 1), (0, 9), (3, 2)]


def test_read_imdb_tar_accepts_dot_slash_prefix_and_plain_tar(tmp_path):
    path = tmp_path / "plain.tar"
    with tarfile.open(path, "w") as tf:
        for name, data in (("./aclImdb/train/pos/5_10.txt", b"great"), ("./aclImdb/test/neg/1_3.txt", b"bad")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo("aclImdb/train/neg/7_1.txt")  # a directory with a review-like name
        info.type = tarfile.DIRTYPE
        tf.addfile(info)
    out = parsers.read_imdb_tar(path)
    assert [(r.split, r.label, r.review_id, r.rating, r.text) for r in out] == [
        ("train", 1, 5, 10, "great"),
        ("test", 0, 1, 3, "bad"),
    ]


def test_clean_imdb_review():
    assert parsers.clean_imdb_review("One.<br /><br />Two.") == "One.  Two."
    assert parsers.clean_imdb_review("no breaks") == "no breaks"
    assert parsers.normalise_text(parsers.clean_imdb_review("A wonderful movie.<br /><br />Truly!")) == "a wonderful movie truly"


@pytest.mark.parametrize("fraction", [0.3, 0.6, 0.95])
def test_truncated_imdb_tar_raises_data_error_with_path(tmp_path, fraction):
    path = fx.truncate(fx.make_imdb_tar(tmp_path), fraction)
    with raises_with_path(path) as exc:
        parsers.read_imdb_tar(path)
    assert "not a complete aclImdb archive" in str(exc.value)


def test_non_tar_imdb_file_raises_data_error(tmp_path):
    path = tmp_path / "aclImdb_v1.tar.gz"
    path.write_bytes(gzip.compress(b"not a tar archive at all " * 40))
    with raises_with_path(path):
        parsers.read_imdb_tar(path)


def test_imdb_tar_without_reviews_raises_data_error(tmp_path):
    empty = tmp_path / "empty.tar.gz"
    with tarfile.open(empty, "w:gz"):
        pass
    with raises_with_path(empty) as exc:
        parsers.read_imdb_tar(empty)
    assert "holds no" in str(exc.value)
    # only non-review members (README, vocab, urls, unsup) is just as empty
    other = tmp_path / "only_extras.tar.gz"
    with tarfile.open(other, "w:gz") as tf:
        for name in ("aclImdb/README", "aclImdb/train/urls_pos.txt", "aclImdb/train/unsup/0_0.txt"):
            info = tarfile.TarInfo(name)
            info.size = 1
            tf.addfile(info, io.BytesIO(b"x"))
    with raises_with_path(other):
        parsers.read_imdb_tar(other)


# --------------------------------------------------------------------------------------------------
# AG News CSV


def test_read_ag_news_csv_fixture(tmp_path):
    path = fx.make_ag_news_csv(tmp_path)
    raw = path.read_text(encoding="utf-8")
    assert '""resume""' in raw and "\\n" in raw  # the fixture really has escaped quotes and a literal \n
    rows = parsers.read_ag_news_csv(path)
    assert rows == [
        (
            2,
            "Wall St. Bears Claw Back Into the Black (Reuters) Reuters - Short-sellers, Wall Street's "
            "dwindling\\band of ultra-cynics.",
        ),
        (0, 'Leaders meet Talks "resume" in the capital.'),
        (1, "Team wins cup A late goal, again."),
        (3, "New chip Faster chips and more cores."),
    ]
    assert [y for y, _ in rows] == [int(r[0]) - 1 for r in fx.AG_ROWS]
    assert all("\\n" not in t for _, t in rows)


def test_read_ag_news_csv_all_classes_and_newlines(tmp_path):
    rows = [(str(c), f"T{c}", f"line one\\nline two\\n{c}") for c in (1, 2, 3, 4)]
    out = parsers.read_ag_news_csv(fx.make_ag_news_csv(tmp_path, rows=rows))
    assert out == [(c - 1, f"T{c} line one line two {c}") for c in (1, 2, 3, 4)]


def test_read_ag_news_csv_unquoted_fields(tmp_path):
    path = tmp_path / "test.csv"
    path.write_text('3,Plain title,"Has, a comma"\n1,x,y\n', encoding="utf-8")
    assert parsers.read_ag_news_csv(path) == [(2, "Plain title Has, a comma"), (0, "x y")]


@pytest.mark.parametrize(
    "bad_row",
    [("5", "t", "d"), ("0", "t", "d"), ("x", "t", "d"), ("-1", "t", "d"), ("1", "only two"), ("1", "a", "b", "c"), ("",)],
)
def test_bad_ag_news_row_names_file_and_line(tmp_path, bad_row):
    path = fx.make_ag_news_csv(tmp_path, rows=[("1", "ok", "fine"), ("2", "also", "fine"), bad_row, ("3", "never", "read")])
    with pytest.raises(DataError) as exc:
        parsers.read_ag_news_csv(path)
    assert f"{path}:3:" in str(exc.value)


def test_empty_ag_news_csv_raises_data_error(tmp_path):
    path = tmp_path / "train.csv"
    path.write_text("", encoding="utf-8")
    with raises_with_path(path) as exc:
        parsers.read_ag_news_csv(path)
    assert "empty" in str(exc.value)


# --------------------------------------------------------------------------------------------------
# Language-modelling text

TRAIN_TOKENS = "= Valkyria = <eos> <eos> the cat sat on the mat <unk> . <eos> the dog sat . <eos>".split()


def test_lm_lines_eos_after_every_line_including_blank():
    assert list(parsers.lm_lines([" a b ", "", "   ", "c"])) == [["a", "b", "<eos>"], ["<eos>"], ["<eos>"], ["c", "<eos>"]]
    assert list(parsers.lm_lines([])) == []
    assert parsers.EOS == "<eos>"


def test_lm_tokens():
    assert parsers.lm_tokens(" a b \n\n c \n") == ["a", "b", "<eos>", "<eos>", "c", "<eos>"]
    assert parsers.lm_tokens("no final newline") == ["no", "final", "newline", "<eos>"]
    assert parsers.lm_tokens("") == []
    assert parsers.lm_tokens(fx.LM_TEXT["train"]) == TRAIN_TOKENS
    assert parsers.lm_tokens(fx.LM_TEXT["test"]) == ["the", "dog", ".", "<eos>", "<unk>", "<eos>"]


def test_build_vocab_first_occurrence_order():
    assert parsers.build_vocab(["b", "a", "b", "c", "a"]) == ["b", "a", "c"]
    assert parsers.build_vocab([]) == []
    assert parsers.build_vocab(iter(TRAIN_TOKENS)) == [
        "=",
        "Valkyria",
        "<eos>",
        "the",
        "cat",
        "sat",
        "on",
        "mat",
        "<unk>",
        ".",
        "dog",
    ]


def test_open_lm_text_plain_file(tmp_path):
    (path,) = fx.make_lm_files(tmp_path, "wikitext-2", {"train": "train.txt"})
    with parsers.open_lm_text(path) as lines:
        got = list(lines)
    assert got == [" = Valkyria = ", "", " the cat sat on the mat <unk> . ", " the dog sat . "]
    with parsers.open_lm_text(path) as lines:
        assert [t for toks in parsers.lm_lines(lines) for t in toks] == TRAIN_TOKENS


@pytest.mark.parametrize("split", ["train", "valid", "test"])
def test_open_lm_text_zip_member(tmp_path, split):
    zpath = fx.make_wikitext_zip(tmp_path)
    assert zpath.name == "wikitext-103-v1.zip"
    with parsers.open_lm_text(zpath, f"wiki.{split}.tokens") as lines:
        tokens = [t for toks in parsers.lm_lines(lines) for t in toks]
    assert tokens == parsers.lm_tokens(fx.LM_TEXT[split])


def test_open_lm_text_missing_member_raises_data_error(tmp_path):
    zpath = fx.make_wikitext_zip(tmp_path)
    with raises_with_path(zpath) as exc:
        with parsers.open_lm_text(zpath, "wiki.nothing.tokens"):
            pass
    assert "wiki.nothing.tokens" in str(exc.value)


def test_open_lm_text_bad_zip_and_bad_encoding(tmp_path):
    zpath = fx.truncate(fx.make_wikitext_zip(tmp_path), 0.5)
    with raises_with_path(zpath):
        with parsers.open_lm_text(zpath, "wiki.train.tokens"):
            pass
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("caf\xe9 au lait\n".encode("latin-1"))
    with raises_with_path(latin) as exc:
        with parsers.open_lm_text(latin) as lines:
            list(lines)
    assert "UTF-8" in str(exc.value)


def test_ag_news_fixture_is_valid_csv(tmp_path):
    # sanity check of the fixture builder itself: every row has 3 fields
    with open(fx.make_ag_news_csv(tmp_path), newline="", encoding="utf-8") as fh:
        assert [len(r) for r in csv.reader(fh)] == [3, 3, 3, 3]
