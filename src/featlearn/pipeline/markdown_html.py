"""Markdown to a standalone HTML page (the results pages and the scorecard, for the Snakemake report)."""

from __future__ import annotations

import html
import re

_HTML_STYLE = """
body{font-family:system-ui,sans-serif;max-width:70rem;margin:1.5rem auto;padding:0 1rem;line-height:1.45;\
color:#111;background:#fff}
table{border-collapse:collapse;font-size:.88rem;margin:.5rem 0}th,td{border:1px solid #bbb;padding:.2rem .45rem;\
vertical-align:top}
th{background:#eee}code{background:#f3f3f3;padding:0 .2rem}h1{font-size:1.5rem}h2{font-size:1.25rem;margin-top:1.6rem}
h3{font-size:1.05rem}img{max-width:100%}
"""


def markdown_to_html(markdown: str, title: str) -> str:
    """A standalone HTML page of a Markdown page (tables included), for the Snakemake report, which shows HTML
    files inline. Images are left out: the report shows each figure as its own item."""
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(
        re.sub(r"^!\[([^\]]*)\]\([^)]*\)$", r"*(\1: shown as its own item in this report)*", markdown, flags=re.M)
    )
    return (f"<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{_HTML_STYLE}</style></head><body>\n{body}</body></html>\n")
