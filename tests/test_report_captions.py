"""Every report caption renders as reStructuredText without a docutils message (an unescaped ``|W|`` reads as a
substitution reference and shows a red error block in the HTML report)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from docutils.core import publish_doctree

CAPTIONS = sorted((Path(__file__).resolve().parents[1] / "workflow" / "report").glob("*.rst"))


@pytest.mark.parametrize("caption", CAPTIONS, ids=lambda p: p.name)
def test_caption_renders_without_docutils_messages(caption):
    messages = io.StringIO()
    publish_doctree(caption.read_text(), settings_overrides={"warning_stream": messages, "report_level": 1, "halt_level": 5})
    assert messages.getvalue() == "", messages.getvalue()


def test_an_unescaped_bar_would_be_caught():
    messages = io.StringIO()
    publish_doctree("size |W| of the alphabet", settings_overrides={"warning_stream": messages, "report_level": 1, "halt_level": 5})
    assert "Undefined substitution" in messages.getvalue()
