"""Workflow hygiene: a config string that reaches a shell command is quoted (a data mirror whose path holds a
quote and a command, `mirror'; touch PWNED; echo '`, is read as a folder name, never run), and the default
profile is where Snakemake looks for it."""

from __future__ import annotations

import shutil

import pytest
import yaml

from wfutil import check_ok, copy_workflow, snakemake

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
    commands = {}
    for cores in ("1", "4"):
        result = check_ok(snakemake(work, "-n", "-p", "--forceall", "--cores", cores, "--configfile", "config/smoke.yaml", "--",
                                    "results/scan_snap/syn_medium_final.csv", "results/joma/eq6_discrete.csv"))
        commands[cores] = sorted(re.findall(r"--run (\S+) .*?--threads (\d+)", result.stdout))
    assert commands["1"] == commands["4"] and ("2" in {t for _, t in commands["1"]}), commands  # a 2-thread rule
