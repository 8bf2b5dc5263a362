"""The job client: how a ``python -m featlearn`` job hands its command line to the job server
(:mod:`featlearn.pipeline.jobserver`), and where the server's workers leave their resource usage. Standard library only:
a job that the server runs imports nothing else.

The client connects to the server's Unix socket and sends its command line, working folder, environment and
its standard input, output and error (the job's log) as file descriptors. It then waits for the server to say a
worker started, and for the worker's exit status and resource usage, and exits with that status. When no
server is reachable, when it refuses, or when the connection ends before a worker started, the client runs
the job itself (nothing ran yet).
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
import time

SOCKET_ENV = "FEATLEARN_JOB_SERVER"  # the server's socket path, set for the jobs of a run that has one
USAGE_ENV = "FEATLEARN_USAGE"  # where the client writes the worker's resource usage (set per job by the rules)
HEADER = struct.Struct("!I")  # length of the JSON request or reply that follows


# ------------------------------------------------------------------------------------------------ messages
def _send(sock: socket.socket, obj: dict, fds: list[int] | None = None) -> None:
    data = json.dumps(obj).encode()
    head = HEADER.pack(len(data))
    if fds:
        socket.send_fds(sock, [head], fds)
    else:
        sock.sendall(head)
    sock.sendall(data)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("the other end closed the connection")
        buf += chunk
    return buf


def _recv(sock: socket.socket, with_fds: bool = False) -> tuple[dict, list[int]]:
    fds: list[int] = []
    if with_fds:
        head, fds, _, _ = socket.recv_fds(sock, HEADER.size, 3)
        if not head:
            raise ConnectionError("the other end closed the connection")
        head += _recv_exact(sock, HEADER.size - len(head))
    else:
        head = _recv_exact(sock, HEADER.size)
    (length,) = HEADER.unpack(head)
    return json.loads(_recv_exact(sock, length)), list(fds)


# ------------------------------------------------------------------------------------------------ client
def run_via_server(argv: list[str], environ=os.environ) -> int | None:
    """Run ``python -m featlearn <argv>`` in a worker of the server named by ``FEATLEARN_JOB_SERVER``; its
    exit status, or None when there is no server to run it (the caller then runs the job itself).

    ``FEATLEARN_USAGE`` names the job's usage file (``<benchmark>.server.json``), to which the worker's usage
    is appended, or is ``-`` for a job without a benchmark file; without it the server is not used."""
    path = environ.get(SOCKET_ENV, "")
    usage_path = environ.get(USAGE_ENV, "")
    if not path or not usage_path or not _cpu_only(argv):
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stdin = 0 if _is_open(0) else os.open(os.devnull, os.O_RDONLY)
    try:
        sock.connect(path)
    except (OSError, ValueError):  # no server (or it is gone): nothing was started, so run the job here
        sock.close()
        return None
    try:
        _send(sock, {"argv": list(argv), "cwd": os.getcwd(), "env": dict(environ)}, [stdin, 1, 2])
    except (OSError, ValueError) as exc:  # it closed while the request was on its way: nothing was started
        sock.close()
        print(f"featlearn: job server: closed before it started this job ({exc}); running in this process",
              file=sys.stderr, flush=True)
        return None
    try:
        started, _ = _recv(sock)  # {"started": pid} once a worker runs the job, or {"refused": why}
    except KeyboardInterrupt:
        sock.close()
        return 130
    except (OSError, ConnectionError, ValueError) as exc:
        # the server ended before it started a worker for this job (stopped while warming up, say): nothing
        # ran, so the job runs here
        sock.close()
        print(f"featlearn: job server: closed before it started this job ({exc}); running in this process",
              file=sys.stderr, flush=True)
        return None
    if "refused" in started:
        sock.close()
        print(f"featlearn: job server: {started['refused']}; running in this process", file=sys.stderr, flush=True)
        return None
    try:
        reply, _ = _recv(sock)
    except KeyboardInterrupt:  # the job was interrupted: closing the socket makes the server kill the worker
        sock.close()
        return 130
    except (OSError, ConnectionError, ValueError) as exc:
        # the server went away while its worker ran this job (the worker dies with it): the job failed, and
        # running it again here could overlap a worker that is still writing its outputs
        sock.close()
        print(f"featlearn: the job server went away while running this job ({exc})", file=sys.stderr, flush=True)
        return 1
    sock.close()
    if usage_path != "-":
        _append_usage(usage_path, {"cpu_s": reply["cpu_s"], "max_rss_mb": reply["max_rss_mb"],
                                   "finished": time.time(), "worker_pid": reply["pid"], "argv": list(argv)})
    print(f"featlearn: ran in the job server's worker {reply['pid']}: {reply['cpu_s']:.2f} CPU-s, "
          f"peak {reply['max_rss_mb']:.0f} MB, exit status {reply['status']}", file=sys.stderr, flush=True)
    return int(reply["status"])


def _cpu_only(argv: list[str]) -> bool:
    """Whether the command stays on the CPU: a job that may use CUDA (``--device auto`` or ``cuda``) runs in its
    own process, since CUDA cannot be trusted in a process forked from one that may have probed the driver."""
    for i, arg in enumerate(argv):
        if arg == "--device" and i + 1 < len(argv):
            return argv[i + 1] == "cpu"
        if arg.startswith("--device="):
            return arg.split("=", 1)[1] == "cpu"
    return True


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


KEEP_S = 7 * 24 * 3600  # a usage file keeps the records of the last week (a job's earlier commands included)


def _append_usage(path: str, record: dict) -> None:
    """One JSON line per command run by a worker; records older than a week are dropped on the way."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    records = [r for r in _usage_records(path) if r.get("finished", 0) > record["finished"] - KEEP_S]
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in [*records, record])
    os.replace(tmp, path)


def _usage_records(path: str) -> list[dict]:
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError):
        return []


# ------------------------------------------------------------------------------ a job's own usage, in its log
# Snakemake's benchmark file samples a job's CPU time and memory, every half second for its first 15 s and every 30 s
# after that (snakemake.benchmark), and keeps the last sample: a job loses the CPU time of up to its last 30 s (a
# 38 s JoMA Table 1 cell, 97% busy by ps, was filed with 14.9 CPU-s; docs/performance.md). So each compute command
# ends its log with what the kernel counted for it, a line that read_logged_usage parses.
USAGE_LINE = "featlearn: usage "


def own_usage_line() -> str:
    """This process's CPU seconds (user + system, with the subprocesses it waited for) and peak resident memory, as
    the log line :func:`read_logged_usage` reads."""
    import resource

    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    unit = 1024 * 1024 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    record = {"cpu_s": round(me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime, 3),
              "max_rss_mb": round(max(me.ru_maxrss, kids.ru_maxrss) / unit, 2), "finished": round(time.time(), 3)}
    return USAGE_LINE + json.dumps(record)


def read_logged_usage(log: str | os.PathLike, mtime: float, wall_s: float) -> dict | None:
    """CPU seconds (summed) and peak memory of the commands whose usage lines (:func:`own_usage_line`) the log holds
    and that finished within the job whose benchmark file was written at ``mtime`` after ``wall_s`` seconds; None
    when there is none (a job of an older version, or one that failed or was killed)."""
    records = []
    try:
        with open(log, errors="replace") as fh:
            for line in fh:
                if line.startswith(USAGE_LINE):
                    try:
                        records.append(json.loads(line[len(USAGE_LINE):]))
                    except ValueError:
                        continue
    except OSError:
        return None
    return _of_the_job(records, mtime, wall_s)


def _of_the_job(records: list[dict], mtime: float, wall_s: float) -> dict | None:
    """The summed CPU seconds and the peak memory of the usage records that finished within the job whose benchmark
    file was written at ``mtime`` after ``wall_s`` seconds (Snakemake writes it as the job ends; older records are of
    earlier runs of the job); None when there is none."""
    window = [r for r in records if mtime - wall_s - 10 <= r.get("finished", 0) <= mtime + 1]
    if not window:
        return None
    return {"cpu_s": sum(r["cpu_s"] for r in window), "max_rss_mb": max(r["max_rss_mb"] for r in window)}


def read_usage(benchmark: str | os.PathLike, mtime: float, wall_s: float) -> dict | None:
    """CPU seconds (summed) and peak memory of the worker commands of the job whose benchmark file was
    written at ``mtime`` after ``wall_s`` seconds: the records that finished within that window (Snakemake
    writes the benchmark file as the job ends; older records are from earlier runs of the job). None when
    the job ran no command in the server."""
    return _of_the_job(_usage_records(f"{os.fspath(benchmark)}.server.json"), mtime, wall_s)
