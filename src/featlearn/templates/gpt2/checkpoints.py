"""Which public GPT-2 checkpoints (Figs. 7, 24) can be loaded: stdlib and huggingface_hub only, so the
Snakefile can ask at DAG-building time without importing torch or transformers."""

from __future__ import annotations

from featlearn.hf import download_command

# Public GPT-2 checkpoints of Figs. 7 and 24 [P]: hub names as from_pretrained takes them.
PRETRAINED = ("gpt2", "gpt2-medium", "gpt2-large")
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def check_model_name(name: str) -> str:
    if name not in PRETRAINED:
        raise ValueError(f"unknown pretrained GPT-2 {name!r}; expected one of {PRETRAINED}")
    return name


def _cached(name: str, filename: str, revision: str, cache_dir: str | None) -> str | None:
    """Path of a file of a revision in the local cache, or None (no network)."""
    from huggingface_hub import try_to_load_from_cache

    path = try_to_load_from_cache(name, filename, cache_dir=cache_dir, revision=revision)
    return path if isinstance(path, str) else None


def available(name: str, revision: str, cache_dir: str | None, offline: bool) -> tuple[bool, str]:
    """Whether checkpoint ``name@revision`` can be loaded: config and weights in the local Hugging Face cache,
    or the network may be used. Makes no network call; the reason names what is missing."""
    try:
        check_model_name(name)
    except ValueError as err:
        return False, str(err)
    where = f"the Hugging Face cache {cache_dir!r}" if cache_dir else "the default Hugging Face cache"
    missing = []
    if _cached(name, "config.json", revision, cache_dir) is None:
        missing.append("config.json")
    if not any(_cached(name, f, revision, cache_dir) for f in WEIGHT_FILES):
        missing.append("weights (" + " or ".join(WEIGHT_FILES) + ")")
    if not missing:
        return True, f"{name}@{revision} is in {where}"
    if not offline:
        return True, f"{name}@{revision} is not (fully) in {where}; it will be downloaded from the hub"
    return False, (f"{name}@{revision} is not in {where} (missing: {'; '.join(missing)}) and offline is set; download it "
                   f"first ({download_command(name, revision, cache_dir)}) or "
                   "allow the network")
