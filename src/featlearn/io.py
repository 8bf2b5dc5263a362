"""Atomic file output: an interrupted job never leaves a file that looks finished.

Everything is written to a temporary name in the destination folder and renamed into place only
once complete (``os.replace`` is atomic on POSIX within one file system).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import IO, Iterator

# mkstemp creates files readable by the owner only; finished outputs get the usual umask permissions.
_UMASK = os.umask(0)
os.umask(_UMASK)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.chmod(tmp_path, 0o666 & ~_UMASK)
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", **kwargs) -> Iterator[IO]:
    """``open`` for writing that only creates ``path`` once the block completes."""
    if "r" in mode or "a" in mode:
        raise ValueError("atomic_open is for writing whole files ('w' or 'wb')")
    if "b" not in mode:
        kwargs.setdefault("encoding", "utf-8")
    with atomic_path(path) as tmp:
        with open(tmp, mode, **kwargs) as fh:
            yield fh


# Every table of the project is written with 10 significant digits: float32 values (all trained models)
# round-trip exactly (9 digits suffice) and float64 values (theory, kernels) keep far more digits than any
# figure or claim resolves.
CSV_FLOAT_FORMAT = "%.10g"


def write_csv(df, path: str | os.PathLike) -> None:
    """Write a pandas table (no index) atomically, floats with ``CSV_FLOAT_FORMAT``."""
    with atomic_open(path, newline="") as fh:
        df.to_csv(fh, index=False, float_format=CSV_FLOAT_FORMAT)


def write_json(path: str | os.PathLike, obj) -> None:
    with atomic_open(path) as fh:
        json.dump(obj, fh, indent=2, sort_keys=True)
        fh.write("\n")


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_open(path) as fh:
        fh.write(text)


def save_tensor(path: str | os.PathLike, tensor) -> None:
    import torch

    # through a file handle: torch names the archive's inner folder after a path's stem, which would
    # put the random temporary name into the bytes and make identical tensors differ on disk
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        torch.save(tensor, fh)


def file_sha256(path: str | os.PathLike) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# A prepared folder's stats.json records the sha256 of each file written beside it under this key.
DIGESTS = "files"


class CorruptFile(ValueError):
    """A prepared file that does not match what was written (truncated, edited) or cannot be read."""


def verify_prepared(path: str | os.PathLike) -> None:
    """Check ``path`` against the sha256 its folder's stats.json recorded when it was written (nothing to check
    when there is no such record); raise :class:`CorruptFile` naming the file and the fix."""
    path = Path(path)
    stats = path.parent / "stats.json"
    if not stats.is_file():
        return
    digests = json.loads(stats.read_text()).get(DIGESTS, {})
    if path.name in digests and file_sha256(path) != digests[path.name]:
        raise CorruptFile(f"{path} does not match the sha256 recorded in {stats} when it was prepared (a truncated or "
                          f"edited file): delete the folder {path.parent} and rerun to prepare it again")


def load_tensor(path: str | os.PathLike):
    """A tensor file, checked against its folder's recorded sha256; an unreadable file raises naming it."""
    import torch

    verify_prepared(path)
    try:
        return torch.load(path, weights_only=True)
    except (RuntimeError, EOFError, OSError) as e:
        raise CorruptFile(f"{path} cannot be read as a tensor file ({e}); it may be truncated: delete it and rerun "
                          "the job that writes it") from e
