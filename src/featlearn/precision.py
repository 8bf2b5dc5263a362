"""The arithmetic precision of the training jobs (config key ``precision``), applied once per compute job.

- ``fp32``: full float32. Matrix products and convolutions in IEEE float32 (TF32 off on NVIDIA GPUs). The default:
  every committed result was made this way.
- ``tf32``: float32 tensors, but matrix products and convolutions on NVIDIA tensor cores in TF32 (10-bit
  mantissa inputs, float32 accumulation); on a CPU the same as fp32.
- ``bf16``: forward passes under ``torch.autocast`` with bfloat16 (matrix products and the ops autocast lists
  run in bfloat16; weights, gradients and optimiser state stay float32). float64 tensors (Scan and Snap's
  vectorised synthetic runs) are left in float64 by autocast.

Only the jobs that can use a GPU (the trainings) take the setting; every other job computes in fp32. A faster
precision is adopted at a scale only where a measured comparison shows it keeps the verdicts (docs/performance.md).
"""

from __future__ import annotations

import contextlib

PRECISIONS = ("fp32", "tf32", "bf16")


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
        return torch.autocast(device_type=device_type(device), dtype=torch.bfloat16)
    return contextlib.nullcontext()


def describe(precision: str) -> str:
    """One line for a job's log and the run record."""
    return {"fp32": "fp32 (float32, TF32 off)", "tf32": "tf32 (float32 tensors, TF32 matrix products on GPUs)",
            "bf16": "bf16 (bfloat16 autocast; float32 weights, gradients and optimiser state)"}[precision]
