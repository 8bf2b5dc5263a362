"""``python -m featlearn compute``: run one registry :class:`~featlearn.registry.Job` (what compute rules run).

Settings arrive as JSON, inputs and outputs as JSON objects of named paths. The device is resolved here,
once per job, and the numeric thread count is set here, once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True)
class Context:
    """How a job runs: the resolved device (``cpu`` or ``cuda``), the torch thread count, and the folder
    for resume checkpoints (None when the job keeps none)."""

    device: str = "cpu"
    threads: int = 1
    work_dir: str | None = None


def run_job(run: str, settings: dict, inputs: dict, outputs: dict, ctx: Context) -> None:
    from featlearn.registry import load

    load(run)(settings, inputs, outputs, ctx)


def _main(args) -> None:
    import torch

    from featlearn.devices import resolve_device

    torch.set_num_threads(args.threads)
    ctx = Context(device=resolve_device(args.device), threads=args.threads, work_dir=args.work_dir or None)
    run_job(args.run, json.loads(args.settings), json.loads(args.inputs), json.loads(args.outputs), ctx)


def register(sub) -> None:
    p = sub.add_parser("compute", help="run one compute job of a paper's registry (tables and checkpoints)")
    p.add_argument("--run", required=True, help="module:function of the job")
    p.add_argument("--settings", required=True, help="JSON object: the job's settings")
    p.add_argument("--inputs", default="{}", help="JSON object: input name -> path or list of paths")
    p.add_argument("--outputs", required=True, help="JSON object: output name -> path")
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--device", required=True, help="auto, cpu or cuda")
    p.add_argument("--work-dir", default="", help="folder of resume checkpoints (jobs that keep them)")
    p.set_defaults(func=_main)
