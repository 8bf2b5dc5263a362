"""Fetching raw files: mirror, network (a real local HTTP server), checksums, offline errors."""

from __future__ import annotations

import functools
import hashlib
import http.server
import threading
import zipfile
from pathlib import Path

import pytest

from featlearn.data.fetch import (
    MIRROR_ENV,
    OFFLINE_ENV,
    ChecksumError,
    DataError,
    fetch,
    match_checksum,
    resolve_mirror,
    resolve_offline,
    sha256_file,
)
from featlearn.data.registry import Checksum, RawFile, Source

CONTENT = b"the cat sat on the mat\n" * 100
SHA = hashlib.sha256(CONTENT).hexdigest()


def raw_file(*sources: Source, accepted=None) -> RawFile:
    accepted = accepted or (Checksum(SHA, len(CONTENT), mirror_name="mirror_name.txt"),)
    return RawFile("toy", "toy.txt", sources or (Source("http://127.0.0.1:9/unreachable/toy.txt"),), accepted)


@pytest.fixture()
def server(tmp_path):
    """A real HTTP server on localhost serving ``tmp_path/www``."""
    root = tmp_path / "www"
    root.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a, **k: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_sha256_file(tmp_path):
    path = tmp_path / "x"
    path.write_bytes(b"abc")
    assert sha256_file(path) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_mirror_copy_is_verified(tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "toy").mkdir(parents=True)
    (mirror / "toy" / "mirror_name.txt").write_bytes(CONTENT)
    dest = tmp_path / "raw" / "toy" / "toy.txt"
    matched = fetch(raw_file(), dest, mirror=mirror, mirror_dir="toy", offline=True)
    assert dest.read_bytes() == CONTENT
    assert matched.sha256 == SHA
    assert leftovers(dest.parent) == ["toy.txt"]


def test_mirror_accepts_local_name_and_flat_layout(tmp_path):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "toy.txt").write_bytes(CONTENT)  # <mirror>/<name>, no dataset folder
    dest = tmp_path / "out" / "toy.txt"
    fetch(raw_file(), dest, mirror=mirror, mirror_dir="toy", offline=True)
    assert dest.read_bytes() == CONTENT


def test_mirror_alternate_checksum_is_accepted(tmp_path):
    other = b"a faithful rebuild\n"
    accepted = (
        Checksum(SHA, len(CONTENT), "canonical.tar.gz"),
        Checksum(hashlib.sha256(other).hexdigest(), len(other), "rebuilt.tar.gz", note="rebuild"),
    )
    mirror = tmp_path / "mirror"
    (mirror / "toy").mkdir(parents=True)
    (mirror / "toy" / "rebuilt.tar.gz").write_bytes(other)
    dest = tmp_path / "raw" / "toy.txt"
    matched = fetch(raw_file(accepted=accepted), dest, mirror=mirror, mirror_dir="toy", offline=True)
    assert matched.note == "rebuild"
    assert dest.read_bytes() == other


def test_corrupt_mirror_file_fails_and_leaves_nothing(tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "toy").mkdir(parents=True)
    (mirror / "toy" / "mirror_name.txt").write_bytes(CONTENT[:-5] + b"XXXXX")
    dest = tmp_path / "raw" / "toy.txt"
    with pytest.raises(ChecksumError, match="checksum mismatch for toy/toy.txt") as info:
        fetch(raw_file(), dest, mirror=mirror, mirror_dir="toy", offline=True)
    assert SHA in str(info.value)
    assert not dest.exists()
    assert leftovers(dest.parent) == []


def test_offline_without_file_names_file_url_and_option(tmp_path):
    raw = raw_file(Source("https://example.org/data/toy.txt"))
    dest = tmp_path / "raw" / "toy.txt"
    with pytest.raises(DataError) as info:
        fetch(raw, dest, mirror=None, mirror_dir="toy", offline=True)
    message = str(info.value)
    assert "toy/toy.txt" in message
    assert "https://example.org/data/toy.txt" in message
    assert "data.mirror" in message and MIRROR_ENV in message
    assert not dest.exists()


def test_download_from_server(tmp_path, server):
    root, url = server
    (root / "toy.txt").write_bytes(CONTENT)
    dest = tmp_path / "raw" / "toy.txt"
    fetch(raw_file(Source(f"{url}/toy.txt")), dest, offline=False)
    assert dest.read_bytes() == CONTENT
    assert leftovers(dest.parent) == ["toy.txt"]


def test_corrupted_download_fails_and_leaves_nothing(tmp_path, server):
    root, url = server
    (root / "toy.txt").write_bytes(CONTENT[: len(CONTENT) // 2])  # truncated on the server
    dest = tmp_path / "raw" / "toy.txt"
    with pytest.raises(DataError, match="every source failed") as info:
        fetch(raw_file(Source(f"{url}/toy.txt")), dest, offline=False)
    assert "checksum mismatch" in str(info.value)
    assert not dest.exists()
    assert leftovers(dest.parent) == []


def test_falls_back_to_next_source(tmp_path, server):
    root, url = server
    (root / "mirror2.txt").write_bytes(CONTENT)
    raw = raw_file(Source(f"{url}/missing.txt"), Source(f"{url}/mirror2.txt"))
    dest = tmp_path / "toy.txt"
    fetch(raw, dest, offline=False)
    assert dest.read_bytes() == CONTENT


def test_archive_member_source(tmp_path, server):
    root, url = server
    with zipfile.ZipFile(root / "bundle.zip", "w") as zf:
        zf.writestr("bundle/other.txt", "x")
        zf.writestr("bundle/toy.txt", CONTENT)
    archive_sha = sha256_file(root / "bundle.zip")
    dest = tmp_path / "toy.txt"
    fetch(raw_file(Source(f"{url}/bundle.zip", member="bundle/toy.txt", archive_sha256=archive_sha)), dest)
    assert dest.read_bytes() == CONTENT

    dest.unlink()
    with pytest.raises(DataError, match="documented sha256"):
        fetch(raw_file(Source(f"{url}/bundle.zip", member="bundle/toy.txt", archive_sha256="0" * 64)), dest)
    assert not dest.exists()


def test_match_checksum_reports_size(tmp_path):
    path = tmp_path / "x"
    path.write_bytes(b"nope")
    with pytest.raises(ChecksumError, match="4 bytes"):
        match_checksum(path, raw_file())


def test_environment_overrides_config(tmp_path, monkeypatch):
    assert resolve_mirror(None) is None
    assert resolve_mirror(str(tmp_path)) == tmp_path
    monkeypatch.setenv(MIRROR_ENV, str(tmp_path / "env"))
    assert resolve_mirror(str(tmp_path)) == tmp_path / "env"
    assert resolve_offline(False) is False
    monkeypatch.setenv(OFFLINE_ENV, "1")
    assert resolve_offline(False) is True
    monkeypatch.setenv(OFFLINE_ENV, "0")
    assert resolve_offline(True) is False


def test_cli_reports_data_error_without_traceback(tmp_path, capsys):
    from featlearn.pipeline.cli import main

    code = main(["data-fetch", "--dataset", "sst", "--file", "trainDevTestTrees_PTB.zip", "--out", str(tmp_path / "x.zip"),
                 "--offline"])
    err = capsys.readouterr().err
    assert code == 2
    assert "https://nlp.stanford.edu/sentiment/trainDevTestTrees_PTB.zip" in err
    assert "Traceback" not in err


def test_corrupt_mirror_error_names_the_mirror_file_not_a_temporary_copy(tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "toy").mkdir(parents=True)
    bad = mirror / "toy" / "mirror_name.txt"
    bad.write_bytes(b"not the file")
    with pytest.raises(ChecksumError) as info:
        fetch(raw_file(), tmp_path / "raw" / "toy.txt", mirror=mirror, mirror_dir="toy", offline=True)
    assert f"read from mirror file {bad}:" in str(info.value)
    assert f"replace or delete mirror file {bad}" in str(info.value)
    assert ".toy.txt." not in str(info.value)  # the temporary folder's name


def test_offline_error_says_which_archive_member_to_extract(tmp_path):
    raw = raw_file(Source("https://example.org/bundle.zip", member="bundle/toy.txt"))
    with pytest.raises(DataError) as info:
        fetch(raw, tmp_path / "toy.txt", mirror=None, mirror_dir="toy", offline=True)
    assert "extract bundle/toy.txt from the archive https://example.org/bundle.zip" in str(info.value)


def test_a_download_larger_than_expected_is_stopped_before_the_checksum(tmp_path, server):
    root, url = server
    (root / "toy.txt").write_bytes(CONTENT * 3)  # three times the recorded size
    dest = tmp_path / "raw" / "toy.txt"
    with pytest.raises(DataError, match="more than the") as info:
        fetch(raw_file(Source(f"{url}/toy.txt")), dest, offline=False)
    assert "checksum" not in str(info.value)
    assert not dest.exists() and leftovers(dest.parent) == []
