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

from featlearn import PAPERS

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
# Every paper's registry declares its claims (docs/claims.md).
DECLARED = PAPERS


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
    from featlearn.pipeline.registry import Paths

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
    """Every figure with claims (hand-written rules included) declares exactly the registry's CLAIM_IDS entry.
    Figures this run leaves out (e.g. public checkpoints offline) need their entry all the same."""
    module, reg = _registry(paper)
    figures = getattr(reg, "declared", reg.figures)
    # tables are keyed "table<n>": a paper may have a Table 3 and a Fig. 3
    with_claims = {fig.stem if fig.kind == "table" else fig.id: fig.claim_ids for fig in figures if fig.claims}
    assert with_claims and all(with_claims[f] == tuple(module.CLAIM_IDS[f]) for f in with_claims)
    assert set(with_claims) <= set(module.CLAIM_IDS)


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


def test_the_figure_command_refuses_an_undeclared_claim():
    from featlearn.pipeline.claims import check
    from featlearn.pipeline.figure import check_declared

    claims = [check("scan_snap", "wiki_freeze_1layer", "", "", "", 0.1, "<", 0.25, "test")]
    check_declared(claims, ["wiki_freeze_*", "wiki_entropy_lr"])  # a declared claim may be missing
    check_declared(claims, [])  # nothing declared: not checked
    with pytest.raises(ValueError, match="not declared"):
        check_declared(claims, ["wiki_entropy_lr"])
