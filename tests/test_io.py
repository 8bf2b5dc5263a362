"""Atomic writes: an interrupted writer never leaves a file that looks finished."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from featlearn.io import atomic_open, load_tensor, save_tensor, write_json


def test_atomic_open_writes_on_success(tmp_path):
    with atomic_open(tmp_path / "sub" / "out.txt") as fh:
        fh.write("done\n")
    assert (tmp_path / "sub" / "out.txt").read_text() == "done\n"
    assert os.listdir(tmp_path / "sub") == ["out.txt"]
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "sub" / "out.txt").stat().st_mode & 0o777 == 0o666 & ~umask


def test_exception_leaves_nothing_and_keeps_old_file(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("old\n")
    with pytest.raises(RuntimeError):
        with atomic_open(path) as fh:
            fh.write("half")
            raise RuntimeError("interrupted")
    assert path.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["out.txt"]


def test_read_modes_rejected(tmp_path):
    with pytest.raises(ValueError):
        with atomic_open(tmp_path / "x", "a"):
            pass


def test_sigkill_mid_write_leaves_no_output(tmp_path):
    script = textwrap.dedent(
        f"""
        import time
        from featlearn.io import atomic_open
        with atomic_open({str(tmp_path / 'out.txt')!r}) as fh:
            fh.write("partial")
            fh.flush()
            print("writing", flush=True)
            time.sleep(60)
        """
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, env=env, text=True)
    assert proc.stdout.readline().strip() == "writing"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert not (tmp_path / "out.txt").exists()
    # only the temporary (hidden, .part) file remains, which no rule will mistake for an output
    assert all(name.startswith(".out.txt.") and name.endswith(".part") for name in os.listdir(tmp_path))


def test_json_and_tensor_roundtrip(tmp_path):
    import torch

    write_json(tmp_path / "a.json", {"b": 1, "a": [1, 2]})
    assert (tmp_path / "a.json").read_text() == '{\n  "a": [\n    1,\n    2\n  ],\n  "b": 1\n}\n'
    t = torch.arange(5)
    save_tensor(tmp_path / "t.pt", t)
    assert torch.equal(load_tensor(tmp_path / "t.pt"), t)


def test_figures_are_byte_identical_across_saves(tmp_path):
    """PNG, PDF and SVG files of the same figure are identical when saved twice (SVG: fixed id salt, no date)."""
    import matplotlib.pyplot as plt

    from featlearn.plotting import save_figure

    def fig():
        f, ax = plt.subplots()
        ax.plot([0, 1, 2], [1, 0, 2], label="curve")
        ax.legend()
        return f

    for run in ("a", "b"):
        save_figure(fig(), *(tmp_path / f"{run}.{ext}" for ext in ("png", "pdf", "svg")), dpi=40)
    for ext in ("png", "pdf", "svg"):
        assert (tmp_path / f"a.{ext}").read_bytes() == (tmp_path / f"b.{ext}").read_bytes(), ext
