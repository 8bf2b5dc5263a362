"""Tiny datasets written in the real on-disk formats of the canonical downloads.

Each builder writes into a folder laid out like a mirror (``<root>/<dataset folder>/<file>``) and
returns the path(s) it wrote. Contents are small but exercise every parser branch.
"""

from __future__ import annotations

import csv
import io
import tarfile
import zipfile
from pathlib import Path

# Five trees per split: labels on every node, a leaf containing a space ("8 1\/2"), a neutral root.
SST_TREES = {
    "train": [
        "(3 (2 The) (4 (3 good) (2 film)))",
        "(1 (2 It) (1 (2 is) (0 (1 n't) (0 bad))))",
        "(2 (2 A) (2 (2 film) (2 .)))",
        "(4 (3 Great) (4 (2 8 1\\/2) (3 fun)))",
        "(0 (0 Awful) (2 ,))",
    ],
    "dev": ["(3 (2 Nice) (3 work))", "(1 (1 Dull) (2 .))", "(2 (2 So) (2 so))"],
    "test": ["(4 (4 Brilliant) (2 !))", "(0 (0 Terrible) (2 film))", "(1 (2 Not) (1 (2 that) (1 good)))"],
}


def make_sst_zip(root: Path, trees: dict[str, list[str]] = SST_TREES) -> Path:
    path = root / "sst" / "trainDevTestTrees_PTB.zip"
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("trees/", "")
        for split, lines in trees.items():
            zf.writestr(f"trees/{split}.txt", "\n".join(lines) + "\n")
    return path


def imdb_reviews(n_per_class: int = 6) -> list[tuple[str, str, int, int, str]]:
    """(split, polarity, id, rating, text) for a balanced toy IMDB."""
    out = []
    for split in ("train", "test"):
        for pol, ratings in (("pos", (7, 8, 9, 10)), ("neg", (1, 2, 3, 4))):
            for i in range(n_per_class):
                word = "wonderful" if pol == "pos" else "dreadful"
                text = f"A {word} movie, review {split} {i}.<br /><br />Truly {word}!"
                out.append((split, pol, i, ratings[i % 4], text))
    return out


def make_imdb_tar(root: Path, reviews=None, name: str = "aclImdb_v1.tar.gz") -> Path:
    reviews = imdb_reviews() if reviews is None else reviews
    path = root / "imdb" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tf:
        def add(member: str, data: bytes) -> None:
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))

        add("aclImdb/README", b"toy aclImdb\n")
        add("aclImdb/imdb.vocab", b"the\nmovie\n")
        for split, pol, i, rating, text in reviews:
            add(f"aclImdb/{split}/{pol}/{i}_{rating}.txt", text.encode("utf-8"))
        add("aclImdb/train/urls_pos.txt", b"http://example.invalid\n")
    return path


AG_ROWS = [
    ("3", "Wall St. Bears Claw Back Into the Black (Reuters)",
     "Reuters - Short-sellers, Wall Street's dwindling\\band of ultra-cynics."),
    ("1", "Leaders meet", 'Talks "resume" in the capital.'),
    ("2", "Team wins cup", "A late goal, again."),
    ("4", "New chip", "Faster chips\\nand more cores."),
]


def make_ag_news_csv(root: Path, rows=AG_ROWS, name: str = "train.csv") -> Path:
    path = root / "ag_news" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, quoting=csv.QUOTE_ALL)
        writer.writerows(rows)
    return path


LM_TEXT = {
    "train": " = Valkyria = \n\n the cat sat on the mat <unk> . \n the dog sat . \n",
    "valid": " the cat sat . \n",
    "test": " the dog . \n <unk> \n",
}


def make_lm_files(root: Path, folder: str, names: dict[str, str], text=LM_TEXT) -> list[Path]:
    """``names`` maps split -> file name, e.g. {"train": "train.txt"} (WikiText-2 mirror names)."""
    out = []
    for split, name in names.items():
        path = root / folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text[split], encoding="utf-8")
        out.append(path)
    return out


def make_wikitext_zip(root: Path, text=LM_TEXT, folder: str = "wikitext-103", top: str = "wikitext-103") -> Path:
    path = root / folder / f"{top}-v1.zip"
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for split, content in text.items():
            zf.writestr(f"{top}/wiki.{split}.tokens", content)
    return path


SHAKESPEARE = "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n"


def make_tinyshakespeare(root: Path, text: str = SHAKESPEARE) -> Path:
    path = root / "tinyshakespeare" / "input.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def truncate(path: Path, keep_fraction: float = 0.5) -> Path:
    data = path.read_bytes()
    path.write_bytes(data[: max(1, int(len(data) * keep_fraction))])
    return path
