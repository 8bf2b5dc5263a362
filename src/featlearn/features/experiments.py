"""Compute side of the classification experiments: extraction tables, training jobs, the theory simulator.

- :func:`extract_table` writes one dataset's extracted units (Table 6): tokens (SST, IMDB, AG News),
  adjectives, bigrams and negation phrases (SSTwsub), with their class counts and log-odds.
- :func:`train_job` trains every run of one (dataset, model, optimiser) at once (all activations, sigma_v
  and seeds of the job in one batched model, :mod:`featlearn.features.train`) and writes the tidy score,
  metric and summary tables. The probes (units whose label scores are logged every epoch) come from the
  extraction table.
- :func:`theory_job` runs the linear NTK flow (:mod:`featlearn.features.theory`) of the MLP (every
  activation) and SA kernels on SST and writes the predicted token scores, the shared bias and the flow's
  training loss.

Every function is deterministic given its settings (seeds inside).
"""

from __future__ import annotations

import random
import sys
from itertools import product

import numpy as np
import pandas as pd

from featlearn.features import extract as X
from featlearn.io import atomic_open

NEGATORS = ("not", "never", "hardly")  # Fig. 9 [P]
PROBES = ("none", "tokens", "negation", "bigrams", "positions")


def _write_csv(df: pd.DataFrame, path: str) -> None:
    with atomic_open(path, newline="") as fh:
        df.to_csv(fh, index=False, float_format="%.8g")


def _log(msg: str) -> None:
    print(f"[features] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------ extraction
def _with_kind(df: pd.DataFrame, kind: str) -> pd.DataFrame:
    return df.assign(kind=kind)[["kind"] + [c for c in df.columns]]


def extract_table(cfg: dict, dataset: str, rows: list[tuple[int, str]]) -> pd.DataFrame:
    """Extracted units of one dataset's training rows. ``cfg`` holds the rule's knobs: ``ratio`` and
    ``min_count`` per unit kind (see config ``features.extract``)."""
    ratio = cfg["ratio"]
    if dataset == "sstwsub":
        adj_cfg, bi_cfg = cfg["adjectives"], cfg["bigrams"]
        adjectives = X.extract_adjectives(rows, lambda t: X.lemminflect_adjective(t, adj_cfg["max_classes"]),
                                          ratio, adj_cfg["min_count"])
        bigrams = X.extract(X.bigram_counts(rows, 2), ratio, bi_cfg["min_count"])
        phrases = X.negation_phrases(rows, NEGATORS, cfg["phrases"]["max_words"])
        ph = pd.DataFrame({"unit": [t for _, t in phrases], "cls": [y for y, _ in phrases]})
        ph["polarity"] = np.where(ph["cls"] == 1, 1, -1)
        parts = [_with_kind(adjectives, "adjective"), _with_kind(bigrams, "bigram"), _with_kind(ph, "phrase")]
        return pd.concat(parts, ignore_index=True)
    n_classes = max(y for y, _ in rows) + 1
    floor = cfg["min_count"][dataset]
    return _with_kind(X.extract(X.token_counts(rows, max(n_classes, 2)), ratio, floor), "token")


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


def load_splits(cfg: dict, data_dir: str | None) -> tuple[dict[str, list[tuple[int, str]]], list[str]]:
    """Rows of every split (train subsampled to ``max_train``, dev/test to ``max_eval``) and the vocabulary.
    The synthetic dataset builds its vocabulary from its own rows."""
    if cfg["dataset"] == "synthetic":
        rows = synthetic_splits(cfg["synthetic"])
        words = sorted({t for r in rows.values() for _, text in r for t in text.split()})
        return rows, ["<pad>", "unk"] + words
    from featlearn.data.prepare import read_classification, read_vocab

    vocab = read_vocab(f"{data_dir}/vocab.json")
    rows = {s: read_classification(f"{data_dir}/{s}.tsv") for s in ("train", "dev", "test")}
    seed = cfg["subsample_seed"]
    rows["train"] = subsample(rows["train"], cfg["max_train"], seed)
    for s in ("dev", "test"):
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


def train_job(cfg: dict, data_dir: str | None, extracted_csv: str | None, scores_csv: str, metrics_csv: str,
              summary_csv: str) -> None:
    """Train one job's runs and write its tidy tables (see :func:`featlearn.features.train.train`)."""
    from featlearn.features.train import Settings, encode, train, write_tables

    rows, vocab = load_splits(cfg, data_dir)
    index = {w: i for i, w in enumerate(vocab)}
    from featlearn.devices import resolve_device

    settings = Settings.from_dict(cfg["settings"])
    settings = Settings.from_dict({**cfg["settings"], "device": resolve_device(settings.device)})
    enc = {s: encode(r, index, settings.max_len) for s, r in rows.items()}
    if cfg["dataset"] == "synthetic":
        extracted = synthetic_extracted(cfg["synthetic"])
    else:
        extracted = pd.read_csv(extracted_csv, keep_default_na=False, na_values=[""]) if extracted_csv else None
    probes = build_probes(cfg["probe"], extracted, index, cfg.get("ks", []))
    n_classes = max(max(y for y, _ in r) for r in rows.values()) + 1
    runs = job_runs(cfg)
    _log(f"{cfg['dataset']} {settings.kind} ({settings.optimizer}): {len(runs)} runs, "
         f"{len(rows['train'])} train / {len(rows['dev'])} dev / {len(rows['test'])} test instances, "
         f"{len(probes.tokens) + len(probes.bigrams) + len(probes.positions) + len(probes.phrases)} probes")
    result = train(settings, runs, enc, len(vocab), probes, n_classes=max(n_classes, 2),
                   label=f"{cfg['dataset']} {settings.kind} {settings.optimizer}")
    write_tables(result, scores_csv, metrics_csv, summary_csv)


# -------------------------------------------------------------------------------------- theory simulator
def theory_job(cfg: dict, data_dir: str, extracted_csv: str, curves_csv: str, scores_csv: str) -> None:
    """Linear NTK flow on the (subsampled) SST training set for the MLP with every activation and for SA,
    at each sigma_v. All MLP flows share one step (from the largest kernel), as do the SA flows, so that
    the sigma_v settings are compared at equal flow time. Writes the flow curves (step, training loss,
    shared bias mu b) and the predicted scores rho u_e + mu b of the extracted tokens at the logged steps."""
    from featlearn.features import theory as T

    rows, vocab = load_splits({**cfg, "dataset": "sst", "max_eval": 0}, data_dir)
    index = {w: i for i, w in enumerate(vocab)}
    train_rows = rows["train"]
    seqs = [[index.get(t, index.get("unk", 0)) for t in text.split()] or [index.get("unk", 0)] for _, text in train_rows]
    labels = np.array([y for y, _ in train_rows])
    lengths = np.array([len(s) for s in seqs], dtype=float)
    extracted = pd.read_csv(extracted_csv, keep_default_na=False, na_values=[""])
    units = [u for u in extracted.loc[extracted["kind"] == "token", "unit"] if u in index]
    probe_ids = np.array([index[u] for u in units])
    se, sw = cfg["sigma_e"], cfg["sigma_w"]
    C = T.count_matrix(seqs, len(vocab))
    d = cfg["d"]
    attn_cache: dict[int, np.ndarray] = {}

    def sa_weights(n: int) -> np.ndarray:  # column sums of E(alpha) at initialisation (Theorem 4.6)
        if n not in attn_cache:
            attn_cache[n] = T.sa_expected_attention(n, d, se, samples=cfg["sa_samples"], seed=cfg["seed"]).sum(0)
        return attn_cache[n]

    C_sa = T.count_matrix(seqs, len(vocab), position_weights=sa_weights)
    flows = []
    for model in cfg["models"]:
        act = "relu" if model == "sa" else model.split("-")[1]
        for sv in cfg["sigma_v"]:
            if model == "sa":
                rho, mu = T.sa_rho(se, sv), 0.0
            elif act == "relu":
                rho, mu = T.relu_mlp_constants(se, sw, sv)
            else:
                rho, mu = T.mlp_constants(act, se, sw, sv)
            flows.append((model, act, sv, rho, mu))
    # early steps on a geometric grid too: the fast modes (shared bias, SA) move before the first log_every
    log_steps = np.unique(np.geomspace(1, cfg["steps"], cfg["geometric_logs"]).astype(int)) if cfg["geometric_logs"] else []
    curve_frames, score_frames = [], []
    for family in ("mlp", "sa"):
        group = [f for f in flows if (f[0] == "sa") == (family == "sa")]
        if not group:
            continue
        Cf = C_sa if family == "sa" else C
        eta = min(T.stable_step(Cf, lengths, rho, mu) for _, _, _, rho, mu in group)
        for model, act, sv, rho, mu in group:
            out = T.ntk_flow(Cf, labels, lengths, rho, mu, eta, cfg["steps"], probe_ids, cfg["log_every"],
                             log_steps=log_steps)
            _log(f"theory {model} sigma_v={sv:g}: rho={rho:.4g} mu={mu:.4g} eta={eta:.4g}, "
                 f"loss {out['loss'][0]:.4f} -> {out['loss'][-1]:.4f}")
            meta = {"model": model, "activation": act, "sigma_v": sv, "rho": rho, "mu": mu, "eta": eta}
            curve_frames.append(pd.DataFrame({**meta, "step": out["step"], "flow_time": out["step"] * eta,
                                              "loss": out["loss"], "bias": out["bias"]}))
            n_logs = len(out["step"])
            score_frames.append(pd.DataFrame({
                "model": model, "activation": act, "sigma_v": sv,
                "step": np.repeat(out["step"], len(units)), "unit": np.tile(units, n_logs),
                "score": out["scores"].reshape(-1)}))
    _write_csv(pd.concat(curve_frames, ignore_index=True), curves_csv)
    _write_csv(pd.concat(score_frames, ignore_index=True), scores_csv)
