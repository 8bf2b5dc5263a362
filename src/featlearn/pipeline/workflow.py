"""Helpers the Snakefile uses at DAG-building time (stdlib only, so they import before any job runs).

- which datasets are switched on, and why (``data.datasets.<name>.enabled``: true, false or auto);
- code hashes, so that editing a paper's subpackage reruns that paper's jobs and nothing else;
- what the run record and the results pages say about the config (its hash, how it differs from paper scale).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from featlearn.data.fetch import find_in_mirror, resolve_mirror, resolve_offline
from featlearn.data.registry import DATASETS, PREPARED

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # src/featlearn

# Prepared datasets each paper reads (see ../reference notes of each paper and the papers' data sections).
PAPER_DATASETS: dict[str, tuple[str, ...]] = {
    "features": ("sst", "sstwsub", "imdb", "ag_news", "ptb", "wikitext2", "tinyshakespeare"),
    "scan_snap": ("wikitext2", "wikitext103"),
    "joma": ("wikitext2", "wikitext103"),
    "templates": ("wikitext2", "wikitext103"),
}


@dataclass(frozen=True)
class DatasetStatus:
    name: str
    enabled: bool
    reason: str


def dataset_status(config: dict, raw_root: str | os.PathLike,
                   reachable: Callable[[list[str]], dict[str, bool]] | None = None) -> dict[str, DatasetStatus]:
    """Resolve ``enabled: auto`` for every raw dataset.

    ``auto`` switches a dataset on when its raw files can be had: already verified in ``raw_root``,
    present in the mirror, or downloadable (not offline and, with ``reachable``, the server of one of each
    missing file's sources answers: ``reachable(["host:port", ...])`` says which do, :func:`hosts_reachable` in a
    real run).
    ``true`` always tries (and fails clearly if the files cannot be had); ``false`` always skips.
    """
    data = config["data"]
    mirror = resolve_mirror(data["mirror"])
    offline = resolve_offline(data["offline"])
    where = f"mirror {mirror}" if mirror else "no mirror set"
    out, absent = {}, {}
    for name, ds in DATASETS.items():
        setting = data["datasets"][name]["enabled"]
        if setting is True or setting is False:
            out[name] = DatasetStatus(name, setting, "set in config")
            continue
        missing = [
            f for f in ds.files
            if not (Path(raw_root) / name / f.name).is_file() and find_in_mirror(f, mirror, ds.mirror_dir) is None
        ]
        if not missing:
            out[name] = DatasetStatus(name, True, "files present")
        elif not offline:
            out[name] = DatasetStatus(name, True, "will download")
            absent[name] = missing
        else:
            names = ", ".join(f.name for f in missing)
            out[name] = DatasetStatus(name, False, f"offline and {names} not found ({where})")
    if reachable is not None and absent:
        answers = reachable(sorted({_endpoint(src.url) for files in absent.values() for f in files for src in f.sources}))
        for name, missing in absent.items():
            cut = [f for f in missing if not any(answers.get(_endpoint(src.url)) for src in f.sources)]
            if cut:
                hosts = ", ".join(sorted({_endpoint(src.url) for f in cut for src in f.sources}))
                out[name] = DatasetStatus(name, False, f"{UNREACHABLE}{', '.join(f.name for f in cut)} not found ({where}) "
                                          f"and {hosts} did not answer within {REACH_TIMEOUT:g} s (set "
                                          f"data.datasets.{name}.enabled: true to try anyway)")
    return out


# the reason of a dataset left out because its download hosts did not answer (assume_online switches it on again)
UNREACHABLE = "no network: "
REACH_TIMEOUT = 3.0
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


def _endpoint(url: str) -> str:
    """``host:port`` of a URL's server (the scheme's port where the URL names none)."""
    from urllib.parse import urlsplit

    u = urlsplit(url)
    return f"{u.hostname or ''}:{u.port or (80 if u.scheme == 'http' else 443)}"


def hosts_reachable(endpoints: list[str], timeout: float = REACH_TIMEOUT) -> dict[str, bool]:
    """Whether a TCP connection to each ``host:port`` opens within ``timeout`` seconds, all at once (no request is
    sent). Behind a proxy (``HTTPS_PROXY``, ``HTTP_PROXY`` or ``ALL_PROXY`` set) nothing is contacted and every
    server counts as reachable: the download goes through the proxy and says itself whether it worked.
    ``FEATLEARN_DATA_HOST_ADDRESS=host:port`` sends every probe to that address instead (a test's listener)."""
    import socket
    from concurrent.futures import ThreadPoolExecutor

    if any(os.environ.get(v) for v in PROXY_VARIABLES):
        return {e: True for e in endpoints}
    redirect = os.environ.get("FEATLEARN_DATA_HOST_ADDRESS")

    def one(endpoint: str) -> bool:
        host, _, port = (redirect or endpoint).rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout):
                return True
        except (OSError, ValueError):
            return False

    with ThreadPoolExecutor(max_workers=max(1, len(endpoints))) as pool:
        return dict(zip(endpoints, pool.map(one, endpoints)))


def prepared_enabled(status: dict[str, DatasetStatus]) -> dict[str, bool]:
    return {name: status[spec.raw].enabled for name, spec in PREPARED.items()}


def code_hash(*relative: str) -> str:
    """sha256 (12 hex digits) over the Python sources of the given package sub-paths.

    Used as a rule ``params`` so that a code change in, e.g., ``scan_snap/`` reruns only the rules
    that depend on it. Compiled caches and non-Python files are ignored.
    """
    h = hashlib.sha256()
    for rel in relative:
        root = PACKAGE_DIR / rel
        files = sorted(root.rglob("*.py")) if root.is_dir() else [root]
        for path in files:
            h.update(str(path.relative_to(PACKAGE_DIR)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:12]


def hub_reachable(host: str = "huggingface.co", port: int = 443, timeout: float = 3.0) -> bool:
    """Whether a TCP connection to the model hub opens within ``timeout`` seconds (no request is sent).
    ``FEATLEARN_HUB_ADDRESS=host:port`` points the probe elsewhere (a proxy, or a test's listener)."""
    import socket

    address = os.environ.get("FEATLEARN_HUB_ADDRESS")
    if address:
        host, _, port_text = address.rpartition(":")
        port = int(port_text)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


# Whether building the DAG may open a connection to the model hub (see is_dry_run: a dry run never does).
HUB_CONTACT = {"allowed": True}


def is_dry_run(argv: list[str]) -> bool:
    """Whether a Snakemake command line asks for a dry run (``-n``, ``--dry-run``, ``--dryrun``, or ``n`` in a
    cluster of short flags such as ``-np``). Snakemake does not tell the Snakefile while it is parsed."""
    for arg in argv:
        if arg == "--":
            break
        if arg in ("--dry-run", "--dryrun", "--dry_run"):
            return True
        if arg.startswith("-") and not arg.startswith("--") and arg[1:].isalpha() and "n" in arg[1:]:
            return True
    return False


def pretrained_checkpoints(pre: dict, data_offline: bool, available) -> tuple[list[tuple[str, str]], list[str]]:
    """Resolve ``joma.pretrained`` (or another paper's section of the same shape): the (model, revision)
    pairs to analyse and, for each one left out, why. ``enabled: auto`` keeps a checkpoint when it is in the
    Hugging Face cache, or when the network may be used and the hub answers; ``true`` keeps them all (a
    missing one then fails clearly in its job); ``false`` keeps none. ``available(model, revision,
    cache_dir, offline) -> (ok, reason)`` checks one checkpoint (each paper passes its own)."""
    pairs = [(m, r) for m, revs in pre["models"].items() for r in revs]
    if pre["enabled"] is False:
        return [], ["joma.pretrained.enabled is false"]
    if pre["enabled"] is True:
        return pairs, []
    from featlearn.data.fetch import resolve_offline

    offline = resolve_offline(data_offline)
    keep, why, reachable = [], [], None
    for model, rev in pairs:
        ok, reason = available(model, rev, pre["cache_dir"], offline=True)  # cached?
        if not ok and not offline and not HUB_CONTACT["allowed"]:
            reason = f"{model}@{rev} is not cached (a dry run does not contact the Hugging Face hub)"
        elif not ok and not offline:
            if reachable is None:
                reachable = hub_reachable()
            ok = reachable
            reason = reason if ok else f"{model}@{rev} is not cached and the Hugging Face hub cannot be reached"
        (keep.append((model, rev)) if ok else why.append(reason))
    return keep, why


def read_yaml(path: str | os.PathLike):
    """The YAML file at ``path``, read as ``yaml.safe_load`` reads it, with libyaml's C parser where PyYAML has it
    (8x faster on the config schema, which every Snakemake call reads with the config files). Kept here, not in
    featlearn.io, whose every edit reruns every job (it is in each job's code hash)."""
    import yaml

    return yaml.load(Path(path).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def load_schema(schema_path: str | os.PathLike) -> dict:
    """The config schema: workflow/schemas/config.schema.yaml, completed by the papers whose records hold the
    keys of a family (a paper's registry module may define ``config_schema(schema)``: the templates sweep grids,
    one ``templates.sweeps.fig<id>`` per grid record, are required and described from their records)."""
    import importlib

    from featlearn import PAPERS

    schema = read_yaml(schema_path)
    for paper in PAPERS:
        complete = getattr(importlib.import_module(f"featlearn.{paper}.registry"), "config_schema", None)
        if complete is not None:
            complete(schema)
    return schema


def config_errors(config: dict, schema_path: str | os.PathLike, limit: int = 10) -> list[str]:
    """One line per schema violation of ``config``: the key's dotted path and the reason (at most ``limit``)."""
    import jsonschema

    schema = load_schema(schema_path)
    validator = jsonschema.validators.validator_for(schema)(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: [str(k) for k in e.absolute_path])
    lines = []
    for err in errors[:limit]:
        key = ".".join(str(k) for k in err.absolute_path) or "(top level)"
        lines.append(f"config key {key}: {err.message}")
    if len(errors) > limit:
        lines.append(f"... and {len(errors) - limit} more")
    return lines


def validate_config(config: dict, schema_path: str | os.PathLike) -> None:
    """Stop the run with a few lines naming each bad key (not the whole schema and config)."""
    from snakemake.exceptions import WorkflowError

    lines = config_errors(config, schema_path)
    if lines:
        raise WorkflowError(f"the configuration does not match {schema_path}:\n  " + "\n  ".join(lines))


def merge_config(base: dict, overlay: dict) -> dict:
    """``overlay`` merged into a copy of ``base``, recursively (as Snakemake merges ``--configfile``)."""
    out = dict(base)
    for key, value in overlay.items():
        out[key] = merge_config(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


CONFIG_SCALES = ("smoke", "default", "paper")


def scale_config(scale: str, config_dir: str | os.PathLike) -> dict:
    """config.yaml, with smoke.yaml or paper.yaml merged on top for those scales (as ``--configfile`` does)."""
    if scale not in CONFIG_SCALES:
        raise ValueError(f"unknown scale {scale!r}; expected one of {CONFIG_SCALES}")
    config_dir = Path(config_dir)
    config = read_yaml(config_dir / "config.yaml")
    if scale != "default":
        config = merge_config(config, read_yaml(config_dir / f"{scale}.yaml") or {})
    return config


def merged_config(configfiles: list[str], config_dir: str | os.PathLike = "config") -> dict:
    """config.yaml with each overlay merged on top in order, as ``snakemake --configfile A B`` merges them."""
    config = read_yaml(Path(config_dir) / "config.yaml")
    for path in configfiles:
        config = merge_config(config, read_yaml(path) or {})
    return config


def paper_scale_config(config_dir: str | os.PathLike) -> dict:
    """config.yaml with paper.yaml merged on top, as ``--configfile config/paper.yaml`` gives it."""
    return scale_config("paper", config_dir)


def _leaves(value, prefix: str) -> dict:
    if isinstance(value, dict) and value:
        out = {}
        for key, sub in value.items():
            out.update(_leaves(sub, f"{prefix}.{key}"))
        return out
    return {prefix: value}


_ABSENT = "(absent)"


def config_differences(config: dict, reference: dict, section: str) -> list[tuple[str, object, object]]:
    """The settings under ``section`` whose value in ``config`` differs from ``reference`` (the paper-scale
    config): ``(dotted key, this run's value, reference value)``, sorted by key."""
    ours = _leaves(config.get(section, {}), section)
    ref = _leaves(reference.get(section, {}), section)
    return [(k, ours.get(k, _ABSENT), ref.get(k, _ABSENT)) for k in sorted(set(ours) | set(ref))
            if ours.get(k, _ABSENT) != ref.get(k, _ABSENT)]


def config_sha256(config: dict) -> str:
    """sha256 of the merged config (key order ignored)."""
    import json

    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()
