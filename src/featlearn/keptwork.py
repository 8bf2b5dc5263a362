"""What a compute job keeps in its resume folder between runs, and when it goes (no torch here: the workflow's
main process removes finished jobs' work when the run ends, :func:`sweep_finished`).

The folder (a registry job's ``work_dir``) holds the resume checkpoint of a training (``resume.pt``,
:func:`featlearn.training.resumable_training`), finished pieces of a job (``parts/``, ``save_part``), the job clock
(``clock.json``, :class:`featlearn.training.JobClock`) with a copy of the job's log (``log.txt``) and, once the job's
outputs are written, a marker of them (``finished.json``). The work stays until Snakemake has accepted the outputs,
so a submission killed after writing them (at a scheduler's time limit, while its job script wraps up: Snakemake then
deletes the outputs and resubmits) is resumed, not started over.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from featlearn.io import atomic_path

RESUME_FILE = "resume.pt"
PARTS_DIR = "parts"
PART_SUFFIX = ".pt"  # one kept piece of a job (``featlearn.training.save_part``)
CLOCK_FILE = "clock.json"
# a copy of the job's log, kept with the clock (``featlearn.training.JobClock``): Snakemake deletes a job's log before
# it runs the job again, so a rerun after a kill finds the killed runs' lines here and writes them into its own log
LOG_FILE = "log.txt"
FINISHED_FILE = "finished.json"
# Wall seconds of training between two saves of a long job's state [D]: a killed job (a scheduler's time limit, the end of
# a sitting) loses at most about this much. The language models' loop (a step), the features classifiers (an epoch),
# a templates sweep group (an epoch) and JoMA Table 1 (a step) save once this long has passed since their last save.
# Measured cost: a 1.4 GiB checkpoint in 1.4 s, 0.3% of 600 s (docs/performance.md, "A sweep group's checkpoint").
CHECKPOINT_SECONDS = 600.0


def has_kept_work(work_dir: str | os.PathLike) -> bool:
    """Whether a killed run of a job left work in ``work_dir`` for a rerun to go on from (a checkpoint or parts)."""
    work = Path(work_dir)
    return (work / RESUME_FILE).is_file() or any((work / PARTS_DIR).glob(f"*{PART_SUFFIX}"))


def remove_checkpoint(work_dir: str | os.PathLike) -> None:
    """Delete the resume checkpoint of a finished run and its finished parts (``save_part``), and any partial
    file a killed save left behind."""
    work = Path(work_dir)
    (work / RESUME_FILE).unlink(missing_ok=True)
    for part in work.glob(f".{RESUME_FILE}.*.part"):  # featlearn.io.atomic_path's temporary files
        part.unlink(missing_ok=True)
    shutil.rmtree(work / PARTS_DIR, ignore_errors=True)


def mark_finished(work_dir: str | os.PathLike, outputs: dict) -> Path:
    """Mark the kept work in ``work_dir`` as that of a job whose ``outputs`` (name -> path or list of paths) are
    written: :func:`sweep_finished` removes it once they are still there when the workflow ends. Until then a rerun
    of the job (Snakemake deleted the outputs of a submission that a time limit killed while it wrapped up) resumes
    from it. Paths are kept absolute, with each file's size."""
    files = {}
    for value in outputs.values():
        for path in [value] if isinstance(value, str) else value:
            path = os.path.abspath(path)
            files[path] = os.path.getsize(path) if os.path.isfile(path) else None
    marker = Path(work_dir) / FINISHED_FILE
    marker.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(marker) as tmp:
        tmp.write_text(json.dumps({"outputs": files}, sort_keys=True))
    return marker


def unmark_finished(work_dir: str | os.PathLike) -> None:
    """The job runs again: its kept work is an ordinary resume point, no longer one of finished outputs."""
    (Path(work_dir) / FINISHED_FILE).unlink(missing_ok=True)


def sweep_finished(root: str | os.PathLike) -> list[Path]:
    """Remove the kept work (checkpoint, parts, clock and log copy) of every job under ``root`` marked finished whose outputs are
    all still there at their recorded sizes; returns the folders cleared. Run by the workflow's main process when it
    ends (successfully or not): by then Snakemake has deleted the outputs of any job it counted as failed, whose work
    is kept for its rerun. An empty folder is removed too."""
    cleared = []
    for marker in sorted(Path(root).glob(f"**/{FINISHED_FILE}")):
        try:
            files = json.loads(marker.read_text())["outputs"]
        except (OSError, ValueError, KeyError, TypeError):
            continue  # torn or unreadable: left for the job's next run, which unmarks it
        if not all(os.path.isdir(p) if size is None else os.path.isfile(p) and os.path.getsize(p) == size
                   for p, size in files.items()):
            continue
        work = marker.parent
        remove_checkpoint(work)
        for name in (CLOCK_FILE, LOG_FILE, FINISHED_FILE):
            for part in work.glob(f".{name}.*.part"):  # a write killed half-way (featlearn.io.atomic_path)
                part.unlink(missing_ok=True)
            (work / name).unlink(missing_ok=True)
        try:
            work.rmdir()  # only if nothing else is in it
        except OSError:
            pass
        cleared.append(work)
    return cleared
