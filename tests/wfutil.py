"""Run snakemake on a private copy of the workflow (so tests never touch the repository's results/)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# profiles/default is left out: the tests set their own options (Snakemake would load it automatically)
COPIED = ("Snakefile", "workflow", "config", "src", "envs", "profiles/slurm")


def copy_workflow(dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for name in COPIED:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(src, dest / name)
    return dest


def snakemake(workdir: Path, *args: str, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    """``snakemake`` from this test's Python environment, with that environment's python on PATH."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("FEATLEARN_")}
    full_env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + full_env.get("PATH", "")
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "snakemake", *args],
        cwd=workdir,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


DATASET_NAMES = ("sst", "imdb", "ag_news", "wikitext2", "wikitext103", "ptb", "tinyshakespeare")


def overlay(workdir: Path, name: str, datasets: dict[str, object] | None = None, papers: bool = True) -> str:
    """Write a config overlay into ``workdir`` switching datasets (others off) and papers; return its name."""
    import yaml

    datasets = datasets or {}
    config = {"data": {"datasets": {n: {"enabled": datasets.get(n, False)} for n in DATASET_NAMES}}}
    if not papers:
        config["papers"] = {p: False for p in ("features", "scan_snap", "joma", "templates")}
    (workdir / name).write_text(yaml.safe_dump(config))
    return name


SMOKE = ("--cores", "2", "--configfile", "config/smoke.yaml")


def check_ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def would_run(work: Path, env: dict, *extra: str) -> str:
    """The names of the rules that would run (stdout of a quiet dry run on the smoke config)."""
    return check_ok(snakemake(work, *SMOKE, *extra, "-n", "--quiet", "rules", env=env)).stdout


def would_run_after_edit(work: Path, env: dict, module: str) -> str:
    """The rules a dry run would schedule after a comment is appended to src/featlearn/<module>."""
    path = work / "src" / "featlearn" / module
    original = path.read_text()
    try:
        path.write_text(original + "\n# edited\n")
        return would_run(work, env)
    finally:
        path.write_text(original)
