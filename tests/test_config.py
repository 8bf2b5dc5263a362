"""Configuration: schema defaults, and bad keys or values rejected before any job runs, naming the key."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from wfutil import REPO, copy_workflow, snakemake

SCHEMA = str(REPO / "workflow" / "schemas" / "config.schema.yaml")


def load(name: str) -> dict:
    return yaml.safe_load((REPO / "config" / name).read_text())


def test_default_config_is_valid_and_complete():
    config = load("config.yaml")
    validate(config, SCHEMA)
    filled = {}
    validate(filled, SCHEMA)  # every key has a default
    assert filled["scale"] == "default" and filled["device"] == "auto"
    assert filled["data"]["datasets"]["sst"] == {"enabled": "auto"}
    assert filled["data"]["datasets"]["wikitext103"] == {"enabled": False}
    assert filled["report"]["figure_formats"] == ["png", "pdf"]
    # the shipped default config sets exactly what the schema defaults to
    assert filled == config


@pytest.mark.parametrize("overlay", ["smoke.yaml", "paper.yaml"])
def test_overlays_are_valid(overlay):
    config = load("config.yaml")
    for key, value in load(overlay).items():
        if isinstance(value, dict):
            config[key] = {**config.get(key, {}), **value}
        else:
            config[key] = value
    validate(config, SCHEMA)


@pytest.mark.parametrize(
    "mutate, key",
    [
        (lambda c: c.update(scael="smoke"), "scael"),  # mistyped top-level key
        (lambda c: c["data"].update(ofline=True), "ofline"),  # mistyped nested key
        (lambda c: c["data"]["datasets"].update(sst2={"enabled": True}), "sst2"),  # unknown dataset
        (lambda c: c.update(scale="huge"), "huge"),  # not in the enum
        (lambda c: c.update(seed="abc"), "seed"),  # wrong type
        (lambda c: c["report"].update(dpi=5), "dpi"),  # out of range
        (lambda c: c["data"].update(offline="yes"), "offline"),  # wrong type
        (lambda c: c["data"]["datasets"]["sst"].update(enabled="maybe"), "enabled"),
        (lambda c: c["report"].update(figure_formats=["pdf"]), "figure_formats"),  # png is required
    ],
)
def test_bad_config_names_the_key(mutate, key):
    config = copy.deepcopy(load("config.yaml"))
    mutate(config)
    with pytest.raises(WorkflowError) as info:
        validate(config, SCHEMA)
    assert key in str(info.value)


def test_bad_key_fails_before_any_job(tmp_path):
    work = copy_workflow(tmp_path / "wf")
    (work / "bad.yaml").write_text("data:\n  mirorr: /somewhere\n")
    result = snakemake(work, "--cores", "1", "--configfile", "bad.yaml")
    assert result.returncode != 0
    assert "mirorr" in result.stdout + result.stderr
    assert not (work / "results").exists()


def test_out_of_range_value_from_command_line(tmp_path):
    work = copy_workflow(tmp_path / "wf")
    result = snakemake(work, "-n", "--config", "seed=-3")
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "instance['seed']" in output and "-3" in output
    assert not (work / "results").exists()
