"""The shared plotting helpers: readable cell labels, line colours without the pale end of viridis, quiet log
axes, and files that are identical from one save to the next."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from featlearn.plotting import ordered_palette, save_figure, text_colour  # noqa: E402


def test_cell_labels_are_black_on_bright_cells_and_white_on_dark_ones():
    fig, ax = plt.subplots()
    im = ax.imshow(np.array([[0.0, 1.0]]), cmap="viridis", vmin=0, vmax=1)
    assert text_colour(im, 1.0) == "black"  # viridis yellow
    assert text_colour(im, 0.0) == "white"  # viridis dark purple
    plt.close(fig)


def test_line_palette_stops_before_the_pale_yellow():
    colours = ordered_palette(5)
    assert len(colours) == 5
    lum = [0.2126 * r + 0.7152 * g + 0.0722 * b for r, g, b, _ in colours]
    assert max(lum) < 0.75  # viridis' own end (0.99, 0.91, 0.14) is 0.87
    assert lum == sorted(lum)  # ordered dark to light, as the quantity grows
    assert ordered_palette(1) == [ordered_palette(3)[0]]


def _labels(ticks):
    return [t.get_text() for t in ticks if t.get_text()]


def _labelled_values(ax):
    """The y values of the labelled major ticks that are in view."""
    lo, hi = sorted(ax.get_ylim())
    return [float(t.get_text()) for t in ax.yaxis.get_majorticklabels() if t.get_text() and lo <= t.get_position()[1] <= hi]


def test_log_axes_over_decades_label_only_the_decades(tmp_path):
    fig, (wide, narrow, across) = plt.subplots(1, 3)
    wide.plot([1, 2], [1e-3, 1e1])
    wide.set_yscale("log")
    narrow.plot([1, 2], [2.0, 6.0])
    narrow.set_yscale("log")
    across.plot([1, 2], [6.3, 12.5])  # one decade tick (10) in view, the data goes past it
    across.set_yscale("log")
    save_figure(fig, tmp_path / "a.png", dpi=40)
    assert _labels(wide.yaxis.get_minorticklabels()) == []
    for ax in (narrow, across):
        assert _labels(ax.yaxis.get_minorticklabels()) == []
        values = _labelled_values(ax)
        assert len(values) >= 3, values  # round plain numbers, no 2x10^0
        assert not any("times" in t or "^" in t for t in _labels(ax.yaxis.get_majorticklabels()))
    assert max(_labelled_values(across)) > 10  # a value above the one decade is labelled
    assert min(_labelled_values(narrow)) <= 3 and max(_labelled_values(narrow)) >= 5


def test_log_axis_near_two_decades_with_one_decade_tick_keeps_minor_labels(tmp_path):
    fig, ax = plt.subplots()
    ax.plot([1, 2], [0.02, 0.8])  # only 0.1 is a decade tick; round linear ticks would leave 0.02-0.2 bare
    ax.set_yscale("log")
    ax.set_ylim(0.015, 0.85)
    save_figure(fig, tmp_path / "a.png", dpi=40)
    minor = _labels(ax.yaxis.get_minorticklabels())
    assert "0.05" in minor and "0.5" in minor


def test_saving_twice_gives_identical_files(tmp_path):
    for name in ("a", "b"):
        fig, ax = plt.subplots()
        ax.plot([0, 1], [0, 1])
        save_figure(fig, tmp_path / f"{name}.png", tmp_path / f"{name}.pdf", tmp_path / f"{name}.svg", dpi=40)
    for ext in ("png", "pdf", "svg"):
        assert (tmp_path / f"a.{ext}").read_bytes() == (tmp_path / f"b.{ext}").read_bytes()


def test_from_zero_leaves_headroom_above_the_data():
    from featlearn.plotting import from_zero

    fig, ax = plt.subplots()
    ax.plot([1, 10], [11.05, 11.3], marker="o")
    ax.axhline(11.32, ls="--")
    from_zero(ax)
    lo, hi = ax.get_ylim()
    assert lo == 0
    assert hi >= 11.32 * 1.04  # the top marker and line sit below the frame, not on it
    ax.autoscale()
    ax.set_ylim(bottom=0)  # what it replaced keeps only the data range's own margin: the top on the marker
    assert ax.get_ylim()[1] < 11.32 * 1.04
    plt.close(fig)


def test_from_zero_on_an_empty_axis():
    from featlearn.plotting import from_zero

    fig, ax = plt.subplots()
    from_zero(ax)
    assert ax.get_ylim() == (0, 1.0)
    plt.close(fig)
