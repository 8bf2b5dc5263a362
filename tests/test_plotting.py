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


def _minor_labels(ax):
    return [t.get_text() for t in ax.yaxis.get_minorticklabels() if t.get_text()]


def test_log_axes_over_decades_label_only_the_decades(tmp_path):
    fig, (wide, narrow) = plt.subplots(1, 2)
    wide.plot([1, 2], [1e-3, 1e1])
    wide.set_yscale("log")
    narrow.plot([1, 2], [2.0, 6.0])
    narrow.set_yscale("log")
    save_figure(fig, tmp_path / "a.png", dpi=40)
    assert _minor_labels(wide) == []
    # within one decade the minor labels are the axis' only labels: kept, as plain numbers
    assert "2" in _minor_labels(narrow) and not any("times" in t for t in _minor_labels(narrow))


def test_saving_twice_gives_identical_files(tmp_path):
    for name in ("a", "b"):
        fig, ax = plt.subplots()
        ax.plot([0, 1], [0, 1])
        save_figure(fig, tmp_path / f"{name}.png", tmp_path / f"{name}.pdf", tmp_path / f"{name}.svg", dpi=40)
    for ext in ("png", "pdf", "svg"):
        assert (tmp_path / f"a.{ext}").read_bytes() == (tmp_path / f"b.{ext}").read_bytes()
