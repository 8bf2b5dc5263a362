"""Which counting definitions give the SSTwsub counts of the features paper (Sun, Li, Lu 2023), on the real data.

Issue 18 item 1. The numbers below were measured on the SST tree archive of the data mirror; the report
next to the issue gives the other definitions that were tried. What matches and what does not:

- footnote 8 ("not": 2086 negative / 813 positive SSTwsub instances) is reproduced exactly by the pipeline's
  text normalisation (lowercase, non-alphanumerics to spaces) counting instances that contain "not";
  lowercased PTB tokens give 2018 / 813.
- Table 6 bigrams (779 / 542) are not reproduced exactly by any rule tried. The authors' token rule
  (freq > 3 x other and freq > 20) gives 760 / 514; the paper's own ">= 3" with the floor "> 20" gives 779 / 527
  and is the pipeline's rule (``inclusive_ratio``); lowercased PTB tokens with the strict rule give 808 / 542.
- Fig. 9 negation phrases (65 = 17 + 48) are reproduced by tree nodes made of a negator and a sub-phrase labelled
  with the opposite polarity (cased PTB tokens, 2..10 words), the pipeline's ``node`` rule. It came out of a search
  over several hundred variants; the first-word definition (``prefix``) gives 214 distinct phrases.
"""

from __future__ import annotations

import collections

import pytest

from featlearn.data import parsers
from featlearn.features import extract

pytestmark = pytest.mark.shared_data

NEGATORS = ("not", "never", "hardly")


@pytest.fixture(scope="module")
def train_trees(shared_data):
    return parsers.read_sst_trees(shared_data / "sst" / "trainDevTestTrees_PTB.zip")["train"]


@pytest.fixture(scope="module")
def sstwsub(train_trees):
    """SSTwsub training rows: as the pipeline normalises them, and as lowercased PTB tokens."""
    phrases = parsers.sst_phrases(train_trees)
    return {"norm": [(y, parsers.normalise_text(t)) for y, t in phrases], "lower": [(y, t.lower()) for y, t in phrases]}


def _instances_with(rows, word):
    n = [0, 0]
    for y, text in rows:
        n[y] += word in text.split()
    return n


def test_not_instance_counts_reproduce_footnote_8(sstwsub):
    assert len(sstwsub["norm"]) == 98_794
    assert _instances_with(sstwsub["norm"], "not") == [2086, 813]  # [negative, positive], paper footnote 8
    assert _instances_with(sstwsub["lower"], "not") == [2018, 813]


def test_bigram_count_definitions(sstwsub):
    norm = extract.bigram_counts(sstwsub["norm"], 2)
    assert extract.class_sizes(extract.extract(norm, 3.0, 20, strict=True)) == {0: 514, 1: 760}  # the authors' token rule
    # closest: freq >= 3 x other (the paper's ">= 3") and freq > 20, i.e. the non-strict rule with a floor of 21
    assert extract.class_sizes(extract.extract(norm, 3.0, 21, strict=False)) == {0: 527, 1: 779}
    assert extract.class_sizes(extract.extract(norm, 3.0, 20, inclusive_ratio=True)) == {0: 527, 1: 779}  # pipeline
    lower = extract.bigram_counts(sstwsub["lower"], 2)
    assert extract.class_sizes(extract.extract(lower, 3.0, 20, strict=True)) == {0: 542, 1: 808}


def _negation_nodes(trees, f, max_words=10):
    """Distinct SSTwsub phrases (tree nodes) made of a negator and a sub-phrase that SSTwsub labels with the
    opposite polarity; {phrase: label}."""
    labels: dict[str, set[int]] = collections.defaultdict(set)
    nodes = []
    for tree in trees:
        for node in tree.nodes():
            y = parsers.sentiment_to_binary(node.label)
            if y is None:
                continue
            text = f(" ".join(node.leaves()))
            labels[text].add(y)
            nodes.append((y, text, [f(" ".join(c.leaves())) for c in node.children]))
    out: dict[str, int] = {}
    for y, text, kids in nodes:
        if (len(text.split()) <= max_words and len(kids) == 2 and kids[0] in NEGATORS
                and (1 - y) in labels.get(kids[1], ())):
            out.setdefault(text, y)
    return out


def test_negation_phrase_definitions(sstwsub, train_trees):
    current = extract.negation_phrases(sstwsub["norm"], NEGATORS, 10)
    assert len(current) == 214 and sum(y for y, _ in current) == 51
    cased = _negation_nodes(train_trees, lambda t: t)
    assert (len(cased), sum(cased.values())) == (65, 17)  # Fig. 9: 65 phrases, 17 positive, 48 negative
    pipeline = extract.negation_nodes(train_trees, NEGATORS, 10)  # the same rule, phrases normalised
    assert (len(pipeline), sum(y for y, _ in pipeline)) == (65, 17)
    assert {t for _, t in pipeline} == {parsers.normalise_text(t) for t in cased}
    lowered = _negation_nodes(train_trees, str.lower)
    assert (len(lowered), sum(lowered.values())) == (74, 19)
