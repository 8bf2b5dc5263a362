"""Seeds of a run's separate random streams (data, initialisation, shuffling, evaluation, dropout).

A run with seed ``s`` draws each stream from its own generator seeded ``derived_seed(s, stream)``, so
the streams never overlap and adding a run to a batched sweep never changes another run's numbers.
The stream numbers are constants of the module that owns the streams (kept as they were first chosen:
changing one changes every number that module produces).
"""

from __future__ import annotations

SEED_STRIDE = 1_000_003  # a prime far above any stream number, so (seed, stream) pairs never collide


def derived_seed(seed: int, stream: int) -> int:
    """The seed of stream ``stream`` of run ``seed``."""
    return SEED_STRIDE * int(seed) + int(stream)
