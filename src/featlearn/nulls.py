"""Null draws for claims about an ordering or a difference between conditions.

An untrained network is a poor null for such claims: its curves do not depend on the condition (learning rate,
ratio of learning rates), so a difference measured on it is 0 by construction and can never pass. The null here is
the claim's own statistic on the trained runs with the condition's labels shuffled among the runs of each block
(each seed, each cell of the other factors): if the condition had no effect, every such relabelling would be as
likely as the real one. The fraction of shuffles that pass the claim's comparison is the baseline's pass rate
(:func:`featlearn.pipeline.claims.check` with a sequence of draws). With few runs per block there are few distinct
shuffles, and the rate cannot fall below one over their number: the row then shows that its seeds cannot
discriminate.
"""

from __future__ import annotations

from typing import Callable, Iterator, Sequence

import numpy as np
import pandas as pd

# Shuffles per null; with the smallest pass rate 1/DRAWS far below the 5% a baseline may pass.
DRAWS = 200
SHUFFLED = "shuffled {label} within each {blocks}"


def shuffled_labels(df: pd.DataFrame, label: str, blocks: Sequence[str], draws: int = DRAWS,
                    seed: int = 0) -> Iterator[pd.DataFrame]:
    """``draws`` copies of ``df``, one at a time, whose column ``label`` is relabelled within each group of
    ``blocks`` by a random permutation of that group's distinct labels: every row of one run keeps one label (a
    run's whole history moves together), and a table with one row per condition and block is simply shuffled.
    Seeded: the draws are the same on every run."""
    if label in blocks:
        raise ValueError(f"the shuffled column {label!r} cannot also define the blocks")
    rng = np.random.default_rng(seed)
    flat = df.reset_index(drop=True)
    groups = list(flat.groupby(list(blocks), sort=True).indices.values()) if blocks else [np.arange(len(flat))]
    values = flat[label].to_numpy()
    # per block: its distinct labels and, for each row, the position of its label among them
    parts = []
    for idx in groups:
        idx = np.asarray(idx)
        distinct, code = np.unique(values[idx], return_inverse=True)
        parts.append((idx, distinct, code))

    def copies():  # one copy alive at a time: a long training history times 200 draws would not fit
        for _ in range(draws):
            shuffled = values.copy()
            for idx, distinct, code in parts:
                shuffled[idx] = distinct[rng.permutation(len(distinct))][code]
            yield df.assign(**{label: shuffled})

    return copies()


def shuffle_null(df: pd.DataFrame, label: str, blocks: Sequence[str], statistic: Callable[[pd.DataFrame], float],
                 draws: int = DRAWS, seed: int = 0) -> list[float]:
    """The claim's ``statistic`` on each of :func:`shuffled_labels`' draws."""
    return [float(statistic(d)) for d in shuffled_labels(df, label, blocks, draws, seed)]


def sign_flips(values: Sequence[float], statistic: Callable[[np.ndarray], float], draws: int = DRAWS,
               seed: int = 0) -> list[float]:
    """The claim's ``statistic`` on ``draws`` copies of paired differences ``values`` (one per token, say) with each
    sign flipped at random: the null that the two sides of every pair are exchangeable, so that a difference is as
    likely positive as negative. Seeded."""
    rng = np.random.default_rng(seed)
    v = np.asarray(values, dtype=float)
    return [float(statistic(v * rng.choice((-1.0, 1.0), size=len(v)))) for _ in range(draws)]
