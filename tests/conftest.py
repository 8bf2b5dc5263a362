"""Shared test fixtures: the repository root, the real-data mirror (skipped when absent)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

# Real copies of the datasets for development and CI: FEATLEARN_DATA_MIRROR, else ../shared/data
# beside the repository when it exists.
_DEFAULT_MIRROR = REPO.parent / "shared" / "data"


def shared_data_dir() -> Path | None:
    value = os.environ.get("FEATLEARN_DATA_MIRROR")
    path = Path(value) if value else _DEFAULT_MIRROR
    return path.resolve() if (path / "MANIFEST.tsv").is_file() or (path / "sst").is_dir() else None


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def benchmark_script():
    """A loader of the scripts of benchmarks/ as modules: ``benchmark_script("scorecard_compare")``."""
    import importlib.util

    def load(name: str):
        spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load


SHARED_DATA = shared_data_dir()  # read once, before any test changes the environment


@pytest.fixture(scope="session")
def shared_data() -> Path:
    path = SHARED_DATA
    if path is None:
        pytest.skip("real data mirror not found (set FEATLEARN_DATA_MIRROR or provide ../shared/data)")
    return path


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch):
    """Tests decide mirror and offline mode themselves."""
    monkeypatch.delenv("FEATLEARN_OFFLINE", raising=False)
    monkeypatch.delenv("FEATLEARN_DATA_MIRROR", raising=False)


@pytest.fixture(scope="module")
def one_thread():
    """Tiny tensors: one torch thread, since thread start-up and contention cost more than the work."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def interrupt_after(monkeypatch):
    """``interrupt_after(owner, name, n)``: ``owner.name`` works ``n`` times, then raises KeyboardInterrupt (a job killed
    in the middle of its training); returns a function that puts the real one back, for the rerun."""

    def patch(owner, name: str, n: int):
        real, calls = getattr(owner, name), []

        def interrupted(*args, **kwargs):
            calls.append(1)
            if len(calls) > n:
                raise KeyboardInterrupt
            return real(*args, **kwargs)

        monkeypatch.setattr(owner, name, interrupted)
        return lambda: monkeypatch.setattr(owner, name, real)

    return patch


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory, shared_data):
    """One smoke run of the whole default target, offline, with the real-data mirror, shared by every
    workflow test module (tests/test_workflow*.py) that inspects its outputs: (workdir, env, result)."""
    from wfutil import SMOKE, check_ok, copy_workflow, snakemake

    work = copy_workflow(tmp_path_factory.mktemp("smoke") / "wf")
    env = {"FEATLEARN_DATA_MIRROR": str(shared_data), "FEATLEARN_OFFLINE": "1"}
    result = check_ok(snakemake(work, *SMOKE, env=env, timeout=1800))  # the whole pipeline: generous on loaded machines
    return work, env, result


# The groups that take longest, longest first (serial seconds on a 2-core CPU on 2026-12-04: the smoke run's tests 313,
# test_faults 178, test_estimate 135, test_workflow_hygiene 83, test_jobserver 66, test_workflow 58, the sweep tests
# 50; the other 61 groups 25 or less). pytest-xdist hands the groups to its workers in the order of the collection
# (``make test`` passes --no-loadscope-reorder; by default it orders them by their number of tests, which sent the 4
# fault tests of 3 minutes out last and left the other worker idle behind them): the long ones start first and the
# short ones fill in.
SLOW_GROUPS = ("smoke_run", "tests/test_faults.py", "tests/test_estimate.py", "tests/test_workflow_hygiene.py",
               "tests/test_jobserver.py", "tests/test_workflow.py", "tests/templates/test_templates_sweeps.py")


def xdist_group_of(item) -> str:
    """The xdist group of a collected test: ``smoke_run`` for the tests of the shared smoke run, else its module."""
    return "smoke_run" if "smoke_run" in getattr(item, "fixturenames", ()) else item.nodeid.split("::", 1)[0]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Groups for pytest-xdist's ``--dist loadgroup`` (``make test`` runs the tests on every core): the tests of one
    module run in one worker, so a module's fixtures (a workflow run) are made once; every test of the shared smoke run
    (fixture ``smoke_run``) runs in one worker too, so the whole pipeline runs once, as without xdist. The slow groups
    go first (``SLOW_GROUPS``), the rest keep their order. First among the hooks: xdist's own, which reads the groups
    into the test ids, runs after it (otherwise no group is ever seen and every worker makes the smoke run again)."""
    rank = {group: i for i, group in enumerate(SLOW_GROUPS)}
    groups = {id(item): xdist_group_of(item) for item in items}
    items.sort(key=lambda item: rank.get(groups[id(item)], len(SLOW_GROUPS)))  # stable: the rest in collection order
    for item in items:
        item.add_marker(pytest.mark.xdist_group(groups[id(item)]))
