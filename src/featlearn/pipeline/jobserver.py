"""The job server: many ``python -m featlearn`` jobs forked from one process that has already imported
torch, pandas, matplotlib and seaborn (``job_server: true`` in the config; the smoke overlay sets it).

Starting Python and importing PyTorch costs about 2-3 CPU-seconds per process on a laptop core, which is
most of a smoke-scale job. With the server on, the Snakefile starts one server per local run (``onstart``)
and every compute and figure job's command becomes a thin client:

1. the client (:mod:`featlearn.pipeline.jobclient`: ``python -m featlearn ...`` imports no library) connects to the server's Unix
   socket and sends its command line, working folder, environment and its standard input, output and
   error (the job's log) as file descriptors;
2. the server checks that the package's code is the code it started with (else it refuses, and the client
   runs the job itself), then forks a worker that takes over those descriptors, folder and environment
   and runs ``featlearn.pipeline.cli.main`` on the command line, exactly as a fresh process would;
3. the server tells the client the worker started; when the worker ends, it sends its exit status and
   resource usage (``wait4``), and the client exits with that status.

The server serves only its own user: a connection from another uid (``SO_PEERCRED``) is refused, and a
connection that sends no complete request within ``REQUEST_TIMEOUT_S`` is dropped, so one silent client cannot
stall the jobs behind it. A client whose connection ends before the server said a worker started (a server
still warming up that is stopped, say) runs the job itself: nothing ran yet.

A client that dies (Ctrl-C, SIGKILL from Snakemake) closes its socket; the server then kills its worker.
The server ends when Snakemake stops it (``onsuccess``/``onerror``) or, checked every 50 ms, when its parent
Snakemake process is gone. When the server is unreachable or refuses, the client runs the job in its own
process, so a job never fails because of the server.

Accounting: Snakemake's ``benchmark:`` files measure the client's process tree, which does not contain
the worker. The client therefore appends the worker's CPU seconds and peak resident memory to the file named
by ``FEATLEARN_USAGE`` (the rules set it to ``<benchmark>.server.json``), and
:func:`featlearn.pipeline.pages.read_benchmark` adds them to what the benchmark file measured.

Only on Linux (forking after these imports is not safe on macOS), on a single machine (never inside a
cluster job), and only for commands that stay on the CPU (a ``--device auto`` or ``cuda`` job runs in its
own process).
"""

from __future__ import annotations

import os
import selectors
import signal
import socket
import struct
import sys
import time

from featlearn.pipeline.jobclient import SOCKET_ENV, _recv, _send

POLL_S = 0.05
REQUEST_TIMEOUT_S = 5.0  # a connected client sends its request at once; a silent one is dropped after this
FOLDER_PREFIX = "featlearn-jobs-"  # the server's private folder (0700) in the temporary folder, one per run
# libraries every job of the package imports sooner or later: what a worker need not import again
# (torch._dynamo: building any torch optimizer imports it, 1.5-2.5 CPU-s)
PRELOAD = ("torch", "torch._dynamo", "torch.profiler", "numpy", "pandas", "scipy.stats", "matplotlib.pyplot",
           "seaborn", "yaml")


# ------------------------------------------------------------------------------------------------ server
def preload() -> None:
    """Import what the jobs import, with the figures' non-interactive backend, without starting any thread
    of PyTorch's pools (a fork must not copy a half-used thread pool)."""
    import importlib

    import matplotlib

    matplotlib.use("Agg")
    for name in PRELOAD:
        importlib.import_module(name)
    # what the first table read/write and the first saved figure import or load (CSV machinery, image
    # plugins, the font cache and the PNG/PDF/SVG writers)
    import io

    import matplotlib.pyplot as plt
    import pandas as pd

    pd.read_csv(io.StringIO(pd.DataFrame({"a": [1.0], "b": ["x"]}).to_csv(index=False)))
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1], label="x")
    ax.legend()
    for fmt in ("png", "pdf", "svg"):
        fig.savefig(io.BytesIO(), format=fmt)
    plt.close(fig)


class Server:
    def __init__(self, path: str, parent: int | None = None):
        from featlearn.pipeline.compute import code_fingerprint

        self.path = path
        self.parent = parent if parent is not None else os.getppid()
        self.code = code_fingerprint()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(64)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ)
        self.workers: dict[int, socket.socket] = {}  # worker pid -> its client's connection
        self.stopping = False
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "stopping", True))
        # Ctrl-C in the terminal reaches the whole process group: the jobs' workers stop on it, and the server
        # ends with its run (stop() or its parent's end)
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    # the worker: this process's copy after fork
    def _become_worker(self, conn: socket.socket, request: dict, fds: list[int], server: int) -> None:
        try:
            _die_with_parent()
            if os.getppid() != server:  # the server ended before the line above took effect
                os._exit(1)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            self.selector.close()
            self.listener.close()
            for other in self.workers.values():
                other.close()
            conn.close()
            sys.stdout.flush()
            sys.stderr.flush()
            for target, fd in zip((0, 1, 2), fds):
                os.dup2(fd, target)
                os.close(fd)
            os.chdir(request["cwd"])
            os.environ.clear()
            os.environ.update(request["env"])
            os.environ.pop(SOCKET_ENV, None)  # the worker runs the job itself, and so do its subprocesses
            # the job's PYTHONPATH, as a fresh interpreter would put it in front of the server's path
            extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in sys.path]
            sys.path[1:1] = extra
            sys.argv = [sys.argv[0], *request["argv"]]
            from featlearn.pipeline.cli import main

            code = main(request["argv"])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if not isinstance(exc.code, int) and exc.code is not None:
                print(exc.code, file=sys.stderr)
        except BaseException:  # noqa: BLE001 - a worker reports every failure as a failed job, like a process
            import traceback

            traceback.print_exc()
            code = 1
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)

    def _accept(self) -> None:
        conn, _ = self.listener.accept()
        uid = peer_uid(conn)
        if uid is not None and uid != os.getuid():  # only the server's own user may have a job run in its name
            self._refuse(conn, [], f"the connecting process runs as uid {uid}, not the server's uid {os.getuid()}")
            return
        conn.settimeout(REQUEST_TIMEOUT_S)
        try:
            request, fds = _recv(conn, with_fds=True)
        except (OSError, ConnectionError, ValueError):  # closed, garbled, or silent past the timeout
            conn.close()
            return
        conn.settimeout(None)
        from featlearn.pipeline.compute import code_fingerprint

        now = code_fingerprint()
        if now != self.code or len(fds) != 3:
            self._refuse(conn, fds, f"the package's code changed since the server started ({self.code} -> {now})"
                         if now != self.code else "the request did not carry three file descriptors")
            return
        server = os.getpid()
        pid = os.fork()
        if pid == 0:
            self._become_worker(conn, request, fds, server)
        for fd in fds:
            os.close(fd)
        self.workers[pid] = conn
        try:
            _send(conn, {"started": pid})
        except OSError:  # the client is already gone: so is the job
            _kill(pid)
        self.selector.register(conn, selectors.EVENT_READ, pid)

    @staticmethod
    def _refuse(conn: socket.socket, fds: list[int], reason: str) -> None:
        for fd in fds:
            os.close(fd)
        try:
            _send(conn, {"refused": reason})
        except OSError:
            pass
        conn.close()

    def _client_gone(self, pid: int) -> None:
        """The client's socket became readable: it closed (the job was killed), so kill its worker."""
        conn = self.workers[pid]
        try:
            if conn.recv(1, socket.MSG_PEEK):
                return
        except OSError:
            pass
        self.selector.unregister(conn)
        _kill(pid)

    def _reap(self) -> None:
        while self.workers:
            try:
                pid, status, rusage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.workers.pop(pid, None)
            if conn is None:
                continue
            code = os.waitstatus_to_exitcode(status)
            reply = {
                "status": code if code >= 0 else 128 - code,
                "pid": pid,
                "cpu_s": round(rusage.ru_utime + rusage.ru_stime, 3),
                # ru_maxrss: kilobytes on Linux, bytes on macOS
                "max_rss_mb": round(rusage.ru_maxrss / (1024 * 1024 if sys.platform == "darwin" else 1024), 2),
            }
            try:
                self.selector.unregister(conn)
            except (KeyError, ValueError):
                pass
            try:
                _send(conn, reply)
            except OSError:
                pass
            conn.close()

    def serve(self) -> None:
        print(f"featlearn job server: pid {os.getpid()}, socket {self.path}, code {self.code}", flush=True)
        while not self.stopping and os.getppid() == self.parent:
            for key, _ in self.selector.select(POLL_S):
                if key.fileobj is self.listener:
                    self._accept()
                elif key.data in self.workers:
                    self._client_gone(key.data)
            self._reap()
        for pid in list(self.workers):
            _kill(pid)
        deadline = time.time() + 5
        while self.workers and time.time() < deadline:
            self._reap()
            time.sleep(POLL_S)
        self.selector.close()
        self.listener.close()
        _remove_socket(self.path)


def peer_uid(conn: socket.socket) -> int | None:
    """The uid of the process at the other end of a Unix socket (Linux ``SO_PEERCRED``; None elsewhere)."""
    if not hasattr(socket, "SO_PEERCRED"):
        return None
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


def _remove_socket(path: str) -> None:
    """Remove the socket, and its folder when that is a server folder this module made and it is now empty."""
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
    folder = os.path.dirname(path)
    if os.path.basename(folder).startswith(FOLDER_PREFIX):
        try:
            os.remove(os.path.join(folder, OWNER_FILE))
        except OSError:
            pass
        try:
            os.rmdir(folder)
        except OSError:
            pass


def remove_stale_folders(tmp: str | None = None) -> list[str]:
    """Remove this user's server folders left in the temporary folder by runs that were killed (no server
    answers on their socket); returns the folders removed. A folder whose server still answers is kept, and so is
    one whose run is alive (its ``owner`` file names the process that made it: another run starting its server at
    this moment, before the socket exists) or, without an owner file, one made in the last minute."""
    import glob
    import shutil
    import tempfile

    removed = []
    for folder in glob.glob(os.path.join(tmp or tempfile.gettempdir(), FOLDER_PREFIX + "*")):
        try:
            st = os.stat(folder)
            if st.st_uid != os.getuid():
                continue
        except OSError:
            continue
        if _owner_alive(folder) or (not os.path.exists(os.path.join(folder, OWNER_FILE))
                                    and time.time() - st.st_mtime < FRESH_S):
            continue
        sock_path = os.path.join(folder, "server.sock")
        if os.path.exists(sock_path):
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.connect(sock_path)
                continue  # a live server (another run's): keep it
            except OSError:
                pass
            finally:
                probe.close()
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


def run_log_path(log_dir: str, parent: int) -> str:
    """One log per run: ``<log_dir>/job_server_<UTC time>_<Snakemake pid>.log`` (a second run in the same folder
    no longer truncates the first run's log)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return os.path.join(log_dir, f"job_server_{stamp}_{parent}.log")


def _die_with_parent() -> None:
    """Linux: the kernel kills this worker when the server ends (prctl PR_SET_PDEATHSIG), so that no worker
    outlives a server that was killed."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# ------------------------------------------------------------------------------------------------ workflow
OWNER_FILE = "owner"  # in a server folder: the pid of the run that made it
FRESH_S = 60.0  # a folder without an owner file this young may be one that another run is making


def _owner_alive(folder: str) -> bool:
    """Whether the process named by the folder's owner file is alive (False without a readable owner file)."""
    try:
        with open(os.path.join(folder, OWNER_FILE)) as fh:
            pid = int(fh.read().strip())
    except (OSError, ValueError):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def start(log_dir: str, src: str, parent: int) -> tuple | None:
    """Start a server for this run (the Snakefile's ``onstart``), logging to a file of its own in ``log_dir``
    (:func:`run_log_path`), and point the jobs at it; returns what :func:`stop` needs, or None when the server
    did not come up within a minute (the jobs then run in their own processes). Folders left by killed runs
    are removed first."""
    import shutil
    import subprocess
    import tempfile

    remove_stale_folders()
    folder = tempfile.mkdtemp(prefix=FOLDER_PREFIX)  # mode 0700: only this user can reach the socket
    with open(os.path.join(folder, OWNER_FILE), "w") as fh:  # so that a run starting beside it leaves it alone
        fh.write(str(os.getpid()))
    log_path = run_log_path(log_dir, parent)
    path = os.path.join(folder, "server.sock")
    os.makedirs(os.path.dirname(log_path) or ".", exist_ok=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH", "")) if p))
    env.pop(SOCKET_ENV, None)
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "featlearn", "job-server", "--socket", path, "--parent", str(parent)],
            env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        )
    deadline = time.time() + 60
    while not os.path.exists(path) and proc.poll() is None and time.time() < deadline:
        time.sleep(POLL_S)
    if not os.path.exists(path):
        proc.kill()
        proc.wait()
        shutil.rmtree(folder, ignore_errors=True)
        return None
    os.environ[SOCKET_ENV] = path
    return proc, folder


def stop(handle: tuple | None) -> None:
    """Stop the run's server (``onsuccess``/``onerror``) and wait for it, so that its workers' CPU time is
    counted in the run's own (e.g. ``/usr/bin/time snakemake ...``)."""
    import shutil
    import subprocess

    os.environ.pop(SOCKET_ENV, None)
    if handle is None:
        return
    proc, folder = handle
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    shutil.rmtree(folder, ignore_errors=True)


def _main(args) -> None:
    from featlearn.allocator import keep_freed_memory

    keep_freed_memory()
    server = Server(args.socket, parent=args.parent)  # listening at once: early clients wait for the preload
    preload()
    server.serve()


def register(sub) -> None:
    p = sub.add_parser("job-server", help="serve the jobs of one local run from one warm process (see "
                                          "featlearn.pipeline.jobserver; the workflow starts it when job_server is on)")
    p.add_argument("--socket", required=True, help="path of the Unix socket to listen on")
    p.add_argument("--parent", type=int, default=None,
                   help="pid whose end ends the server (default: the parent process)")
    p.set_defaults(func=_main)
