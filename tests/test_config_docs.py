"""config/README.md documents every config key: generated from the schema's descriptions and the three config
files, and committed up to date."""

from __future__ import annotations

from featlearn.pipeline.config_docs import build, missing_descriptions, render
from wfutil import REPO


def test_config_readme_is_up_to_date():
    text, _ = build(REPO)
    committed = (REPO / "config" / "README.md").read_text()
    assert committed == text, "config/README.md is out of date: run `python -m featlearn config-docs`"


def test_every_config_key_has_a_description():
    _, missing = build(REPO)
    assert missing == [], f"keys without a description in workflow/schemas/config.schema.yaml: {missing}"


def test_a_key_without_description_is_reported_and_scales_are_compared():
    schema = {"properties": {"a": {"description": "the a", "properties": {"b": {}}}, "c": {"description": "the c"}}}
    configs = {"default": {"a": {"b": 1}, "c": 2}, "smoke": {"a": {"b": 1}, "c": 3}, "paper": {"a": {"b": 5}}}
    assert missing_descriptions(schema, configs) == ["a.b"]
    text = render(schema, configs)
    assert "| `a.b` | `1` |  | `5` |  |" in text  # smoke keeps the default: empty cell
    assert "| `c` | `2` | `3` | (absent) | the c |" in text
