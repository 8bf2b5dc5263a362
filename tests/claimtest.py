"""Planted tests of claims: data built so that a claim must pass, or must fail.

Every declared claim id of a paper whose registry declares its claims has at least one
``assert_passes`` and one ``assert_fails`` call naming it, with the paper and the ids as string literals
(tests/test_claim_coverage.py reads the test files to check that).
"""

from __future__ import annotations


def _by_id(paper: str, claims, ids) -> dict:
    found = {c.claim_id: c for c in claims}
    for cid in ids:
        assert cid in found, f"{paper} claim {cid} was not written (got {sorted(found)})"
        assert found[cid].paper == paper
    return found


def assert_passes(paper: str, claims, *ids: str) -> None:
    """Each claim ``ids`` of ``claims`` passes its comparison."""
    found = _by_id(paper, claims, ids)
    failing = {cid: (found[cid].measured, found[cid].target) for cid in ids if not found[cid].passed}
    assert not failing, f"{paper}: planted data should pass {failing}"


def assert_fails(paper: str, claims, *ids: str) -> None:
    """Each claim ``ids`` of ``claims`` fails its comparison."""
    found = _by_id(paper, claims, ids)
    passing = {cid: (found[cid].measured, found[cid].target) for cid in ids if found[cid].passed}
    assert not passing, f"{paper}: planted data should fail {passing}"
