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


def ordered_palette(n: int) -> list:
    """``n`` colours of viridis for lines ordered by a quantity, stopping before its pale yellow end, which is
    hard to see on white."""
    from matplotlib import colormaps

    cmap = colormaps["viridis"]
    return [cmap(0.8 * i / max(n - 1, 1)) for i in range(n)]


def text_colour(image, value: float) -> str:
    """Black or white, whichever reads better on the colour ``image`` (a matplotlib image) gives ``value``."""
    if value != value:  # NaN: drawn as the background
        return "black"
    r, g, b, _ = image.cmap(image.norm(value))
    return "black" if 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.45 else "white"


def from_zero(ax, headroom: float = 0.05) -> None:
    """A y axis from 0 to the drawn data's top plus ``headroom`` of that height, so markers at the top are not
    cut by the frame (``set_ylim(bottom=0)`` keeps the margin of the data's own range, which is thin when the
    values lie far above 0)."""
    ax.relim()
    ax.autoscale_view()
    top = max(ax.dataLim.y1, 0.0)
    ax.set_ylim(0, top * (1 + headroom) if top > 0 else 1.0)


def _quiet_log_minor_labels(fig) -> None:
    """On a log axis spanning two or more labelled decades, label only the decades (matplotlib also labels
    minor ticks, which crowds the axis). An axis spanning at most a factor 10 gets evenly chosen round ticks as
    plain numbers instead (6, 8, 10, 12 rather than 6x10⁰ ... 10¹ and nothing above it), so values above its one
    decade tick are labelled too; a wider axis with a single decade tick keeps its minor labels, as plain numbers."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter

    for ax in fig.axes:
        for axis, scale, lim in ((ax.xaxis, ax.get_xscale(), ax.get_xlim()), (ax.yaxis, ax.get_yscale(), ax.get_ylim())):
            if scale != "log":
                continue
            lo, hi = sorted(lim)
            majors = [t for t in axis.get_majorticklocs() if lo <= t <= hi]
            plain = FuncFormatter(lambda v, _: f"{v:g}")
            if len(majors) >= 2:
                axis.set_minor_formatter(NullFormatter())
            elif 0 < lo and hi <= 10 * lo:  # at most a factor 10: round ticks are spread well even on a log axis
                axis.set_major_locator(MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]))
                axis.set_major_formatter(plain)
                axis.set_minor_formatter(NullFormatter())
            else:  # close to two decades with one decade tick: the minor ticks label the rest
                axis.set_major_formatter(plain)
                axis.set_minor_formatter(plain)


def save_figure(fig, *paths: str | os.PathLike, dpi: int = 150) -> None:
    """Save ``fig`` to every path (format from the extension), each atomically, then close it.

    PDF and SVG metadata carry no date, and SVG ids come from a fixed salt, so that reruns give identical files.
    """
    _quiet_log_minor_labels(fig)
    for path in paths:
        fmt = os.path.splitext(str(path))[1].lstrip(".").lower()
        metadata = {"pdf": {"CreationDate": None}, "png": {"Software": None}, "svg": {"Date": None}}.get(fmt)
        with atomic_path(path) as tmp, plt.rc_context({"svg.hashsalt": "featlearn"}):
            fig.savefig(tmp, format=fmt, dpi=dpi, metadata=metadata)
    plt.close(fig)
