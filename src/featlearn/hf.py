"""What differs between the transformers versions this project supports (pyproject: >= 4.46, < 6)."""

from __future__ import annotations

# transformers 4.56 renamed from_pretrained's ``torch_dtype`` to ``dtype``; earlier versions take an unknown ``dtype``
# without complaint and load the checkpoint's own dtype, so the keyword has to match the installed version.
DTYPE_RENAMED_IN = (4, 56)


def _version(text: str) -> tuple[int, int]:
    major, minor = text.split(".")[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


def dtype_keyword(dtype, version: str | None = None) -> dict:
    """{keyword: dtype} that sets the weights' dtype in ``from_pretrained`` of the installed transformers
    (or of ``version``)."""
    if version is None:
        import transformers

        version = transformers.__version__
    return {"dtype": dtype} if _version(version) >= DTYPE_RENAMED_IN else {"torch_dtype": dtype}


def download_command(repo_id: str, revision: str, cache_dir: str | None = None) -> str:
    """The ``hf download`` command that fetches a checkpoint, every argument quoted for a POSIX shell, so that
    pasting it runs nothing but the download (a cache folder named ``$(...)`` stays a name)."""
    import shlex

    words = ["hf", "download", repo_id, "--revision", revision] + (["--cache-dir", cache_dir] if cache_dir else [])
    return " ".join(shlex.quote(w) for w in words)
