"""Arguments shared by the papers' command-line entry points."""

from __future__ import annotations

import argparse


def add_figure_arguments(p: argparse.ArgumentParser, claims_required: bool) -> None:
    """Tables in, figure files and a claims table out, with the figure-only settings."""
    p.add_argument("--tables", nargs="+", required=True, help="tidy tables the figure reads")
    p.add_argument("--figures", nargs="*", default=[], help="output files; the format follows the extension")
    p.add_argument("--claims", required=claims_required, default=None, help="claims table to write")
    p.add_argument("--settings", default=None, help="JSON object of figure settings")
    p.add_argument("--scale", required=True, help="label of the configuration scale")
    p.add_argument("--dpi", type=int, default=150)
