"""The order a pool of workers takes its tasks in: the templates sweep engine's group pool runs its groups in it, and
the estimate (``featlearn.pipeline.estimate``) schedules a job's groups in it. A module of its own, with nothing
imported, so that the sweeps' code hash (their import closure) holds this rule and not the estimate's whole code."""

from __future__ import annotations


def work_order(items: list[tuple[float | None, object]]) -> list[tuple[float | None, object]]:
    """(work, item) pairs in the order a pool of workers takes them: the largest work first (a work of None counts as
    0), ties in their listed order (``featlearn.templates.sweeps.engine.GroupQueue``)."""
    return sorted(items, key=lambda pair: -(pair[0] or 0.0))
