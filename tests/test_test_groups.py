"""The suite's own scheduling: under ``make test`` (pytest-xdist with ``--dist loadgroup``) every test carries the
group tests/conftest.py gives it (its module, or ``smoke_run`` for the tests of the shared smoke run), so a module's
fixtures and the smoke run are each made by one worker only."""

from __future__ import annotations

import pytest


def test_every_test_is_in_its_group(request):
    if not getattr(request.config.option, "loadgroup", False):  # set in the workers of --dist loadgroup only
        pytest.skip("not run by pytest-xdist with --dist loadgroup")
    wrong = []
    for item in request.session.items:
        module = item.path.relative_to(request.config.rootpath).as_posix()
        group = "smoke_run" if "smoke_run" in item.fixturenames else module
        if not item.nodeid.endswith(f"@{group}"):
            wrong.append(item.nodeid)
    # the group is read into each test id by xdist; a test id without it is sent to any worker (pytest 9.2 keeps the
    # id apart from what xdist 3.8 rewrites, and without conftest's hook first no group is read at all)
    assert not wrong, f"{len(wrong)} tests without their group, e.g. {wrong[:3]}"


def test_the_slow_groups_go_first_in_their_order_each_in_one_run(request):
    """conftest's SLOW_GROUPS lead the collection, in their order and each in one run (xdist hands the groups out in
    that order under ``make test``), ahead of every other test."""
    from conftest import SLOW_GROUPS, xdist_group_of

    items = request.session.items
    if len(items) < 2 or not any(xdist_group_of(i) != "smoke_run" and xdist_group_of(i) in SLOW_GROUPS for i in items):
        pytest.skip("run with the whole suite")
    order = [xdist_group_of(i) for i in items]
    first = {group: order.index(group) for group in SLOW_GROUPS if group in order}
    assert list(first) == sorted(first, key=first.get), "the slow groups are not in SLOW_GROUPS' order"
    rest = [i for i, g in enumerate(order) if g not in SLOW_GROUPS]
    assert not rest or max(i for i, g in enumerate(order) if g in SLOW_GROUPS) < min(rest)
    # a slow group is one run of tests, not split by the others
    for group in first:
        at = [i for i, g in enumerate(order) if g == group]
        assert at == list(range(at[0], at[0] + len(at))), group
