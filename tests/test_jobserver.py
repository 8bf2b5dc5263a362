"""featlearn.pipeline.jobserver: jobs forked from the warm server behave like jobs in their own process (output,
exit status, working folder, environment), a killed client takes its worker with it, and the client runs
the job itself when there is no server or the code changed since the server started."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from featlearn.pipeline import jobclient, jobserver
from featlearn.pipeline.pages import read_benchmark

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the job server forks")

SRC = Path(__file__).resolve().parents[1] / "src"

# A compute job (module:function) that reports which process ran it, writes its output, and fails or waits
# on request.
PROBE = '''
import os, sys, time
def job(settings, inputs, outputs, ctx):
    print("pid", os.getpid(), "parent", os.getppid(), "cwd", os.getcwd(), "env", os.environ.get("PROBE_VALUE"))
    print("to stderr", file=sys.stderr)
    if settings.get("fail"):
        raise RuntimeError("planted failure")
    if settings.get("wait"):
        with open(outputs["out"] + ".pid.tmp", "w") as f:  # renamed whole: the test never reads it half-written
            f.write(str(os.getpid()))
        os.replace(outputs["out"] + ".pid.tmp", outputs["out"] + ".pid")
        time.sleep(60)
    with open(outputs["out"], "w") as f:
        f.write("done")
'''


def _env(tmp_path: Path, socket: str | None, src: Path = SRC) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(src), str(tmp_path)]), PROBE_VALUE="from-client")
    env.pop(jobclient.SOCKET_ENV, None)
    if socket is not None:
        env[jobclient.SOCKET_ENV] = socket
    env[jobclient.USAGE_ENV] = str(tmp_path / "job.tsv.server.json")
    return env


def _job(tmp_path: Path, env: dict, **settings) -> subprocess.CompletedProcess:
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    cmd = [sys.executable, "-m", "featlearn", "compute", "--run", "probe_job:job", "--settings", json.dumps(settings),
           "--outputs", json.dumps({"out": str(tmp_path / "out.txt")}), "--threads", "1", "--device", "cpu"]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def server(tmp_path):
    """A server for this test (its parent: this test process), with its socket path."""
    (tmp_path / "probe_job.py").write_text(PROBE)
    handle = _start_server(tmp_path, SRC)
    yield handle[1]
    _stop(handle[0])


def _start_server(tmp_path: Path, src: Path) -> tuple[subprocess.Popen, str]:
    sock = str(tmp_path / "s.sock")
    env = dict(os.environ, PYTHONPATH=str(src))
    proc = subprocess.Popen([sys.executable, "-m", "featlearn", "job-server", "--socket", sock, "--parent", str(os.getpid())],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 60
    while not os.path.exists(sock) and time.time() < deadline:
        assert proc.poll() is None, proc.stdout.read()
        time.sleep(0.05)
    return proc, sock


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    proc.wait(timeout=30)


def _pid_line(out: str) -> dict:
    words = next(line for line in out.splitlines() if line.startswith("pid ")).split()
    return dict(zip(words[::2], words[1::2]))


def test_job_runs_in_a_worker_of_the_server(server, tmp_path):
    res = _job(tmp_path, _env(tmp_path, server))
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "out.txt").read_text() == "done"
    seen = _pid_line(res.stdout)  # the client's standard output is the worker's
    assert "to stderr" in res.stderr
    # the worker is a child of the server, not of the client, and works in the client's folder and environment
    assert seen["parent"] != str(os.getpid())
    assert seen["cwd"] == str(tmp_path / "cwd") and seen["env"] == "from-client"
    assert "ran in the job server's worker " + seen["pid"] in res.stderr
    (usage,) = [json.loads(line) for line in (tmp_path / "job.tsv.server.json").read_text().splitlines()]
    assert usage["worker_pid"] == int(seen["pid"]) and usage["cpu_s"] > 0 and usage["max_rss_mb"] > 10
    # a second command of the same job adds its own record
    assert _job(tmp_path, _env(tmp_path, server)).returncode == 0
    assert len((tmp_path / "job.tsv.server.json").read_text().splitlines()) == 2


def test_jobs_that_may_use_cuda_run_in_their_own_process(server, tmp_path):
    env = _env(tmp_path, server)
    cmd = [sys.executable, "-m", "featlearn", "compute", "--run", "probe_job:job", "--settings", "{}",
           "--outputs", json.dumps({"out": str(tmp_path / "out.txt")}), "--threads", "1", "--device", "auto"]
    res = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert _pid_line(res.stdout)["parent"] == str(os.getpid()) and "job server" not in res.stderr
    assert jobclient._cpu_only(["compute", "--device=cpu"]) and not jobclient._cpu_only(["compute", "--device=cuda"])
    assert jobclient._cpu_only(["figure", "--draw=x"])


def test_worker_failures_are_the_jobs_exit_status(server, tmp_path):
    env = _env(tmp_path, server)
    failed = _job(tmp_path, env, fail=True)
    assert failed.returncode == 1
    assert "planted failure" in failed.stderr and "Traceback" in failed.stderr
    bad_args = subprocess.run([sys.executable, "-m", "featlearn", "compute", "--run", "probe_job:job"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert bad_args.returncode == 2 and "required" in bad_args.stderr


def test_killed_client_takes_its_worker_with_it(server, tmp_path):
    env = _env(tmp_path, server)
    cmd = [sys.executable, "-m", "featlearn", "compute", "--run", "probe_job:job", "--settings", '{"wait": true}',
           "--outputs", json.dumps({"out": str(tmp_path / "out.txt")}), "--threads", "1", "--device", "cpu"]
    client = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pid_file = tmp_path / "out.txt.pid"
    deadline = time.time() + 60
    while not pid_file.exists() and time.time() < deadline:
        time.sleep(0.05)
    worker = int(pid_file.read_text())
    assert worker != client.pid
    client.send_signal(signal.SIGKILL)
    client.wait()
    deadline = time.time() + 10
    while _alive(worker) and time.time() < deadline:
        time.sleep(0.05)
    assert not _alive(worker), "the worker outlived its killed client"
    assert not (tmp_path / "out.txt").exists()


def test_killed_server_fails_the_job_and_takes_its_worker_with_it(tmp_path):
    """A job whose server died mid-run fails (rerunning it in the client could overlap the worker), and the
    worker dies with the server."""
    (tmp_path / "probe_job.py").write_text(PROBE)
    proc, sock = _start_server(tmp_path, SRC)
    cmd = [sys.executable, "-m", "featlearn", "compute", "--run", "probe_job:job", "--settings", '{"wait": true}',
           "--outputs", json.dumps({"out": str(tmp_path / "out.txt")}), "--threads", "1", "--device", "cpu"]
    client = subprocess.Popen(cmd, cwd=tmp_path, env=_env(tmp_path, sock), stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    pid_file = tmp_path / "out.txt.pid"
    deadline = time.time() + 60
    while not pid_file.exists() and time.time() < deadline:
        time.sleep(0.05)
    worker = int(pid_file.read_text())
    proc.kill()
    proc.wait()
    assert client.wait(timeout=30) == 1
    assert "job server went away" in client.stderr.read()
    deadline = time.time() + 10
    while _alive(worker) and time.time() < deadline:
        time.sleep(0.05)
    assert not _alive(worker)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False
    except OSError:
        return True


def test_without_a_server_the_client_runs_the_job_itself(tmp_path):
    (tmp_path / "probe_job.py").write_text(PROBE)
    earlier = tmp_path / "job.tsv.server.json"
    earlier.write_text('{"cpu_s": 99, "max_rss_mb": 1, "finished": 0}\n')
    res = _job(tmp_path, _env(tmp_path, str(tmp_path / "no-such.sock")))
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "out.txt").read_text() == "done"
    assert "job server" not in res.stderr
    assert earlier.read_text() == '{"cpu_s": 99, "max_rss_mb": 1, "finished": 0}\n', "no worker: nothing recorded"


def test_server_refuses_after_a_code_change(tmp_path):
    (tmp_path / "probe_job.py").write_text(PROBE)
    src = tmp_path / "src"
    shutil.copytree(SRC / "featlearn", src / "featlearn", ignore=shutil.ignore_patterns("__pycache__"))
    proc, sock = _start_server(tmp_path, src)
    try:
        (src / "featlearn" / "seeding.py").write_text((src / "featlearn" / "seeding.py").read_text() + "\n# edited\n")
        res = _job(tmp_path, _env(tmp_path, sock, src))
    finally:
        _stop(proc)
    assert res.returncode == 0, res.stderr
    assert "code changed since the server started" in res.stderr
    assert _pid_line(res.stdout)["parent"] == str(os.getpid())  # the client ran it: its parent is this test
    assert not (tmp_path / "job.tsv.server.json").exists()
    assert _pid_line(res.stdout)["cwd"] == str(tmp_path / "cwd")


def test_server_ends_with_its_parent(tmp_path):
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    sock = str(tmp_path / "s.sock")
    server = subprocess.Popen([sys.executable, "-m", "featlearn", "job-server", "--socket", sock, "--parent", str(parent.pid)],
                              env=dict(os.environ, PYTHONPATH=str(SRC)), stdout=subprocess.DEVNULL)
    deadline = time.time() + 60
    while not os.path.exists(sock) and time.time() < deadline:
        time.sleep(0.05)
    assert os.path.exists(sock)
    parent.kill()
    parent.wait()
    assert server.wait(timeout=60) == 0
    assert not os.path.exists(sock)


def test_start_and_stop_point_jobs_at_the_server(tmp_path, monkeypatch):
    monkeypatch.delenv(jobclient.SOCKET_ENV, raising=False)
    handle = jobserver.start(str(tmp_path / "logs"), str(SRC), os.getpid())
    assert handle is not None
    path = os.environ[jobclient.SOCKET_ENV]
    assert os.path.exists(path)
    assert oct(os.stat(os.path.dirname(path)).st_mode & 0o777) == "0o700"
    jobserver.stop(handle)
    assert jobclient.SOCKET_ENV not in os.environ
    assert handle[0].returncode == 0 and not os.path.exists(path) and not os.path.exists(os.path.dirname(path))
    logs = list((tmp_path / "logs").glob("job_server_*.log"))
    assert len(logs) == 1 and "featlearn job server: pid" in logs[0].read_text()


def test_each_run_writes_its_own_server_log(tmp_path):
    """A second run in the same folder keeps the first run's log (it used to truncate it)."""
    first = jobserver.run_log_path(str(tmp_path), 111)
    second = jobserver.run_log_path(str(tmp_path), 222)
    assert first != second and os.path.dirname(first) == str(tmp_path)
    assert os.path.basename(first).startswith("job_server_") and first.endswith("_111.log")


def test_a_silent_connection_does_not_stall_the_jobs_behind_it(server, tmp_path):
    """A client that connects and sends nothing is dropped after REQUEST_TIMEOUT_S; the next job runs."""
    import socket

    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    silent.connect(server)
    try:
        t0 = time.time()
        res = _job(tmp_path, _env(tmp_path, server))
        took = time.time() - t0
    finally:
        silent.close()
    assert res.returncode == 0, res.stderr
    assert "ran in the job server's worker" in res.stderr  # served, not a fallback
    assert took < jobserver.REQUEST_TIMEOUT_S + 30


@pytest.mark.parametrize("read", [65536, 0])
def test_a_server_that_closes_before_starting_the_job_lets_the_client_run_it(tmp_path, read):
    """A server stopped while still warming up (it accepted nothing, or closed the connection before a worker
    started): the client runs the job itself instead of failing it, and says so, whether the close came after the
    request was read, or while it was still being sent (``read`` 0: closed at once)."""
    import socket
    import threading

    (tmp_path / "probe_job.py").write_text(PROBE)
    path = str(tmp_path / "warming.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(4)

    def accept_then_close():  # reads the request as a warming server would, then ends without an answer
        conn, _ = listener.accept()
        try:
            if read:
                conn.recv(read)
        finally:
            conn.close()

    thread = threading.Thread(target=accept_then_close)
    thread.start()
    try:
        res = _job(tmp_path, _env(tmp_path, path))
    finally:
        thread.join(timeout=30)
        listener.close()
    assert res.returncode == 0, res.stderr
    assert "closed before it started this job" in res.stderr
    assert _pid_line(res.stdout)["parent"] == str(os.getpid())  # the client ran it
    assert (tmp_path / "out.txt").read_text() == "done"


def test_the_server_refuses_another_user(tmp_path):
    """SO_PEERCRED: a process of another uid gets a refusal, never a worker (needs root to become another user)."""
    if os.getuid() != 0:
        pytest.skip("becoming another user needs root")
    script = (
        "import json, os, socket, struct, sys\n"
        "os.setgid(65534); os.setuid(65534)\n"
        "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect(sys.argv[1])\n"
        "data = json.dumps({'argv': ['--help'], 'cwd': '/', 'env': {}}).encode()\n"
        "socket.send_fds(s, [struct.pack('!I', len(data))], [0, 1, 2]); s.sendall(data)\n"
        "head = s.recv(4); n = struct.unpack('!I', head)[0]; print(s.recv(n).decode())\n"
    )
    import tempfile

    # a socket that user can reach (in a run, the server's 0700 folder keeps other users out before this check)
    public = Path(tempfile.mkdtemp(prefix="featlearn-test-peer-"))
    os.chmod(public, 0o755)
    proc, sock = _start_server(public, SRC)
    try:
        os.chmod(sock, 0o777)
        out = subprocess.run([sys.executable, "-c", script, sock], capture_output=True, text=True, timeout=60)
    finally:
        _stop(proc)
        shutil.rmtree(public, ignore_errors=True)
    assert out.returncode == 0, out.stderr
    reply = json.loads(out.stdout)
    assert "refused" in reply and "uid 65534" in reply["refused"], reply


def test_peer_uid_is_this_users_on_a_local_pair():
    import socket

    a, b = socket.socketpair(socket.AF_UNIX)
    try:
        assert jobserver.peer_uid(a) in (os.getuid(), None)
    finally:
        a.close()
        b.close()


def test_stale_server_folders_are_removed_and_live_ones_kept(tmp_path):
    """Folders of runs that were killed (a socket nobody answers, a dead owner) go; a folder whose server answers
    stays, and so does one that another run is setting up at this moment (its owner alive, no socket yet: two runs
    started side by side used to remove each other's folder before its server could bind its socket)."""
    import socket
    import time

    hour_ago = time.time() - 3600
    stale = tmp_path / f"{jobserver.FOLDER_PREFIX}old"
    stale.mkdir()
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(stale / "server.sock"))  # bound, never listening, then closed: the file stays, nobody answers
    dead.close()
    os.utime(stale, (hour_ago, hour_ago))
    empty = tmp_path / f"{jobserver.FOLDER_PREFIX}empty"  # left by a run killed before it wrote its owner file
    empty.mkdir()
    os.utime(empty, (hour_ago, hour_ago))
    fresh = tmp_path / f"{jobserver.FOLDER_PREFIX}fresh"  # just made by a run that has not written its owner file
    fresh.mkdir()
    starting = tmp_path / f"{jobserver.FOLDER_PREFIX}starting"  # another run, alive, before its server's socket
    starting.mkdir()
    (starting / jobserver.OWNER_FILE).write_text(str(os.getpid()))
    os.utime(starting, (hour_ago, hour_ago))
    orphan = tmp_path / f"{jobserver.FOLDER_PREFIX}orphan"  # its run died before its server started
    orphan.mkdir()
    (orphan / jobserver.OWNER_FILE).write_text(str(2**22 + 7))  # above Linux's largest pid: no such process
    live = tmp_path / f"{jobserver.FOLDER_PREFIX}live"
    live.mkdir()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(live / "server.sock"))
    listener.listen(1)
    other = tmp_path / "unrelated"
    other.mkdir()
    try:
        removed = jobserver.remove_stale_folders(str(tmp_path))
    finally:
        listener.close()
    assert sorted(removed) == sorted([str(stale), str(empty), str(orphan)])
    assert live.is_dir() and other.is_dir() and fresh.is_dir() and starting.is_dir()
    assert not stale.exists() and not empty.exists() and not orphan.exists()


def test_benchmark_adds_the_workers_usage_of_the_same_run_only(tmp_path):
    tsv = tmp_path / "job.tsv"
    tsv.write_text("s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
                   "20.0\t0:00:20\t15.0\t20\t6\t8\t0\t0\t0\t0.5\n")
    end = tsv.stat().st_mtime
    usage = tmp_path / "job.tsv.server.json"
    records = [
        {"cpu_s": 7.0, "max_rss_mb": 900.0, "finished": end - 3600},  # an earlier run of the job
        {"cpu_s": 1.5, "max_rss_mb": 300.0, "finished": end - 12},  # this run: two commands
        {"cpu_s": 2.0, "max_rss_mb": 250.0, "finished": end - 1},
    ]
    usage.write_text("".join(json.dumps(r) + "\n" for r in records))
    # the clients' own 0.5 CPU-s (the benchmark file) plus the two workers'
    assert read_benchmark(tsv) == {"wall_s": 20.0, "cpu_s": 4.0, "max_rss_mb": 300.0, "served": True}
    usage.write_text(json.dumps(records[0]) + "\n")
    assert read_benchmark(tsv) == {"wall_s": 20.0, "cpu_s": 0.5, "max_rss_mb": 15.0, "served": False}


def test_benchmark_takes_the_jobs_own_usage_line_where_the_samples_missed_cpu_time(tmp_path):
    """Snakemake samples a job's CPU time every 30 s after its first 15: the usage line the command ends its log
    with (the kernel's count) replaces the sampled value where it is larger; an earlier run's line is left out."""
    tsv = tmp_path / "results" / "benchmarks" / "joma" / "cell.tsv"
    log = tmp_path / "results" / "logs" / "joma" / "cell.log"
    tsv.parent.mkdir(parents=True)
    log.parent.mkdir(parents=True)
    tsv.write_text("s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
                   "38.0\t0:00:38\t500.0\t20\t6\t8\t0\t0\t0\t14.9\n")
    end = tsv.stat().st_mtime
    line = jobclient.USAGE_LINE
    log.write_text("featlearn: cpu, 1 torch threads\n"
                   + line + json.dumps({"cpu_s": 99.0, "max_rss_mb": 9000.0, "finished": end - 3600}) + "\n"
                   + "trained\n" + line + "not json\n"
                   + line + json.dumps({"cpu_s": 36.8, "max_rss_mb": 520.0, "finished": end - 0.5}) + "\n")
    assert read_benchmark(tsv) == {"wall_s": 38.0, "cpu_s": 36.8, "max_rss_mb": 520.0, "served": False}
    # a line below the sampled values changes nothing; a log without a line of this run neither
    log.write_text(line + json.dumps({"cpu_s": 10.0, "max_rss_mb": 100.0, "finished": end - 1}) + "\n")
    assert read_benchmark(tsv) == {"wall_s": 38.0, "cpu_s": 14.9, "max_rss_mb": 500.0, "served": False}
    log.write_text("no usage line\n")
    assert read_benchmark(tsv) == {"wall_s": 38.0, "cpu_s": 14.9, "max_rss_mb": 500.0, "served": False}
    log.unlink()
    assert read_benchmark(tsv)["cpu_s"] == 14.9


def test_a_compute_command_ends_its_log_with_its_own_usage(monkeypatch, capsys):
    from featlearn.pipeline import cli

    def busy(args):
        t = time.process_time()
        while time.process_time() - t < 0.2:
            pass

    def parser(argv=None):
        p = argparse.ArgumentParser()
        p.add_argument("command")
        p.set_defaults(func=busy)
        return p

    monkeypatch.setattr(cli, "build_parser", parser)
    monkeypatch.delenv(jobclient.SOCKET_ENV, raising=False)
    for command, expected in (("compute", True), ("estimate", False)):
        before = time.time()
        assert cli.main([command]) == 0
        lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith(jobclient.USAGE_LINE)]
        assert bool(lines) == expected, command
        if lines:
            record = json.loads(lines[0][len(jobclient.USAGE_LINE):])
            assert record["cpu_s"] >= 0.2 and record["max_rss_mb"] > 10
            assert before - 0.001 <= record["finished"] <= time.time() + 0.001  # (rounded to ms)
