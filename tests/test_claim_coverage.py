"""Every declared claim can fail and can pass: each has a planted-negative and a planted-positive test.

A paper declares its claims in its registry (``CLAIM_IDS``: figure id -> claim ids or patterns); the tests
call ``assert_fails`` / ``assert_passes`` (tests/claimtest.py) with the paper and claim ids as literals,
which this module reads from the test sources.
"""

from __future__ import annotations

import ast
import importlib
from collections import defaultdict
from fnmatch import fnmatchcase
from pathlib import Path

import pytest
import yaml

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
# Papers whose registry declares its claims. The others still write undeclared claims (see the
# honest-verdicts work in progress, README "Scorecard").
DECLARED = ("scan_snap",)


def planted_calls(root: Path = TESTS) -> dict[str, dict[str, set[str]]]:
    """{"assert_fails" | "assert_passes": {paper: claim ids}} from every test file under ``root``."""
    found: dict[str, dict[str, set[str]]] = {"assert_fails": defaultdict(set), "assert_passes": defaultdict(set)}
    for path in root.rglob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in found:
                args = node.args
                if args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
                    ids = {a.value for a in args[2:] if isinstance(a, ast.Constant) and isinstance(a.value, str)}
                    found[node.func.id][args[0].value] |= ids
    return found


def _registry(paper: str):
    from featlearn.registry import Paths

    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    module = importlib.import_module(f"featlearn.{paper}.registry")
    return module, module.registry(config, Paths("results"), lambda name: True)


@pytest.mark.parametrize("paper", DECLARED)
def test_every_declared_claim_has_a_planted_negative_and_positive_test(paper):
    module, _ = _registry(paper)
    calls = planted_calls()
    missing = {}
    for fig, ids in module.CLAIM_IDS.items():
        for pattern in ids:
            for fn in ("assert_fails", "assert_passes"):
                if not any(fnmatchcase(cid, pattern) for cid in calls[fn][paper]):
                    missing.setdefault(f"{fig}/{pattern}", []).append(fn)
    assert not missing, f"{paper}: claims without a planted test: {missing}"


@pytest.mark.parametrize("paper", DECLARED)
def test_every_figure_with_claims_declares_them(paper):
    module, reg = _registry(paper)
    with_claims = {fig.id: fig.claim_ids for fig in reg.figures if fig.claims}
    assert with_claims == {fig: tuple(ids) for fig, ids in module.CLAIM_IDS.items()}


def test_the_reader_finds_literal_ids_only(tmp_path):
    (tmp_path / "test_x.py").write_text(
        "def test_a(c):\n"
        "    assert_passes('scan_snap', c, '4a', '4b')\n"
        "    assert_fails('scan_snap', c, '4a')\n"
        "    assert_fails('joma', c, name)\n"  # not a literal: not counted
    )
    calls = planted_calls(tmp_path)
    assert calls["assert_passes"]["scan_snap"] == {"4a", "4b"}
    assert calls["assert_fails"]["scan_snap"] == {"4a"} and calls["assert_fails"]["joma"] == set()
