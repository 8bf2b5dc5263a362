"""Fetch raw files into ``results/data/raw``: from a mirror folder or the network, always checksummed.

Order of attempts for one raw file:
1. the mirror folder (config ``data.mirror`` or environment variable ``FEATLEARN_DATA_MIRROR``),
   looked up as ``<mirror>/<dataset folder>/<name>`` and ``<mirror>/<name>``;
2. unless offline (config ``data.offline`` or ``FEATLEARN_OFFLINE=1``), each registered URL in turn.

Whatever the origin, the bytes are verified against the registry's sha256 before the file is moved
into place; on any failure nothing is left at the destination.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

from featlearn.data.registry import Checksum, RawFile, Source

MIRROR_ENV = "FEATLEARN_DATA_MIRROR"
OFFLINE_ENV = "FEATLEARN_OFFLINE"
_CHUNK = 1 << 20
# Cap on an archive download (the largest, WikiText-103, is 190 MB): stops a wrong URL from filling the disk.
ARCHIVE_LIMIT = 2 << 30


class DataError(RuntimeError):
    """A dataset file is missing, unreachable or corrupt; the message says what to do."""


class ChecksumError(DataError):
    pass


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def match_checksum(path: str | os.PathLike, raw: RawFile, origin: str | None = None) -> Checksum:
    """Return the accepted checksum that ``path`` matches, or raise ``ChecksumError`` naming ``origin`` (where
    the bytes came from: a mirror file or a URL) rather than the temporary copy being checked."""
    digest = sha256_file(path)
    for accepted in raw.accepted:
        if digest == accepted.sha256:
            return accepted
    expected = ", ".join(a.sha256 for a in raw.accepted)
    size = os.path.getsize(path)
    fix = (f"replace or delete {origin}" if origin and not origin.startswith(("http://", "https://"))
           else "delete it and fetch again")
    raise ChecksumError(
        f"checksum mismatch for {raw.dataset}/{raw.name} read from {origin or path}: "
        f"sha256 {digest} ({size:,} bytes), expected {expected}"
        + (f" ({raw.canonical.size:,} bytes)" if raw.canonical.size else "")
        + f". The file is corrupt, truncated or a different version; {fix}."
    )


def how_to_get(raw: RawFile) -> str:
    """Where the file comes from, in words: a URL, or the member to extract from an archive at a URL."""
    source = raw.sources[0]
    if source.member:
        return f"extract {source.member} from the archive {source.url}"
    return f"download it from {source.url}"


def resolve_mirror(configured: str | None) -> Path | None:
    """The mirror folder: the environment variable wins over the config key."""
    value = os.environ.get(MIRROR_ENV) or configured
    return Path(value).expanduser() if value else None


def resolve_offline(configured: bool) -> bool:
    env = os.environ.get(OFFLINE_ENV, "").strip().lower()
    if env in ("1", "true", "yes", "on"):
        return True
    if env in ("0", "false", "no", "off"):
        return False
    return bool(configured)


def mirror_candidates(raw: RawFile, mirror: Path, mirror_dir: str) -> list[Path]:
    names: list[str] = []
    for accepted in raw.accepted:
        for name in (accepted.mirror_name, raw.name):
            if name not in names:
                names.append(name)
    return [mirror / folder / name for name in names for folder in (mirror_dir, ".")]


def find_in_mirror(raw: RawFile, mirror: Path | None, mirror_dir: str) -> Path | None:
    if mirror is None:
        return None
    for candidate in mirror_candidates(raw, mirror, mirror_dir):
        if candidate.is_file():
            return candidate
    return None


def _log(msg: str) -> None:
    print(f"[featlearn.data] {msg}", file=sys.stderr, flush=True)


def download_limit(raw: RawFile, source: Source) -> int:
    """Most bytes a download of ``source`` may take before it is stopped: the largest accepted size of a direct
    file with 1% slack, else (an archive, or no size on record) ``ARCHIVE_LIMIT``."""
    sizes = [a.size for a in raw.accepted if a.size]
    if source.member is None and sizes:
        return int(max(sizes) * 1.01) + 4096
    return ARCHIVE_LIMIT


def _download(url: str, dest: Path, timeout: float = 60.0, limit: int = 0) -> None:
    """Stream ``url`` into ``dest`` with progress on stderr; stop with an error past ``limit`` bytes (0: none),
    before the checksum is even computed, so that a wrong or hostile server cannot fill the disk."""
    request = urllib.request.Request(url, headers={"User-Agent": "featlearn-data/1"})
    with urllib.request.urlopen(request, timeout=timeout) as response, open(dest, "wb") as out:
        total = int(response.headers.get("Content-Length") or 0)
        if limit and total > limit:
            raise DataError(f"{url} announces {total:,} bytes, more than the {limit:,} expected; not downloaded")
        done, next_report = 0, 0.1
        while chunk := response.read(_CHUNK):
            out.write(chunk)
            done += len(chunk)
            if limit and done > limit:
                raise DataError(f"{url} sent more than the {limit:,} bytes expected; download stopped")
            if total and done / total >= next_report:
                _log(f"  {url}: {done / total:4.0%} of {total:,} bytes")
                next_report += 0.1


def _extract_member(archive: Path, member: str, dest: Path) -> None:
    """Copy one member (matched by path suffix, so a leading './' or folder prefix is tolerated)."""
    want = member.lstrip("./")
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            names = [n for n in zf.namelist() if n.lstrip("./").endswith(want)]
            if not names:
                raise DataError(f"archive {archive.name} has no member {member}")
            with zf.open(names[0]) as src, open(dest, "wb") as out:
                shutil.copyfileobj(src, out, _CHUNK)
        return
    with tarfile.open(archive) as tf:
        for info in tf:
            if info.isfile() and info.name.lstrip("./").endswith(want):
                src = tf.extractfile(info)
                assert src is not None
                with src, open(dest, "wb") as out:
                    shutil.copyfileobj(src, out, _CHUNK)
                return
    raise DataError(f"archive {archive.name} has no member {member}")


def _fetch_from_source(source: Source, tmp: Path, workdir: Path, limit: int = 0) -> None:
    if source.member is None:
        _download(source.url, tmp, limit=limit)
        return
    archive = workdir / "archive"
    _download(source.url, archive, limit=limit)
    if source.archive_sha256 and sha256_file(archive) != source.archive_sha256:
        raise ChecksumError(f"archive at {source.url} does not match its documented sha256 {source.archive_sha256}")
    _extract_member(archive, source.member, tmp)


def fetch(
    raw: RawFile,
    dest: str | os.PathLike,
    *,
    mirror: Path | None = None,
    mirror_dir: str | None = None,
    offline: bool = False,
) -> Checksum:
    """Place a verified copy of ``raw`` at ``dest``; return the checksum it matched."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    mirror_dir = mirror_dir or raw.dataset
    with tempfile.TemporaryDirectory(prefix=f".{dest.name}.", dir=dest.parent) as workdir:
        tmp = Path(workdir) / dest.name

        found = find_in_mirror(raw, mirror, mirror_dir)
        if found is not None:
            _log(f"{raw.dataset}/{raw.name}: copying from mirror {found}")
            shutil.copyfile(found, tmp)
            # a corrupt mirror is an error naming the mirror file, not a silent fallback
            matched = match_checksum(tmp, raw, origin=f"mirror file {found}")
            os.replace(tmp, dest)
            _log(f"{raw.dataset}/{raw.name}: verified sha256 {matched.sha256[:12]}... {matched.note}".rstrip())
            return matched

        where = f"mirror {mirror}" if mirror is not None else "no mirror set"
        if offline:
            raise DataError(
                f"{raw.dataset}/{raw.name} is not available offline: it is not in results/data/raw and "
                f"not in the mirror ({where}). To provide it, {how_to_get(raw)} and put it in a mirror folder "
                f"as <mirror>/{mirror_dir}/{raw.canonical.mirror_name}, then point config key "
                f"data.mirror (or the environment variable {MIRROR_ENV}) at that folder; or go online "
                f"(data.offline: false, {OFFLINE_ENV}=0); or switch the dataset off "
                f"(data.datasets.{raw.dataset}.enabled: false)."
            )

        errors: list[str] = []
        for source in raw.sources:
            label = source.url + (f" (member {source.member})" if source.member else "")
            _log(f"{raw.dataset}/{raw.name}: downloading {label}")
            try:
                _fetch_from_source(source, tmp, Path(workdir), limit=download_limit(raw, source))
                matched = match_checksum(tmp, raw, origin=label)
            except (urllib.error.URLError, OSError, DataError, zipfile.BadZipFile, tarfile.TarError) as exc:
                errors.append(f"  {label}: {exc}")
                _log(f"{raw.dataset}/{raw.name}: failed: {exc}")
                tmp.unlink(missing_ok=True)
                continue
            os.replace(tmp, dest)
            _log(f"{raw.dataset}/{raw.name}: verified sha256 {matched.sha256[:12]}...")
            return matched
        raise DataError(
            f"could not fetch {raw.dataset}/{raw.name} ({where}); every source failed:\n"
            + "\n".join(errors)
            + f"\nWithout network, {how_to_get(raw)}, put the file in a mirror folder as <mirror>/{mirror_dir}/"
            f"{raw.canonical.mirror_name} and set data.mirror or {MIRROR_ENV}."
        )
