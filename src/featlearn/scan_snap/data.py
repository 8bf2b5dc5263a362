"""Sequence classes of Sec. 3.2: contextual tokens drawn i.i.d. from a class distribution, then a query.

Token-id layout (authors' public generator, facts only): 10 common tokens (ids 0-9) shared by every
class; 10 distinct tokens per class (class n: 10 + 10n ... 19 + 10n); then one id per query ("last")
token; then one id per next token. With K = num_last * num_next_per_last classes,
M = 10 + 10K + num_last + K. Class n = m * num_next_per_last + j has query m and next token n.

Per class, unnormalised weight 1 for each common token and linspace(0.1, 1.0, 10) for its distinct
tokens (increasing with id); normalised (sum 15.5), a common token has P = 1/15.5 = 0.0645.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from featlearn.scan_snap.constants import N_COMMON, N_DISTINCT  # noqa: F401 (re-exported)

DISTINCT_WEIGHTS = (0.1, 1.0)  # linspace end points of the distinct tokens' unnormalised weights


@dataclass(frozen=True)
class SequenceClasses:
    num_last: int  # number of query tokens
    num_next_per_last: int  # classes (next tokens) per query
    seq_len: int = 128  # T: 127 contextual tokens, then the query

    @property
    def K(self) -> int:
        return self.num_last * self.num_next_per_last

    @property
    def M(self) -> int:
        return N_COMMON + N_DISTINCT * self.K + self.num_last + self.K

    @property
    def query_offset(self) -> int:
        return N_COMMON + N_DISTINCT * self.K

    @property
    def next_offset(self) -> int:
        return self.query_offset + self.num_last

    def distinct_ids(self, n: int) -> torch.Tensor:
        start = N_COMMON + N_DISTINCT * n
        return torch.arange(start, start + N_DISTINCT)

    def query_id(self, n: int) -> int:
        return self.query_offset + n // self.num_next_per_last

    def next_id(self, n: int) -> int:
        return self.next_offset + n

    def queries(self) -> torch.Tensor:
        """Query id of every class, shape [K]."""
        return torch.tensor([self.query_id(n) for n in range(self.K)])

    def labels(self) -> torch.Tensor:
        """Next-token id of every class, shape [K]."""
        return torch.tensor([self.next_id(n) for n in range(self.K)])

    def probabilities(self) -> torch.Tensor:
        """P(l | n) for every class n and token l, shape [K, M] (float64)."""
        P = torch.zeros(self.K, self.M, dtype=torch.float64)
        distinct = torch.linspace(*DISTINCT_WEIGHTS, N_DISTINCT, dtype=torch.float64)
        for n in range(self.K):
            P[n, :N_COMMON] = 1.0
            P[n, self.distinct_ids(n)] = distinct
        return P / P.sum(dim=1, keepdim=True)


def sample_counts(spec: SequenceClasses, batch: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """One fresh batch as token counts: the model only sees how often each id occurs in the context.

    Returns ``classes`` [batch] and ``counts`` [batch, M] (float32; each row sums to T - 1). Attention
    over positions with logits that depend only on the token id equals attention over ids weighted by
    their counts, so counts are an exact and compact encoding of a sequence for this model.
    """
    classes = torch.randint(spec.K, (batch,), generator=generator)
    P = spec.probabilities().to(torch.float32)
    tokens = torch.multinomial(P[classes], spec.seq_len - 1, replacement=True, generator=generator)
    counts = torch.zeros(batch, spec.M)
    counts.scatter_add_(1, tokens, torch.ones_like(tokens, dtype=torch.float32))
    return classes, counts


def sample_sequences(spec: SequenceClasses, batch: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Explicit sequences [batch, T] (contexts then query) and labels [batch], for inspection and tests."""
    classes = torch.randint(spec.K, (batch,), generator=generator)
    P = spec.probabilities().to(torch.float32)
    tokens = torch.multinomial(P[classes], spec.seq_len - 1, replacement=True, generator=generator)
    seqs = torch.cat([tokens, spec.queries()[classes].unsqueeze(1)], dim=1)
    return seqs, spec.labels()[classes]
