"""The download hint printed for a checkpoint that is not cached offline is a command that, pasted into a
shell, runs the download and nothing else: a cache folder named like a command substitution stays a name."""

from __future__ import annotations

import shlex
import subprocess

from featlearn.hf import download_command

HOSTILE = "/tmp/cache $(touch PWNED)`touch PWNED2`"


def _hint_command(reason: str) -> str:
    return reason.split("download it first (", 1)[1].rsplit(") or", 1)[0]


def test_download_command_quotes_every_word(tmp_path):
    cmd = download_command("EleutherAI/pythia-70m", "step0", HOSTILE)
    assert shlex.split(cmd) == ["hf", "download", "EleutherAI/pythia-70m", "--revision", "step0", "--cache-dir", HOSTILE]
    # what a shell makes of it: the words themselves, and no file created
    out = subprocess.run(["bash", "-c", f"set -- {cmd}; printf '%s\\n' \"$@\""], cwd=tmp_path, capture_output=True, text=True)
    assert out.stdout.splitlines()[-1] == HOSTILE
    assert not list(tmp_path.iterdir())
    assert download_command("gpt2", "main") == "hf download gpt2 --revision main"


def test_both_papers_print_the_quoted_hint(tmp_path):
    from featlearn.joma import checkpoints as joma
    from featlearn.templates.gpt2 import checkpoints as gpt2

    for module, name, revision in ((joma, "pythia-70m", "step0"), (gpt2, "gpt2", "main")):
        ok, reason = module.available(name, revision, HOSTILE, offline=True)
        assert not ok
        assert shlex.split(_hint_command(reason))[-1] == HOSTILE, reason
