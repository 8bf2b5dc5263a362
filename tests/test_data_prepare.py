"""Prepared datasets built from fixture files: outputs, counts, determinism, checksum and split errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

import datafixtures as fx
from featlearn.data.fetch import ChecksumError, DataError
from featlearn.data.prepare import prepare, read_classification, read_vocab, seeded_split
from featlearn.data.registry import PREPARED
from featlearn.io import load_tensor


def raw_dir(tmp_path: Path, dataset: str) -> Path:
    """Fixture raw files under the registry's local names."""
    src, out = tmp_path / "src", tmp_path / "raw" / dataset
    out.mkdir(parents=True, exist_ok=True)
    if dataset == "sst":
        shutil.copy(fx.make_sst_zip(src), out / "trainDevTestTrees_PTB.zip")
    elif dataset == "imdb":
        shutil.copy(fx.make_imdb_tar(src), out / "aclImdb_v1.tar.gz")
    elif dataset == "ag_news":
        shutil.copy(fx.make_ag_news_csv(src), out / "train.csv")
        shutil.copy(fx.make_ag_news_csv(src, rows=fx.AG_ROWS[:2], name="test.csv"), out / "test.csv")
    elif dataset in ("wikitext2", "ptb"):
        names = {s: (f"wiki.{s}.tokens" if dataset == "wikitext2" else f"ptb.{s}.txt") for s in fx.LM_TEXT}
        fx.make_lm_files(tmp_path / "raw", dataset, names)
    elif dataset == "wikitext103":
        fx.make_wikitext_zip(tmp_path / "raw", folder="wikitext103")
    elif dataset == "tinyshakespeare":
        shutil.copy(fx.make_tinyshakespeare(src), out / "input.txt")
    return out


SIZES = {"imdb": (16, 4, 4), "ag_news": (1,)}


@pytest.mark.parametrize("name", sorted(PREPARED))
def test_prepare_every_dataset_from_fixtures(tmp_path, name):
    spec = PREPARED[name]
    out = tmp_path / "prepared" / name
    stats = prepare(name, raw_dir(tmp_path, spec.raw), out, verify=False, split_sizes=SIZES.get(name))
    for path in spec.outputs(tmp_path / "prepared"):
        assert Path(path).is_file(), path
    assert json.loads((out / "stats.json").read_text()) == stats
    vocab = read_vocab(out / "vocab.json")
    assert len(vocab) == stats["vocab_size"] == len(set(vocab))
    if spec.kind == "classification":
        assert vocab[:3] == ["<pad>", "unk", "<eos>"]
        for split in spec.splits:
            rows = read_classification(out / f"{split}.tsv")
            assert len(rows) == stats["splits"][split]["n"]
            assert all(t == t.lower() and "\t" not in t for _, t in rows)
            assert {y for y, _ in rows} <= ({0, 1, 2, 3} if name == "ag_news" else {0, 1})
    else:
        decoded = {}
        for split in spec.splits:
            ids = load_tensor(out / f"{split}.pt")
            assert ids.dtype == torch.int64 and ids.numel() == stats["splits"][split]["n_tokens"]
            decoded[split] = [vocab[i] for i in ids.tolist()]
        if name == "tinyshakespeare":
            assert "".join(decoded["train"] + decoded["valid"]) == fx.SHAKESPEARE
            assert len(decoded["train"]) == int(len(fx.SHAKESPEARE) * 0.9) and vocab == sorted(set(fx.SHAKESPEARE))
        else:
            assert decoded["train"][:4] == ["=", "Valkyria", "=", "<eos>"]
            assert decoded["valid"] == ["the", "cat", "sat", ".", "<eos>"]
            assert vocab[:3] == ["=", "Valkyria", "<eos>"]  # first-occurrence order of the training split


def test_sstwsub_train_is_every_non_neutral_phrase(tmp_path):
    stats = prepare("sstwsub", raw_dir(tmp_path, "sst"), tmp_path / "out", verify=False)
    assert stats["splits"]["train"]["n"] == 14 and stats["splits"]["dev"]["n"] == 2


def test_token_outside_training_vocabulary(tmp_path):
    raw = raw_dir(tmp_path, "ptb")
    (raw / "ptb.test.txt").write_text(" zebra \n")
    with pytest.raises(DataError, match="zebra"):
        prepare("ptb", raw, tmp_path / "out", verify=False)


def test_verification_rejects_fixtures_and_writes_nothing(tmp_path):
    with pytest.raises(ChecksumError):
        prepare("sst", raw_dir(tmp_path, "sst"), tmp_path / "out")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
    with pytest.raises(DataError, match="missing raw file"):
        prepare("tinyshakespeare", tmp_path / "nowhere", tmp_path / "out")


def test_seeded_split():
    a = seeded_split(100, (60, 30, 10), seed=1)
    assert [len(x) for x in a] == [60, 30, 10]
    assert len(set().union(*map(set, a))) == 100
    assert all((x[1:] > x[:-1]).all() for x in a)
    assert all((x == y).all() for x, y in zip(a, seeded_split(100, (60, 30, 10), seed=1)))
    assert not (a[0] == seeded_split(100, (60, 30, 10), seed=2)[0]).all()
    with pytest.raises(DataError):
        seeded_split(10, (8, 5), seed=0)


def test_prepare_is_deterministic(tmp_path):
    raw = raw_dir(tmp_path, "imdb")
    prepare("imdb", raw, tmp_path / "a", seed=5, verify=False, split_sizes=(16, 4, 4))
    prepare("imdb", raw, tmp_path / "b", seed=5, verify=False, split_sizes=(16, 4, 4))
    for f in ("train.tsv", "dev.tsv", "test.tsv", "vocab.json", "stats.json"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()
