"""Code hashes from the import closure (issue 35): editing any featlearn module a job may import changes its
hash, editing a module it cannot import does not; the walk follows relative imports, imports inside
functions and the packages on the way."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from featlearn.imports import closure, entry_module, files, modules_hash

SRC = Path(__file__).resolve().parents[1] / "src" / "featlearn"


@pytest.fixture
def package(tmp_path):
    root = tmp_path / "featlearn"
    shutil.copytree(SRC, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _edit(path: Path) -> None:
    path.write_text(path.read_text() + "\n# edited\n")


def test_the_sweep_hash_follows_the_grid_table_it_reads(package):
    """The reviewer's case: the sweep engine reads GRID_AXIS from templates/registry.py, which no hand-written
    list named; any module of its closure now changes the hash."""
    entries = (entry_module("featlearn.templates.sweeps.experiments:sweep"), "featlearn.compute")
    got = files(entries, package)
    for needed in ("templates/registry.py", "io.py", "compute.py", "devices.py", "templates/sweeps/engine.py",
                   "templates/__init__.py", "seeding.py"):
        assert needed in got, needed
    before = modules_hash(entries, root=package)
    for rel in got:
        _edit(package / rel)
        after = modules_hash(entries, root=package)
        assert after != before, rel
        before = after


def test_an_unrelated_papers_module_leaves_the_hash_alone(package):
    entries = ("featlearn.templates.sweeps.experiments", "featlearn.compute")
    before = modules_hash(entries, root=package)
    got = set(files(entries, package))
    for rel in ("scan_snap/figures.py", "features/figures.py", "joma/figures.py", "scorecard.py", "pages.py"):
        assert rel not in got
        _edit(package / rel)
    assert modules_hash(entries, root=package) == before


def test_every_registry_jobs_closure_holds_its_run_module_and_the_compute_command():
    from featlearn.registry import Paths
    from featlearn.workflow import scale_config

    import importlib

    config = scale_config("default", SRC.parents[1] / "config")
    for paper in ("features", "scan_snap", "joma", "templates"):
        reg = importlib.import_module(f"featlearn.{paper}.registry").registry(config, Paths("results"), lambda n: True)
        for job in reg.jobs:
            module = entry_module(job.run)
            got = set(files((module, "featlearn.compute")))
            run_file = module.split(".", 1)[1].replace(".", "/") + ".py"
            assert {run_file, "compute.py", f"{paper}/__init__.py"} <= got, job.name


def test_relative_imports_and_imports_in_functions_count(tmp_path):
    root = tmp_path / "featlearn"
    (root / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "sub" / "__init__.py").write_text("")
    (root / "sub" / "a.py").write_text("from . import b\nfrom .c import thing\n")
    (root / "sub" / "b.py").write_text("def f():\n    import featlearn.d\n")
    (root / "sub" / "c.py").write_text("thing = 1\n")
    (root / "d.py").write_text("import os\n")
    (root / "e.py").write_text("")
    assert closure(["featlearn.sub.a"], root) == ["featlearn", "featlearn.d", "featlearn.sub", "featlearn.sub.a",
                                                  "featlearn.sub.b", "featlearn.sub.c"]
    with pytest.raises(ValueError, match="not a module"):
        closure(["featlearn.nothing"], root)
