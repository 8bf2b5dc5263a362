"""Parsers for the raw formats: PTB-style sentiment trees, the aclImdb tarball, AG News CSV,
whitespace-tokenised language-modelling text and character text.

Every parser reads the real on-disk format of the canonical download and raises ``DataError`` with
the file name when the file is truncated or malformed.
"""

from __future__ import annotations

import contextlib
import csv
import io
import re
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from featlearn.data.fetch import DataError

# Sun, Li, Lu (features paper), authors' public preprocessing: lowercase, and every run of
# characters that are not letters or digits becomes one space ("n't" -> "n t"). Letters include
# accented ones ("andré" stays one token), as in the authors' prepared SST files.
_NON_ALNUM = re.compile(r"[\W_]+")


def normalise_text(text: str) -> str:
    return _NON_ALNUM.sub(" ", text.lower()).strip()


# --------------------------------------------------------------------------------------------------
# SST: PTB-format trees, e.g. "(3 (2 The) (4 (3 good) (2 film)))"


@dataclass
class Tree:
    label: int
    children: list["Tree"]
    word: str | None = None

    def leaves(self) -> list[str]:
        if self.word is not None:
            return [self.word]
        return [w for c in self.children for w in c.leaves()]

    def nodes(self) -> Iterator["Tree"]:
        yield self
        for c in self.children:
            yield from c.nodes()


_TREE_TOKEN = re.compile(r"\(|\)|[^\s()]+")


def parse_tree(line: str) -> Tree:
    """Parse one PTB-format sentiment tree (labels 0..4 on every node)."""
    tokens = _TREE_TOKEN.findall(line)
    pos = 0

    def node() -> Tree:
        nonlocal pos
        if pos >= len(tokens) or tokens[pos] != "(":
            raise ValueError(f"expected '(' at token {pos}")
        pos += 1
        label = int(tokens[pos])
        if not 0 <= label <= 4:
            raise ValueError(f"sentiment label {label} outside 0..4")
        pos += 1
        if tokens[pos] == "(":
            children = []
            while tokens[pos] == "(":
                children.append(node())
            tree = Tree(label, children)
        else:
            # a leaf's text may itself contain spaces, e.g. "(2 8 1\\/2)" in the SST train trees
            words = []
            while tokens[pos] not in ("(", ")"):
                words.append(tokens[pos])
                pos += 1
            if not words:
                raise ValueError(f"empty leaf at token {pos}")
            tree = Tree(label, [], word=" ".join(words))
        if tokens[pos] != ")":
            raise ValueError(f"expected ')' at token {pos}")
        pos += 1
        return tree

    try:
        tree = node()
    except (IndexError, ValueError) as exc:
        raise ValueError(f"malformed sentiment tree: {exc}: {line[:80]!r}") from None
    if pos != len(tokens):
        raise ValueError(f"trailing tokens after tree: {line[:80]!r}")
    return tree


SST_SPLITS = {"train": "trees/train.txt", "dev": "trees/dev.txt", "test": "trees/test.txt"}


def read_sst_trees(zip_path: str | Path) -> dict[str, list[Tree]]:
    """All trees of ``trainDevTestTrees_PTB.zip``, by split (8,544 / 1,101 / 2,210 in the official file)."""
    out: dict[str, list[Tree]] = {}
    try:
        with zipfile.ZipFile(zip_path) as zf:
            for split, member in SST_SPLITS.items():
                text = zf.read(member).decode("utf-8")
                trees = []
                for lineno, line in enumerate(text.splitlines(), 1):
                    if line.strip():
                        try:
                            trees.append(parse_tree(line))
                        except ValueError as exc:
                            raise DataError(f"{zip_path}:{member}:{lineno}: {exc}") from None
                out[split] = trees
    except (zipfile.BadZipFile, EOFError, KeyError, zipfile.LargeZipFile) as exc:
        raise DataError(f"{zip_path} is not a complete SST tree archive ({exc}); delete it and fetch again") from None
    return out


def sentiment_to_binary(label: int) -> int | None:
    """SST 5-way label -> binary: 0,1 negative (0); 3,4 positive (1); 2 neutral (None, dropped)."""
    return None if label == 2 else int(label > 2)


def sst_sentences(trees: Iterable[Tree]) -> list[tuple[int, str]]:
    """Sentence-level binary SST: root label, neutral sentences dropped."""
    out = []
    for t in trees:
        y = sentiment_to_binary(t.label)
        if y is not None:
            out.append((y, " ".join(t.leaves())))
    return out


def sst_phrases(trees: Iterable[Tree]) -> list[tuple[int, str]]:
    """Every non-neutral node of every tree (single words included, duplicates kept): SSTwsub."""
    out = []
    for t in trees:
        for n in t.nodes():
            y = sentiment_to_binary(n.label)
            if y is not None:
                out.append((y, " ".join(n.leaves())))
    return out


# --------------------------------------------------------------------------------------------------
# IMDB: aclImdb/{train,test}/{pos,neg}/<id>_<rating>.txt inside a .tar.gz

_IMDB_MEMBER = re.compile(r"(?:^|/)aclImdb/(train|test)/(pos|neg)/(\d+)_(\d+)\.txt$")


@dataclass(frozen=True)
class Review:
    split: str
    label: int  # 1 positive, 0 negative
    review_id: int
    rating: int
    text: str


def read_imdb_tar(tar_path: str | Path) -> list[Review]:
    """The labelled reviews of an aclImdb tarball, in a fixed order (split, label, id)."""
    reviews = []
    try:
        with tarfile.open(tar_path, "r:*") as tf:
            for info in tf:
                m = _IMDB_MEMBER.search(info.name)
                if not (m and info.isfile()):
                    continue
                fh = tf.extractfile(info)
                assert fh is not None
                text = fh.read().decode("utf-8")
                split, pol, rid, rating = m.groups()
                reviews.append(Review(split, int(pol == "pos"), int(rid), int(rating), text))
    except (tarfile.TarError, EOFError, OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{tar_path} is not a complete aclImdb archive ({exc}); delete it and fetch again") from None
    if not reviews:
        raise DataError(f"{tar_path} holds no aclImdb/{{train,test}}/{{pos,neg}}/*.txt reviews")
    reviews.sort(key=lambda r: (r.split != "train", -r.label, r.review_id))
    return reviews


def clean_imdb_review(text: str) -> str:
    return text.replace("<br />", " ")


# --------------------------------------------------------------------------------------------------
# AG News: CSV without header: class index 1..4, title, description; "\n" written as backslash-n

AG_NEWS_CLASSES = ("World", "Sports", "Business", "Sci/Tech")


def read_ag_news_csv(path: str | Path) -> list[tuple[int, str]]:
    """Rows as (label 0..3, title + " " + description)."""
    out = []
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        for row in reader:
            if len(row) != 3 or row[0] not in ("1", "2", "3", "4"):
                raise DataError(f"{path}:{reader.line_num}: expected 3 fields 'class(1-4),title,description', got {row[:3]!r}")
            title, desc = (s.replace("\\n", " ") for s in row[1:])
            out.append((int(row[0]) - 1, f"{title} {desc}"))
    if not out:
        raise DataError(f"{path} is empty")
    return out


# --------------------------------------------------------------------------------------------------
# Language-modelling text

EOS = "<eos>"


def lm_lines(lines: Iterable[str]) -> Iterator[list[str]]:
    """Whitespace tokens of each line followed by ``<eos>`` (pytorch/examples word_language_model).

    This convention gives 2,088,628 WikiText-2 and 929,589 PTB training tokens.
    """
    for line in lines:
        yield line.split() + [EOS]


def lm_tokens(text: str) -> list[str]:
    """Tokens of a whole text, split into lines at "\n" only (as reading the file line by line does)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [t for toks in lm_lines(lines) for t in toks]


@contextlib.contextmanager
def open_lm_text(path: str | Path, member_suffix: str | None = None) -> Iterator[Iterator[str]]:
    """Lines of a token file, or of the zip member whose path ends with ``member_suffix``, streamed."""
    try:
        if member_suffix is None:
            with open(path, encoding="utf-8") as fh:
                yield (line.rstrip("\n") for line in fh)
            return
        with zipfile.ZipFile(path) as zf:
            names = [n for n in zf.namelist() if n.endswith(member_suffix)]
            if not names:
                raise DataError(f"{path} has no member ending in {member_suffix}")
            with zf.open(names[0]) as fh:
                yield (line.rstrip("\n") for line in io.TextIOWrapper(fh, encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise DataError(f"{path} is not UTF-8 text ({exc})") from None
    except (zipfile.BadZipFile, EOFError) as exc:
        raise DataError(f"{path} is not a complete zip archive ({exc}); delete it and fetch again") from None


def build_vocab(tokens: Iterable[str]) -> list[str]:
    """Types in order of first occurrence (the pytorch/examples ``Dictionary`` order)."""
    return list(dict.fromkeys(tokens))
