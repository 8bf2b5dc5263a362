"""The arithmetic precision of the training jobs (config key ``precision``), applied once per compute job.

- ``fp32``: full float32. Matrix products and convolutions in IEEE float32 (TF32 off on NVIDIA GPUs). The default:
  every committed result was made this way.
- ``tf32``: float32 tensors, but matrix products and convolutions on NVIDIA tensor cores in TF32 (10-bit
  mantissa inputs, float32 accumulation); on a CPU the same as fp32.
- ``bf16``: forward passes under ``torch.autocast`` with bfloat16 (matrix products and the ops autocast lists
  run in bfloat16; weights, gradients and optimiser state stay float32). float64 tensors (Scan and Snap's
  vectorised synthetic runs) are left in float64 by autocast. The language models' evaluations and the
  measurements read from them (validation loss, attention entropy and maps, logit tables) run in float32 inside
  :func:`full_precision`: the precision changes how a model is trained, not the instrument that reads it.

Only the jobs that can use a GPU (the trainings) take the setting; every other job computes in fp32. A faster
precision is adopted at a scale only where a measured comparison shows it keeps the verdicts (docs/performance.md).
"""

from __future__ import annotations

import contextlib

PRECISIONS = ("fp32", "tf32", "bf16")


def of_job(own: str | None, run: str, gpu: bool) -> str:
    """A job's arithmetic: a job that can use a GPU (a training) computes in its own precision (its config section's
    ``precision``) or, where that is None, in the run's (config key ``precision``); every other job in fp32."""
    if not gpu:
        return "fp32"
    return own or run


def device_type(device: str) -> str:
    """``cuda`` or ``cpu``: the autocast device type of a resolved device name (``cuda:1`` -> ``cuda``)."""
    return "cuda" if str(device).startswith("cuda") else "cpu"


def apply(precision: str, device: str) -> contextlib.AbstractContextManager:
    """Set the process-wide float32 matmul precision for ``precision`` and return the context that the job runs in
    (autocast for ``bf16``, nothing for the others)."""
    import torch

    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    if precision == "bf16":
        # One autocast context holds a whole job, optimiser steps included, so its cache of bfloat16 copies of the
        # weights (kept until the outermost context exits) would serve the first step's weights to every later
        # forward pass: off, each forward pass casts the weights as they are now.
        return torch.autocast(device_type=device_type(device), dtype=torch.bfloat16, cache_enabled=False)
    return contextlib.nullcontext()


@contextlib.contextmanager
def scoped(precision: str, device: str):
    """:func:`apply` for the duration of a block, the process's float32 matmul settings restored after it (a process
    that times jobs of several precisions one after another: the estimate's probes)."""
    import torch

    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.get_float32_matmul_precision())
    try:
        with apply(precision, device):
            yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before[:2]
        torch.set_float32_matmul_precision(before[2])


def full_precision(device) -> contextlib.AbstractContextManager:
    """float32 inside a job's bf16 autocast (nothing changes in a float32 job): where an evaluation or a measurement
    of the trained model runs. ``device``: a device name or ``torch.device``."""
    import torch

    return torch.autocast(device_type=device_type(getattr(device, "type", device)), enabled=False)


def describe(precision: str) -> str:
    """One line for a job's log and the run record."""
    return {"fp32": "fp32 (float32, TF32 off)", "tf32": "tf32 (float32 tensors, TF32 matrix products on GPUs)",
            "bf16": "bf16 (bfloat16 autocast; float32 weights, gradients and optimiser state)"}[precision]
