"""``python -m featlearn compute``: run one registry :class:`~featlearn.pipeline.registry.Job` (what compute rules run).

Settings arrive as JSON, inputs and outputs as JSON objects of named paths. The device is resolved here,
once per job, and the numeric thread count is set here, once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True)
class Context:
    """How a job runs: the resolved device (``cpu`` or ``cuda``), the torch thread count, the folder for resume
    checkpoints (None when the job keeps none) and the arithmetic it computes in (``fp32``, ``tf32`` or ``bf16``:
    a config's ``auto`` resolved on the device, featlearn.precision)."""

    device: str = "cpu"
    threads: int = 1
    work_dir: str | None = None
    precision: str = "fp32"


def run_job(run: str, settings: dict, inputs: dict, outputs: dict, ctx: Context) -> None:
    from featlearn.pipeline.registry import load

    load(run)(settings, inputs, outputs, ctx)


def code_fingerprint() -> str:
    """sha256 over the package's Python sources (relative path and content of every ``.py`` under featlearn/)."""
    import hashlib
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]  # src/featlearn
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def inputs_fingerprint(inputs: dict) -> str:
    """sha256 over each input file's name, size and modification time (cheap: no file is read)."""
    import hashlib
    import os

    h = hashlib.sha256()
    for name in sorted(inputs):
        paths = inputs[name] if isinstance(inputs[name], list) else [inputs[name]]
        for path in paths:
            st = os.stat(path) if os.path.exists(path) else None
            h.update(f"{name}={path}:{st.st_size if st else -1}:{st.st_mtime_ns if st else -1};".encode())
    return h.hexdigest()[:16]


def run_identity(inputs: dict, threads: int, device: str, precision: str = "fp32") -> dict:
    """What a resume checkpoint must have been written under, besides the run's settings: the code, the inputs,
    the numeric thread count, the device and the precision (:func:`featlearn.training.resumable_training`
    reads it)."""
    ident = {"code": code_fingerprint(), "inputs": inputs_fingerprint(inputs), "threads": threads, "device": device}
    if precision != "fp32":  # fp32 checkpoints written before the setting existed stay valid
        ident["precision"] = precision
    return ident


def _main(args) -> None:
    import os

    from featlearn.devices import describe_job_device, pin_one_gpu, resolve_device

    # several GPUs on this machine: claim one before torch starts CUDA (no-op on the CPU or with one GPU)
    pinned = pin_one_gpu(args.device, need_mb=args.gpu_mem_mb or None)
    if pinned is not None:
        print(f"featlearn: this job uses GPU {pinned} (CUDA_VISIBLE_DEVICES={pinned})", flush=True)

    import torch
    from featlearn import precision
    from featlearn.training import IDENTITY_ENV

    torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    # the arithmetic on this device (``auto``: bf16 where it is native, else fp32): what the job computes in, what its
    # resume checkpoint is keyed by and what its log names
    ctx = Context(device=device, threads=args.threads, work_dir=args.work_dir or None,
                  precision=precision.resolve(args.precision, device))
    arithmetic = precision.apply(ctx.precision, ctx.device)
    # the first lines of every compute job's log: where it computes, with how many threads, in what arithmetic
    print(f"featlearn: device {describe_job_device(ctx.device)} (asked: {args.device}); "
          f"torch threads {torch.get_num_threads()}; precision {precision.describe(args.precision, device)}", flush=True)
    warning = precision.emulated_warning(args.precision, device)
    if warning:
        print(f"featlearn: {warning}", flush=True)
    inputs = json.loads(args.inputs)
    # the run identity holds for this job only: a caller that runs several jobs in one process (a test, a worker)
    # gets its own environment back
    before = os.environ.get(IDENTITY_ENV)
    os.environ[IDENTITY_ENV] = json.dumps(run_identity(inputs, args.threads, ctx.device, ctx.precision), sort_keys=True)
    clock = None
    try:
        if ctx.work_dir:
            # the wall time of this job's runs, kept beside its checkpoint: a rerun after a kill logs the earlier
            # runs' seconds (featlearn.training.JobClock), which Snakemake's benchmark file of the last run leaves out
            from featlearn.training import JobClock, stdout_file, unmark_finished

            unmark_finished(ctx.work_dir)  # a finished run's kept work, its outputs since deleted: resumed from here
            # the clock keeps a copy of this job's log too: Snakemake deletes the log before a rerun, which writes the
            # killed runs' lines into its own log from that copy
            clock = JobClock(ctx.work_dir, log=stdout_file())
            if clock.line():
                print("\n".join([clock.line(), *clock.earlier_log_lines()]), flush=True)
            clock.start()
        with arithmetic:
            run_job(args.run, json.loads(args.settings), inputs, json.loads(args.outputs), ctx)
    finally:
        if clock is not None:
            clock.stop()
        if before is None:
            os.environ.pop(IDENTITY_ENV, None)
        else:
            os.environ[IDENTITY_ENV] = before
    if ctx.work_dir:
        # the outputs are written. The job's kept work (checkpoint, parts, clock) stays until Snakemake has accepted
        # them: a submission killed at its time limit after this point (while its job script wraps up) is failed by
        # Snakemake, which deletes the outputs and resubmits; the rerun resumes from here instead of starting over.
        # The workflow removes it when it ends (featlearn.keptwork.sweep_finished, the Snakefile's onsuccess/onerror).
        from featlearn.training import mark_finished

        mark_finished(ctx.work_dir, json.loads(args.outputs))


def register(sub) -> None:
    from featlearn.precision import PRECISIONS

    p = sub.add_parser("compute", help="run one compute job of a paper's registry (tables and checkpoints)")
    p.add_argument("--run", required=True, help="module:function of the job")
    p.add_argument("--settings", required=True, help="JSON object: the job's settings")
    p.add_argument("--inputs", default="{}", help="JSON object: input name -> path or list of paths")
    p.add_argument("--outputs", required=True, help="JSON object: output name -> path")
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--device", required=True, help="auto, cpu or cuda")
    p.add_argument("--work-dir", default="", help="folder of resume checkpoints (jobs that keep them)")
    p.add_argument("--precision", default="fp32", choices=PRECISIONS,
                   help="arithmetic of the job (featlearn.precision; auto: bf16 where the device computes bfloat16 "
                        "natively, else fp32); fp32 by default")
    p.add_argument("--gpu-mem-mb", type=int, default=0,
                   help="GPU memory the job declared (its gpu_mem_mb resource): with several GPUs it shares one "
                        "where this fits; 0: it holds a GPU whole")
    p.set_defaults(func=_main)
