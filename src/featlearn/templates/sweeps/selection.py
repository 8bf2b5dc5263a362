"""Reading a sweep's runs table: the learning rate kept per curve and n*_tau (pandas only, no torch, so that
figure jobs start quickly)."""

from __future__ import annotations

import math

import pandas as pd


def select_lr(runs: pd.DataFrame, per: tuple[str, ...] = ("task", "arch", "variant"), by: str = "val_loss") -> pd.DataFrame:
    """Learning-rate selection per curve [P App. A]: for each group of ``per`` keep the rows of the lr whose
    mean ``by`` (validation loss, on its own alphabet) over every n and seed is lowest."""
    means = runs.groupby(list(per) + ["lr"], dropna=False)[by].mean().reset_index()
    best = means.loc[means.groupby(list(per), dropna=False)[by].idxmin(), list(per) + ["lr"]]
    return runs.merge(best, on=list(per) + ["lr"], how="inner")


def n_star(runs: pd.DataFrame, tau: float, metric: str = "test_metric") -> float:
    """Smallest n whose seed-mean ``metric`` is <= tau (inf when none is): n*_τ of the claims."""
    means = runs.groupby("n")[metric].mean().sort_index()
    hit = means[means <= tau]
    return float(hit.index[0]) if len(hit) else math.inf
