"""Dependencies are declared where they are imported, and the shipped constraints (the versions the results
were produced with) lie inside the declared ranges."""

from __future__ import annotations

import ast
import re
import sys
import pytest
from packaging.requirements import Requirement

from wfutil import REPO

# import name -> distribution name, where they differ
DIST = {"yaml": "pyyaml", "markdown_it": "markdown-it-py", "sklearn": "scikit-learn"}


def _declared() -> dict[str, Requirement]:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    return {r.name.lower().replace("_", "-"): r for r in reqs}


def _third_party_imports() -> set[str]:
    names = set()
    for path in (REPO / "src" / "featlearn").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n not in ("featlearn", "__future__")}


def test_every_imported_package_is_declared():
    declared = _declared()
    missing = sorted(n for n in _third_party_imports() if DIST.get(n, n).lower().replace("_", "-") not in declared)
    assert missing == [], f"imported by src/featlearn but not in pyproject.toml dependencies: {missing}"


def _pins(path) -> dict[str, str]:
    """``name==version`` lines of a pip constraints file: normalised name -> version."""
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[name.lower().replace("_", "-")] = version
    return pins


def test_constraints_pin_every_dependency_inside_its_range():
    pins = _pins(REPO / "envs" / "constraints.txt")
    for name, req in _declared().items():
        assert name in pins, f"envs/constraints.txt does not pin {name}"
        assert req.specifier.contains(pins[name], prereleases=True), f"{name}=={pins[name]} is outside {req.specifier}"


def test_conda_environment_lists_the_same_packages():
    text = (REPO / "envs" / "featlearn.yaml").read_text()
    listed = {m.lower().replace("_", "-") for m in re.findall(r"^\s+- ([A-Za-z][A-Za-z0-9_.\-]*)", text, re.M)}
    listed |= {"torch"} if "pytorch" in listed else set()
    listed |= {"matplotlib"} if "matplotlib-base" in listed else set()
    listed |= {"seaborn"} if "seaborn-base" in listed else set()
    # the rules' environment runs jobs, not Snakemake itself
    missing = sorted(n for n in _declared() if n not in listed and not n.startswith("snakemake"))
    assert missing == [], f"envs/featlearn.yaml lacks {missing}"


def test_floors_file_is_the_floors_of_pyproject():
    floors = _pins(REPO / "envs" / "floors.txt")
    for name, req in _declared().items():
        lowest = [s.version for s in req.specifier if s.operator == ">="]
        assert lowest, f"{name} has no floor in pyproject.toml"
        assert floors.get(name) == lowest[0], f"envs/floors.txt: {name}=={floors.get(name)}, pyproject.toml: >={lowest[0]}"
