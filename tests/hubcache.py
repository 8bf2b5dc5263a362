"""A local Hugging Face hub cache for tests: tiny random models stored as a real download would be."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def save_in_hub_cache(cache: Path, repo_id: str, revision: str, src: Path) -> None:
    """Files of ``src`` as huggingface_hub stores a download: blobs named by content hash, a snapshot
    folder per commit with relative links to the blobs, and refs/<revision> holding the commit hash."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    commit = hashlib.sha1(f"{repo_id}@{revision}".encode()).hexdigest()
    snap = repo / "snapshots" / commit
    snap.mkdir(parents=True)
    (repo / "blobs").mkdir(exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    for f in sorted(src.iterdir()):
        data = f.read_bytes()
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        os.symlink(os.path.relpath(blob, snap), snap / f.name)
    (repo / "refs" / revision).write_text(commit)
