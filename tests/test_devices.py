"""Several GPUs on one machine: each concurrent job claims its own GPU (faked here: the claims are lock files,
the GPUs a CUDA_VISIBLE_DEVICES list), and a job a scheduler already gave one GPU is left alone."""

from __future__ import annotations

import os
import subprocess
import sys

from featlearn.devices import claim_gpu, pin_one_gpu, visible_gpu_ids


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
