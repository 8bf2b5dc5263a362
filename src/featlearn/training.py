"""The one resumable training loop of every language model in the project (scan_snap and JoMA's
``lm/train.py``, the features character GPT, the templates GPT-2).

A model's own module says what one step is (``step(i) -> loss``) and what an evaluation logs
(``record(i, mean_train_loss)``); this loop runs the steps, evaluates at step 0, every ``eval_every``
steps and at the last one, and writes a resume checkpoint atomically every ``checkpoint_every`` steps and after any
step that ends :data:`~featlearn.keptwork.CHECKPOINT_SECONDS` (10 minutes) after the last one, so that a paper-scale
run of slow steps (the character GPT's 250 steps between checkpoints take 80 minutes on one CPU core) loses at most
that much when it is killed, as the classifiers, the sweep groups and JoMA's Table 1 already kept theirs.
The checkpoint holds the model, the optimiser, torch's global random state (and CUDA's on a GPU), any
extra generators, the running training loss and whatever the caller logs (``save_log``/``load_log``), so
a job killed at any point and rerun continues from its last checkpoint; on the CPU the result equals an
uninterrupted run (tests kill one with SIGKILL). A checkpoint is used only if it was written under the same
settings and the same run identity (code, inputs, numeric threads, device: set by ``python -m featlearn
compute`` in the environment variable ``FEATLEARN_RUN_IDENTITY``); any other is discarded with a log line and
the run starts afresh, so a resumed table never mixes two versions of the code. Inside a compute job (a run
identity is set) the checkpoint outlives the last step, and the job itself: once the job's outputs are written the
compute command marks its folder finished (:func:`mark_finished`), and the kept work is removed only once Snakemake
has accepted those outputs (:func:`sweep_finished`, run when the workflow ends). A job killed between its last step
and its tables, or after its tables but before Snakemake saw it end (a scheduler's time limit reached while the job
script wraps up, which makes Snakemake delete the outputs and resubmit it), resumes instead of starting over.

A job that trains many independent pieces one after another (a templates sweep's groups) keeps each finished
piece instead (``save_part``/``load_part``, under ``parts/`` of the same folder and checked against the same run
identity), so a killed job trains only the pieces it had not finished; a loop of its own keeps its latest state the
same way under one fixed key (the features classifiers and a templates sweep group, after an epoch). They are removed
with the checkpoint.

A killed job's earlier runs are timed too (:class:`JobClock`, a file beside the checkpoint that the compute command
keeps up to date): a rerun that finds kept work logs how long the runs before it computed, so a resumed job's whole
wall time is known although Snakemake's benchmark file times its last run only.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from featlearn.io import atomic_path
from featlearn.keptwork import (CHECKPOINT_SECONDS, CLOCK_FILE, FINISHED_FILE, LOG_FILE, PART_SUFFIX, PARTS_DIR, RESUME_FILE,  # noqa: F401
                                has_kept_work, mark_finished, remove_checkpoint, sweep_finished, unmark_finished)
from featlearn.precision import full_precision

IDENTITY_ENV = "FEATLEARN_RUN_IDENTITY"


# A long training prints a progress line at least this often (wall seconds), between the lines of its evaluations: the
# language models' loop (a step) and a templates sweep group (an epoch). At paper scale on a CPU an evaluation can be
# an hour or more away (the character GPT: 250 steps of about 20 s; templates Fig. 11's 64-head group: 100 epochs
# of about 24 s).
PROGRESS_SECONDS = 600.0


def run_identity() -> dict:
    """The identity the compute command set for this process (empty outside a compute job)."""
    raw = os.environ.get(IDENTITY_ENV, "")
    return json.loads(raw) if raw else {}


def resumable_training(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    *,
    total: int,
    step: Callable[[int], float | torch.Tensor],
    record: Callable[[int, float | None], None],
    eval_every: int,
    checkpoint_every: int,
    work_dir: str | os.PathLike,
    settings: dict,
    device: str | torch.device = "cpu",
    generators: Sequence[torch.Generator] = (),
    save_log: Callable[[], dict] = dict,
    load_log: Callable[[dict], None] = lambda logged: None,
    log: Callable[[str], None] = print,
    keep_checkpoint: bool = False,
    checkpoint_seconds: float | None = None,
) -> int:
    """Train ``model`` from step 1 (or from the checkpoint in ``work_dir``) to ``total``; returns the step
    it started from. ``settings`` identifies the run: a checkpoint saved under other settings or another run
    identity is discarded. A checkpoint is written every ``checkpoint_every`` steps and after the first step that
    ends ``checkpoint_seconds`` (None: :data:`CHECKPOINT_SECONDS`) of wall time after the last one; where it is
    written changes nothing of an uninterrupted run. The checkpoint is removed once the last step is done, except
    inside a compute job (a run identity is set), whose command marks it finished once the job's outputs are written (the workflow
    removes it when it ends: :func:`sweep_finished`), or with
    ``keep_checkpoint``, which leaves it for the caller to remove with :func:`remove_checkpoint` once its
    results are written (for a long evaluation after the last step).

    ``step`` may return its loss as a 0-dim tensor: the running sum then stays on the device (in float64, the
    same sum a Python float gives) and is read back only at evaluations and checkpoints, so a GPU step does
    not wait for the host."""
    work = Path(work_dir)
    work.mkdir(parents=True, exist_ok=True)
    resume = work / RESUME_FILE
    dev = torch.device(device)
    start, running, seen = 0, 0.0, 0  # running: sum of the training losses since the last evaluation
    identity = run_identity()
    # loaded onto the CPU: the random-number states must stay CPU byte tensors (a GPU run's checkpoint mapped onto
    # its device could not be restored); load_state_dict copies the model's and the optimiser's tensors to their device
    state = None
    if resume.exists():
        try:
            state = torch.load(resume, weights_only=True, map_location="cpu")
            if not isinstance(state, dict):
                raise TypeError(f"a {type(state).__name__}, not a checkpoint")
        except Exception as err:  # noqa: BLE001 - a torn or foreign file is trained again, never trusted (as load_part)
            log(f"discarding {resume}: unreadable ({type(err).__name__}); starting afresh")
            resume.unlink()
            state = None
    if state is not None and (state.get("settings") != settings or state.get("identity", {}) != identity):
        what = "settings" if state.get("settings") != settings else ", ".join(
            k for k in sorted(set(identity) | set(state.get("identity", {})))
            if identity.get(k) != state.get("identity", {}).get(k))
        log(f"discarding {resume}: written under other {what}; starting afresh")
        resume.unlink()
        state = None
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["rng"])
        if dev.type == "cuda" and state["cuda_rng"] is not None:
            torch.cuda.set_rng_state(state["cuda_rng"], dev)
        for gen, gen_state in zip(generators, state["generators"], strict=True):
            gen.set_state(gen_state)
        start, running, seen = state["step"], state["running"], state["seen"]
        load_log(state["logged"])
        log(f"resuming at step {start} from {resume}")

    keep_seconds = CHECKPOINT_SECONDS if checkpoint_seconds is None else checkpoint_seconds
    t0 = saved_at = shown_at = time.perf_counter()
    if start == 0:
        with full_precision(dev):
            record(0, None)
    model.train()
    for i in range(start + 1, total + 1):
        loss = step(i)
        running, seen = running + (loss.detach().double() if isinstance(loss, torch.Tensor) else loss), seen + 1
        if i % eval_every == 0 or i == total:
            with full_precision(dev):  # evaluations in float32 whatever the job's precision (featlearn.precision)
                record(i, float(running) / seen)
            running, seen = 0.0, 0
            log(progress(i - start, total - i, time.perf_counter() - t0))
            shown_at = time.perf_counter()
        elif time.perf_counter() - shown_at >= PROGRESS_SECONDS:  # a long gap between evaluations (paper scale, a CPU)
            log(f"step {i} of {total}: {progress(i - start, total - i, time.perf_counter() - t0)}")
            shown_at = time.perf_counter()
        since = time.perf_counter() - saved_at
        by_time = i % checkpoint_every != 0 and since >= keep_seconds
        if i < total and (i % checkpoint_every == 0 or by_time):
            with atomic_path(resume) as tmp:
                torch.save(
                    {
                        "settings": settings,
                        "identity": identity,
                        "step": i,
                        "model": model.state_dict(),
                        "optimizer": optimizer.state_dict(),
                        "rng": torch.get_rng_state(),
                        "cuda_rng": torch.cuda.get_rng_state(dev) if dev.type == "cuda" else None,
                        "generators": [g.get_state() for g in generators],
                        "running": float(running),
                        "seen": seen,
                        "logged": save_log(),
                    },
                    tmp,
                )
            if by_time:
                log(f"checkpoint at step {i}, {since / 60:.1f} min after the last one")
            saved_at = time.perf_counter()
    if not keep_checkpoint and not identity:
        remove_checkpoint(work)
    log(f"done: {total - start} steps in {time.perf_counter() - t0:.0f}s")
    return start


def progress(done: int, left: int, seconds: float, unit: str = "steps") -> str:
    """One progress line: ``unit`` (steps, epochs) per second since this process started (evaluations included) and
    the time left at that rate."""
    rate = done / seconds if seconds > 0 else float("inf")
    eta = left / rate if rate > 0 else float("inf")
    done_unit = unit[:-1] if done == 1 else unit  # "1 step", "2 steps"
    return f"progress: {done} {done_unit} in {seconds:.0f}s, {rate:.3g} {unit}/s, about {_duration(eta)} left"


def _duration(seconds: float) -> str:
    if seconds != seconds or seconds == float("inf"):
        return "unknown time"
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _part_key(work_dir: str | os.PathLike, key: dict) -> tuple[Path, dict]:
    """The file of a part and its key as JSON reads it back (tuples as lists, other objects as their str)."""
    text = json.dumps(key, sort_keys=True, default=str)
    return Path(work_dir) / PARTS_DIR / f"{hashlib.sha256(text.encode()).hexdigest()[:20]}{PART_SUFFIX}", json.loads(text)


def save_part(work_dir: str | os.PathLike, key: dict, value: Any) -> Path:
    """Keep ``value``, the result of one finished piece of a job identified by ``key`` (a JSON-able dict of
    everything the piece depends on), for a rerun of the killed job to load (``load_part``). Written atomically
    with the run identity by ``torch.save`` (the value is any Python object, e.g. the piece's tables; its tensors are
    written as they are in memory: a paper-scale sweep group's 1.4 GiB checkpoint takes 1.4 s and no extra memory,
    where pickling them took 9.2 s and a second copy in memory, docs/performance.md)."""
    path, key = _part_key(work_dir, key)
    with atomic_path(path) as tmp:
        torch.save({"key": key, "identity": run_identity(), "value": value}, tmp)
    return path


def remove_part(work_dir: str | os.PathLike, key: dict) -> None:
    """Delete what ``save_part`` kept for ``key`` (a checkpoint kept under a fixed key, once its run is done)."""
    _part_key(work_dir, key)[0].unlink(missing_ok=True)


def load_part(work_dir: str | os.PathLike, key: dict, log: Callable[[str], None] = print) -> Any | None:
    """The value ``save_part`` kept for ``key`` in ``work_dir``, or None where there is none. One kept under another
    run identity (code, inputs, threads, device, precision) or unreadable (a torn file) is deleted with a log line
    and None returned: the piece is trained again, so a resumed table never mixes two versions of the code."""
    path, key = _part_key(work_dir, key)
    if not path.exists():
        return None
    try:
        saved = torch.load(path, map_location="cpu", weights_only=False)  # the job's own file, with its tables
    except Exception as err:  # noqa: BLE001 - any unreadable file is retrained, never trusted
        log(f"discarding {path}: unreadable ({type(err).__name__}); training it again")
        path.unlink(missing_ok=True)
        return None
    if saved.get("key") != key or saved.get("identity") != run_identity():
        what = "settings" if saved.get("key") != key else "run identity"
        log(f"discarding {path}: written under another {what}; training it again")
        path.unlink(missing_ok=True)
        return None
    return saved["value"]


def resident_mb() -> float | None:
    """This process's resident memory now, in MiB (Linux's ``/proc/self/statm``; None where it cannot be read)."""
    try:
        with open("/proc/self/statm") as fh:
            pages = int(fh.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def machine_mb() -> float | None:
    """The machine's memory in MiB (None where the OS does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, AttributeError):
        return None


# The most of a job's log its clock keeps a copy of (the last bytes, from a line's start): a log of progress lines
# every 10 minutes stays far below it over days; a runaway log is cut rather than copied whole every 30 s.
LOG_KEEP_BYTES = 1 << 20
# the lines around the killed runs' log in a rerun's log; their own lines there start with EARLIER_LOG_PREFIX
EARLIER_LOG_START = "featlearn: the log of those runs, as their clock last kept it (every 30 s):"
EARLIER_LOG_END = "featlearn: (end of the earlier runs' log)"
EARLIER_LOG_PREFIX = "| "


def stdout_file() -> Path | None:
    """The file this process's standard output goes to (a compute job's log: ``> {log} 2>&1``), where the OS says
    (Linux's ``/proc``); None for a terminal, a pipe, or a deleted file."""
    try:
        path = Path(os.readlink("/proc/self/fd/1"))
    except OSError:
        return None
    return path if path.is_absolute() and path.is_file() else None


def earlier_log_lines(kept: str) -> list[str]:
    """The lines a rerun writes into its log for the log copy ``kept`` of the run before it: each line of that run
    prefixed with :data:`EARLIER_LOG_PREFIX`, the runs before that one (already prefixed there) as they were, their
    start and end lines left out; so after any number of reruns each run's lines appear once, in order."""
    lines = []
    for line in kept.splitlines():
        if line in (EARLIER_LOG_START, EARLIER_LOG_END):
            continue
        lines.append(line if line.startswith(EARLIER_LOG_PREFIX) else EARLIER_LOG_PREFIX + line)
    return lines


# A killed run whose resident memory had reached this share of the machine's is said to have been near its end: the
# kernel's out-of-memory killer ends the largest process when memory runs out, with a SIGKILL its log cannot record.
NEAR_MACHINE_MEMORY = 0.75


class JobClock:
    """The wall time of all the runs of one compute job, kept in its resume folder (``clock.json``: seconds, runs,
    run identity, and the largest resident memory this run's clock has read) and rewritten every ``interval`` seconds
    by a daemon thread, so a run killed without warning loses at most that much of it. A rerun's log line then says
    how large the last killed run had grown (its own process, read at each rewrite; the worker processes of a sweep's
    group pool are not counted): a run ended by the out-of-memory killer leaves no word of its own.

    A run that starts where a killed one left kept work (:func:`has_kept_work`) under the same run identity counts
    the earlier runs' seconds (``earlier_s``, ``earlier_runs``): the time that work cost, with whatever was computed
    after its last checkpoint and is computed again. Without kept work, or under another identity, the clock starts
    at zero. The compute command prints :meth:`line` in the job's log; once the job's outputs are written the file
    stays with the kept work until the workflow removes both (:func:`featlearn.keptwork.sweep_finished`), so a run
    after a submission that was failed while it wrapped up counts that one too.
    """

    def __init__(self, work_dir: str | os.PathLike, interval: float = 30.0, log: str | os.PathLike | None = None):
        self.path = Path(work_dir) / CLOCK_FILE
        self.log_copy = Path(work_dir) / LOG_FILE
        self.log = Path(log) if log is not None else None  # the job's own log, copied at every rewrite
        self.earlier_log: str | None = None  # the copy the last earlier run's clock kept of its log
        self.interval = interval
        self.earlier_s, self.earlier_runs = 0.0, 0
        self.last_rss_mb: float | None = None  # the last earlier run's largest resident memory read by its clock
        self.rss_mb: float | None = None  # this run's, so far
        self.identity = run_identity()
        if has_kept_work(work_dir):
            try:
                saved = json.loads(self.path.read_text())
                if saved.get("identity") == self.identity:
                    self.earlier_s, self.earlier_runs = float(saved["seconds"]), int(saved["runs"])
                    rss = saved.get("rss_mb")
                    self.last_rss_mb = float(rss) if isinstance(rss, (int, float)) else None
                    if self.log_copy.is_file():
                        self.earlier_log = self.log_copy.read_text(errors="replace")
            except (OSError, ValueError, KeyError, TypeError):
                pass  # no clock or an unreadable one: the earlier runs' time is unknown, counted as none
        self._t0 = time.perf_counter()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def seconds(self) -> float:
        """Wall seconds of every run so far, this one included."""
        return self.earlier_s + time.perf_counter() - self._t0

    def line(self) -> str | None:
        """The log line of a run that follows killed ones (None for a first run): ``featlearn.pipeline.benchfiles``
        reads the seconds back."""
        if not self.earlier_runs:
            return None
        line = (f"featlearn: earlier runs of this job: {self.earlier_s:.1f} s of wall time in {self.earlier_runs} "
                f"run{'s' if self.earlier_runs != 1 else ''}, killed (their kept work is in {self.path.parent})")
        if self.last_rss_mb is not None:
            total = machine_mb()
            line += f"; the last one's resident memory reached at least {self.last_rss_mb:,.0f} MiB"
            if total:
                line += f" of this machine's {total:,.0f} MiB"
                if self.last_rss_mb >= NEAR_MACHINE_MEMORY * total:
                    line += " (near all of it: the kernel's out-of-memory killer may have ended it)"
        return line

    def earlier_log_lines(self) -> list[str]:
        """The lines that give a rerun's log the killed runs' log (none for a first run, or where no copy was kept):
        a start line, each of their lines prefixed (:func:`earlier_log_lines`), an end line."""
        if not self.earlier_runs or not self.earlier_log:
            return []
        return [EARLIER_LOG_START, *earlier_log_lines(self.earlier_log), EARLIER_LOG_END]

    def _write(self) -> None:
        now = resident_mb()
        if now is not None:
            self.rss_mb = max(self.rss_mb or 0.0, now)
        record = {"seconds": round(self.seconds(), 3), "runs": self.earlier_runs + 1, "identity": self.identity}
        if self.rss_mb is not None:
            record["rss_mb"] = round(self.rss_mb, 1)
        with atomic_path(self.path) as tmp:
            tmp.write_text(json.dumps(record))
        if self.log is not None:
            self._copy_log()

    def _copy_log(self) -> None:
        """Keep a copy of the job's log beside the clock (its last :data:`LOG_KEEP_BYTES`, from a line's start)."""
        try:
            with open(self.log, "rb") as fh:
                size = fh.seek(0, os.SEEK_END)
                fh.seek(max(0, size - LOG_KEEP_BYTES))
                text = fh.read()
        except OSError:
            return  # the log went (a test's temporary file): nothing to keep
        if size > LOG_KEEP_BYTES:
            text = text[text.find(b"\n") + 1:]
        with atomic_path(self.log_copy) as tmp:
            tmp.write_bytes(text)

    def _tick(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._write()
            except OSError:  # a full or vanished disk must not kill the job: its clock just stops
                return

    def start(self) -> JobClock:
        """Write the file and keep rewriting it. A folder that cannot be written (read-only, full, not a folder)
        leaves the job running without its clock, with a warning: the time of its runs is just not kept."""
        try:
            self._write()
        except OSError as err:
            print(f"featlearn: warning: cannot write the job clock {self.path} ({err.strerror or err}); the wall time "
                  "of this job's runs is not kept", file=sys.stderr)
            return self
        self._thread = threading.Thread(target=self._tick, name="featlearn-job-clock", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop rewriting the file, once its last time is written (it stays, for a rerun after a failure)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
            try:
                self._write()
            except OSError:
                pass

    def close(self) -> None:
        """The job is done: stop and remove the file and the log copy."""
        self.stop()
        for path in (self.path, self.log_copy):
            try:
                path.unlink(missing_ok=True)
            except OSError:  # a folder that never held it (start's warning)
                pass
