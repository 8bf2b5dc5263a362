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


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Groups for pytest-xdist's ``--dist loadgroup`` (``make test`` runs the tests on every core): the tests of one
    module run in one worker, so a module's fixtures (a workflow run) are made once; every test of the shared smoke run
    (fixture ``smoke_run``) runs in one worker too, so the whole pipeline runs once, as without xdist. First among the
    hooks: xdist's own, which reads the groups into the test ids, runs after it (otherwise no group is ever seen and
    every worker makes the smoke run again)."""
    for item in items:
        group = "smoke_run" if "smoke_run" in getattr(item, "fixturenames", ()) else item.nodeid.split("::", 1)[0]
        item.add_marker(pytest.mark.xdist_group(group))
