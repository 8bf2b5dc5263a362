"""featlearn.allocator: freed large blocks stay in the heap (glibc), and the opt-out leaves glibc's default."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from featlearn.allocator import ENV, keep_freed_memory

glibc = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt/mallinfo2 are glibc's")

# Allocate and free a 64 MiB block, then report the bytes free inside the heap (mallinfo2's fordblks): the block
# is still there when it was served from the heap, and gone (returned to the kernel by munmap) when it was mmapped.
PROBE = (r"""
import ctypes, sys
from featlearn.allocator import keep_freed_memory
took = keep_freed_memory()
libc = ctypes.CDLL("libc.so.6")
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks","""
         r""" "uordblks", "fordblks", "keepcost")]
libc.mallinfo2.restype = Info
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = (ctypes.c_void_p,)
block = libc.malloc(64 << 20)
ctypes.memset(block, 1, 64 << 20)
libc.free(block)
print(int(took), libc.mallinfo2().fordblks)
""")


def _probe(malloc: str | None) -> tuple[bool, int]:
    env = dict(os.environ)
    env.pop(ENV, None)
    if malloc is not None:
        env[ENV] = malloc
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True).stdout.split()
    return bool(int(out[0])), int(out[1])


@glibc
def test_freed_block_stays_in_the_heap():
    took, free_bytes = _probe(None)
    assert took
    assert free_bytes >= 64 << 20


@glibc
def test_opt_out_keeps_glibc_default():
    took, free_bytes = _probe("default")
    assert not took
    assert free_bytes < 64 << 20  # the block was mmapped and given back


def test_opt_out_changes_nothing_in_process():
    assert keep_freed_memory({ENV: "default"}) is False
