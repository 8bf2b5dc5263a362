"""Compute side of the classification experiments: the training jobs (the extraction job is
:func:`featlearn.features.extract.extract_job`, the theory simulator :mod:`featlearn.features.simulate`).

- :func:`train_job` (registry job ``features_train``) trains every run of one (dataset, model, optimiser)
  at once (all activations, sigma_v and seeds of the job in one batched model, :mod:`featlearn.features.train`)
  and writes the tidy score, metric and summary tables. The probes (units whose label scores are logged
  every epoch) come from the extraction table.
Every function is deterministic given its settings (seeds inside).
"""

from __future__ import annotations

import random
import sys
from itertools import product

import pandas as pd

from featlearn.features import extract as X

PROBES = ("none", "tokens", "negation", "bigrams", "positions")


def _log(msg: str) -> None:
    print(f"[features] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------- datasets
def subsample(rows: list, n: int, seed: int) -> list:
    """``n`` rows drawn without replacement by a seeded generator, in their original order (all if n <= 0)."""
    if n <= 0 or n >= len(rows):
        return rows
    keep = sorted(random.Random(seed).sample(range(len(rows)), n))
    return [rows[i] for i in keep]


def synthetic_splits(cfg: dict) -> dict[str, list[tuple[int, str]]]:
    """[D] L-RNN position data (Fig. 12): train/dev/test drawn with different seeds."""
    kw = {k: cfg[k] for k in ("n_markers", "n_fillers", "min_len", "max_len", "distance")}
    return {
        "train": X.synthetic_position_rows(cfg["n_per_class"], seed=cfg["seed"], **kw),
        "dev": X.synthetic_position_rows(cfg["n_eval_per_class"], seed=cfg["seed"] + 1, **kw),
        "test": X.synthetic_position_rows(cfg["n_eval_per_class"], seed=cfg["seed"] + 2, **kw),
    }


def load_splits(cfg: dict, inputs: dict) -> tuple[dict[str, list[tuple[int, str]]], list[str]]:
    """Rows of the splits among ``inputs`` (prepared ``train``/``dev``/``test`` TSVs; train subsampled to
    ``max_train``, dev/test to ``max_eval``) and the vocabulary (``inputs["vocab"]``). The synthetic dataset
    builds its splits and vocabulary itself."""
    if cfg["dataset"] == "synthetic":
        rows = synthetic_splits(cfg["synthetic"])
        words = sorted({t for r in rows.values() for _, text in r for t in text.split()})
        return rows, ["<pad>", "unk"] + words
    from featlearn.data.prepare import read_classification, read_vocab

    vocab = read_vocab(inputs["vocab"])
    rows = {s: read_classification(inputs[s]) for s in ("train", "dev", "test") if s in inputs}
    seed = cfg["subsample_seed"]
    rows["train"] = subsample(rows["train"], cfg["max_train"], seed)
    for s in ("dev", "test"):
        if s in rows:
            rows[s] = subsample(rows[s], cfg["max_eval"], seed + 1)
    return rows, vocab


# ----------------------------------------------------------------------------------------------- probes
def negation_units(extracted: pd.DataFrame) -> dict[str, list[str]]:
    """Inputs scored for the negation figures (6, 8, 9): every adjective alone and after "not", the word
    "not" alone, and every negation phrase with its sub-phrase (the phrase without its first word)."""
    adjs = extracted.loc[extracted["kind"] == "adjective", "unit"].tolist()
    phrases = extracted.loc[extracted["kind"] == "phrase", "unit"].tolist()
    units = {a: [a] for a in adjs}
    units.update({f"not {a}": ["not", a] for a in adjs})
    units["not"] = ["not"]
    for p in phrases:
        words = p.split()
        units[p] = words
        units[" ".join(words[1:])] = words[1:]
    return units


def build_probes(kind: str, extracted: pd.DataFrame | None, index: dict[str, int], ks: list[int]):
    """:class:`~featlearn.features.train.Probes` of a job; units missing from the vocabulary are skipped."""
    from featlearn.features.train import Probes

    probes = Probes()
    if kind == "none" or extracted is None:
        return probes
    if kind == "tokens":
        units = extracted.loc[extracted["kind"] == "token", "unit"]
        probes.tokens = {u: index[u] for u in units if u in index}
    elif kind == "bigrams":
        for u in extracted.loc[extracted["kind"] == "bigram", "unit"]:
            a, b = u.split(" ")
            if a in index and b in index:
                probes.bigrams[u] = (index[a], index[b])
        kind = "negation"  # MV (Fig. 3, 6c): the adjectives and their negations too
    if kind == "negation":
        for u, words in negation_units(extracted).items():
            if all(w in index for w in words):
                probes.phrases[u] = [index[w] for w in words]
    elif kind == "positions":
        units = extracted.loc[extracted["kind"] == "token", "unit"]
        probes.positions = {u: index[u] for u in units if u in index}
        probes.ks = list(ks)
    return probes


def synthetic_extracted(cfg: dict) -> pd.DataFrame:
    """The synthetic data's class markers as extracted tokens (by construction)."""
    n = cfg["n_markers"]
    units = [f"neg{i}" for i in range(n)] + [f"pos{i}" for i in range(n)]
    return pd.DataFrame({"kind": "token", "unit": units, "cls": [0] * n + [1] * n, "polarity": [-1] * n + [1] * n})


# ---------------------------------------------------------------------------------------------- training
def job_runs(cfg: dict):
    """Every run of a job: activations x sigma_v x seeds."""
    from featlearn.features.train import Run

    return [Run(seed=s, activation=a, sigma_v=sv) for a, sv, s in product(cfg["activations"], cfg["sigma_v"], cfg["seeds"])]


def train_job(cfg: dict, inputs: dict, outputs: dict, ctx) -> None:
    """Train one job's runs (registry ``features_train``) and write its tidy tables ``outputs["scores"]``,
    ``["metrics"]`` and ``["summary"]`` (see :func:`featlearn.features.train.train`). ``inputs``: the prepared
    ``train``, ``dev``, ``test`` splits, ``vocab`` and the ``extracted`` units (none for the synthetic data).
    The model runs on ``ctx.device``."""
    from featlearn.features.train import Settings, encode, train, write_tables

    rows, vocab = load_splits(cfg, inputs)
    index = {w: i for i, w in enumerate(vocab)}
    settings = Settings.from_dict({**cfg["settings"], "device": ctx.device})
    enc = {s: encode(r, index, settings.max_len) for s, r in rows.items()}
    if cfg["dataset"] == "synthetic":
        extracted = synthetic_extracted(cfg["synthetic"])
    else:
        extracted = pd.read_csv(inputs["extracted"], keep_default_na=False, na_values=[""])
    probes = build_probes(cfg["probe"], extracted, index, cfg["ks"])
    n_classes = max(max(y for y, _ in r) for r in rows.values()) + 1
    runs = job_runs(cfg)
    _log(f"{cfg['dataset']} {settings.kind} ({settings.optimizer}): {len(runs)} runs, "
         f"{len(rows['train'])} train / {len(rows['dev'])} dev / {len(rows['test'])} test instances, "
         f"{len(probes.tokens) + len(probes.bigrams) + len(probes.positions) + len(probes.phrases)} probes")
    result = train(settings, runs, enc, len(vocab), probes, n_classes=max(n_classes, 2),
                   label=f"{cfg['dataset']} {settings.kind} {settings.optimizer}", work_dir=ctx.work_dir)
    write_tables(result, outputs["scores"], outputs["metrics"], outputs["summary"])
    _log(f"trained in {result.seconds:.1f} s")
