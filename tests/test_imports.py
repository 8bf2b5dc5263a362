"""Code hashes from the import closure (issue 35): editing any featlearn module a job may import changes its
hash, editing a module it cannot import does not; the walk follows relative imports, imports inside
functions and the packages on the way."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from featlearn.pipeline.imports import closure, entry_module, files, modules_hash

SRC = Path(__file__).resolve().parents[1] / "src" / "featlearn"


@pytest.fixture
def package(tmp_path):
    root = tmp_path / "featlearn"
    shutil.copytree(SRC, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _edit(path: Path) -> None:
    path.write_text(path.read_text() + "\n# edited\n")


def test_the_sweep_hash_follows_the_grid_table_it_reads(package):
    """The reviewer's case: the sweep engine read GRID_AXIS from templates/registry.py, which no hand-written
    list named (it now reads its grid's record in templates/sweeps/grids.py); any module of its closure changes
    the hash."""
    entries = (entry_module("featlearn.templates.sweeps.experiments:sweep"), "featlearn.pipeline.compute")
    got = files(entries, package)
    for needed in ("templates/sweeps/grids.py", "io.py", "pipeline/compute.py", "devices.py", "templates/sweeps/engine.py",
                   "templates/__init__.py", "seeding.py"):
        assert needed in got, needed
    before = modules_hash(entries, root=package)
    for rel in got:
        _edit(package / rel)
        after = modules_hash(entries, root=package)
        assert after != before, rel
        before = after


def test_an_unrelated_papers_module_leaves_the_hash_alone(package):
    entries = ("featlearn.templates.sweeps.experiments", "featlearn.pipeline.compute")
    before = modules_hash(entries, root=package)
    got = set(files(entries, package))
    for rel in ("scan_snap/figures.py", "features/figures.py", "joma/figures.py", "pipeline/scorecard.py", "pipeline/pages.py"):
        assert rel not in got
        _edit(package / rel)
    assert modules_hash(entries, root=package) == before


def test_every_registry_jobs_closure_holds_its_run_module_and_the_compute_command():
    from featlearn.pipeline.registry import Paths
    from featlearn.pipeline.workflow import scale_config

    import importlib

    config = scale_config("default", SRC.parents[1] / "config")
    for paper in ("features", "scan_snap", "joma", "templates"):
        reg = importlib.import_module(f"featlearn.{paper}.registry").registry(config, Paths("results"), lambda n: True)
        for job in reg.jobs:
            module = entry_module(job.run)
            got = set(files((module, "featlearn.pipeline.compute")))
            run_file = module.split(".", 1)[1].replace(".", "/") + ".py"
            assert {run_file, "pipeline/compute.py", f"{paper}/__init__.py"} <= got, job.name


def test_no_compute_job_reruns_when_the_estimate_or_the_dag_code_changes():
    """A job's code hash holds what it runs: no compute job imports the estimate (the sweep engine's pool shares only
    its order, featlearn.pipeline.order) and no training job the workflow's DAG code, so an edit of either does not
    rerun the trainings (before 2026-12-04 every templates sweep did)."""
    import importlib

    from featlearn.pipeline.registry import Paths
    from featlearn.pipeline.workflow import scale_config

    config = scale_config("default", SRC.parents[1] / "config")
    checked = []
    for paper in ("features", "scan_snap", "joma", "templates"):
        reg = importlib.import_module(f"featlearn.{paper}.registry").registry(config, Paths("results"), lambda n: True)
        for job in reg.jobs:
            got = set(closure((entry_module(job.run), "featlearn.pipeline.compute")))
            assert "featlearn.pipeline.estimate" not in got, job.name
            if job.name != "templates_checks":  # its checks read the registry's claim ids, and so its checkpoint list
                assert "featlearn.pipeline.workflow" not in got, job.name
            checked.append(job.name)
    assert "templates_sweep" in checked


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


def test_an_import_in_any_nested_block_counts_and_an_edit_is_seen(tmp_path):
    """The import walk visits statement blocks only (an expression holds no import): every kind of block that
    nests statements is planted here, each importing a module of its own. A file parsed once is parsed again
    after an edit (its size and modification time key the parse)."""
    import os

    root = tmp_path / "featlearn"
    root.mkdir()
    (root / "__init__.py").write_text("")
    blocks = {
        "m_def": "def f():\n    import featlearn.m_def\n",
        "m_async": "async def f():\n    async with x:\n        from featlearn import m_async\n",
        "m_class": "class A:\n    def g(self):\n        if x:\n            pass\n"
                   "        else:\n            import featlearn.m_class\n",
        "m_try": "try:\n    pass\nexcept ImportError:\n    import featlearn.m_try\n",
        "m_finally": "try:\n    pass\nfinally:\n    import featlearn.m_finally\n",
        "m_tryelse": "try:\n    pass\nexcept Exception:\n    pass\nelse:\n    import featlearn.m_tryelse\n",
        "m_for": "for i in x:\n    pass\nelse:\n    import featlearn.m_for\n",
        "m_while": "while x:\n    with y:\n        import featlearn.m_while\n",
        "m_match": "match x:\n    case 1:\n        import featlearn.m_match\n",
        "m_lambda": "f = lambda: __import__('featlearn.m_none')\ns = 'import featlearn.m_none'\n",
    }
    for name in [*blocks, "m_none"]:
        (root / f"{name}.py").write_text("")
    entry = root / "entry.py"
    entry.write_text("".join(blocks.values()))
    found = closure(["featlearn.entry"], root)
    assert found == sorted(["featlearn", "featlearn.entry", *(f"featlearn.{n}" for n in blocks if n != "m_lambda")])
    # the same file edited (a new import, the same modification time as before): the next closure sees it
    stat = entry.stat()
    entry.write_text(entry.read_text() + "import featlearn.m_none\n")
    os.utime(entry, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert "featlearn.m_none" in closure(["featlearn.entry"], root)


# ------------------------------------------------------------------------------ the package's layers (issue 36)
# Lowest first. A module may import its own layer and those below; papers sit above the pipeline machinery,
# which sits above the base modules. The estimate's core is pipeline machinery; each paper's cost models sit
# in its own package and are named by its job records, never imported by the pipeline. The command that spans
# the papers (the LM benchmark) sits on top; the command line reaches every command through importlib.
LAYERS = {
    "base": ("featlearn", "io", "seeding", "devices", "precision", "plotting", "training", "keptwork", "allocator", "hf",
             "data", "lm", "nulls", "cudagraphs"),
    "pipeline": ("pipeline",),
    "papers": ("features", "joma", "scan_snap", "templates"),
    "commands": ("lm_bench", "__main__"),
}


def _layer(module: str) -> int:
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else "featlearn"
    for rank, names in enumerate(LAYERS.values()):
        if top in names:
            return rank
    raise AssertionError(f"{module} is in no layer of tests/test_imports.py: place it")


def test_the_package_has_no_import_circles():
    from featlearn.pipeline.imports import cycles, graph

    assert cycles(graph()) == []


def test_no_module_imports_a_layer_above_its_own():
    from featlearn.pipeline.imports import graph

    upward = [f"{m} -> {d}" for m, deps in graph().items() for d in sorted(deps) if _layer(d) > _layer(m)]
    assert upward == []


def test_the_circle_and_layer_checks_can_fail(tmp_path):
    """A planted circle and a planted upward import are found."""
    from featlearn.pipeline.imports import cycles, graph

    root = tmp_path / "featlearn"
    (root / "joma").mkdir(parents=True)
    (root / "pipeline").mkdir()
    (root / "pipeline" / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "io.py").write_text("from featlearn.pipeline import claims\n")
    (root / "pipeline" / "claims.py").write_text("def f():\n    import featlearn.io\n")
    (root / "joma" / "__init__.py").write_text("")
    (root / "pipeline" / "registry.py").write_text("from featlearn.joma import x\n")
    (root / "joma" / "x.py").write_text("")
    edges = graph(root)
    assert cycles(edges) == [["featlearn.io", "featlearn.pipeline.claims"]]
    assert sorted(f"{m} -> {d}" for m, deps in edges.items() for d in deps if _layer(d) > _layer(m)) == [
        "featlearn.io -> featlearn.pipeline", "featlearn.io -> featlearn.pipeline.claims",
        "featlearn.pipeline.registry -> featlearn.joma", "featlearn.pipeline.registry -> featlearn.joma.x"]


_DRY_RUN = """
import sys
import snakemake.cli
try:
    snakemake.cli.main(sys.argv[1:])
except SystemExit as exc:
    if exc.code:
        raise
print("IMPORTED", " ".join(sorted(m for m in ("torch", "transformers", "matplotlib", "seaborn") if m in sys.modules)))
"""


@pytest.mark.parametrize("configfile", ["config/config.yaml", "config/paper.yaml"])
def test_building_the_dag_imports_no_torch(configfile, tmp_path):
    """The registries promise the standard library only: a dry run of the whole DAG, in one process, leaves
    torch (and the plotting and model libraries) unimported."""
    import os
    import subprocess
    import sys

    from wfutil import copy_workflow

    work = copy_workflow(tmp_path / "wf")
    env = {k: v for k, v in os.environ.items() if not k.startswith("FEATLEARN_")}
    env.update(FEATLEARN_OFFLINE="1", FEATLEARN_DATA_MIRROR=str(tmp_path / "no-mirror"))
    out = subprocess.run([sys.executable, "-c", _DRY_RUN, "-n", "--quiet", "rules", "--cores", "2",
                          "--configfile", configfile], cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("IMPORTED"))
    assert line.split()[1:] == []
