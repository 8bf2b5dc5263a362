"""Device choice: ``auto`` picks CUDA when PyTorch sees a GPU, else the CPU. Nothing requires a GPU.

On a machine with several GPUs, Snakemake runs up to ``--resources gpu=N`` GPU jobs at once but does not say
which GPU each should use. Before a job starts PyTorch, :func:`pin_one_gpu` claims one free GPU (an exclusive
lock file per GPU, held until the job's process ends) and sets ``CUDA_VISIBLE_DEVICES`` to it, so concurrent
jobs land on different GPUs and each sees its GPU as ``cuda:0``. Where a scheduler already gave the job one
GPU (SLURM sets ``CUDA_VISIBLE_DEVICES``), nothing is changed.

Several jobs can share one GPU: a job that declares the GPU memory it needs (``gpu_mem_mb``, from the cost
estimate or its rule) records it in a ledger beside the locks and takes the GPU with the most memory left
where it fits (:func:`claim_gpu_memory`); ``profiles/gpu`` caps the sum over all running jobs with the global
resource ``gpu_mem_mb``, so Snakemake starts as many GPU jobs as fit.
"""

from __future__ import annotations

import functools
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LOCK_DIR_ENV = "FEATLEARN_GPU_LOCK_DIR"
# Where the NVIDIA driver lists the machine's GPUs (one folder per GPU); tests point it at a folder of fakes.
DRIVER_DIR_ENV = "FEATLEARN_GPU_DRIVER_DIR"
DRIVER_DIR = "/proc/driver/nvidia/gpus"
_HELD: list = []  # open lock files of the GPUs this process holds (closed when it exits)


def resolve_device(name: str) -> str:
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device: cuda was asked for, but PyTorch sees no GPU; use device: auto or cpu")
    return name


def _cpuinfo_model(text: str) -> str | None:
    """The first ``model name`` (x86) or ``Model`` / ``Hardware`` (ARM) value of a ``/proc/cpuinfo`` text."""
    for key in ("model name", "Model", "Hardware"):
        for line in text.splitlines():
            name, sep, value = line.partition(":")
            if sep and name.strip() == key and value.strip():
                return " ".join(value.split())
    return None


@functools.lru_cache(maxsize=1)
def cpu_model(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The CPU's model as the system names it, e.g. ``Intel(R) Xeon(R) Processor`` or ``AMD EPYC 9354 32-Core
    Processor``: Linux's ``/proc/cpuinfo``, macOS's ``machdep.cpu.brand_string``, else ``platform.processor()``
    or the architecture (``x86_64``). Two machines of one size can differ by 2x per job (docs/performance.md), so
    timings and the estimate's probe cache name the model, not only the architecture."""
    try:
        found = _cpuinfo_model(Path(cpuinfo).read_text(errors="replace"))
    except OSError:
        found = None
    if not found and sys.platform == "darwin":
        try:
            out = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True, timeout=5)
            found = out.stdout.strip() or None
        except (OSError, subprocess.SubprocessError):
            found = None
    return found or platform.processor() or platform.machine() or "unknown CPU"


def device_label(device) -> str:
    """A device's name for a timing record: the GPU's name on CUDA (the current device for a bare ``cuda``), the
    CPU's model otherwise."""
    if str(device).startswith("cuda"):
        import torch

        return torch.cuda.get_device_name(torch.device(str(device)))
    return cpu_model()


def visible_gpu_ids(environ=os.environ, driver_dir: str | os.PathLike = "/proc/driver/nvidia/gpus") -> list[str]:
    """The GPUs this process may use, as ``CUDA_VISIBLE_DEVICES`` names them: that variable's list when it is
    set, else one index per GPU the NVIDIA driver lists (read without starting CUDA)."""
    if "CUDA_VISIBLE_DEVICES" in environ:
        return [g.strip() for g in environ["CUDA_VISIBLE_DEVICES"].split(",") if g.strip()]
    root = Path(driver_dir)
    return [str(i) for i in range(len(list(root.iterdir())))] if root.is_dir() else []


def gpus_visible(environ=os.environ) -> list[str]:
    """The GPUs a local run may use, found without importing PyTorch (the DAG is built before any job starts):
    the driver must list at least one GPU (``/proc/driver/nvidia/gpus``, or the folder ``FEATLEARN_GPU_DRIVER_DIR``
    names), and ``CUDA_VISIBLE_DEVICES``, where set, chooses among them. Empty on a machine without an NVIDIA
    GPU, whatever ``CUDA_VISIBLE_DEVICES`` says."""
    root = Path(environ.get(DRIVER_DIR_ENV) or DRIVER_DIR)
    if not root.is_dir() or not any(root.iterdir()):
        return []
    return visible_gpu_ids(environ, driver_dir=root)


def dag_device(configured: str, local: bool, environ=os.environ) -> str:
    """The device the jobs of a run are given, decided once before the DAG is built: ``auto`` on a local run
    where no GPU is visible becomes ``cpu``, so no job waits for a GPU slot the machine does not have. A
    cluster run (``local`` false) keeps ``auto``: its jobs run on other nodes and resolve it there. ``cpu``
    and ``cuda`` are kept as they are (``cuda`` without a GPU fails in the job, loudly)."""
    if configured == "auto" and local and not gpus_visible(environ):
        return "cpu"
    return configured


def describe_job_device(device: str) -> str:
    """One line for a job's log: where this job computes (CPU, or the GPU's name and CUDA_VISIBLE_DEVICES)."""
    if device.startswith("cuda"):
        return f"{device} ({device_label(device)}, CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')})"
    return "cpu"  # (parsed from job logs as the device; the CPU's model is in the run record, ``host_cpu``)


def lock_folder(path: str | os.PathLike) -> Path:
    """The GPU lock folder, created private (0700). One that another user owns is refused: whoever created it
    first could hold every lock, and this user's jobs would wait for GPUs nobody uses."""
    folder = Path(path)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = folder.stat()
    if st.st_uid != os.getuid():
        raise PermissionError(f"the GPU lock folder {folder} belongs to uid {st.st_uid}, not to this user "
                              f"(uid {os.getuid()}); set {LOCK_DIR_ENV} to a folder of your own")
    if st.st_mode & 0o077:
        folder.chmod(0o700)
    return folder


def claim_gpu(ids: list[str], lock_dir: str | os.PathLike | None = None, wait: float = 0.0, poll: float = 2.0,
              log=lambda msg: print(msg, file=sys.stderr, flush=True)) -> str | None:
    """Lock the first free GPU of ``ids`` for this process and return its name; wait up to ``wait`` seconds for
    one (None if none frees up). The lock is an ``flock`` on ``<lock_dir>/gpu<id>.lock``, released when the
    process exits, however it exits."""
    import fcntl

    folder = lock_folder(
        lock_dir or os.environ.get(LOCK_DIR_ENV) or Path(tempfile.gettempdir()) / f"featlearn-gpus-{os.getuid()}"
    )
    deadline = time.monotonic() + wait
    warned = False
    while True:
        for gid in ids:
            fh = open(folder / f"gpu{gid}.lock", "a+")
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                fh.close()
                continue
            _HELD.append(fh)
            return gid
        if time.monotonic() >= deadline:
            return None
        if not warned:
            log(f"featlearn: all {len(ids)} GPUs ({', '.join(ids)}) are taken by other jobs; waiting for one")
            warned = True
        time.sleep(poll)


MEMORY_ENV = "FEATLEARN_GPU_MEMORY_MB"  # every GPU's memory in MB (tests, or to keep headroom); else nvidia-smi


def gpu_totals_mb(ids: list[str], environ=os.environ) -> dict[str, int]:
    """Total memory (MB) of each GPU of ``ids`` that can be told without starting CUDA: ``FEATLEARN_GPU_MEMORY_MB``
    for every GPU where set, else what ``nvidia-smi`` lists for that index (GPUs named by UUID are left out)."""
    if environ.get(MEMORY_ENV):
        return {gid: int(environ[MEMORY_ENV]) for gid in ids}
    import subprocess

    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,memory.total", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    listed = dict(tuple(x.strip() for x in line.split(",")[:2]) for line in out.splitlines() if line.count(",") >= 1)
    return {gid: int(float(listed[gid])) for gid in ids if gid in listed}


def _start_time(pid: int) -> str | None:
    """The start time of process ``pid`` (``/proc/<pid>/stat`` field 22), telling a live holder from a reused pid;
    None when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return "?"


def held_mb(folder: Path, gid: str) -> int:
    """GPU memory (MB) that the live jobs sharing GPU ``gid`` declared; records of jobs that ended are removed."""
    total = 0
    for rec in (folder / f"gpu{gid}.jobs").glob("*"):
        try:
            mb, started = rec.read_text().split()
        except (OSError, ValueError):
            continue
        alive = _start_time(int(rec.name))
        if alive is None or (alive != "?" and alive != started):
            rec.unlink(missing_ok=True)
            continue
        total += int(mb)
    return total


def claim_gpu_memory(ids: list[str], need_mb: int, totals: dict[str, int], lock_dir: str | os.PathLike | None = None,
                     wait: float = 0.0, poll: float = 2.0,
                     log=lambda msg: print(msg, file=sys.stderr, flush=True)) -> str | None:
    """Share a GPU: pick the GPU of ``ids`` with the most memory left once the live jobs on it are counted, among
    those where ``need_mb`` fits (``totals``: each GPU's memory; a GPU of unknown size takes any job), record this
    job's ``need_mb`` there until the process ends, and return its name; wait up to ``wait`` seconds for room
    (None if none frees up). A GPU held whole by a job that declared no memory (:func:`claim_gpu`) is skipped;
    such a job waits until the sharers have left (they hold the GPU's lock shared)."""
    import fcntl

    folder = lock_folder(
        lock_dir or os.environ.get(LOCK_DIR_ENV) or Path(tempfile.gettempdir()) / f"featlearn-gpus-{os.getuid()}"
    )
    too_big = [g for g in ids if g in totals and need_mb > totals[g]]
    if too_big and len(too_big) == len(ids):
        raise RuntimeError(f"this job declares {need_mb} MB of GPU memory, more than any GPU has "
                           f"({', '.join(f'GPU {g}: {totals[g]} MB' for g in ids)})")
    deadline = time.monotonic() + wait
    warned = False
    while True:
        with open(folder / "ledger.lock", "a+") as ledger:
            fcntl.flock(ledger, fcntl.LOCK_EX)  # one claimant at a time reads and writes the records
            free = {g: totals.get(g, 10**12) - held_mb(folder, g) for g in ids}
            for gid in sorted(ids, key=lambda g: -free[g]):
                if free[gid] < need_mb:
                    break
                fh = open(folder / f"gpu{gid}.lock", "a+")
                try:
                    fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
                except OSError:  # held whole by another job
                    fh.close()
                    continue
                _HELD.append(fh)
                jobs = folder / f"gpu{gid}.jobs"
                jobs.mkdir(mode=0o700, exist_ok=True)
                (jobs / str(os.getpid())).write_text(f"{need_mb} {_start_time(os.getpid())}\n")
                return gid
        if time.monotonic() >= deadline:
            return None
        if not warned:
            log(f"featlearn: no GPU of {', '.join(ids)} has {need_mb} MB free for this job "
                f"(free now: {', '.join(f'{g}: {max(0, free[g])} MB' for g in ids if free[g] < 10**11)}); waiting")
            warned = True
        time.sleep(poll)


def pin_one_gpu(device: str, environ=os.environ, need_mb: int | None = None, **kw) -> str | None:
    """Give this job one GPU of several (see the module's docstring); returns the GPU pinned, or None when there
    was nothing to choose (CPU device, no GPU, or exactly one visible). With ``need_mb`` (the job's declared
    ``gpu_mem_mb``) the GPU is shared with other jobs while their memory fits (:func:`claim_gpu_memory`);
    without it the job holds a GPU whole (:func:`claim_gpu`). Call before PyTorch starts CUDA."""
    if device == "cpu":
        return None
    ids = visible_gpu_ids(environ, **({"driver_dir": kw.pop("driver_dir")} if "driver_dir" in kw else {}))
    if len(ids) <= 1:
        return None
    wait = kw.pop("wait", 24 * 3600.0)
    if need_mb:  # the job declared its GPU memory: share a GPU with others as long as the memory fits
        gid = claim_gpu_memory(ids, need_mb, gpu_totals_mb(ids, environ), wait=wait, **kw)
    else:
        gid = claim_gpu(ids, wait=wait, **kw)
    if gid is None:
        return None
    environ["CUDA_VISIBLE_DEVICES"] = gid
    return gid
