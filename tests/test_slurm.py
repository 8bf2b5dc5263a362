"""The workflow on a real SLURM cluster: a throw-away single-node cluster (tests/slurm/cluster.sh) runs
the Scan and Snap synthetic figures and a GPU rule of each other paper at smoke scale through
``--workflow-profile profiles/slurm``.

Checked from the scheduler's own records (the job-completion log, and the controller's job records):
every training job went through SLURM with the CPUs, memory, time limit, partition and GPU request its
rule declares, figure rules stayed local, and the tables equal those of a local run.

Needs root (or SLURM and munge already installed) and Debian's packages; skipped with the reason
otherwise. Set FEATLEARN_REQUIRE_SLURM=1 to make a cluster that does not start fail instead.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from wfutil import copy_workflow, overlay, snakemake

pytestmark = [pytest.mark.slurm, pytest.mark.workflow]

CLUSTER = Path(__file__).resolve().parent / "slurm" / "cluster.sh"
# One GPU rule of each other paper, on synthetic data (no dataset needed): a features classifier, a JoMA
# Table 1 cell, a templates sweep grid.
GPU_TARGETS = {
    "features_train": "results/features/train/synthetic_lrnn/scores.csv",
    "joma_table1_cell": "results/joma/table1/cell_C20_nch2_n10-20.csv",
    "templates_sweep": "results/templates/sweeps/fig2c_runs.csv",
}
SMOKE = ("scan_snap", *GPU_TARGETS.values(), "--configfile", "config/smoke.yaml")
# The rules that train or simulate (everything else of the targets is a local rule).
COMPUTE_RULES = {"scan_snap_generator", "scan_snap_syn_small", "scan_snap_adam", "scan_snap_syn_medium", "scan_snap_theory",
                 *GPU_TARGETS}
# Resources of rules that declare none: values no rule of the target uses, so that a job that got
# them instead of its rule's own would show.
DEFAULTS = ("mem_mb=900", "runtime=7")
# The GPU partition's time limit in the test's partitions file: below scan_snap_syn_medium's own 60 minutes.
GPU_PARTITION_MINUTES = 50


def _free_port_pair() -> int:
    """A port P such that P and P + 1 are free on localhost (slurmctld and slurmd)."""
    rng = random.Random(os.getpid())
    for _ in range(50):
        port = rng.randrange(20000, 40000)
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 1))
            return port
        except OSError:
            continue
    raise RuntimeError("no free port pair found")


def _unavailable(reason: str):
    if os.environ.get("FEATLEARN_REQUIRE_SLURM") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def cluster():
    """Start the cluster (installing the packages when missing); yield the client environment."""
    if "1" not in (os.environ.get("FEATLEARN_SLURM_TESTS"), os.environ.get("FEATLEARN_REQUIRE_SLURM")):
        pytest.skip("opt-in: FEATLEARN_SLURM_TESTS=1 runs it (as root it installs Debian's SLURM and munge when "
                    "missing); CI turns it on")
    if not sys.platform.startswith("linux"):
        _unavailable("the SLURM test cluster needs Linux")
    if os.geteuid() != 0 and not shutil.which("slurmctld"):
        _unavailable("SLURM is not installed and installing it (apt-get) needs root")
    state = Path(tempfile.mkdtemp(prefix="featlearn-slurm-"))  # short path: munge's socket name is limited
    try:
        start = subprocess.run(
            ["bash", str(CLUSTER), "start", str(state), str(_free_port_pair())],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        if start.returncode != 0:
            _unavailable(f"single-node SLURM cluster did not start: {start.stderr.strip()[-1500:]}")
        env = {
            "SLURM_CONF": str(state / "slurm.conf"),
            # cluster.sh's srun shim first, then this test's Python environment (as wfutil.snakemake)
            "PATH": os.pathsep.join([str(state / "bin"), os.path.dirname(sys.executable), os.environ.get("PATH", "")]),
        }
        yield state, env
    finally:
        subprocess.run(["bash", str(CLUSTER), "stop", str(state)], capture_output=True, timeout=120, check=False)
        shutil.rmtree(state, ignore_errors=True)


def _ok(result):
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    return result


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    work = copy_workflow(tmp_path_factory.mktemp("local") / "wf")
    start = time.time()
    _ok(snakemake(work, *SMOKE, overlay(work, "off.yaml"), "--cores", "2"))
    print(f"local smoke run: {time.time() - start:.0f} s", file=sys.stderr)
    return work


@pytest.fixture(scope="module")
def slurm_run(cluster, tmp_path_factory):
    """The same target through the SLURM profile, with `device: auto` so that the GPU rule asks for one."""
    state, env = cluster
    work = copy_workflow(tmp_path_factory.mktemp("slurm") / "wf")
    # the GPU partition's limit below a GPU rule's own (scan_snap_syn_medium: 60 min): its runtime is capped
    parts = yaml.safe_load((work / "profiles/slurm/partitions.yaml").read_text())
    parts["partitions"]["gpu"]["max_runtime"] = GPU_PARTITION_MINUTES
    (work / "profiles/slurm/partitions.yaml").write_text(yaml.safe_dump(parts))
    start = time.time()
    result = _ok(
        snakemake(
            work,
            *SMOKE,
            overlay(work, "off.yaml"),
            "--workflow-profile",
            "profiles/slurm",
            "--config",
            "device=auto",
            # The profile's account is a placeholder: replace it (no accounts here).
            "--default-resources",
            *DEFAULTS,
            # No accounting database: job states come from squeue (finished jobs stay listed for
            # MinJobAge), and the plugin's first status check comes early for these short jobs.
            "--slurm-status-command",
            "squeue",
            "--slurm-init-seconds-before-status-checks",
            "2",
            "--slurm-keep-successful-logs",
            env=env,
            timeout=900,
        )
    )
    print(f"SLURM smoke run: {time.time() - start:.0f} s", file=sys.stderr)
    return work, state, env, result.stdout + result.stderr


def _job_blocks(log: str) -> dict[int, dict]:
    """Snakemake's job announcements: {jobid: {"rule", "local", "threads", "resources"}}."""
    jobs, current = {}, None
    for line in log.splitlines():
        head = re.match(r"^(local)?rule (\w+):$", line)
        if head:
            current = {"rule": head.group(2), "local": bool(head.group(1)), "threads": 1, "resources": {}}
            continue
        if current is None:
            continue
        field = re.match(r"^    (\w+): (.*)$", line)
        if not field:
            current = None
            continue
        key, value = field.groups()
        if key == "jobid":
            jobs[int(value)] = current
        elif key == "threads":
            current["threads"] = int(value)
        elif key == "resources":
            current["resources"] = dict(item.split("=", 1) for item in value.split(", "))
    return jobs


def _submissions(log: str) -> dict[int, str]:
    """{snakemake jobid: SLURM job id} from the plugin's submission messages."""
    return {int(a): b for a, b in re.findall(r"Job (\d+) has been submitted with SLURM jobid (\d+)", log)}


def _jobcomp(state: Path) -> dict[str, dict]:
    """The job-completion log (jobcomp/filetxt): {job id: {field: value}}."""
    records = {}
    for line in (state / "jobcomp.log").read_text().splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        records[fields["JobId"]] = fields
    return records


def _controller_record(env: dict, job_id: str) -> dict:
    out = subprocess.run(
        ["scontrol", "show", "job", "--oneliner", job_id], capture_output=True, text=True, env={**os.environ, **env}, check=True
    ).stdout
    return dict(re.findall(r"(\w+)=(\S*)", out))


def test_training_jobs_went_through_slurm_with_declared_resources(slurm_run):
    _, state, env, log = slurm_run
    run_id = re.search(r"SLURM run ID: (\S+)", log).group(1)
    jobs = _job_blocks(log)
    submitted = _submissions(log)
    # every training rule was submitted, no local rule was
    assert {jobs[j]["rule"] for j in submitted} == COMPUTE_RULES
    assert all(jobs[j]["local"] == (j not in submitted) for j in jobs)
    assert sum(j["local"] for j in jobs.values()) >= 8  # figures, claims: on the submitting host
    records = _jobcomp(state)
    ours = {k: r for k, r in records.items() if r["Name"] == run_id}
    assert set(ours) == set(submitted.values())
    for snakemake_id, slurm_id in submitted.items():
        declared, record = jobs[snakemake_id], ours[slurm_id]
        res = declared["resources"]
        what = f"{declared['rule']} (SLURM job {slurm_id}): {record}"
        assert record["JobState"] == "COMPLETED" and record["ExitCode"] == "0:0", what
        assert record["NodeList"] == "localnode", what
        assert int(record["ProcCnt"]) == declared["threads"], what
        assert int(record["TimeLimit"]) == int(res["runtime"]), what
        assert re.search(rf"(^|,)mem={int(res['mem_mb'])}M(,|$)", record["Tres"]), what
        # the plugin chose the partition from profiles/slurm/partitions.yaml: GPU jobs to gpu, CPU jobs to cpu
        # (the test cluster's cpu partition refuses GPU jobs; the records are checked as well)
        assert "slurm_partition" not in res, what
        assert record["Partition"] == ("gpu" if int(res.get("gpu", 0)) else "cpu"), what
        # rules declare their own memory and time limit; none fell back to the defaults
        assert f"mem_mb={res['mem_mb']}" not in DEFAULTS and f"runtime={res['runtime']}" not in DEFAULTS, what
        gpus = int(res.get("gpu", 0))
        controller = _controller_record(env, slurm_id)
        if gpus:
            assert controller.get("TresPerJob") == f"gres:gpu:{gpus}", controller
        else:
            assert "gpu" not in controller.get("TresPerJob", ""), controller
    by_rule = {jobs[j]["rule"]: ours[s] for j, s in submitted.items()}
    # the rules' own values, as the rule file and the profile set them
    assert by_rule["scan_snap_syn_medium"]["Partition"] == "gpu"  # a GPU job: the GPU partition
    assert _controller_record(env, by_rule["scan_snap_syn_medium"]["JobId"])["TresPerJob"] == "gres:gpu:1"
    assert by_rule["scan_snap_theory"]["ProcCnt"] == "1" and by_rule["scan_snap_syn_small"]["ProcCnt"] == "1"
    # its rule asks 60 minutes; the GPU partition allows GPU_PARTITION_MINUTES: capped to fit (issue 35)
    assert "mem=4000M" in by_rule["scan_snap_syn_medium"]["Tres"]
    assert by_rule["scan_snap_syn_medium"]["TimeLimit"] == str(GPU_PARTITION_MINUTES)
    # a GPU rule of every paper went to the GPU partition with one GPU
    for rule in ("scan_snap_syn_medium", *GPU_TARGETS):
        assert by_rule[rule]["Partition"] == "gpu", (rule, by_rule[rule])
        assert _controller_record(env, by_rule[rule]["JobId"])["TresPerJob"] == "gres:gpu:1", rule


def test_the_cpu_partition_refuses_gpu_jobs(cluster):
    """The test cluster's cpu partition has no GPU (job_submit.lua in tests/slurm/cluster.sh): a GPU job sent
    there fails, so a misrouted GPU rule would fail the workflow run above."""
    _, env = cluster
    env = {**os.environ, **env}
    sbatch = ["sbatch", "--wrap", "true", "--time", "1", "--mem", "100", "--output", "/dev/null"]
    refused = subprocess.run([*sbatch, "--partition", "cpu", "--gpus", "1"], capture_output=True, text=True, env=env, check=False)
    assert refused.returncode != 0 and "no GPU" in refused.stderr, refused.stderr
    default = subprocess.run([*sbatch, "--gpus", "1"], capture_output=True, text=True, env=env, check=False)  # cpu is the default
    assert default.returncode != 0, default.stdout
    for ok in ([*sbatch, "--partition", "gpu", "--gpus", "1"], [*sbatch, "--partition", "cpu"]):
        accepted = subprocess.run(ok, capture_output=True, text=True, env=env, check=False)
        assert accepted.returncode == 0 and "Submitted batch job" in accepted.stdout, accepted.stderr


def test_slurm_logs_kept_per_rule(slurm_run):
    work, _, _, log = slurm_run
    for slurm_id in _submissions(log).values():
        root = work / ".snakemake" / "slurm_logs"
        logs = list(root.rglob(f"{slurm_id}.log"))  # rule_<name>/[<wildcards>/]<id>.log
        assert len(logs) == 1 and logs[0].relative_to(root).parts[0].startswith(
            ("rule_scan_snap_", *(f"rule_{r}" for r in GPU_TARGETS)))
        assert "Finished jobid" in logs[0].read_text() or "steps (100%) done" in logs[0].read_text()


def test_outputs_equal_local_run(slurm_run, local_run):
    work = slurm_run[0]
    tables = sorted(p.relative_to(local_run) for p in (local_run / "results" / "scan_snap").rglob("*.csv"))
    assert len(tables) >= 15
    assert tables == sorted(p.relative_to(work) for p in (work / "results" / "scan_snap").rglob("*.csv"))
    for table in tables + [Path(t) for t in GPU_TARGETS.values()]:
        assert (work / table).read_bytes() == (local_run / table).read_bytes(), table
    for n in (3, 4, 5, 6, 8, 9, 11, 12):
        assert (work / "results" / "figures" / "scan_snap" / f"fig{n}.png").stat().st_size > 1000
