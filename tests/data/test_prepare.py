"""featlearn.data.prepare on fixture files: outputs, counts, vocabularies, errors and determinism."""

from __future__ import annotations

import collections
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

import datafixtures as fx
from featlearn.data import parsers
from featlearn.data.fetch import ChecksumError, DataError
from featlearn.data.prepare import prepare, read_classification, read_vocab, seeded_split
from featlearn.data.registry import PREPARED, get_dataset
from featlearn.io import load_tensor

SPECIALS = ["<pad>", "unk", "<eos>"]
SIZES = {"imdb": (16, 4, 4), "ag_news": (1,)}
AG_TEST_ROWS = [
    ("2", "Final score", '"Close" game, said the coach.'),
    ("4", "Robots", "Smaller\\nfaster robots."),
    ("1", "Summit", "Leaders agree."),
]


def make_raw(tmp_path: Path, dataset: str, lm_text: dict[str, str] | None = None) -> Path:
    """Fixture raw files of registry ``dataset`` in one folder, under the registry's local names."""
    src, out = tmp_path / "src", tmp_path / "raw" / dataset
    out.mkdir(parents=True, exist_ok=True)
    lm_text = lm_text or fx.LM_TEXT
    if dataset == "sst":
        shutil.copy(fx.make_sst_zip(src), out / "trainDevTestTrees_PTB.zip")
    elif dataset == "imdb":
        shutil.copy(fx.make_imdb_tar(src), out / "aclImdb_v1.tar.gz")
    elif dataset == "ag_news":
        shutil.copy(fx.make_ag_news_csv(src), out / "train.csv")
        shutil.copy(fx.make_ag_news_csv(src, rows=AG_TEST_ROWS, name="test.csv"), out / "test.csv")
    elif dataset == "wikitext2":
        # mirror layout is wikitext-2/{train,valid,test}.txt; locally wiki.{split}.tokens
        for path in fx.make_lm_files(src, "wikitext-2", {s: f"{s}.txt" for s in lm_text}, text=lm_text):
            shutil.copy(path, out / f"wiki.{path.stem}.tokens")
    elif dataset == "ptb":
        for path in fx.make_lm_files(src, "ptb", {s: f"ptb.{s}.txt" for s in lm_text}, text=lm_text):
            shutil.copy(path, out / path.name)
    elif dataset == "wikitext103":
        shutil.copy(fx.make_wikitext_zip(src, text=lm_text), out / "wikitext-103-v1.zip")
    elif dataset == "tinyshakespeare":
        shutil.copy(fx.make_tinyshakespeare(src), out / "input.txt")
    else:
        raise KeyError(dataset)
    assert sorted(p.name for p in out.iterdir()) == sorted(f.name for f in get_dataset(dataset).files)
    return out


def run_prepare(tmp_path: Path, name: str, out_name: str = "prepared", **kwargs) -> tuple[dict, Path]:
    raw = tmp_path / "raw" / PREPARED[name].raw
    if not raw.is_dir():
        make_raw(tmp_path, PREPARED[name].raw)
    out = tmp_path / out_name / name
    kwargs.setdefault("split_sizes", SIZES.get(name))
    stats = prepare(name, raw, out, verify=False, **kwargs)
    return stats, out


def tsv_counts(out: Path, splits) -> collections.Counter:
    counts: collections.Counter = collections.Counter()
    for split in splits:
        for _, text in read_classification(out / f"{split}.tsv"):
            counts.update(text.split())
    return counts


# --------------------------------------------------------------------------------------------------
# every prepared dataset from fixtures


@pytest.mark.parametrize("name", sorted(PREPARED))
def test_outputs_exist_and_stats_match_files(tmp_path, name):
    spec = PREPARED[name]
    stats, out = run_prepare(tmp_path, name)
    outputs = spec.outputs(tmp_path / "prepared")
    assert len(outputs) == len(spec.splits) + 2
    for path in outputs:
        assert Path(path).is_file(), path
    assert sorted(p.name for p in out.iterdir()) == sorted(Path(p).name for p in outputs)  # no temp files left
    assert json.loads((out / "stats.json").read_text(encoding="utf-8")) == stats
    vocab = read_vocab(out / "vocab.json")
    assert len(vocab) == len(set(vocab)) == stats["vocab_size"]
    assert list(stats["splits"]) == list(spec.splits)
    for split in spec.splits:
        if spec.kind == "classification":
            rows = read_classification(out / f"{split}.tsv")
            assert stats["splits"][split]["n"] == len(rows)
            assert stats["splits"][split]["labels"] == {
                str(k): v for k, v in sorted(collections.Counter(y for y, _ in rows).items())
            }
            lengths = [len(t.split()) for _, t in rows]
            assert stats["splits"][split]["mean_length"] == pytest.approx(np.mean(lengths), abs=1e-3)
        else:
            ids = load_tensor(out / f"{split}.pt")
            assert stats["splits"][split]["n_tokens"] == ids.numel()


@pytest.mark.parametrize("name", [n for n in sorted(PREPARED) if PREPARED[n].kind == "classification"])
def test_classification_tables_and_vocab(tmp_path, name):
    spec = PREPARED[name]
    stats, out = run_prepare(tmp_path, name)
    allowed = {0, 1, 2, 3} if name == "ag_news" else {0, 1}
    for split in spec.splits:
        text = (out / f"{split}.tsv").read_text(encoding="utf-8")
        lines = text.split("\n")
        assert lines[0] == "label\ttext" and lines[-1] == ""
        for line in lines[1:-1]:
            label, text_ = line.split("\t")  # exactly one tab
            assert int(label) in allowed
            assert text_ == parsers.normalise_text(text_)  # already normalised: lowercase, single spaces
    vocab = read_vocab(out / "vocab.json")
    assert vocab[:3] == SPECIALS
    counts = tsv_counts(out, spec.splits)
    assert set(vocab[3:]) == set(counts)  # every type of every split once, nothing else
    assert vocab[3:] == sorted(counts, key=lambda w: (-counts[w], w))  # descending frequency, then alphabetical
    assert stats["vocab_size"] == 3 + len(counts)


def test_sst_prepared_rows(tmp_path):
    stats, out = run_prepare(tmp_path, "sst")
    assert read_classification(out / "train.tsv") == [
        (1, "the good film"),
        (0, "it is n t bad"),
        (1, "great 8 1 2 fun"),
        (0, "awful"),
    ]
    assert read_classification(out / "dev.tsv") == [(1, "nice work"), (0, "dull")]
    assert read_classification(out / "test.tsv") == [(1, "brilliant"), (0, "terrible film"), (0, "not that good")]
    assert stats["n_trees"] == {"train": 5, "dev": 3, "test": 3}
    assert {s: v["n"] for s, v in stats["splits"].items()} == {"train": 4, "dev": 2, "test": 3}
    assert stats["splits"]["train"]["labels"] == {"0": 2, "1": 2}


def test_sstwsub_train_is_every_non_neutral_phrase(tmp_path):
    stats, out = run_prepare(tmp_path, "sstwsub")
    trees = parsers.read_sst_trees(tmp_path / "raw" / "sst" / "trainDevTestTrees_PTB.zip")
    phrases = parsers.sst_phrases(trees["train"])
    assert len(phrases) == 14  # counted by hand in test_parsers.SST_TRAIN_PHRASES
    train = read_classification(out / "train.tsv")
    assert stats["splits"]["train"]["n"] == len(train) == 14
    assert train == [(y, parsers.normalise_text(t)) for y, t in phrases]
    assert (0, "n t") in train and (1, "good") in train
    # dev and test stay sentence level, identical to the sst dataset
    assert {s: v["n"] for s, v in stats["splits"].items()} == {"train": 14, "dev": 2, "test": 3}
    assert read_classification(out / "dev.tsv") == [(1, "nice work"), (0, "dull")]
    assert stats["n_trees"] == {"train": 5, "dev": 3, "test": 3}


def test_imdb_prepared_split(tmp_path):
    stats, out = run_prepare(tmp_path, "imdb", seed=7)
    assert stats["n_pooled"] == 24 and stats["seed"] == 7
    assert {s: v["n"] for s, v in stats["splits"].items()} == {"train": 16, "dev": 4, "test": 4}
    rows = {s: read_classification(out / f"{s}.tsv") for s in ("train", "dev", "test")}
    pooled = [r for s in rows.values() for r in s]
    expected = [
        (
            int(pol == "pos"),
            f"a {'wonderful' if pol == 'pos' else 'dreadful'} movie review {split} {i} truly "
            f"{'wonderful' if pol == 'pos' else 'dreadful'}",
        )
        for split, pol, i, _, _ in fx.imdb_reviews()
    ]
    assert sorted(pooled) == sorted(expected)  # every review exactly once across the splits
    assert all("br" not in t.split() for _, t in pooled)
    # the split is the seeded permutation of the fixed review order
    order = [
        (r.label, parsers.normalise_text(parsers.clean_imdb_review(r.text)))
        for r in parsers.read_imdb_tar(tmp_path / "raw" / "imdb" / "aclImdb_v1.tar.gz")
    ]
    for split, ix in zip(("train", "dev", "test"), seeded_split(24, (16, 4, 4), 7)):
        assert rows[split] == [order[i] for i in ix]


def test_imdb_split_sizes_may_leave_reviews_out(tmp_path):
    stats, _ = run_prepare(tmp_path, "imdb", split_sizes=(10, 2, 2))
    assert {s: v["n"] for s, v in stats["splits"].items()} == {"train": 10, "dev": 2, "test": 2} and stats["n_pooled"] == 24
    with pytest.raises(DataError):
        run_prepare(tmp_path, "imdb", out_name="too_big", split_sizes=(20, 4, 4))


def test_ag_news_prepared(tmp_path):
    stats, out = run_prepare(tmp_path, "ag_news")
    train, dev, test = (read_classification(out / f"{s}.tsv") for s in ("train", "dev", "test"))
    assert (len(train), len(dev), len(test)) == (3, 1, 3)
    expected_train = [(int(c) - 1, parsers.normalise_text(f"{t} {d}".replace("\\n", " "))) for c, t, d in fx.AG_ROWS]
    assert sorted(train + dev) == sorted(expected_train)  # seeded dev split out of train.csv
    assert test == [
        (1, "final score close game said the coach"),
        (3, "robots smaller faster robots"),
        (0, "summit leaders agree"),
    ]
    assert (
        2,
        "wall st bears claw back into the black reuters reuters short sellers wall street s dwindling band of ultra cynics",
    ) in train + dev
    assert stats["classes"] == ["World", "Sports", "Business", "Sci/Tech"]
    assert stats["seed"] == 2021
    # the dev rows are the seeded choice from the 4 train.csv rows
    dv = seeded_split(4, (3, 1), 2021)[1]
    assert dev == [expected_train[i] for i in dv]


def test_ag_news_dev_larger_than_train_raises(tmp_path):
    with pytest.raises(DataError):
        run_prepare(tmp_path, "ag_news", split_sizes=(5,))


LM_EXPECTED = {
    "train": "= Valkyria = <eos> <eos> the cat sat on the mat <unk> . <eos> the dog sat . <eos>".split(),
    "valid": "the cat sat . <eos>".split(),
    "test": "the dog . <eos> <unk> <eos>".split(),
}
LM_VOCAB = ["=", "Valkyria", "<eos>", "the", "cat", "sat", "on", "mat", "<unk>", ".", "dog"]


@pytest.mark.parametrize("name", ["wikitext2", "wikitext103", "ptb"])
def test_word_lm_tensors_decode_to_tokens(tmp_path, name):
    stats, out = run_prepare(tmp_path, name)
    vocab = read_vocab(out / "vocab.json")
    assert vocab == LM_VOCAB  # training split, first-occurrence order; no specials added
    assert stats["vocab_size"] == 11
    for split in ("train", "valid", "test"):
        ids = load_tensor(out / f"{split}.pt")
        assert isinstance(ids, torch.Tensor) and ids.dtype == torch.int64 and ids.dim() == 1
        assert [vocab[i] for i in ids.tolist()] == LM_EXPECTED[split]
        assert stats["splits"][split]["n_tokens"] == len(LM_EXPECTED[split])
    assert load_tensor(out / "train.pt").tolist()[:5] == [0, 1, 0, 2, 2]


def test_word_lm_one_eos_per_line(tmp_path):
    text = {"train": "a b\n\n\nc\n", "valid": "\n", "test": "b a c"}  # blank lines and no final newline
    raw = make_raw(tmp_path, "ptb", lm_text=text)
    stats = prepare("ptb", raw, tmp_path / "out", verify=False)
    assert {s: v["n_tokens"] for s, v in stats["splits"].items()} == {"train": 7, "valid": 1, "test": 4}
    vocab = read_vocab(tmp_path / "out" / "vocab.json")
    assert vocab == ["a", "b", "<eos>", "c"]
    assert [vocab[i] for i in load_tensor(tmp_path / "out" / "train.pt").tolist()] == [
        "a",
        "b",
        "<eos>",
        "<eos>",
        "<eos>",
        "c",
        "<eos>",
    ]


def test_tinyshakespeare_char_split(tmp_path):
    stats, out = run_prepare(tmp_path, "tinyshakespeare")
    text = fx.SHAKESPEARE
    n_train = int(len(text) * 0.9)
    vocab = read_vocab(out / "vocab.json")
    assert vocab == sorted(set(text)) and "\n" in vocab and " " in vocab
    train, valid = (load_tensor(out / f"{s}.pt") for s in ("train", "valid"))
    assert train.dtype == valid.dtype == torch.int64
    assert (train.numel(), valid.numel()) == (n_train, len(text) - n_train) == (72, 9)
    assert "".join(vocab[i] for i in train.tolist()) == text[:n_train]
    assert "".join(vocab[i] for i in valid.tolist()) == text[n_train:]
    assert stats["n_chars"] == len(text) == 81
    assert stats["vocab_size"] == len(set(text))
    assert {s: v["n_tokens"] for s, v in stats["splits"].items()} == {"train": 72, "valid": 9}


# --------------------------------------------------------------------------------------------------
# errors


@pytest.mark.parametrize("name, split", [("ptb", "valid"), ("ptb", "test"), ("wikitext2", "test"), ("wikitext103", "valid")])
def test_token_outside_training_vocabulary_raises(tmp_path, name, split):
    text = dict(fx.LM_TEXT, **{split: " the zebra sat \n"})
    raw = make_raw(tmp_path, name, lm_text=text)
    with pytest.raises(DataError, match="zebra") as exc:
        prepare(name, raw, tmp_path / "out", verify=False)
    assert split in str(exc.value)


@pytest.mark.parametrize("name", sorted(PREPARED))
def test_verify_rejects_fixtures_and_writes_nothing(tmp_path, name):
    raw = make_raw(tmp_path, PREPARED[name].raw)
    out = tmp_path / "out" / name
    with pytest.raises(ChecksumError) as exc:
        prepare(name, raw, out, verify=True, split_sizes=SIZES.get(name))
    assert isinstance(exc.value, DataError)
    assert "checksum mismatch" in str(exc.value) and str(raw) in str(exc.value)
    assert not out.exists() or not any(out.rglob("*"))


def test_verify_is_the_default(tmp_path):
    raw = make_raw(tmp_path, "sst")
    with pytest.raises(ChecksumError):
        prepare("sst", raw, tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", sorted(PREPARED))
def test_missing_raw_file_raises_with_path(tmp_path, name):
    raw = make_raw(tmp_path, PREPARED[name].raw)
    victim = sorted(raw.iterdir())[-1]
    victim.unlink()
    out = tmp_path / "out"
    with pytest.raises(DataError) as exc:
        prepare(name, raw, out, verify=False, split_sizes=SIZES.get(name))
    assert str(victim) in str(exc.value) and "missing raw file" in str(exc.value)
    assert not out.exists()


def test_missing_raw_dir_raises_with_path(tmp_path):
    with pytest.raises(DataError, match="missing raw file") as exc:
        prepare("tinyshakespeare", tmp_path / "nowhere", tmp_path / "out", verify=False)
    assert str(tmp_path / "nowhere" / "input.txt") in str(exc.value)


def test_corrupt_raw_file_raises_data_error(tmp_path):
    raw = make_raw(tmp_path, "sst")
    fx.truncate(raw / "trainDevTestTrees_PTB.zip", 0.5)
    with pytest.raises(DataError, match="not a complete SST tree archive"):
        prepare("sst", raw, tmp_path / "out", verify=False)
    assert not (tmp_path / "out").exists()


def test_unknown_name_raises_key_error(tmp_path):
    with pytest.raises(KeyError):
        prepare("mnist", tmp_path, tmp_path / "out", verify=False)


def test_read_classification_and_vocab_reject_other_files(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("y\tx\n1\ta\n", encoding="utf-8")
    with pytest.raises(DataError, match="not a prepared classification table"):
        read_classification(bad)
    good = tmp_path / "good.tsv"
    good.write_text("label\ttext\n1\ta b\n0\t\n", encoding="utf-8")
    assert read_classification(good) == [(1, "a b"), (0, "")]
    vocab = tmp_path / "vocab.json"
    vocab.write_text('{"a": 0}', encoding="utf-8")
    with pytest.raises(DataError, match="not a vocabulary list"):
        read_vocab(vocab)


def test_empty_lm_split_gives_empty_tensor_or_data_error(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "input.txt").write_text("a", encoding="utf-8")
    try:
        prepare("tinyshakespeare", raw, tmp_path / "out", verify=False)
    except DataError:
        return
    assert load_tensor(tmp_path / "out" / "train.pt").numel() == 0


# --------------------------------------------------------------------------------------------------
# seeded_split


def test_seeded_split_sizes_disjoint_sorted():
    parts = seeded_split(100, (60, 30, 10), seed=1)
    assert [len(p) for p in parts] == [60, 30, 10]
    assert all(isinstance(p, np.ndarray) for p in parts)
    assert all(np.all(np.diff(p) > 0) for p in parts)  # sorted, no repeats
    together = np.concatenate(parts)
    assert len(np.unique(together)) == 100 and together.min() == 0 and together.max() == 99


def test_seeded_split_partial_and_empty_parts():
    parts = seeded_split(50, (10, 0, 5), seed=3)
    assert [len(p) for p in parts] == [10, 0, 5]
    assert len(set(parts[0]) | set(parts[2])) == 15
    assert all(0 <= i < 50 for p in parts for i in p)


def test_seeded_split_same_seed_same_split():
    a = seeded_split(1000, (700, 200, 100), seed=2021)
    b = seeded_split(1000, (700, 200, 100), seed=2021)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))


def test_seeded_split_different_seed_different_split():
    a = seeded_split(1000, (700, 200, 100), seed=1)
    b = seeded_split(1000, (700, 200, 100), seed=2)
    assert not np.array_equal(a[1], b[1]) and not np.array_equal(a[0], b[0])


@pytest.mark.parametrize("n, sizes", [(10, (8, 5)), (0, (1,)), (10, (11,)), (10, (5, -1)), (3, (1, 1, 1, 1))])
def test_seeded_split_impossible_sizes_raise(n, sizes):
    with pytest.raises(DataError):
        seeded_split(n, sizes, seed=0)


# --------------------------------------------------------------------------------------------------
# determinism


def _prepare_twice(tmp_path: Path, name: str) -> tuple[Path, Path]:
    raw = make_raw(tmp_path, PREPARED[name].raw)
    a, b = tmp_path / "a", tmp_path / "b"
    prepare(name, raw, a, seed=5, verify=False, split_sizes=SIZES.get(name))
    prepare(name, raw, b, seed=5, verify=False, split_sizes=SIZES.get(name))
    return a, b


@pytest.mark.parametrize("name", sorted(PREPARED))
def test_prepare_twice_same_content(tmp_path, name):
    a, b = _prepare_twice(tmp_path, name)
    names = sorted(p.name for p in a.iterdir())
    assert names == sorted(p.name for p in b.iterdir())
    for f in names:
        if f.endswith(".pt"):
            assert torch.equal(load_tensor(a / f), load_tensor(b / f)), f
        else:
            assert (a / f).read_bytes() == (b / f).read_bytes(), f


@pytest.mark.parametrize(
    "name",
    sorted(PREPARED),
)
def test_prepare_twice_byte_identical(tmp_path, name):
    a, b = _prepare_twice(tmp_path, name)
    for path in PREPARED[name].outputs(a.parent):
        rel = Path(path).name
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel


def test_different_seed_changes_imdb_split(tmp_path):
    raw = make_raw(tmp_path, "imdb")
    prepare("imdb", raw, tmp_path / "s1", seed=1, verify=False, split_sizes=(16, 4, 4))
    prepare("imdb", raw, tmp_path / "s2", seed=2, verify=False, split_sizes=(16, 4, 4))
    assert (tmp_path / "s1" / "dev.tsv").read_bytes() != (tmp_path / "s2" / "dev.tsv").read_bytes()


@pytest.mark.parametrize("name", ["sst", "ptb"])
def test_a_cut_prepared_file_is_refused_naming_it(tmp_path, name):
    """stats.json records each prepared file's sha256; a table or tensor cut mid-file is refused on load with
    a message that names it and the fix (issue 19: a cut SST table was used silently, with 1,416 of 6,920 rows)."""
    from featlearn.io import CorruptFile

    stats, out = run_prepare(tmp_path, name)
    split = PREPARED[name].splits[0]
    ext = "tsv" if PREPARED[name].kind == "classification" else "pt"
    path = out / f"{split}.{ext}"
    assert set(stats["files"]) == {*(f"{s}.{ext}" for s in PREPARED[name].splits), "vocab.json"}
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptFile, match=f"{path.name} does not match the sha256.*delete the folder"):
        read_classification(path) if ext == "tsv" else load_tensor(path)
    # without the record (an older cache), a torn tensor still fails naming its file
    (out / "stats.json").unlink()
    if ext == "pt":
        with pytest.raises(CorruptFile, match=f"{path.name} cannot be read as a tensor file"):
            load_tensor(path)
