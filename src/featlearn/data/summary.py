"""Summary of the prepared datasets next to their published sizes: a tidy table and a figure."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

from featlearn.data.registry import PREPARED
from featlearn.io import write_csv


def summary_table(stats_paths: list[str | os.PathLike]) -> pd.DataFrame:
    """One row per (dataset, quantity): measured count, published count, and whether they agree."""
    rows = []
    for path in stats_paths:
        name = Path(path).parent.name
        spec = PREPARED[name]
        stats = json.loads(Path(path).read_text(encoding="utf-8"))
        unit = "examples" if spec.kind == "classification" else "tokens"
        for i, split in enumerate(spec.splits):
            s = stats["splits"][split]
            measured = s["n"] if unit == "examples" else s["n_tokens"]
            expected = spec.expected_sizes[i] if spec.expected_sizes else None
            rows.append((name, f"{split} {unit}", measured, expected))
        rows.append((name, "vocabulary", stats["vocab_size"], spec.expected_vocab))
    df = pd.DataFrame(rows, columns=["dataset", "quantity", "measured", "published"]).astype({"measured": "int64"})
    df["published"] = df["published"].astype("Int64")
    df["matches"] = (df["measured"] == df["published"]).astype("boolean")
    df.loc[df["published"].isna(), "matches"] = pd.NA
    return df


def write_summary(
    stats_paths: list[str | os.PathLike], out_csv: str | os.PathLike, figures: list[str], scale: str, dpi: int = 150
) -> pd.DataFrame:
    import matplotlib.pyplot as plt
    import seaborn as sns

    from featlearn.plotting import save_figure, set_style

    df = summary_table(stats_paths)
    write_csv(df, out_csv)

    set_style()
    if df.empty:  # every dataset switched off: still a valid (empty) figure
        fig, ax = plt.subplots(figsize=(6, 1.5))
        ax.axis("off")
        ax.text(0.5, 0.5, f"No dataset enabled in this run (scale: {scale})", ha="center", va="center")
        save_figure(fig, *figures, dpi=dpi)
        return df
    sizes = df[df["quantity"] != "vocabulary"].copy()
    sizes["label"] = sizes["dataset"] + ": " + sizes["quantity"]
    long = sizes.melt(id_vars="label", value_vars=["measured", "published"], var_name="source", value_name="count").dropna()
    fig, ax = plt.subplots(figsize=(7, 0.32 * len(sizes) + 1.2))
    sns.barplot(data=long, y="label", x="count", hue="source", ax=ax, orient="h")
    ax.set_xscale("log")
    ax.set_xlabel("count (examples or tokens, log scale)")
    ax.set_ylabel("")
    ax.set_title(f"Prepared datasets vs published sizes (scale: {scale})")
    save_figure(fig, *figures, dpi=dpi)
    return df
