"""benchmarks/device/dag_session.sh, the workflow's one command on a lent GPU machine, run here with a fake Snakemake:
what it passes to Snakemake and what its tarballs bring back (a device session has minutes, and a returned file may
have at most 16 MiB, so kept checkpoints must stay behind)."""

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "device" / "dag_session.sh"


def _fake_python(bin_dir: Path, argv_file: Path) -> None:
    """``python3 -m snakemake ...`` records its arguments and the commit it was given; anything else is the real
    interpreter."""
    bin_dir.mkdir()
    fake = bin_dir / "python3"
    fake.write_text(
        "#!/usr/bin/env bash\n"
        'if [ "$1" = "-m" ] && [ "$2" = "snakemake" ]; then\n'
        "    shift 2\n"
        f'    printf "%s\\n" "$@" > {argv_file}\n'
        f'    echo "FEATLEARN_COMMIT=${{FEATLEARN_COMMIT:-}} FEATLEARN_OFFLINE=${{FEATLEARN_OFFLINE:-}}" >> {argv_file}\n'
        '    echo "3 of 3 steps (100%) done"\n'
        "    exit 0\n"
        "fi\n"
        f'exec {sys.executable} "$@"\n'
    )
    fake.chmod(0o755)


def _members(path: Path) -> set[str]:
    with tarfile.open(path) as tar:
        return {m.name for m in tar.getmembers() if m.isfile()}


@pytest.mark.skipif(not SCRIPT.exists(), reason="no device scripts in this checkout")
def test_dag_session_passes_the_run_to_snakemake_and_returns_results_without_kept_checkpoints(tmp_path):
    work, out, argv = tmp_path / "copy", tmp_path / "out", tmp_path / "argv.txt"
    _fake_python(tmp_path / "bin", argv)
    files = {
        "results/run.json": '{"scale": "paper"}',
        "results/joma/claims/4.csv": "claim_id\nfig4_drop\n",
        "results/joma/fig4_runs.csv": "step,value\n0,1\n",
        "results/figures/joma/fig4.png": "png",
        "results/logs/joma/fig4.log": "done\n",
        "results/data/prepared/wikitext2/train.pt": "ids",  # the prepared data: left behind
        "results/joma/table1/cell.resume/parts/0123.pt": "x" * 1000,  # kept work of an unfinished job: left behind
        "results/scan_snap/lm/fig10.resume/resume.pt": "x" * 1000,
        "results/scan_snap/lm/fig10.resume/clock.json": "{}",
    }
    for name, text in files.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text)
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "OUT": str(out), "DAG_LIMIT": "60",
           "DAG_EVIDENCE": "1", "DAG_GPU_MEM_MB": "1000", "COMMIT": "0123abcd"}
    env.pop("FEATLEARN_COMMIT", None)
    done = subprocess.run(["bash", str(SCRIPT), "results/joma/evidence/fig_joma_4.json", "--configfile",
                           "config/paper.yaml"], cwd=work, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert "snakemake finished" in done.stdout and "3 of 3 steps (100%) done" in done.stdout

    args = argv.read_text().splitlines()
    assert args[args.index("--workflow-profile") + 1] == "profiles/gpu"
    assert args[args.index("--resources") + 1] == "gpu_mem_mb=1000"
    assert args[-4:-1] == ["results/joma/evidence/fig_joma_4.json", "--configfile", "config/paper.yaml"]
    assert args[-1] == "FEATLEARN_COMMIT=0123abcd FEATLEARN_OFFLINE=1"

    session = _members(out / "dag_session.tar.gz")
    assert {"results/run.json", "results/joma/claims/4.csv", "results/logs/joma/fig4.log",
            "results/dag_session_snakemake.log"} <= session
    assert "results/figures/joma/fig4.png" not in session  # figures only with DAG_FIGURES=1

    results = _members(out / "dag_results.tar.gz")
    assert {"results/run.json", "results/joma/fig4_runs.csv", "results/figures/joma/fig4.png"} <= results
    left = sorted(n for n in results if "/data/" in n or ".resume" in n or n.endswith(".pt"))
    assert left == [], f"kept checkpoints or prepared data in the returned results: {left}"


def test_the_device_sessions_estimate_options_exist():
    """benchmarks/device_session.sh runs the estimate in steps a lent machine gives minutes to: an option the command
    does not know (a typo, a renamed flag) would lose a step there. Every option the script passes to it (its
    ESTIMATE, PAPER, GRAPHS and SCALE arrays and the lines that use them) is one of the command's."""
    import argparse
    import re

    from featlearn.pipeline import estimate

    text = (REPO / "benchmarks" / "device_session.sh").read_text()
    lines = [m.replace("\n", " ") for m in re.findall(r"^\s*(?:ESTIMATE|PAPER|GRAPHS|SCALE)=\((.*?)\)", text,
                                                        flags=re.S | re.M)]
    lines += [ln for ln in text.replace("\\\n", " ").splitlines() if '"${ESTIMATE[@]}"' in ln]
    used = {opt for ln in lines for opt in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", ln.split("#")[0])}
    assert {"--probe-budget", "--max-probes-per-job", "--assume-online", "--no-probe", "--resources-out",
            "--scale-from"} <= used
    parser = argparse.ArgumentParser()
    estimate.register(parser.add_subparsers())
    known = {s for a in parser._subparsers._group_actions[0].choices["estimate"]._actions for s in a.option_strings}
    assert used - known == set()
