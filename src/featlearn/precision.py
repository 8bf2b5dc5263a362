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
- ``auto``: ``bf16`` where the job's device computes in bfloat16 natively (:func:`native_bf16`: a CUDA GPU with
  bfloat16 support, an x86 CPU with AVX-512 BF16), ``fp32`` everywhere else, decided in the job
  (:func:`resolve`) and logged there. Without those instructions a CPU emulates bfloat16 matrix products: a
  step of Scan and Snap's 1-layer Fig. 7 LM took 10.3 s under bf16 autocast against 0.59 s in fp32 on a 2-core AVX2
  EPYC, 14-20x for the four LM families (docs/performance.md, "bf16 on a CPU without AVX-512 BF16"), where the
  AVX-512 BF16 CPU of the bf16 comparison took 0.29 s against 0.52 s.

Only the jobs that can use a GPU (the trainings) take the setting; every other job computes in fp32. A faster
precision is adopted at a scale only where a measured comparison shows it keeps the verdicts (docs/performance.md).
"""

from __future__ import annotations

import contextlib

ARITHMETICS = ("fp32", "tf32", "bf16")  # what a job computes in
PRECISIONS = (*ARITHMETICS, "auto")  # what a config may ask for (auto: resolved per device, :func:`resolve`)


def of_job(own: str | None, run: str, gpu: bool) -> str:
    """A job's arithmetic: a job that can use a GPU (a training) computes in its own precision (its config section's
    ``precision``) or, where that is None, in the run's (config key ``precision``); every other job in fp32."""
    if not gpu:
        return "fp32"
    return own or run


def device_type(device: str) -> str:
    """``cuda`` or ``cpu``: the autocast device type of a resolved device name (``cuda:1`` -> ``cuda``)."""
    return "cuda" if str(device).startswith("cuda") else "cpu"


def native_bf16(device: str) -> tuple[bool, str]:
    """Whether ``device`` computes bfloat16 matrix products natively, and a few words saying why: a CUDA GPU that
    supports bfloat16 without emulation (compute capability 8.0 or more), an x86 CPU with AVX-512 BF16 (which every
    CPU with AMX also has). Other CPUs (AVX2 only, AVX-512 without BF16, ARM) count as not native: bf16 was measured
    faster than fp32 only on an AVX-512 BF16 CPU, and 14-20x slower on an AVX2 one."""
    import torch

    if device_type(device) == "cuda":
        try:
            ok = torch.cuda.is_bf16_supported(including_emulation=False)
        except TypeError:  # a torch without the argument
            ok = torch.cuda.is_bf16_supported()
        return bool(ok), f"this GPU {'supports' if ok else 'does not support'} bfloat16 natively"
    check = getattr(torch.cpu, "_is_avx512_bf16_supported", None)
    ok = bool(check is not None and check())
    return ok, f"this CPU {'has' if ok else 'has no'} AVX-512 BF16"


def resolve(precision: str, device: str) -> str:
    """The arithmetic a job on ``device`` computes in: ``precision`` itself, or for ``auto`` ``bf16`` where the device
    computes bfloat16 natively (:func:`native_bf16`) and ``fp32`` elsewhere."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    if precision != "auto":
        return precision
    return "bf16" if native_bf16(device)[0] else "fp32"


def emulated_warning(precision: str, device: str) -> str | None:
    """A warning for a job asked by name for ``bf16`` on a device that emulates bfloat16 (:func:`native_bf16`), where
    a step runs many times slower than in fp32; None otherwise (``auto`` never resolves to emulated bf16)."""
    if precision != "bf16":
        return None
    native, why = native_bf16(device)
    if native:
        return None
    return (f"warning: bf16 asked, but {why}: its bfloat16 products are emulated, 14-20x slower than fp32 for the "
            "language models on an AVX2 CPU (docs/performance.md); `precision: auto` computes in fp32 on this device")


def apply(precision: str, device: str) -> contextlib.AbstractContextManager:
    """Set the process-wide float32 matmul precision for ``precision`` (``auto``: as :func:`resolve` decides on
    ``device``) and return the context that the job runs in (autocast for ``bf16``, nothing for the others)."""
    import torch

    precision = resolve(precision, device)
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


def describe(precision: str, device: str | None = None) -> str:
    """One line for a job's log and the run record; for ``auto`` (on ``device``), the arithmetic it resolved to first
    (the word a job log's first line is read for: featlearn.pipeline.benchfiles), then why."""
    if precision == "auto":
        arithmetic, (_, why) = resolve(precision, device), native_bf16(device)
        return f"{describe(arithmetic)}, asked auto: {why}"
    return {"fp32": "fp32 (float32, TF32 off)", "tf32": "tf32 (float32 tensors, TF32 matrix products on GPUs)",
            "bf16": "bf16 (bfloat16 autocast; float32 weights, gradients and optimiser state)"}[precision]
