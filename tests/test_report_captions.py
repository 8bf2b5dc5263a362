"""Every report caption renders as reStructuredText without a docutils message (an unescaped ``|W|`` reads as a
substitution reference and shows a red error block in the HTML report)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from docutils.core import publish_doctree

CAPTIONS = sorted((Path(__file__).resolve().parents[1] / "workflow" / "report").glob("*.rst"))


# Snakemake appends a link target to every caption for each file in the report, named by its file name.
REPORT_FILES = ("scorecard.html",)


@pytest.mark.parametrize("caption", CAPTIONS, ids=lambda p: p.name)
def test_caption_renders_without_docutils_messages(caption):
    messages = io.StringIO()
    text = caption.read_text()
    text += "".join(f"\n\n.. _{name}: javascript:void(0)\n" for name in REPORT_FILES if f"`{name}`_" in text)
    publish_doctree(text, settings_overrides={"warning_stream": messages, "report_level": 1, "halt_level": 5})
    assert messages.getvalue() == "", messages.getvalue()


def test_an_unescaped_bar_would_be_caught():
    messages = io.StringIO()
    publish_doctree("size |W| of the alphabet",
                    settings_overrides={"warning_stream": messages, "report_level": 1, "halt_level": 5})
    assert "Undefined substitution" in messages.getvalue()
