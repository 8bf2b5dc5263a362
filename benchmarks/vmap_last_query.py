"""The slow path of a vmap'ed linear map of a strided slice with per-run weights, as the templates transformer's
last-query attention computes it (``featlearn.templates.models``): time of one forward and backward, the strided
slice ``x[:, -1:]`` against a contiguous copy of it, at several widths.

    python benchmarks/vmap_last_query.py                       # one CPU thread, 2 runs, batch 1024
    python benchmarks/vmap_last_query.py --device cuda --widths 64 1024 4096

Measured on one CPU core (2026-11-28): width 64: 1.08 s against 0.10 s; 256: 4.0 against 0.15; 1024: 39.9 against
0.37; 2048: 86 against 0.71; 4096: the strided form asks for a 32 GiB buffer.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F
from torch.func import vmap


def attention_logits(x: torch.Tensor, w: torch.Tensor, contiguous: bool) -> torch.Tensor:
    """Query of the last position against every key (one run; vmap adds the runs), squared and summed."""
    inner = w.shape[0] // 2
    xq = x[:, -1:].contiguous() if contiguous else x[:, -1:]
    q, k = F.linear(xq, w[:inner]), F.linear(x, w[inner:])
    return (q @ k.transpose(-1, -2)).square().sum()


def timed(runs: int, batch: int, width: int, device: str, contiguous: bool) -> float | str:
    x = torch.randn(runs, batch, 2, width, device=device)
    w = torch.randn(runs, 2048, width, device=device, requires_grad=True)
    try:
        t0 = time.perf_counter()
        loss = vmap(lambda a, b: attention_logits(a, b, contiguous))(x, w)
        torch.autograd.grad(loss.sum(), [w])
        if device == "cuda":
            torch.cuda.synchronize()
        return round(time.perf_counter() - t0, 3)
    except (RuntimeError, torch.OutOfMemoryError) as exc:
        return "out of memory" if "memory" in str(exc) else f"error: {str(exc)[:80]}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--widths", type=int, nargs="*", default=[64, 256, 1024, 2048])
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print("width  strided_s  contiguous_s")
    for width in args.widths:
        timed(args.runs, args.batch, width, args.device, True)  # warm-up
        strided = timed(args.runs, args.batch, width, args.device, False)
        contiguous = timed(args.runs, args.batch, width, args.device, True)
        print(f"{width:5d}  {strided!s:>9}  {contiguous!s:>12}", flush=True)


if __name__ == "__main__":
    main()
