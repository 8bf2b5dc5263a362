"""Hierarchical data of JoMA Sec. 5: the latent hierarchy of Table 1, and HBLT(rho) for Theorem 5.

"Code" mode (Table 1; the generator of the authors' public code, facts only [C]):
  Token M - 1 is padding; tokens 0..M-2 are real. Level 0 has N_0 latents, each a unique sorted
  N_ch-subset of the real tokens; level s > 0 has N_s latents, each a unique sorted N_ch-subset of the
  level s - 1 latents; the top level's latents are the C classes. A sample draws its class uniformly,
  expands it top-down (a latent is active when its parent is active) to the union of leaf tokens, and
  writes those tokens once each, in increasing id order, right-aligned after left padding to length T.
  Given its class a sample is deterministic, so the data have C distinct sequences.

Stochastic HBLT(rho) (Appendix, Definitions 1-2): the class y_0 is uniform over D values; top latent
  y_1^(j) (j = 0..D-1) is on with probability p_on when y_0 = j, else p_off [D]. Below each top latent
  is a binary tree of depth L - 1 whose edges are M(rho) = 1/2 [[1+rho, 1-rho], [1-rho, 1+rho]]:
  a child copies its parent with probability (1 + rho)/2 and flips it otherwise. The leaves (depth L
  below the root) are the tokens; leaf l present <=> y_l = 1.
Theorem 5: tokens l, m whose common latent ancestor is H levels up (1 <= H <= L - 1) satisfy
      P[y_l = 1 | y_m = 1] = 1/2 (1 + rho^(2H) - 2 rho^(L-1) rho_0) / (1 - rho^(L-1) rho_0),
  with rho_0 = 2 P[y_1 = 0] - 1 for the top latent above them (the paper's printed
  rho_0 = p_{.|0}^T p_0 = P[y_1 = 0] disagrees with its own proof, which needs D(c) =
  diag(P[y_c]) = 1/2 diag(1 + rho_c, 1 - rho_c); the 2 P - 1 form matches Monte Carlo).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

# ----------------------------------------------------------------------------- code mode (Table 1)


def _unique_subsets(n: int, k: int, count: int, gen: torch.Generator) -> tuple[tuple[int, ...], ...]:
    """``count`` distinct sorted k-subsets of range(n), each uniform, rejecting repeats (as [C] does)."""
    if k > n:
        raise ValueError(f"cannot draw {k} children out of {n}")
    if count > math.comb(n, k):
        raise ValueError(f"only {math.comb(n, k)} distinct {k}-subsets of {n} exist, {count} asked for")
    seen: set[tuple[int, ...]] = set()
    out = []
    while len(out) < count:
        subset = tuple(sorted(torch.randperm(n, generator=gen)[:k].tolist()))
        if subset not in seen:
            seen.add(subset)
            out.append(subset)
    return tuple(out)


def to_sequences(present: torch.Tensor, T: int, pad: int) -> torch.Tensor:
    """[N, V] presence indicators -> [N, T] token ids: present ids in increasing order, right-aligned,
    left-padded with ``pad``."""
    N, V = present.shape
    if N and int(present.sum(dim=1).max()) > T:
        raise ValueError(f"a sample has more than T = {T} tokens")
    ids = torch.where(present.bool(), torch.arange(V).expand(N, V), torch.full((N, V), -1))
    if V < T:
        ids = torch.cat([torch.full((N, T - V), -1), ids], dim=1)
    seq = ids.sort(dim=1).values[:, -T:]  # absent (-1) first, then present ids ascending
    return torch.where(seq < 0, torch.full_like(seq, pad), seq)


@dataclass(frozen=True)
class Hierarchy:
    """children[s][i]: the sorted ids one level down (tokens for s = 0) that latent i of level s
    expands to; the last level's latents are the classes."""

    children: tuple[tuple[tuple[int, ...], ...], ...]
    M: int
    T: int

    @property
    def sizes(self) -> tuple[int, ...]:
        """(N_0, N_1, ..., C)."""
        return tuple(len(c) for c in self.children)

    @property
    def n_classes(self) -> int:
        return self.sizes[-1]

    @property
    def pad(self) -> int:
        return self.M - 1

    def class_tables(self) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Per class: its token sequence [C, T] and its active latents per level, [C, N_s] bool for
        s = 0 .. top (the top level is the one-hot class)."""
        C = self.n_classes
        active = [torch.zeros(C, n, dtype=torch.bool) for n in self.sizes]
        tokens = torch.zeros(C, self.M - 1, dtype=torch.bool)
        for c in range(C):
            ids = {c}
            for s in reversed(range(len(self.sizes))):  # top-down expansion
                active[s][c, sorted(ids)] = True
                ids = set().union(*(self.children[s][i] for i in ids))
            tokens[c, sorted(ids)] = True
        return to_sequences(tokens, self.T, self.pad), active

    def duplicate_classes(self) -> int:
        """Number of classes whose token sequence equals another class's (such classes cannot be
        told apart; the generator does not prevent it, [C] neither)."""
        seq, _ = self.class_tables()
        _, inverse, counts = torch.unique(seq, dim=0, return_inverse=True, return_counts=True)
        return int((counts[inverse] > 1).sum())

    def sample(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        """n samples: tokens [n, T] int64, labels [n], active latents per level [n, N_s] bool."""
        labels = torch.randint(self.n_classes, (n,), generator=generator)
        seq, active = self.class_tables()
        return seq[labels], labels, [a[labels] for a in active]


def make_hierarchy(n_latents: list[int], n_classes: int, n_children: int | list[int], M: int = 100, T: int = 30,
                   generator: torch.Generator | int = 0) -> Hierarchy:
    """The Table 1 generator: levels with n_latents = [N_0, N_1, ...] latents, then C classes; each
    latent (and class) has n_children children one level down (an int, or one per level)."""
    gen = torch.Generator().manual_seed(generator) if isinstance(generator, int) else generator
    sizes = [*n_latents, n_classes]
    ks = [n_children] * len(sizes) if isinstance(n_children, int) else list(n_children)
    if len(ks) != len(sizes):
        raise ValueError(f"n_children needs one entry per level ({len(sizes)}), got {len(ks)}")
    children, below = [], M - 1  # level 0 picks among the M - 1 real tokens
    for size, k in zip(sizes, ks):
        children.append(_unique_subsets(below, k, size, gen))
        below = size
    h = Hierarchy(tuple(children), M, T)
    h.class_tables()  # raises when a class expands to more than T tokens
    return h


# ----------------------------------------------------------------------------- HBLT(rho) and Theorem 5


def edge_matrix(rho: float) -> torch.Tensor:
    """M(rho), indexed [child state, parent state] with states ordered (0, 1) (symmetric)."""
    return 0.5 * torch.tensor([[1 + rho, 1 - rho], [1 - rho, 1 + rho]], dtype=torch.float64)


def hblt_rho0(n_classes: int, p_on: float, p_off: float) -> float:
    """rho_0 = 2 P[y_1 = 0] - 1 for one top latent, with y_0 uniform over D = n_classes values."""
    p1 = (p_on + (n_classes - 1) * p_off) / n_classes
    return 1.0 - 2.0 * p1


def theorem5(rho: float, L: int, rho0: float, H: int) -> float:
    """P[y_l = 1 | y_m = 1] for tokens whose common latent ancestor is H levels up (Theorem 5)."""
    if not 1 <= H <= L - 1:
        raise ValueError(f"H must be in 1..L-1 = 1..{L - 1}, got {H}")
    a = rho ** (L - 1) * rho0
    return 0.5 * (1 + rho ** (2 * H) - 2 * a) / (1 - a)


def sample_hblt(n: int, rho: float, L: int, n_classes: int, p_on: float, p_off: float,
                generator: torch.Generator | int = 0) -> torch.Tensor:
    """n samples of HBLT(rho): leaves [n, D, 2^(L-1)] bool, subtree j under top latent j."""
    gen = torch.Generator().manual_seed(generator) if isinstance(generator, int) else generator
    if L < 2:
        raise ValueError("L must be at least 2 (root, top latents, tokens)")
    y0 = torch.randint(n_classes, (n,), generator=gen)
    p_top = torch.where(torch.arange(n_classes)[None, :] == y0[:, None], p_on, p_off)
    y = torch.rand(n, n_classes, generator=gen) < p_top  # [n, D] top latents y_1
    y = y[:, :, None]
    flip = (1 - rho) / 2  # M(rho): a child differs from its parent with probability (1 - rho)/2
    for _ in range(L - 1):
        y = y.repeat_interleave(2, dim=2)
        y = y ^ (torch.rand(y.shape, generator=gen) < flip)
    return y


def hblt_pair(H: int) -> tuple[int, int]:
    """(l, m): leaf indices in one subtree whose common ancestor is H levels up."""
    return 2 ** (H - 1), 0


def cooccurrence(leaves: torch.Tensor, l: int, m: int) -> tuple[float, float, int]:
    """Monte Carlo P[y_l = 1 | y_m = 1] from [n, V] leaves (one subtree): estimate, its binomial
    standard error, and the number of samples with y_m = 1."""
    on_m = leaves[:, m]
    n_m = int(on_m.sum())
    if n_m == 0:
        return math.nan, math.nan, 0
    p = float(leaves[on_m, l].double().mean())
    return p, math.sqrt(p * (1 - p) / n_m), n_m
