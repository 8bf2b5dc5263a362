"""The public checkpoints of JoMA's Fig. 7 (Pythia across training, OPT final) and whether one is in the local
Hugging Face cache. Standard library only (``huggingface_hub`` is imported when a cache is read): the DAG is
built from :func:`available` without importing torch (the analysis is in :mod:`featlearn.joma.checkpoints`)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from featlearn.hf import download_command

# Pythia checkpoints: step0, the log-spaced step1 ... step512, then every 1000 steps to step143000;
# "main" is step143000 (Pythia model cards) [C].
PYTHIA_STEPS = (0, *(2**k for k in range(10)), *range(1000, 143001, 1000))
PYTHIA_REVISIONS = tuple(f"step{s}" for s in PYTHIA_STEPS)

# Parameter name of layer i's MLP up-projection (the projection into the hidden neurons), by the
# transformers model type [P, Fig. 7; names as in the public checkpoints].
UP_PROJ = {
    "gpt_neox": "gpt_neox.layers.{i}.mlp.dense_h_to_4h.weight",
    "opt": "model.decoder.layers.{i}.fc1.weight",
}

WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
TOKENIZER_FILES = ("tokenizer.json", "vocab.json")  # a fast tokenizer, or GPT-2 style vocab.json + merges.txt (OPT)


@dataclass(frozen=True)
class CheckpointModel:
    """A public model whose checkpoints Fig. 7 reads."""

    repo_id: str
    family: str  # transformers model_type: a key of UP_PROJ
    revisions: tuple[str, ...]
    final_step: int | None  # training step of the "main" revision, where known

    @property
    def short(self) -> str:
        return self.repo_id.split("/")[-1]

    @property
    def up_proj(self) -> str:
        return UP_PROJ[self.family]


def _pythia(size: str) -> CheckpointModel:
    return CheckpointModel(f"EleutherAI/pythia-{size}", "gpt_neox", (*PYTHIA_REVISIONS, "main"), PYTHIA_STEPS[-1])


def _opt(size: str) -> CheckpointModel:
    # OPT's intermediate checkpoints are not public: only the final "main" revision exists.
    return CheckpointModel(f"facebook/opt-{size}", "opt", ("main",), None)


MODELS = {
    m.short: m
    for m in (
        *(_pythia(s) for s in ("14m", "70m", "160m", "410m", "1b", "1.4b", "2.8b", "6.9b", "12b")),
        *(_opt(s) for s in ("125m", "350m", "1.3b", "2.7b", "6.7b", "13b")),
    )
}


def model_spec(model: str) -> CheckpointModel:
    """The spec of a model given by short name (``pythia-70m``) or hub id (``EleutherAI/pythia-70m``)."""
    spec = MODELS.get(model.split("/")[-1])
    if spec is None or ("/" in model and model != spec.repo_id):
        raise ValueError(f"unknown checkpoint model {model!r}; known: {', '.join(MODELS)}")
    return spec


def revision_step(spec: CheckpointModel, revision: str) -> float:
    """Training step of a revision ("step1000" -> 1000; "main" -> the final step, NaN where unknown)."""
    if revision not in spec.revisions:
        shown = ", ".join(spec.revisions[:12]) + (", ..." if len(spec.revisions) > 12 else "")
        raise ValueError(f"{spec.repo_id} has no revision {revision!r}; its revisions are: {shown}")
    if revision == "main":
        return float("nan") if spec.final_step is None else float(spec.final_step)
    return float(revision.removeprefix("step"))


# ---------------------------------------------------------------- the local Hugging Face cache


def _cached(repo_id: str, filename: str, revision: str, cache_dir: str | None) -> str | None:
    """Path of a file of a revision in the cache, or None (no network)."""
    from huggingface_hub import try_to_load_from_cache

    path = try_to_load_from_cache(repo_id, filename, cache_dir=cache_dir, revision=revision)
    return path if isinstance(path, str) else None


def fetch_file(repo_id: str, filename: str, revision: str, cache_dir: str | None, offline: bool) -> str | None:
    """Path of a file of a revision, downloaded into the cache unless offline; None if the revision has no such file."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError

    try:
        return hf_hub_download(repo_id, filename, revision=revision, cache_dir=cache_dir, local_files_only=offline)
    except EntryNotFoundError:  # also LocalEntryNotFoundError: not in the cache while offline
        return None


def available(name: str, revision: str, cache_dir: str | None, offline: bool) -> tuple[bool, str]:
    """Whether the checkpoint can be analysed: its config, weights and tokenizer are in the local cache,
    or the network may be used. The reason says which files are missing. Makes no network call."""
    try:
        spec = model_spec(name)
        revision_step(spec, revision)
    except ValueError as err:
        return False, str(err)
    where = f"the Hugging Face cache {cache_dir!r}" if cache_dir else "the default Hugging Face cache"
    missing = []
    if _cached(spec.repo_id, "config.json", revision, cache_dir) is None:
        missing.append("config.json")
    if not _cached_weights(spec.repo_id, revision, cache_dir):
        missing.append("weights (" + " or ".join(WEIGHT_FILES) + ")")
    if not any(_cached(spec.repo_id, f, revision, cache_dir) for f in TOKENIZER_FILES):
        missing.append("tokenizer (" + " or ".join(TOKENIZER_FILES) + ")")
    if not missing:
        return True, f"{spec.repo_id}@{revision} is in {where}"
    if not offline:
        return True, f"{spec.repo_id}@{revision} is not (fully) in {where}; it will be downloaded from the hub"
    return False, (
        f"{spec.repo_id}@{revision} is not in {where} (missing: {'; '.join(missing)}) and offline is set; "
        f"download it first ({download_command(spec.repo_id, revision, cache_dir)}) or allow the network"
    )


def _cached_weights(repo_id: str, revision: str, cache_dir: str | None) -> bool:
    for single, index in ((WEIGHT_FILES[0], WEIGHT_FILES[1]), (WEIGHT_FILES[2], WEIGHT_FILES[3])):
        if _cached(repo_id, single, revision, cache_dir):
            return True
        idx = _cached(repo_id, index, revision, cache_dir)
        if idx:
            with open(idx, encoding="utf-8") as fh:
                shards = set(json.load(fh)["weight_map"].values())
            if all(_cached(repo_id, s, revision, cache_dir) for s in shards):
                return True
    return False
