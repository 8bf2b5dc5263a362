"""The run record (``results/run.json``): who made a run's results. Scale, config and code hashes, git
commit, the configured device and what the jobs were given, precision, date and package versions; and the
one line that names the run on every page."""

from __future__ import annotations

import datetime
import json
import os
import platform
import re
import subprocess
from importlib import metadata
from pathlib import Path

from featlearn.devices import cpu_model
from featlearn.io import write_json

# The commit of a checkout copied without its git folder (a lent GPU machine gets the working tree only), given by
# whoever copied it: recorded as given, with where it came from, only where git itself cannot say.
COMMIT_ENV = "FEATLEARN_COMMIT"

# Packages whose installed versions every run records.
RECORDED_PACKAGES = (
    "torch", "snakemake", "snakemake-executor-plugin-slurm", "numpy", "pandas", "scipy", "matplotlib", "seaborn",
    "transformers", "safetensors", "pyyaml", "lemminflect", "markdown-it-py",
)


def _git(repo: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def installed_versions(packages=RECORDED_PACKAGES) -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in packages:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def device_description(configured: str) -> str:
    """The configured device and what it resolves to here (with the GPU's name)."""
    from featlearn.devices import resolve_device

    try:
        resolved = resolve_device(configured)
    except Exception as exc:  # a device that does not exist here is recorded, not fatal
        return f"{configured} (unavailable here: {exc})"
    if resolved.startswith("cuda"):
        import torch

        return f"{configured} -> {resolved} ({torch.cuda.get_device_name(torch.device(resolved))})"
    return f"{configured} -> {resolved}" if configured != resolved else resolved


def job_device_description(configured: str, given: str | None) -> str:
    """What the run's GPU-capable jobs were given (``--device`` of their commands) and why."""
    if given is None or given == configured:
        if configured == "cpu":
            return "cpu: every job runs on the CPU and asks for no GPU slot"
        return f"{configured}: GPU-capable jobs ask for a GPU slot and resolve `{configured}` themselves"
    if given == "cpu" and configured == "auto":
        return "cpu: device auto and no GPU visible when the DAG was built, so no job asks for a GPU slot"
    return f"{given} (configured: {configured})"


def run_record(scale: str, config_sha: str, code_sha: str, device: str, repo: str | os.PathLike = ".",
               job_device: str | None = None, precision: str = "fp32") -> dict:
    """Who made these results: scale, config and code hashes, git commit, device, date, the host's CPU count and
    model, package versions."""
    repo = Path(repo)
    commit = _git(repo, "rev-parse", "HEAD")
    dirty = _git(repo, "status", "--porcelain", "--untracked-files=no")
    given = os.environ.get(COMMIT_ENV, "").strip() if commit is None else ""
    return {
        "scale": scale,
        "config_sha256": config_sha,
        "code_sha256": code_sha,
        "commit": commit or given or "unknown (not a git checkout)",
        **({"commit_source": f"{COMMIT_ENV}: not a git checkout; the commit its copier named"} if given else {}),
        "uncommitted_changes": bool(dirty) if dirty is not None else None,
        "device": device_description(device),
        "job_device": job_device_description(device, job_device),
        "precision": precision,
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
        "host_cpus": os.cpu_count(),
        "host_cpu": cpu_model(),
        "versions": installed_versions(),
    }


def write_run_record(out: str | os.PathLike, **kw) -> dict:
    record = run_record(**kw)
    write_json(out, record)
    return record


def provenance_line(record: dict) -> str:
    """One Markdown line naming the run: scale, commit, config hash, device, precision, date."""
    commit = record.get("commit", "unknown")
    short = commit[:10] if re.fullmatch(r"[0-9a-f]{40}", commit) else commit
    dirty = " with uncommitted changes" if record.get("uncommitted_changes") else ""
    return (f"Scale `{record.get('scale')}`; commit `{short}`{dirty}; config sha256 `{record.get('config_sha256', '')[:12]}`; "
            f"code sha256 `{record.get('code_sha256', '')[:12]}`; device {record.get('device')}; "
            f"precision {record.get('precision', 'fp32')}; recorded {record.get('date_utc')} UTC.")


def register(sub) -> None:
    p = sub.add_parser("run-record", help="write the run record: scale, hashes, commit, device, versions")
    p.add_argument("--out", required=True)
    p.add_argument("--scale", required=True)
    p.add_argument("--config-sha", required=True)
    p.add_argument("--code-sha", required=True)
    p.add_argument("--device", default="cpu", help="the configured device")
    p.add_argument("--job-device", default=None, help="the device the GPU-capable jobs were given")
    p.add_argument("--precision", default="fp32", help="the trainings' arithmetic (config key precision)")
    p.set_defaults(func=lambda a: print(json.dumps(write_run_record(
        a.out, scale=a.scale, config_sha=a.config_sha, code_sha=a.code_sha, device=a.device,
        job_device=a.job_device, precision=a.precision), indent=2)))
