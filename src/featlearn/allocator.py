"""Keep freed memory in the process (glibc malloc), so large CPU tensors are not page-faulted in again and
again.

By default glibc serves every allocation above 32 MB with a fresh ``mmap`` and returns it to the kernel on
``free``; the kernel then zero-fills each of its pages on first touch. A training step of the WikiText-2
tutorial LM allocates several [700 x 33,278] float tensors (93 MB each: logits, their log-softmax, its
gradient), so every step paid for those page faults again: about 30% of the step on 2 CPU cores
(``benchmarks/allocator.py`` measures it). :func:`keep_freed_memory` raises the mmap threshold and the trim
threshold to their largest values, so such blocks are reused from the heap. The arithmetic is unchanged:
results are bit-identical; only the resident memory after a peak is not given back until the process ends.

Set ``FEATLEARN_MALLOC=default`` to leave glibc's defaults (for a measurement). On a C library other than
glibc (macOS, musl) nothing is changed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

ENV = "FEATLEARN_MALLOC"
M_TRIM_THRESHOLD = -1  # mallopt parameters (glibc's malloc.h)
M_MMAP_THRESHOLD = -3
LARGEST = 2**31 - 1  # mallopt takes an int


def keep_freed_memory(environ=os.environ) -> bool:
    """Ask glibc's malloc to keep freed blocks of any size below 2 GiB; True when it took effect."""
    if environ.get(ENV, "") == "default":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, LARGEST)) and bool(mallopt(M_TRIM_THRESHOLD, LARGEST))
