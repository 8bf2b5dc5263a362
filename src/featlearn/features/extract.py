"""Co-occurrence features of Sec. 5 (Table 6): the tokens, bigrams, adjectives and token-positions that
co-occur mainly with one label in the training data.

freq(u, c) = occurrences of unit u (a token, a bigram, a token at a distance from the end) in the training
instances of class c. A unit is extracted for class c when

    freq(u, c) > ratio * max_{c' != c} freq(u, c')   and   freq(u, c) > min_count

([C]: rate (p - n)/(p + n) > 0.5 and p > 5 on SST, > 50 on IMDB; the paper states freq(e,+)/freq(e,-) >= 3
with no floor, kept as ``strict=False``; ``inclusive_ratio`` takes the paper's ">= 3" with the strict floor,
which is what reproduces the positive SSTwsub bigram count of Table 6, see docs/features_counts.md).
Binary labels are 0 (negative) and 1 (positive); an extracted
unit's polarity is +1 or -1. Every unit also gets the continuous score log((freq(u,+) + 1)/(freq(u,-) + 1)).

Adjectives (negation, Fig. 6): the same rule on SSTwsub, then a part-of-speech filter (a callable, so that
any offline tagger can be plugged in; :func:`lemminflect_adjective` uses lemminflect's bundled tables).

Synthetic position data for the L-RNN (Fig. 12) [D]: class-marker tokens at distance 2 from the end,
filler tokens elsewhere.

:func:`extract_table`: one dataset's extracted units (Table 6) with their kind; :func:`extract_job` is the
extraction compute job (registry ``features_extract``).
"""

from __future__ import annotations

import collections
import math
import random
from typing import Callable, Iterable, Sequence

import numpy as np
import pandas as pd
from featlearn.io import write_csv

Rows = Sequence[tuple[int, str]]
COLUMNS = ("unit", "cls", "polarity", "total", "log_odds")


def _tokens(rows: Iterable[tuple[int, str]]) -> Iterable[tuple[int, list[str]]]:
    for y, text in rows:
        yield y, text.split()


def _n_classes(rows: Rows, n_classes: int | None) -> int:
    return n_classes if n_classes is not None else max(y for y, _ in rows) + 1


def _tabulate(counter: dict) -> dict:
    return {u: np.asarray(c, dtype=np.int64) for u, c in counter.items()}


def token_counts(rows: Rows, n_classes: int | None = None) -> dict[str, np.ndarray]:
    """freq(e, c) for every token e: an array of C counts (occurrences, repeats in one instance included)."""
    C = _n_classes(rows, n_classes)
    out: dict[str, list[int]] = collections.defaultdict(lambda: [0] * C)
    for y, toks in _tokens(rows):
        for t in toks:
            out[t][y] += 1
    return _tabulate(out)


def bigram_counts(rows: Rows, n_classes: int | None = None) -> dict[str, np.ndarray]:
    """freq(ab, c) for every adjacent pair inside an instance; a bigram unit is written "a b"."""
    C = _n_classes(rows, n_classes)
    out: dict[str, list[int]] = collections.defaultdict(lambda: [0] * C)
    for y, toks in _tokens(rows):
        for a, b in zip(toks[:-1], toks[1:]):
            out[f"{a} {b}"][y] += 1
    return _tabulate(out)


def position_counts(rows: Rows, max_distance: int, n_classes: int | None = None) -> dict[tuple[str, int], np.ndarray]:
    """freq((e, k), c): token e at distance k (0 = the last token) from the end, k <= max_distance."""
    C = _n_classes(rows, n_classes)
    out: dict[tuple[str, int], list[int]] = collections.defaultdict(lambda: [0] * C)
    for y, toks in _tokens(rows):
        T = len(toks)
        for k in range(min(T, max_distance + 1)):
            out[(toks[T - 1 - k], k)][y] += 1
    return _tabulate(out)


def log_odds(counts: np.ndarray) -> float:
    """log((freq(+) + 1) / (freq(-) + 1)) of a binary count pair [neg, pos]."""
    return math.log((counts[1] + 1) / (counts[0] + 1))


def extract(counts: dict, ratio: float = 3.0, min_count: int = 5, strict: bool = True,
            inclusive_ratio: bool = False) -> pd.DataFrame:
    """Units that co-occur mainly with one class (rule in the module docstring). With ``inclusive_ratio``
    the ratio test is freq >= ratio x other while the floor stays freq > min_count.

    Columns: ``unit``, ``cls``, ``polarity`` (binary: +1 for class 1, -1 for class 0; multi-class: 0),
    ``freq_<c>`` per class, ``total``, ``log_odds`` (binary only, else NaN). Sorted by class, then by
    decreasing frequency in that class, then by unit.
    """
    records = []
    for unit, f in counts.items():
        C = len(f)
        for c in range(C):
            others = np.delete(f, c).max() if C > 1 else 0
            if strict:
                above = f[c] >= ratio * others if inclusive_ratio else f[c] > ratio * others
                ok = above and f[c] > min_count
            else:
                ok = f[c] >= ratio * others and f[c] >= min_count
            if ok:
                rec = {"unit": unit, "cls": c, "polarity": (1 if c == 1 else -1) if C == 2 else 0}
                rec.update({f"freq_{k}": int(f[k]) for k in range(C)})
                rec["total"] = int(f.sum())
                rec["log_odds"] = log_odds(f) if C == 2 else float("nan")
                records.append(rec)
                break  # at most one class can satisfy the rule when ratio >= 1
    C = len(next(iter(counts.values()))) if counts else 2
    cols = ["unit", "cls", "polarity"] + [f"freq_{k}" for k in range(C)] + ["total", "log_odds"]
    df = pd.DataFrame.from_records(records, columns=cols)
    if df.empty:
        return df
    own = df.apply(lambda r: r[f"freq_{int(r['cls'])}"], axis=1)
    df = df.assign(_own=own).sort_values(["cls", "_own", "unit"], ascending=[True, False, True], kind="mergesort")
    return df.drop(columns="_own").reset_index(drop=True)


def class_sizes(df: pd.DataFrame) -> dict[int, int]:
    """Number of extracted units per class."""
    return {int(c): int(n) for c, n in df["cls"].value_counts().sort_index().items()}


def all_log_odds(counts: dict[str, np.ndarray]) -> pd.DataFrame:
    """Every unit's binary counts and log-odds: columns ``unit``, ``freq_0``, ``freq_1``, ``log_odds``."""
    recs = [{"unit": u, "freq_0": int(f[0]), "freq_1": int(f[1]), "log_odds": log_odds(f)} for u, f in counts.items()]
    return (pd.DataFrame.from_records(recs, columns=["unit", "freq_0", "freq_1", "log_odds"])
            .sort_values("unit", kind="mergesort").reset_index(drop=True))


# ------------------------------------------------------------------------------------- adjectives
def extract_adjectives(rows: Rows, is_adjective: Callable[[str], bool], ratio: float = 3.0, min_count: int = 5,
                       strict: bool = True) -> pd.DataFrame:
    """Tokens extracted by the ratio rule (binary) and kept when ``is_adjective(token)``."""
    df = extract(token_counts(rows, 2), ratio, min_count, strict)
    if df.empty:
        return df
    return df[df["unit"].map(is_adjective)].reset_index(drop=True)


def lemminflect_adjective(token: str, max_classes: int = 0) -> bool:
    """True when lemminflect's bundled lemma tables know ``token`` as an adjective (no download needed);
    with ``max_classes`` > 0, only when the token has at most that many word classes there (2 keeps "good"
    (adjective, noun) and "dull" (adjective, verb) and drops "left", "mean", "waste", words that are
    mostly verbs or nouns). Requires the ``lemminflect`` package."""
    try:
        import lemminflect
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise RuntimeError("the adjective filter needs the 'lemminflect' package (pip install lemminflect)") from exc
    classes = lemminflect.getAllLemmas(token)
    return "ADJ" in classes and (max_classes <= 0 or len(classes) <= max_classes)


def negation_phrases(
    rows: Rows, negators: Sequence[str] = ("not", "never", "hardly"), max_words: int = 10
) -> list[tuple[int, str]]:
    """Distinct labelled phrases that start with a negation word and have at most ``max_words`` words,
    in first-seen order (Fig. 9: phrases under 11 words starting with not/never/hardly). The ``prefix``
    definition of ``features.extract.phrases.rule``."""
    seen: dict[str, int] = {}
    for y, text in rows:
        toks = text.split()
        if 1 < len(toks) <= max_words and toks[0] in negators and text not in seen:
            seen[text] = y
    return [(y, t) for t, y in seen.items()]


def negation_nodes(trees, negators: Sequence[str] = ("not", "never", "hardly"), max_words: int = 10) -> list[tuple[int, str]]:
    """SSTwsub negation phrases as tree nodes (the ``node`` definition of ``features.extract.phrases.rule``):
    a non-neutral node of at most ``max_words`` words whose two children are a negation word and a
    sub-phrase that SSTwsub labels, somewhere in the training trees, with the opposite polarity. Tokens are
    compared as the trees write them (cased: a sentence-initial "Not" is not a negator here); the phrases
    are returned normalised as the pipeline's text (distinct, first-seen order) with their labels.

    On the SST training trees this gives 65 phrases, 17 positive and 48 negative: the counts of the paper's
    Fig. 9 (App. C.2), which no definition by first word reproduces (docs/features_counts.md)."""
    from featlearn.data.parsers import normalise_text, sentiment_to_binary

    labels: dict[str, set[int]] = collections.defaultdict(set)
    candidates = []
    for tree in trees:
        for node in tree.nodes():
            y = sentiment_to_binary(node.label)
            if y is None:
                continue
            words = node.leaves()
            labels[" ".join(words)].add(y)
            if len(node.children) == 2 and len(words) <= max_words:
                head, rest = (" ".join(c.leaves()) for c in node.children)
                if head in negators:
                    candidates.append((y, " ".join(words), rest))
    seen: dict[str, int] = {}
    for y, text, rest in candidates:
        if (1 - y) in labels[rest]:
            seen.setdefault(normalise_text(text), y)
    return [(y, t) for t, y in seen.items()]


# ------------------------------------------------------------------------------- synthetic positions
def synthetic_position_rows(n_per_class: int = 1000, n_markers: int = 10, n_fillers: int = 200, min_len: int = 6,
                            max_len: int = 12, distance: int = 2, seed: int = 0) -> list[tuple[int, str]]:
    """[D] L-RNN data (Fig. 12): each instance has one class-marker token (``pos<i>`` in class 1, ``neg<i>``
    in class 0) at ``distance`` from the end and uniformly drawn filler tokens (``f<i>``) elsewhere; lengths
    uniform in [min_len, max_len]. Classes alternate, so the rows are balanced."""
    if not 0 <= distance < min_len:
        raise ValueError("the marker distance must be smaller than the shortest instance")
    rng = random.Random(seed)
    rows = []
    for i in range(2 * n_per_class):
        y = i % 2
        T = rng.randint(min_len, max_len)
        toks = [f"f{rng.randrange(n_fillers)}" for _ in range(T)]
        toks[T - 1 - distance] = f"{'pos' if y else 'neg'}{rng.randrange(n_markers)}"
        rows.append((y, " ".join(toks)))
    return rows


# ------------------------------------------------------------------------------- extraction job
NEGATORS = ("not", "never", "hardly")  # Fig. 9 [P]


def _with_kind(df: pd.DataFrame, kind: str) -> pd.DataFrame:
    return df.assign(kind=kind)[["kind"] + [c for c in df.columns]]


def extract_table(cfg: dict, dataset: str, rows: list[tuple[int, str]], trees=None) -> pd.DataFrame:
    """Extracted units of one dataset's training rows. ``cfg`` holds the rule's knobs: ``ratio`` and
    ``min_count`` per unit kind (see config ``features.extract``). SSTwsub's negation phrases under the
    ``node`` rule need the training ``trees``."""
    ratio = cfg["ratio"]
    if dataset == "sstwsub":
        adj_cfg, bi_cfg, ph_cfg = cfg["adjectives"], cfg["bigrams"], cfg["phrases"]
        adjectives = extract_adjectives(rows, lambda t: lemminflect_adjective(t, adj_cfg["max_classes"]),
                                        ratio, adj_cfg["min_count"])
        bigrams = extract(bigram_counts(rows, 2), ratio, bi_cfg["min_count"], inclusive_ratio=bi_cfg["inclusive_ratio"])
        if ph_cfg["rule"] == "node":
            if trees is None:
                raise ValueError("the 'node' negation-phrase rule needs the SST training trees")
            phrases = negation_nodes(trees, NEGATORS, ph_cfg["max_words"])
        else:
            phrases = negation_phrases(rows, NEGATORS, ph_cfg["max_words"])
        ph = pd.DataFrame({"unit": [t for _, t in phrases], "cls": [y for y, _ in phrases]})
        ph["polarity"] = np.where(ph["cls"] == 1, 1, -1)
        parts = [_with_kind(adjectives, "adjective"), _with_kind(bigrams, "bigram"), _with_kind(ph, "phrase")]
        return pd.concat(parts, ignore_index=True)
    n_classes = max(y for y, _ in rows) + 1
    floor = cfg["min_count"][dataset]
    return _with_kind(extract(token_counts(rows, max(n_classes, 2)), ratio, floor), "token")


def extract_job(settings: dict, inputs: dict, outputs: dict, ctx) -> None:
    """The extraction job: the units of ``settings["dataset"]`` extracted from ``inputs["train"]`` (a prepared
    train.tsv), written to ``outputs["extracted"]``."""
    from featlearn.data.prepare import read_classification

    from featlearn.data.parsers import read_sst_trees

    dataset = settings["dataset"]
    trees = read_sst_trees(inputs["trees"])["train"] if "trees" in inputs else None
    table = extract_table(settings, dataset, read_classification(inputs["train"]), trees)
    write_csv(table, outputs["extracted"])
    counts = table.groupby(["kind", "cls"]).size()
    print(f"{dataset}: extracted\n{counts.to_string()}")
