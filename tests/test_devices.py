"""Several GPUs on one machine: each concurrent job claims its own GPU (faked here: the claims are lock files,
the GPUs a CUDA_VISIBLE_DEVICES list), and a job a scheduler already gave one GPU is left alone."""

from __future__ import annotations

import os
import subprocess
import sys

from featlearn.devices import claim_gpu, cpu_model, describe_job_device, pin_one_gpu, visible_gpu_ids


def test_visible_gpus_come_from_the_environment_or_the_driver(tmp_path):
    assert visible_gpu_ids({"CUDA_VISIBLE_DEVICES": "2,3"}) == ["2", "3"]
    assert visible_gpu_ids({"CUDA_VISIBLE_DEVICES": ""}) == []
    driver = tmp_path / "gpus"
    for pci in ("0000:01:00.0", "0000:02:00.0"):
        (driver / pci).mkdir(parents=True)
    assert visible_gpu_ids({}, driver_dir=driver) == ["0", "1"]
    assert visible_gpu_ids({}, driver_dir=tmp_path / "none") == []


def test_two_jobs_get_two_gpus_and_a_third_waits(tmp_path):
    first = claim_gpu(["0", "1"], lock_dir=tmp_path)
    second = claim_gpu(["0", "1"], lock_dir=tmp_path)  # another open file: another claimant
    assert {first, second} == {"0", "1"}
    assert claim_gpu(["0", "1"], lock_dir=tmp_path, wait=0.0) is None


def test_pinning_sets_cuda_visible_devices_only_when_there_is_a_choice(tmp_path):
    env = {"CUDA_VISIBLE_DEVICES": "4,5"}
    assert pin_one_gpu("auto", env, lock_dir=tmp_path) in ("4", "5")
    assert env["CUDA_VISIBLE_DEVICES"] in ("4", "5")
    single = {"CUDA_VISIBLE_DEVICES": "7"}  # e.g. SLURM gave the job one GPU
    assert pin_one_gpu("cuda", single, lock_dir=tmp_path) is None and single["CUDA_VISIBLE_DEVICES"] == "7"
    cpu = {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert pin_one_gpu("cpu", cpu, lock_dir=tmp_path) is None and cpu["CUDA_VISIBLE_DEVICES"] == "0,1"


CLAIM = """
import os, sys, time
from featlearn.devices import pin_one_gpu
print(pin_one_gpu("auto", os.environ, lock_dir=sys.argv[1], wait=0.0), flush=True)
time.sleep(float(sys.argv[2]))
"""


def test_concurrent_processes_hold_different_gpus_until_they_exit(tmp_path):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "0,1"}
    procs = [subprocess.Popen([sys.executable, "-c", CLAIM, str(tmp_path), "3"], env=env, stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    got = sorted(p.stdout.readline().strip() for p in procs)
    assert got == ["0", "1"]
    for p in procs:
        p.wait(timeout=30)
    # both exited: their locks are gone, a new job gets a GPU
    after = subprocess.run([sys.executable, "-c", CLAIM, str(tmp_path), "0"], env=env, capture_output=True, text=True)
    assert after.stdout.strip() in ("0", "1")


def _driver(tmp_path, n: int):
    """A fake NVIDIA driver folder listing ``n`` GPUs (one folder per GPU, as /proc/driver/nvidia/gpus)."""
    root = tmp_path / f"driver{n}"
    root.mkdir()
    for i in range(n):
        (root / f"0000:0{i + 1}:00.0").mkdir()
    return root


def test_gpus_visible_needs_the_driver_and_honours_cuda_visible_devices(tmp_path):
    from featlearn.devices import DRIVER_DIR_ENV, gpus_visible

    none, two = _driver(tmp_path, 0), _driver(tmp_path, 2)
    assert gpus_visible({DRIVER_DIR_ENV: str(tmp_path / "absent")}) == []
    assert gpus_visible({DRIVER_DIR_ENV: str(none)}) == []
    # CUDA_VISIBLE_DEVICES alone (set in a shell profile, say) does not make a GPU
    assert gpus_visible({DRIVER_DIR_ENV: str(none), "CUDA_VISIBLE_DEVICES": "0"}) == []
    assert gpus_visible({DRIVER_DIR_ENV: str(two)}) == ["0", "1"]
    assert gpus_visible({DRIVER_DIR_ENV: str(two), "CUDA_VISIBLE_DEVICES": "1"}) == ["1"]
    assert gpus_visible({DRIVER_DIR_ENV: str(two), "CUDA_VISIBLE_DEVICES": ""}) == []  # all hidden


def test_dag_device_turns_auto_into_cpu_only_on_a_local_run_without_a_gpu(tmp_path):
    from featlearn.devices import DRIVER_DIR_ENV, dag_device

    no_gpu, one_gpu = {DRIVER_DIR_ENV: str(_driver(tmp_path, 0))}, {DRIVER_DIR_ENV: str(_driver(tmp_path, 1))}
    assert dag_device("auto", True, no_gpu) == "cpu"
    assert dag_device("auto", True, one_gpu) == "auto"  # today's behaviour where a GPU is visible
    assert dag_device("auto", False, no_gpu) == "auto"  # a cluster run: its jobs resolve auto on their node
    assert dag_device("cuda", True, no_gpu) == "cuda"  # asked for: fails loudly in the job, never silently CPU
    assert dag_device("cpu", True, one_gpu) == "cpu"


def test_the_run_record_says_what_the_jobs_were_given():
    from featlearn.pipeline.runrecord import job_device_description

    assert "no GPU visible" in job_device_description("auto", "cpu")
    assert job_device_description("auto", "auto").startswith("auto: GPU-capable jobs ask for a GPU slot")
    assert job_device_description("cpu", "cpu").startswith("cpu: every job runs on the CPU")
    assert job_device_description("cuda", None).startswith("cuda: GPU-capable jobs ask for a GPU slot")


def test_the_gpu_lock_folder_is_private_and_another_users_is_refused(tmp_path):
    """Issue 35: the lock folder is created 0700; one that another user created first is refused with a message
    naming the variable to set (it could hold every GPU's lock)."""
    import pytest

    from featlearn.devices import lock_folder

    mine = lock_folder(tmp_path / "locks")
    assert oct(mine.stat().st_mode & 0o777) == "0o700"
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o777)
    loose.chmod(0o777)
    assert oct(lock_folder(loose).stat().st_mode & 0o777) == "0o700"
    if os.getuid() != 0:
        pytest.skip("giving a folder to another user needs root")
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, 65534, 65534)
    with pytest.raises(PermissionError, match="FEATLEARN_GPU_LOCK_DIR"):
        claim_gpu(["0", "1"], lock_dir=theirs)


def test_a_job_waiting_for_a_gpu_says_so(tmp_path):
    held = claim_gpu(["0"], lock_dir=tmp_path)
    assert held == "0"
    said = []
    assert claim_gpu(["0"], lock_dir=tmp_path, wait=0.2, poll=0.05, log=said.append) is None
    assert said and "waiting" in said[0]


SHARE = """
import os, sys, time
from featlearn.devices import pin_one_gpu
try:
    print(pin_one_gpu("cuda", os.environ, need_mb=int(sys.argv[2]), lock_dir=sys.argv[1], wait=0.0), flush=True)
except RuntimeError as exc:
    print("error", exc, flush=True)
time.sleep(float(sys.argv[3]))
"""


def _share(tmp_path, need_mb: int, hold_s: float, env: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", SHARE, str(tmp_path), str(need_mb), str(hold_s)], env=env,
                            stdout=subprocess.PIPE, text=True)


def test_jobs_share_fake_gpus_while_their_memory_fits(tmp_path):
    """Issue 34: two fake 10 GB GPUs. Jobs of 4 GB pack two to a GPU, spread over both; a fifth does not fit and
    gets none (it would wait); once a job ends its memory is free again."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "0,1", "FEATLEARN_GPU_MEMORY_MB": "10000"}
    holders = [_share(tmp_path, 4000, 6, env) for _ in range(4)]
    got = sorted(p.stdout.readline().strip() for p in holders)
    assert got == ["0", "0", "1", "1"]
    fifth = _share(tmp_path, 4000, 0, env)
    assert fifth.stdout.readline().strip() == "None"
    fifth.wait(timeout=30)
    # a small job still fits beside them (2 GB left on each)
    small = _share(tmp_path, 2000, 0, env)
    assert small.stdout.readline().strip() in ("0", "1")
    small.wait(timeout=30)
    for p in holders:
        p.wait(timeout=30)
    after = _share(tmp_path, 9000, 0, env)  # all ended: a large job fits again
    assert after.stdout.readline().strip() in ("0", "1")
    after.wait(timeout=30)


def test_a_job_larger_than_every_gpu_fails_with_a_message(tmp_path):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "0,1", "FEATLEARN_GPU_MEMORY_MB": "10000"}
    p = _share(tmp_path, 20000, 0, env)
    line = p.stdout.readline()
    p.wait(timeout=30)
    assert line.startswith("error") and "more than any GPU has" in line


def test_a_whole_gpu_job_and_sharing_jobs_keep_apart(tmp_path):
    """A job that declared no memory holds a GPU whole: sharers skip that GPU, and it cannot take a GPU that
    sharers are on."""
    from featlearn.devices import claim_gpu

    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "0,1", "FEATLEARN_GPU_MEMORY_MB": "10000"}
    sharer = _share(tmp_path, 1000, 5, env)
    on = sharer.stdout.readline().strip()
    other = "1" if on == "0" else "0"
    assert claim_gpu([on], lock_dir=tmp_path, wait=0.0) is None  # the sharer's GPU is not free to hold whole
    assert claim_gpu([other], lock_dir=tmp_path, wait=0.0) == other  # this test process now holds the other whole
    second = _share(tmp_path, 1000, 0, env)
    assert second.stdout.readline().strip() == on  # not the GPU held whole
    second.wait(timeout=30)
    sharer.wait(timeout=30)


def test_the_cpu_model_comes_from_cpuinfo_and_falls_back_to_the_architecture(tmp_path, monkeypatch):
    """Timings name the CPU's model (two 2-core machines ran the same jobs up to 2.35x apart): the first ``model
    name`` of /proc/cpuinfo on x86, ``Model`` or ``Hardware`` on ARM; without either, platform's processor or
    architecture."""
    model = cpu_model.__wrapped__  # (the cached function reads the real /proc/cpuinfo once)
    x86 = tmp_path / "x86"
    x86.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel\t\t: 17\n"
                   "model name\t: AMD EPYC 9354   32-Core Processor\nprocessor\t: 1\nmodel name\t: other\n")
    assert model(str(x86)) == "AMD EPYC 9354 32-Core Processor"  # (the numeric ``model`` line is not the name)
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nBogoMIPS\t: 50.00\nCPU part\t: 0xd0c\n\nHardware\t: BCM2835\nModel\t: Raspberry Pi 4\n")
    assert model(str(arm)) == "Raspberry Pi 4"
    empty = tmp_path / "empty"
    empty.write_text("processor\t: 0\nmodel name\t:  \n")
    monkeypatch.setattr("featlearn.devices.sys.platform", "linux")
    monkeypatch.setattr("featlearn.devices.platform.processor", lambda: "")
    monkeypatch.setattr("featlearn.devices.platform.machine", lambda: "riscv64")
    assert model(str(empty)) == "riscv64"
    assert model(str(tmp_path / "absent")) == "riscv64"
    assert cpu_model() != "" and describe_job_device("cpu") == "cpu"  # (job logs' device; the run record has the model)
