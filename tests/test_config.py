"""Configuration: values only in config.yaml, every key required, overlays merged as Snakemake merges them, and
bad keys or values rejected before any job runs, naming the key."""

from __future__ import annotations

import copy

import pytest
import yaml
from snakemake.exceptions import WorkflowError
from snakemake.utils import update_config

from wfutil import REPO, copy_workflow, snakemake

from featlearn.pipeline.workflow import load_schema, read_yaml
from featlearn.pipeline.workflow import validate_config as validate  # the schema the Snakefile checks, completed

SCHEMA = str(REPO / "workflow" / "schemas" / "config.schema.yaml")


def load(name: str) -> dict:
    return yaml.safe_load((REPO / "config" / name).read_text())


def merged(overlay: str) -> dict:
    """config.yaml with an overlay merged as Snakemake merges ``--configfile`` (recursively)."""
    config = load("config.yaml")
    update_config(config, load(overlay))
    return config


def _keys(node, path=()):
    """Every key path of a nested config."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield (*path, key)
            yield from _keys(value, (*path, key))


def _schema_keys(node):
    if isinstance(node, dict):
        yield from node
        for value in node.values():
            yield from _schema_keys(value)
    elif isinstance(node, list):
        for value in node:
            yield from _schema_keys(value)


def test_schema_holds_no_values():
    """Values live in config.yaml only; the schema keeps types, ranges, enums and descriptions."""
    schema = load_schema(SCHEMA)
    assert "default" not in set(_schema_keys(schema))


def test_default_config_is_valid():
    config = load("config.yaml")
    before = copy.deepcopy(config)
    validate(config, SCHEMA)
    assert config == before  # nothing filled in: config.yaml is complete
    assert config["scale"] == "default" and config["device"] == "auto"
    assert config["data"]["datasets"]["wikitext103"] == {"enabled": False}


def _required_paths():
    """Key paths of config.yaml that the schema requires (the keys config.yaml feeds to the code)."""
    schema = load_schema(SCHEMA)
    config = load("config.yaml")
    out = []
    for path in _keys(config):
        node, sch = config, schema
        for key in path[:-1]:
            node = node[key]
            sch = _subschema(schema, sch, key)
        if sch is not None and path[-1] in _resolve(schema, sch).get("required", ()):
            out.append(path)
    return out


def _resolve(schema, sch):
    while isinstance(sch, dict) and "$ref" in sch:
        sch = schema["$defs"][sch["$ref"].rsplit("/", 1)[1]]
    return sch


def _subschema(schema, sch, key):
    sch = _resolve(schema, sch)
    if sch is None:
        return None
    props = sch.get("properties", {})
    if key in props:
        return props[key]
    extra = sch.get("additionalProperties")
    return extra if isinstance(extra, dict) else None


REQUIRED = _required_paths()


def test_every_config_key_is_required():
    """Keys with a value in config.yaml are required by the schema (a config without one fails)."""
    assert len(REQUIRED) > 300
    assert ("templates", "sweeps", "fig8", "lrs") in REQUIRED
    assert ("scan_snap", "wikitext", "fig7", "iterations") in REQUIRED


@pytest.mark.parametrize("path", REQUIRED[:: max(1, len(REQUIRED) // 40)], ids=lambda p: ".".join(map(str, p)))
def test_missing_key_fails_naming_it(path):
    config = load("config.yaml")
    node = config
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    with pytest.raises(WorkflowError) as info:
        validate(config, SCHEMA)
    assert f"'{path[-1]}' is a required property" in str(info.value)


@pytest.mark.parametrize("overlay", ["smoke.yaml", "paper.yaml"])
def test_overlays_are_valid(overlay):
    validate(merged(overlay), SCHEMA)


def test_overlay_merge_is_recursive_as_snakemake_does_it():
    """What the overlays really run: a key of config.yaml survives under a section an overlay redefines."""
    config = merged("smoke.yaml")
    smoke = load("smoke.yaml")
    assert config["scale"] == "smoke"
    # smoke.yaml sets only some scan_snap.syn_small keys; the others keep config.yaml's values
    assert set(smoke["scan_snap"]["syn_small"]) < set(config["scan_snap"]["syn_small"])
    assert config["scan_snap"]["syn_small"]["batch"] == load("config.yaml")["scan_snap"]["syn_small"]["batch"]


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
        # a GPT-2 revision with "_" would not match the rule's wildcard (outputs join revision and init with "_")
        (lambda c: c["templates"]["gpt2"]["pretrained"]["models"].update(gpt2=["my_rev"]), "my_rev"),
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
    assert "config key seed: -3 is less than the minimum of 0" in output
    assert len(output.splitlines()) < 60  # a few lines, not the schema and the whole config
    assert not (work / "results").exists()


def test_config_errors_name_the_key_and_the_reason():
    from featlearn.pipeline.workflow import config_errors

    config = copy.deepcopy(load("config.yaml"))
    config["data"]["mirorr"] = "/somewhere"
    config["report"]["dpi"] = 5
    lines = config_errors(config, SCHEMA)
    assert lines == ["config key data: Additional properties are not allowed ('mirorr' was unexpected)",
                     "config key report.dpi: 5 is less than the minimum of 50"]
    assert config_errors(load("config.yaml"), SCHEMA) == []


def test_read_yaml_reads_what_safe_load_reads_and_refuses_what_it_refuses(repo, tmp_path):
    for path in [repo / "workflow" / "schemas" / "config.schema.yaml", *sorted((repo / "config").glob("*.yaml"))]:
        assert read_yaml(path) == yaml.safe_load(path.read_text()), path
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\nb: 3\n")
    with pytest.raises(yaml.YAMLError):
        read_yaml(bad)
    tagged = tmp_path / "tagged.yaml"  # no Python objects: safe loading only
    tagged.write_text("a: !!python/object/apply:os.system ['true']\n")
    with pytest.raises(yaml.YAMLError):
        read_yaml(tagged)
