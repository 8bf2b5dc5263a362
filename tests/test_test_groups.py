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
