"""Stable rank of a weight matrix: ||W||_F^2 / ||W||_2^2 (JoMA Sec. 6, Fig. 7).

For an n x m matrix of i.i.d. Gaussians the stable rank is about nm / (sqrt n + sqrt m)^2 (Frobenius norm^2
~ nm sigma^2, spectral norm ~ (sqrt n + sqrt m) sigma), e.g. 227.6 for Pythia-70M's 2048 x 512 up-projection.
"""

from __future__ import annotations

import math

import torch


@torch.no_grad()
def stable_rank(weight: torch.Tensor) -> float:
    """||W||_F^2 / ||W||_2^2 of a 2-D tensor, computed in float64 (1 for rank one, min(n, m) for orthogonal)."""
    if weight.ndim != 2:
        raise ValueError(f"stable rank needs a matrix, got shape {tuple(weight.shape)}")
    w = weight.detach().to(torch.float64)
    spectral = torch.linalg.matrix_norm(w, ord=2)
    if spectral == 0:
        raise ValueError("stable rank of a zero matrix is undefined")
    return float(torch.linalg.matrix_norm(w, ord="fro") ** 2 / spectral**2)


def gaussian_stable_rank(n: int, m: int) -> float:
    """Large-size approximation nm / (sqrt n + sqrt m)^2 of the stable rank of an n x m Gaussian matrix."""
    return n * m / (math.sqrt(n) + math.sqrt(m)) ** 2
