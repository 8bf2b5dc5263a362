"""Workflow hygiene: a config string that reaches a shell command is quoted (a data mirror whose path holds a
quote and a command, `mirror'; touch PWNED; echo '`, is read as a folder name, never run), and the default
profile is where Snakemake looks for it."""

from __future__ import annotations

import json
import re
import shutil

import pytest
import yaml

from wfutil import DATASET_NAMES, check_ok, copy_workflow, snakemake

pytestmark = pytest.mark.workflow


@pytest.mark.shared_data
def test_a_hostile_mirror_path_is_a_path(tmp_path, shared_data):
    work = copy_workflow(tmp_path / "wf")
    mirror = tmp_path / "mirror'; touch PWNED; echo '"
    (mirror / "ptb").mkdir(parents=True)
    shutil.copy2(shared_data / "ptb" / "ptb.train.txt", mirror / "ptb" / "ptb.train.txt")
    (work / "hostile.yaml").write_text(yaml.safe_dump({"data": {"mirror": str(mirror), "offline": True}}))
    check_ok(snakemake(work, "--cores", "1", "--configfile", "hostile.yaml", "--", "results/data/raw/ptb/ptb.train.txt"))
    assert (work / "results/data/raw/ptb/ptb.train.txt").stat().st_size == (mirror / "ptb" / "ptb.train.txt").stat().st_size
    assert not list(tmp_path.rglob("PWNED")) and not (work / "PWNED").exists()


def test_the_default_profile_is_loaded_by_a_plain_call(tmp_path):
    """profiles/default sits next to the Snakefile, where Snakemake looks for it (issue 19: it used to sit in
    workflow/profiles/, where a plain `snakemake` never read it)."""
    from wfutil import REPO

    work = copy_workflow(tmp_path / "wf")
    shutil.copytree(REPO / "profiles" / "default", work / "profiles" / "default")
    result = check_ok(snakemake(work, "-n", "--configfile", "config/smoke.yaml", "--", "fig_joma_4"))
    assert "profiles/default" in result.stdout + result.stderr
    plain = check_ok(snakemake(work, "-n", "--workflow-profile", "none", "--configfile", "config/smoke.yaml", "--", "fig_joma_4"))
    assert "profiles/default" not in plain.stdout + plain.stderr


def test_numeric_threads_do_not_follow_the_cores_given(tmp_path):
    """A job's torch threads are its rule's own (issue 19: Snakemake scales {threads} down to --cores, and the
    numbers of a run then depended on how many cores it was given)."""
    import re

    work = copy_workflow(tmp_path / "wf")
    # a 2-thread rule (the configs run every training on 1 thread since issue 33; a workstation may raise it)
    (work / "threads.yaml").write_text("scan_snap:\n  threads: 2\n")
    commands = {}
    for cores in ("1", "4"):
        result = check_ok(snakemake(work, "-n", "-p", "--forceall", "--cores", cores, "--configfile", "config/smoke.yaml",
                                    "threads.yaml", "--", "results/scan_snap/syn_medium_final.csv",
                                    "results/joma/eq6_discrete.csv"))
        commands[cores] = sorted(re.findall(r"--run (\S+) .*?--threads (\d+)", result.stdout))
    assert commands["1"] == commands["4"] and ("2" in {t for _, t in commands["1"]}), commands  # a 2-thread rule


def test_dry_run_flags_are_recognised():
    from featlearn.pipeline.workflow import is_dry_run

    for argv in (["snakemake", "-n"], ["snakemake", "-np", "all"], ["snakemake", "--dry-run"], ["snakemake", "--dryrun"]):
        assert is_dry_run(argv), argv
    for argv in (["snakemake", "--cores", "2"], ["snakemake", "-c2"], ["snakemake", "--", "-n"], ["snakemake", "--notemp"]):
        assert not is_dry_run(argv), argv


def test_a_dry_run_never_contacts_the_model_hub(tmp_path):
    """Building the DAG of a dry run leaves uncached checkpoints out without opening a connection; a real
    invocation (here --list-rules, which builds the same registries) does probe the hub."""
    import socket
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    accepted = []
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            accepted.append(1)
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    work = copy_workflow(tmp_path / "wf")
    (work / "hub.yaml").write_text(yaml.safe_dump({
        "data": {"offline": False, "datasets": {n: {"enabled": False}
                                                for n in ("sst", "imdb", "ag_news", "wikitext2", "wikitext103", "ptb",
                                                          "tinyshakespeare", "gpt2")}},
        "joma": {"pretrained": {"enabled": "auto", "cache_dir": str(tmp_path / "empty_cache")}},
        "papers": {"features": False, "scan_snap": False, "templates": False, "joma": True},
    }))
    env = {"FEATLEARN_HUB_ADDRESS": f"127.0.0.1:{listener.getsockname()[1]}", "HF_HUB_OFFLINE": "0"}
    try:
        dry = check_ok(snakemake(work, "-n", "--configfile", "config/smoke.yaml", "hub.yaml", env=env))
        assert accepted == []
        assert "a dry run does not contact the Hugging Face hub" in dry.stderr
        check_ok(snakemake(work, "--list-rules", "--configfile", "config/smoke.yaml", "hub.yaml", env=env))
        assert accepted, "a real invocation should have probed the hub"
    finally:
        stop.set()
        thread.join(timeout=2)
        listener.close()


def test_a_real_run_leaves_out_a_dataset_whose_hosts_do_not_answer_and_a_dry_run_does_not_ask(tmp_path):
    """`enabled: auto`, online, no mirror: a real invocation (--list-rules) tries PTB's hosts (here a closed port)
    and skips the dataset with the reason; a dry run contacts nothing and counts it as to download."""
    import socket

    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    work = copy_workflow(tmp_path / "wf")
    (work / "net.yaml").write_text(yaml.safe_dump({
        "data": {"offline": False, "mirror": None,
                 "datasets": {n: {"enabled": "auto" if n == "ptb" else False} for n in DATASET_NAMES}},
        "papers": {"features": True, "scan_snap": False, "templates": False, "joma": False},
    }))
    env = {"FEATLEARN_DATA_HOST_ADDRESS": f"127.0.0.1:{port}",
           **{v: "" for v in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")}}
    real = check_ok(snakemake(work, "--list-rules", "--configfile", "config/smoke.yaml", "net.yaml", env=env))
    assert "skipping dataset ptb (no network: ptb.train.txt" in real.stderr
    dry = check_ok(snakemake(work, "-n", "--configfile", "config/smoke.yaml", "net.yaml", env=env))
    assert "skipping dataset ptb" not in dry.stderr and "data_fetch" in dry.stdout


def test_the_gpu_profile_asks_for_cuda_and_keeps_cpu_jobs_off_the_gpu(tmp_path):
    """profiles/gpu: GPU jobs run with --device cuda (a machine without a GPU fails loudly instead of training
    on the CPU) and declare their GPU memory, which the profile caps (jobs share the card while they fit);
    CPU-only jobs never ask for the GPU."""
    from wfutil import REPO

    work = copy_workflow(tmp_path / "wf")
    shutil.copytree(REPO / "profiles" / "gpu", work / "profiles" / "gpu")
    out = check_ok(snakemake(work, "-n", "-p", "--workflow-profile", "profiles/gpu", "--configfile", "config/smoke.yaml",
                             "--", "fig_scan_snap_6", "fig_joma_4")).stdout
    assert "--device cuda" in out and "--device auto" not in out
    gpu = dict(re.findall(r"^rule (\w+):\n(?:.*\n)*?\s+resources:.*?gpu=(\d)", out, re.M))
    assert gpu["scan_snap_syn_medium"] == "1" and gpu["joma_eq6"] == "0"  # a GPU job and a CPU-only one
    mem = dict(re.findall(r"^rule (\w+):\n(?:.*\n)*?\s+resources:.*?gpu_mem_mb=(\d+)", out, re.M))
    assert int(mem["scan_snap_syn_medium"]) > 0 and mem["joma_eq6"] == "0"
    assert re.search(r"--gpu-mem-mb [1-9]\d*", out) and "--gpu-mem-mb 0" in out
    profile = yaml.safe_load((REPO / "profiles" / "gpu" / "config.yaml").read_text())
    assert profile["resources"] == {"gpu_mem_mb": 76000}  # no one-job `gpu` slot: jobs share by memory


def test_the_estimate_file_sets_a_jobs_runtime_and_memory(tmp_path):
    """results/estimate/resources.json (written by `python -m featlearn estimate`) raises the limits of the job
    it names; other jobs keep their rule's."""
    import importlib

    from featlearn.pipeline import sizing
    from featlearn.pipeline.registry import Paths
    from featlearn.pipeline.workflow import scale_config
    from wfutil import REPO

    work = copy_workflow(tmp_path / "wf")
    config = scale_config("smoke", REPO / "config")
    jobs = {j.name: j
            for j in importlib.import_module("featlearn.joma.registry").registry(config, Paths("results"), lambda n: True).jobs}
    key = sizing.resource_key("joma_eq6", jobs["joma_eq6"].settings_json(None))
    table = work / "results" / sizing.ESTIMATE_RESOURCES
    table.parent.mkdir(parents=True)
    table.write_text(json.dumps({"device": "test", "jobs": {key: {"runtime": 777, "mem_mb": 12345}}}))
    out = check_ok(snakemake(work, "-n", "--configfile", "config/smoke.yaml", "--", "fig_joma_4", "check_joma_theorem2")).stdout
    limits = dict(re.findall(r"^rule (\w+):\n(?:.*\n)*?\s+resources:.*?(runtime=\d+, .*?\bmem_mb=\d+)", out, re.M))
    assert "runtime=777" in limits["joma_eq6"] and "mem_mb=12345" in limits["joma_eq6"], limits
    assert "runtime=777" not in limits["joma_theorem2"], limits


def test_the_estimate_file_sets_a_gpu_jobs_gpu_memory(tmp_path):
    """A GPU job's gpu_mem_mb (what profiles/gpu packs by) is the estimate's where resources.json has one, else
    its rule's mem_mb; on the CPU it is 0."""
    import importlib

    from featlearn.pipeline import sizing
    from featlearn.pipeline.registry import Paths
    from featlearn.pipeline.workflow import scale_config
    from wfutil import REPO

    work = copy_workflow(tmp_path / "wf")
    shutil.copytree(REPO / "profiles" / "gpu", work / "profiles" / "gpu")
    config = scale_config("smoke", REPO / "config")
    jobs = {j.name: j for j in importlib.import_module("featlearn.scan_snap.registry").registry(
        config, Paths("results"), lambda n: True).jobs}
    job = jobs["scan_snap_syn_medium"]
    key = sizing.resource_key(job.name, job.settings_json(None))
    table = work / "results" / sizing.ESTIMATE_RESOURCES
    table.parent.mkdir(parents=True)

    def declared():
        out = check_ok(snakemake(work, "-n", "--workflow-profile", "profiles/gpu", "--configfile", "config/smoke.yaml",
                                 "--", "fig_scan_snap_6")).stdout
        return int(dict(re.findall(r"^rule (\w+):\n(?:.*\n)*?\s+resources:.*?gpu_mem_mb=(\d+)", out, re.M))[
            "scan_snap_syn_medium"])

    table.write_text(json.dumps({"device": "test", "jobs": {}}))
    assert declared() == job.resources.mem_mb  # no estimate for it: the rule's host-memory limit
    table.write_text(json.dumps({"device": "test", "jobs": {key: {"runtime": 20, "mem_mb": 3000, "gpu_mem_mb": 1234}}}))
    assert declared() == 1234


def test_device_auto_asks_for_a_gpu_slot_only_where_a_gpu_is_visible(tmp_path):
    """Issue 33: with `device: auto`, a machine where no GPU is visible gives the GPU-capable jobs
    `--device cpu` and no `gpu` slot (they used to wait for one, one at a time); with (fake) GPUs they keep
    `--device auto` and `gpu=1`."""
    work = copy_workflow(tmp_path / "wf")
    (work / "auto.yaml").write_text("device: auto\n")
    no_gpu, gpus = tmp_path / "no_gpu", tmp_path / "gpus"
    no_gpu.mkdir()
    for pci in ("0000:01:00.0", "0000:02:00.0"):
        (gpus / pci).mkdir(parents=True)
    args = ("-n", "-p", "--configfile", "config/smoke.yaml", "auto.yaml", "--", "fig_scan_snap_6", "fig_joma_4")

    def dry(env):
        out = check_ok(snakemake(work, *args, env=env)).stdout
        computes = "\n".join(line for line in out.splitlines() if "featlearn compute" in line)
        return computes, dict(re.findall(r"^rule (\w+):\n(?:.*\n)*?\s+resources:.*?gpu=(\d)", out, re.M))

    # no GPU: CUDA_VISIBLE_DEVICES set by a shell profile does not make one
    out, slots = dry({"FEATLEARN_GPU_DRIVER_DIR": str(no_gpu), "CUDA_VISIBLE_DEVICES": "0"})
    assert set(slots.values()) == {"0"} and "--device auto" not in out
    assert slots["scan_snap_syn_medium"] == "0" and "--device cpu" in out
    # two fake GPUs: today's behaviour
    out, slots = dry({"FEATLEARN_GPU_DRIVER_DIR": str(gpus)})
    assert slots["scan_snap_syn_medium"] == "1" and slots["joma_eq6"] == "0"
    assert "--device auto" in out
    # GPUs hidden by CUDA_VISIBLE_DEVICES="": none visible
    out, slots = dry({"FEATLEARN_GPU_DRIVER_DIR": str(gpus), "CUDA_VISIBLE_DEVICES": ""})
    assert set(slots.values()) == {"0"} and "--device auto" not in out


def test_the_slurm_profile_makes_gpu_jobs_insist_on_a_gpu(tmp_path):
    """Issue 35: through profiles/slurm a GPU job runs `--device cuda` (it fails on a node without a GPU instead
    of training on its CPU) and asks for a GPU; CPU-only jobs stay `--device cpu`."""
    work = copy_workflow(tmp_path / "wf")
    out = check_ok(snakemake(work, "-n", "-p", "--workflow-profile", "profiles/slurm", "--configfile", "config/smoke.yaml",
                             "--", "fig_scan_snap_6", "fig_joma_4")).stdout
    slots = dict(re.findall(r"^rule (\w+):\n(?:.*\n)*?\s+resources:.*?gpu=(\d)", out, re.M))
    computes = [line for line in out.splitlines() if "featlearn compute" in line]
    assert any("scan_snap_syn_medium" in c or "--device cuda" in c for c in computes)
    assert "--device auto" not in "\n".join(computes)
    assert slots["scan_snap_syn_medium"] == "1" and slots["joma_eq6"] == "0"


def test_precision_reaches_the_trainings_only_and_a_bad_one_stops_the_run(tmp_path):
    """Issue 34: `precision: bf16` is given to the jobs that can use a GPU; every other job computes in fp32;
    an unknown precision stops the run naming the key."""
    work = copy_workflow(tmp_path / "wf")
    (work / "bf16.yaml").write_text("precision: bf16\n")
    out = check_ok(snakemake(work, "-n", "-p", "--configfile", "config/smoke.yaml", "bf16.yaml", "--",
                             "fig_scan_snap_6", "fig_joma_4")).stdout
    runs = {m.group(1): m.group(2) for m in re.finditer(r"--run (\S+).*?--precision (\w+)", out)}
    assert runs["featlearn.scan_snap.experiments:syn_medium"] == "bf16", runs
    assert any(v == "fp32" for v in runs.values()), runs  # the CPU-only simulations
    (work / "bad.yaml").write_text("precision: fp16\n")
    bad = snakemake(work, "-n", "--configfile", "config/smoke.yaml", "bad.yaml", "--", "fig_joma_4")
    assert bad.returncode != 0 and "precision" in bad.stdout + bad.stderr


def test_a_training_family_can_set_its_own_precision(tmp_path):
    """A section's `precision` (here the Scan and Snap WikiText LMs', auto in the config) wins over the run's for that
    family's jobs only; null follows the run's `precision`; a bad value stops the run naming the key."""
    work = copy_workflow(tmp_path / "wf")
    targets = ("--", "fig_scan_snap_10", "fig_scan_snap_6", "fig_joma_4")

    def precisions(*overlays):
        out = check_ok(snakemake(work, "-n", "-p", "--configfile", "config/smoke.yaml", *overlays, *targets)).stdout
        return {m.group(1): m.group(2) for m in re.finditer(r"--run (\S+).*?--precision (\w+)", out)}

    runs = precisions()  # the config's own: auto for the LMs (bf16 where the device computes bfloat16 natively)
    assert runs["featlearn.scan_snap.wikitext:run_variant"] == "auto", runs
    assert runs["featlearn.scan_snap.experiments:syn_medium"] == "fp32", runs
    (work / "lm.yaml").write_text("scan_snap: {wikitext: {precision: bf16}}\n")
    runs = precisions("lm.yaml")
    assert runs["featlearn.scan_snap.wikitext:run_variant"] == "bf16", runs
    assert runs["featlearn.scan_snap.experiments:syn_medium"] == "fp32", runs  # the run's precision
    assert runs["featlearn.joma.experiments:eq6_tables"] == "fp32", runs  # a CPU-only job
    (work / "run.yaml").write_text("precision: tf32\nscan_snap: {wikitext: {precision: null}}\n")
    runs = precisions("run.yaml")
    assert runs["featlearn.scan_snap.wikitext:run_variant"] == "tf32", runs  # null: the run's
    assert runs["featlearn.scan_snap.experiments:syn_medium"] == "tf32", runs
    (work / "bad.yaml").write_text("scan_snap: {wikitext: {precision: fp16}}\n")
    bad = snakemake(work, "-n", "--configfile", "config/smoke.yaml", "bad.yaml", "--", "fig_scan_snap_10")
    assert bad.returncode != 0 and "scan_snap.wikitext.precision" in bad.stdout + bad.stderr
