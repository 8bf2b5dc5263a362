"""Counts on the real datasets of the data mirror (skipped when there is none).

Raw files are copied and verified with ``fetch`` (offline, from the mirror) into a session-scoped
folder, then each dataset is prepared once with ``verify=True`` and the default split sizes.
"""

from __future__ import annotations

import collections
import csv
from pathlib import Path

import pytest

from featlearn.data import parsers
from featlearn.data.fetch import fetch, match_checksum, sha256_file
from featlearn.data.prepare import IMDB_SPLIT, prepare, read_classification, read_vocab, seeded_split
from featlearn.data.registry import DATASETS, PREPARED
from featlearn.io import load_tensor

pytestmark = pytest.mark.shared_data

SPLITS = {
    "sst": {"train": 6_920, "dev": 872, "test": 1_821},
    "sstwsub": {"train": 98_794, "dev": 872, "test": 1_821},
    "imdb": {"train": 39_877, "dev": 5_016, "test": 5_107},
    "wikitext2": {"train": 2_088_628, "valid": 217_646, "test": 245_569},
    "ptb": {"train": 929_589, "valid": 73_760, "test": 82_430},
    "tinyshakespeare": {"train": 1_003_854, "valid": 111_540},
}
VOCAB = {"wikitext2": 33_278, "ptb": 10_000, "tinyshakespeare": 65}


class Store:
    """Raw files fetched from the mirror and datasets prepared from them, each at most once per session."""

    def __init__(self, mirror: Path, root: Path):
        self.mirror, self.root = mirror, root
        self._raw: dict[str, Path] = {}
        self._prepared: dict[tuple[str, str], tuple[dict, Path]] = {}
        self.matched: dict[str, object] = {}

    def raw(self, dataset: str) -> Path:
        if dataset not in self._raw:
            ds = DATASETS[dataset]
            folder = self.root / "raw" / dataset
            for f in ds.files:
                dest = folder / f.name
                matched = fetch(f, dest, mirror=self.mirror, mirror_dir=ds.mirror_dir, offline=True)
                assert matched in f.accepted and sha256_file(dest) == matched.sha256
                self.matched[f"{dataset}/{f.name}"] = matched
            self._raw[dataset] = folder
        return self._raw[dataset]

    def prepared(self, name: str, tag: str = "prepared") -> tuple[dict, Path]:
        if (name, tag) not in self._prepared:
            out = self.root / tag / name
            stats = prepare(name, self.raw(PREPARED[name].raw), out, verify=True)  # default seed and sizes
            self._prepared[name, tag] = (stats, out)
        return self._prepared[name, tag]


@pytest.fixture(scope="session")
def store(shared_data, tmp_path_factory) -> Store:
    return Store(shared_data, tmp_path_factory.mktemp("shared_data"))


def split_counts(stats: dict, name: str) -> dict[str, int]:
    key = "n" if PREPARED[name].kind == "classification" else "n_tokens"
    return {s: v[key] for s, v in stats["splits"].items()}


def check_outputs(name: str, out: Path, stats: dict) -> None:
    """Every output exists and the written rows / tokens equal the counts in stats."""
    for path in PREPARED[name].outputs(out.parent):
        assert Path(path).is_file(), path
    vocab = read_vocab(out / "vocab.json")
    assert len(vocab) == len(set(vocab)) == stats["vocab_size"]
    for split in PREPARED[name].splits:
        if PREPARED[name].kind == "classification":
            rows = read_classification(out / f"{split}.tsv")
            assert len(rows) == stats["splits"][split]["n"]
            assert {y for y, _ in rows} <= {0, 1}
        else:
            ids = load_tensor(out / f"{split}.pt")
            assert ids.numel() == stats["splits"][split]["n_tokens"]
            assert 0 <= int(ids.min()) and int(ids.max()) < len(vocab)


# --------------------------------------------------------------------------------------------------
# classification


def test_sst(store):
    stats, out = store.prepared("sst")
    assert stats["n_trees"] == {"train": 8_544, "dev": 1_101, "test": 2_210}
    assert split_counts(stats, "sst") == SPLITS["sst"]
    check_outputs("sst", out, stats)
    assert read_vocab(out / "vocab.json")[:3] == ["<pad>", "unk", "<eos>"]


def test_sstwsub(store):
    stats, out = store.prepared("sstwsub")
    assert split_counts(stats, "sstwsub") == SPLITS["sstwsub"]
    assert stats["n_trees"] == {"train": 8_544, "dev": 1_101, "test": 2_210}
    check_outputs("sstwsub", out, stats)
    trees = parsers.read_sst_trees(store.raw("sst") / "trainDevTestTrees_PTB.zip")
    assert len(parsers.sst_phrases(trees["train"])) == 98_794
    # dev and test are the sentence-level sets of sst
    _, sst_out = store.prepared("sst")
    for split in ("dev", "test"):
        assert (out / f"{split}.tsv").read_bytes() == (sst_out / f"{split}.tsv").read_bytes()


def test_imdb(store):
    assert store.raw("imdb")
    assert store.matched["imdb/aclImdb_v1.tar.gz"].sha256 in {c.sha256 for c in DATASETS["imdb"].files[0].accepted}
    stats, out = store.prepared("imdb")
    assert stats["n_pooled"] == 50_000 and stats["seed"] == 2021
    assert split_counts(stats, "imdb") == SPLITS["imdb"] == dict(zip(("train", "dev", "test"), IMDB_SPLIT))
    assert sum(IMDB_SPLIT) == 50_000
    check_outputs("imdb", out, stats)
    assert all("br" not in t.split() for _, t in read_classification(out / "dev.tsv")[:500])


def test_imdb_split_is_deterministic(store):
    stats, out = store.prepared("imdb")
    again, out2 = store.prepared("imdb", tag="again")
    assert again == stats
    for f in ("train.tsv", "dev.tsv", "test.tsv", "vocab.json", "stats.json"):
        assert (out / f).read_bytes() == (out2 / f).read_bytes(), f
    a = seeded_split(50_000, IMDB_SPLIT, 2021)
    b = seeded_split(50_000, IMDB_SPLIT, 2021)
    assert all((x == y).all() for x, y in zip(a, b))


def test_ag_news_test_csv(shared_data):
    rows = parsers.read_ag_news_csv(shared_data / "ag_news" / "test.csv")
    assert len(rows) == 7_600
    assert collections.Counter(y for y, _ in rows) == {0: 1_900, 1: 1_900, 2: 1_900, 3: 1_900}
    assert all("\\n" not in t for _, t in rows)
    train = shared_data / "ag_news" / "train.csv"
    if train.is_file():
        train_rows = parsers.read_ag_news_csv(train)
        assert len(train_rows) == 120_000
        assert collections.Counter(y for y, _ in train_rows) == {0: 30_000, 1: 30_000, 2: 30_000, 3: 30_000}


# --------------------------------------------------------------------------------------------------
# language modelling


def reference_tokens(path: Path) -> list[str]:
    """pytorch/examples word_language_model: ``line.split() + ['<eos>']`` for every line of the file."""
    out: list[str] = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            out += line.split() + ["<eos>"]
    return out


@pytest.mark.parametrize("name", ["wikitext2", "ptb"])
def test_word_lm(store, name):
    stats, out = store.prepared(name)
    assert split_counts(stats, name) == SPLITS[name]
    assert stats["vocab_size"] == VOCAB[name]
    check_outputs(name, out, stats)
    vocab = read_vocab(out / "vocab.json")
    raw = store.raw(name)
    files = {f.name.split(".")[1]: raw / f.name for f in DATASETS[name].files}  # wiki.train.tokens / ptb.train.txt
    assert set(files) == {"train", "valid", "test"}
    train_tokens = reference_tokens(files["train"])
    assert vocab == list(dict.fromkeys(train_tokens))  # training split, first-occurrence order
    assert "<eos>" in vocab and "<unk>" in vocab
    for split, path in files.items():
        ids = load_tensor(out / f"{split}.pt")
        expected = train_tokens if split == "train" else reference_tokens(path)
        assert len(expected) == SPLITS[name][split]
        assert [vocab[i] for i in ids.tolist()] == expected
        text = path.read_text(encoding="utf-8")
        assert expected.count("<eos>") == text.count("\n")


def test_tinyshakespeare(store):
    stats, out = store.prepared("tinyshakespeare")
    text = (store.raw("tinyshakespeare") / "input.txt").read_text(encoding="utf-8")
    assert stats["n_chars"] == len(text) == 1_115_394
    assert stats["vocab_size"] == 65
    assert split_counts(stats, "tinyshakespeare") == SPLITS["tinyshakespeare"]
    assert 1_003_854 == int(0.9 * 1_115_394) and 1_003_854 + 111_540 == 1_115_394
    check_outputs("tinyshakespeare", out, stats)
    vocab = read_vocab(out / "vocab.json")
    assert vocab == sorted(set(text)) and len(vocab) == 65
    train, valid = (load_tensor(out / f"{s}.pt") for s in ("train", "valid"))
    assert "".join(vocab[i] for i in train.tolist()) == text[:1_003_854]
    assert "".join(vocab[i] for i in valid.tolist()) == text[1_003_854:]


# --------------------------------------------------------------------------------------------------
# mirror checksums


def _registry_file_for(rel: str):
    """(RawFile, Checksum) whose mirror name and dataset folder match a MANIFEST path, else None."""
    folder, _, name = rel.rpartition("/")
    for ds in DATASETS.values():
        if folder not in (ds.mirror_dir, ""):
            continue
        for f in ds.files:
            for accepted in f.accepted:
                if accepted.mirror_name == name:
                    return f, accepted
    return None


def test_every_manifest_file_of_the_registry_verifies(shared_data):
    manifest_path = shared_data / "MANIFEST.tsv"
    if not manifest_path.is_file():
        pytest.skip("mirror has no MANIFEST.tsv")
    with open(manifest_path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    assert rows and set(rows[0]) == {"path", "bytes", "sha256"}
    checked = []
    for row in rows:
        hit = _registry_file_for(row["path"])
        if hit is None:
            continue
        raw, accepted = hit
        path = shared_data / row["path"]
        assert path.is_file(), path
        assert match_checksum(path, raw) == accepted
        assert row["sha256"] == accepted.sha256
        assert int(row["bytes"]) == path.stat().st_size
        if accepted.size is not None:
            assert int(row["bytes"]) == accepted.size
        checked.append(f"{raw.dataset}/{raw.name}")
    assert len(checked) == len(set(checked))
    # every dataset the other tests read is covered by the manifest
    for needed in (
        "sst/trainDevTestTrees_PTB.zip",
        "imdb/aclImdb_v1.tar.gz",
        "ag_news/test.csv",
        "wikitext2/wiki.train.tokens",
        "wikitext2/wiki.valid.tokens",
        "wikitext2/wiki.test.tokens",
        "ptb/ptb.train.txt",
        "ptb/ptb.valid.txt",
        "ptb/ptb.test.txt",
        "tinyshakespeare/input.txt",
    ):
        assert needed in checked, needed
