"""One plotting style for every figure, and atomic saving to PNG and PDF."""

from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")  # figures are files; no screen is needed
import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402

from featlearn.io import atomic_path  # noqa: E402


def set_style() -> None:
    sns.set_theme(context="paper", style="whitegrid", font_scale=1.1)
    plt.rcParams.update({"figure.dpi": 100, "savefig.bbox": "tight", "pdf.fonttype": 42, "svg.hashsalt": "featlearn"})


def save_figure(fig, *paths: str | os.PathLike, dpi: int = 150) -> None:
    """Save ``fig`` to every path (format from the extension), each atomically, then close it.

    PDF and SVG metadata carry no date, and SVG ids come from a fixed salt, so that reruns give identical files.
    """
    for path in paths:
        fmt = os.path.splitext(str(path))[1].lstrip(".").lower()
        metadata = {"pdf": {"CreationDate": None}, "png": {"Software": None}, "svg": {"Date": None}}.get(fmt)
        with atomic_path(path) as tmp, plt.rc_context({"svg.hashsalt": "featlearn"}):
            fig.savefig(tmp, format=fmt, dpi=dpi, metadata=metadata)
    plt.close(fig)
