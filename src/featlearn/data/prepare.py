"""Prepared, cached datasets under ``results/data/prepared/<name>/`` built from verified raw files.

Classification sets (``sst``, ``sstwsub``, ``imdb``, ``ag_news``): ``{train,dev,test}.tsv`` with a
``label<TAB>text`` header, text normalised as in the features paper; ``vocab.json`` (specials, then
types by descending frequency over all splits); ``stats.json`` (counts).
Language-modelling sets (``wikitext2``, ``wikitext103``, ``ptb``, ``tinyshakespeare``): one int64
tensor of token ids per split (``{split}.pt``), ``vocab.json`` (id order) and ``stats.json``.

Expected sizes (Sun, Li, Lu 2023, Table 2; WikiText/PTB/Tiny Shakespeare SOURCE notes):
SST 6,920/872/1,821; SSTwsub train 98,794; IMDB 39,877/5,016/5,107; AG News 110,000/10,000/7,600.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
from array import array
from pathlib import Path
from typing import Callable, Iterable, Iterator

import numpy as np

from featlearn.data import parsers
from featlearn.data.fetch import DataError, match_checksum
from featlearn.data.registry import PREPARED, get_dataset
from featlearn.io import DIGESTS, atomic_open, file_sha256, save_tensor, verify_prepared, write_json

# Specials of the authors' vocabulary for the classification sets (features paper).
PAD, UNK = "<pad>", "unk"
CLASSIFICATION_SPECIALS = (PAD, UNK, parsers.EOS)

IMDB_SPLIT = (39_877, 5_016, 5_107)
AG_NEWS_DEV = 10_000
TINYSHAKESPEARE_TRAIN_FRACTION = 0.9


def _raw_paths(raw_dir: Path, dataset: str, verify: bool) -> dict[str, Path]:
    """Raw files of ``dataset`` in ``raw_dir``, each re-checked against the registry when ``verify``."""
    out = {}
    for raw in get_dataset(dataset).files:
        path = raw_dir / raw.name
        if not path.is_file():
            raise DataError(f"missing raw file {path}; run the data_fetch rule for {dataset}")
        if verify:
            match_checksum(path, raw)
        out[raw.name] = path
    return out


def seeded_split(n: int, sizes: tuple[int, ...], seed: int) -> list[np.ndarray]:
    """Disjoint index sets of the given sizes from a seeded permutation of range(n)."""
    if sum(sizes) > n or min(sizes) < 0:
        raise DataError(f"cannot split {n} items into parts of {sizes}")
    perm = np.random.default_rng(seed).permutation(n)
    bounds = np.cumsum((0,) + tuple(sizes))
    return [np.sort(perm[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]


def _write_classification(out_dir: Path, splits: dict[str, list[tuple[int, str]]], extra: dict) -> dict:
    counts: collections.Counter[str] = collections.Counter()
    stats: dict = {"splits": {}, **extra}
    for split, rows in splits.items():
        rows = [(y, parsers.normalise_text(t)) for y, t in rows]
        lengths = []
        with atomic_open(out_dir / f"{split}.tsv") as fh:
            fh.write("label\ttext\n")
            for y, t in rows:
                toks = t.split()
                counts.update(toks)
                lengths.append(len(toks))
                fh.write(f"{y}\t{t}\n")
        stats["splits"][split] = {
            "n": len(rows),
            "labels": dict(sorted(collections.Counter(str(y) for y, _ in rows).items())),
            "mean_length": round(float(np.mean(lengths)), 3) if lengths else 0.0,
        }
    vocab = list(CLASSIFICATION_SPECIALS) + sorted(
        (w for w in counts if w not in CLASSIFICATION_SPECIALS), key=lambda w: (-counts[w], w)
    )
    write_vocab(out_dir / "vocab.json", vocab)
    stats["vocab_size"] = len(vocab)
    stats[DIGESTS] = _digests(out_dir, [*(f"{split}.tsv" for split in splits), "vocab.json"])
    write_json(out_dir / "stats.json", stats)
    return stats


def _digests(out_dir: Path, names: Iterable[str]) -> dict[str, str]:
    """sha256 of each prepared file, recorded in stats.json and checked whenever the file is read."""
    return {name: file_sha256(out_dir / name) for name in names}


def _encode(lines: Iterable[list[str]], index: dict[str, int], grow: bool, where: str):
    """Token ids of a stream of token lines; new types get the next id when ``grow`` (training split)."""
    import torch

    ids = array("q")
    for tokens in lines:
        for t in tokens:
            i = index.get(t)
            if i is None:
                if not grow:
                    raise DataError(f"{where}: token {t!r} is not in the training vocabulary")
                i = index[t] = len(index)
            ids.append(i)
    if not ids:
        raise DataError(f"{where}: the split holds no tokens")
    return torch.frombuffer(bytearray(ids.tobytes()), dtype=torch.int64)


def _prepare_lm(out_dir: Path, split_lines: dict[str, Callable], extra: dict, vocab: list[str] | None = None) -> dict:
    """Encode each split (streamed, so WikiText-103 fits in memory) and write ids, vocab and stats.

    Without a given ``vocab`` the vocabulary is the training split's types in first-occurrence order
    (the pytorch/examples ``Dictionary``), which gives 33,278 types for WikiText-2.
    """
    index = {w: i for i, w in enumerate(vocab or [])}
    stats: dict = {"splits": {}, **extra}
    for split, open_lines in split_lines.items():
        with open_lines() as lines:
            ids = _encode(lines, index, grow=vocab is None and split == "train", where=f"{out_dir.name}/{split}")
        save_tensor(out_dir / f"{split}.pt", ids)
        stats["splits"][split] = {"n_tokens": int(ids.numel())}
    stats["vocab_size"] = len(index)
    write_vocab(out_dir / "vocab.json", list(index))
    stats[DIGESTS] = _digests(out_dir, [*(f"{split}.pt" for split in split_lines), "vocab.json"])
    write_json(out_dir / "stats.json", stats)
    return stats


def prepare(
    name: str,
    raw_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    seed: int = 2021,
    *,
    verify: bool = True,
    split_sizes: tuple[int, ...] | None = None,
) -> dict:
    """Build the prepared dataset ``name`` from the raw files in ``raw_dir``; return its stats.

    ``verify`` re-checks every raw file's sha256 (the pipeline always does; tests of the parsers on
    small fixtures switch it off). ``split_sizes`` overrides the seeded split sizes of IMDB
    (train, dev, test) or AG News (dev) for such fixtures.
    """
    spec = PREPARED[name]
    raw_dir, out_dir = Path(raw_dir), Path(out_dir)
    files = _raw_paths(raw_dir, spec.raw, verify)

    if name in ("sst", "sstwsub"):
        trees = parsers.read_sst_trees(files["trainDevTestTrees_PTB.zip"])
        splits = {s: parsers.sst_sentences(trees[s]) for s in spec.splits}
        if name == "sstwsub":
            splits["train"] = parsers.sst_phrases(trees["train"])
        return _write_classification(out_dir, splits, {"n_trees": {s: len(t) for s, t in trees.items()}})

    if name == "imdb":
        reviews = parsers.read_imdb_tar(files["aclImdb_v1.tar.gz"])
        rows = [(r.label, parsers.clean_imdb_review(r.text)) for r in reviews]
        idx = seeded_split(len(rows), split_sizes or IMDB_SPLIT, seed)
        splits = {s: [rows[i] for i in ix] for s, ix in zip(spec.splits, idx)}
        return _write_classification(out_dir, splits, {"seed": seed, "n_pooled": len(rows)})

    if name == "ag_news":
        train = parsers.read_ag_news_csv(files["train.csv"])
        n_dev = split_sizes[-1] if split_sizes else AG_NEWS_DEV
        tr, dv = seeded_split(len(train), (len(train) - n_dev, n_dev), seed)
        splits = {
            "train": [train[i] for i in tr],
            "dev": [train[i] for i in dv],
            "test": parsers.read_ag_news_csv(files["test.csv"]),
        }
        return _write_classification(out_dir, splits, {"seed": seed, "classes": list(parsers.AG_NEWS_CLASSES)})

    if name in ("wikitext2", "ptb", "wikitext103"):
        def opener(split: str) -> Callable:
            return lambda: _token_lines(*lm_source(name, files, split))

        return _prepare_lm(out_dir, {s: opener(s) for s in spec.splits}, {})

    if name == "tinyshakespeare":
        text = files["input.txt"].read_text(encoding="utf-8")
        n_train = int(len(text) * TINYSHAKESPEARE_TRAIN_FRACTION)  # nanoGPT's char-level 90/10 split
        chunks = {"train": text[:n_train], "valid": text[n_train:]}
        return _prepare_lm(
            out_dir,
            {s: (lambda c=c: contextlib.nullcontext([list(c)])) for s, c in chunks.items()},
            {"n_chars": len(text)},
            vocab=sorted(set(text)),
        )

    raise KeyError(name)


def lm_source(name: str, files: dict[str, Path], split: str) -> tuple[Path, str | None]:
    """(file, zip member or None) holding the text of one split of a word-level LM set."""
    if name == "wikitext103":
        return files["wikitext-103-v1.zip"], f"wiki.{split}.tokens"
    return files[f"wiki.{split}.tokens" if name == "wikitext2" else f"ptb.{split}.txt"], None


def lm_text_lines(name: str, raw_dir: str | os.PathLike, split: str, verify: bool = True):
    """Context manager over the lines (without their newline) of one split of a word-level LM set, as in its raw
    file: what a subword tokenizer reads (``templates`` Fig. 6 with GPT-2's BPE)."""
    files = _raw_paths(Path(raw_dir), PREPARED[name].raw, verify)
    return parsers.open_lm_text(*lm_source(name, files, split))


@contextlib.contextmanager
def _token_lines(path: Path, member: str | None) -> Iterator[Iterator[list[str]]]:
    with parsers.open_lm_text(path, member) as lines:
        yield parsers.lm_lines(lines)


def read_classification(path: str | os.PathLike) -> list[tuple[int, str]]:
    """Rows of a prepared ``{split}.tsv`` (checked against the sha256 its stats.json recorded)."""
    verify_prepared(path)
    rows = []
    with open(path, encoding="utf-8") as fh:
        header = fh.readline().rstrip("\n")
        if header != "label\ttext":
            raise DataError(f"{path}: not a prepared classification table (header {header!r})")
        for line in fh:
            label, _, text = line.rstrip("\n").partition("\t")
            rows.append((int(label), text))
    return rows


def write_vocab(path: str | os.PathLike, vocab: list[str]) -> None:
    """Vocabulary as a JSON list in id order (JSON keeps whitespace types such as "\\n" intact)."""
    with atomic_open(path) as fh:
        json.dump(vocab, fh, ensure_ascii=False, indent=0)
        fh.write("\n")


def read_vocab(path: str | os.PathLike) -> list[str]:
    verify_prepared(path)
    with open(path, encoding="utf-8") as fh:
        vocab = json.load(fh)
    if not isinstance(vocab, list):
        raise DataError(f"{path}: not a vocabulary list")
    return vocab
