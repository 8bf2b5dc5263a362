"""The templates_checks job (claims 1-2): its own module, so that the sweep jobs' code hash (the import closure
of ``experiments``) does not take in the figure module that judges these claims."""

from __future__ import annotations

from featlearn.io import write_csv
from featlearn.templates.sweeps.experiments import data_and_identity_checks


def checks(settings: dict, inputs: dict, outputs: dict, ctx) -> None:
    """Compute job ``templates_checks``: the table of claims 1-2's measurements (``outputs["table"]``) and
    the claims themselves (``outputs["claims"]``, at ``settings["scale"]``)."""
    import pandas as pd

    from featlearn.pipeline.claims import write_claims
    from featlearn.templates.sweeps.figures import check_claims

    rows = pd.DataFrame(data_and_identity_checks())
    write_csv(rows, outputs["table"])
    claims = check_claims(rows, settings["scale"])
    write_claims(outputs["claims"], claims)
    print(f"templates checks: {sum(c.passed for c in claims)}/{len(claims)} claims pass")
