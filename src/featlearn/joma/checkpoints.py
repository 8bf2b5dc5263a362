"""Compute side of JoMA's Fig. 7: public pretrained checkpoints (Pythia across training, OPT final).

For each checkpoint (model, revision) and each layer l:

  stable rank   sr(W_l) = ||W_l||_F^2 / ||W_l||_2^2 of the MLP up-projection W_l (n x m = d_ff x d),
                compared at step 0 with the Gaussian value n m / (sqrt n + sqrt m)^2 [P, Sec. 6];
  attention     H_l = mean over windows, heads and query rows i of  -sum_j a_ij log(a_ij + 1e-8),
  entropy       on causal windows of T tokens of WikiText validation text; uniform causal attention
                gives mean_{i=1..T} ln i (2.632 at T = 35, the bound of Figs. 6 and 8).

The stable rank is read tensor by tensor from the checkpoint's safetensors files (one matrix in memory
at a time); where a revision has no safetensors file it is taken from the loaded model. Checkpoints load
with ``transformers`` ``from_pretrained(name, revision=...)`` into a Hugging Face cache folder, with eager
attention so that the attention maps are returned; only one checkpoint is in memory at a time.
"""

from __future__ import annotations

import gc
import json
import sys
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from featlearn.data.fetch import resolve_offline
from featlearn.hf import download_command
from featlearn.io import load_tensor, write_csv
from featlearn.lm.attention import attention_entropy, uniform_causal_entropy
from featlearn.lm.rank import gaussian_stable_rank, stable_rank

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


def _fetch(repo_id: str, filename: str, revision: str, cache_dir: str | None, offline: bool) -> str | None:
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


def _config(spec: CheckpointModel, revision: str, cache_dir: str | None, offline: bool) -> dict:
    path = _fetch(spec.repo_id, "config.json", revision, cache_dir, offline)
    if path is None:
        ok, reason = available(spec.repo_id, revision, cache_dir, offline)
        raise FileNotFoundError(reason if not ok else f"{spec.repo_id}@{revision} has no config.json")
    with open(path, encoding="utf-8") as fh:
        config = json.load(fh)
    if config.get("model_type") != spec.family:
        raise ValueError(f"{spec.repo_id}@{revision}: model_type {config.get('model_type')!r}, expected {spec.family!r}")
    return config


# ---------------------------------------------------------------- stable rank


def safetensors_index(repo_id: str, revision: str, cache_dir: str | None, offline: bool) -> dict[str, str] | None:
    """Tensor name -> local safetensors file of a revision (sharded or single file), or None if the
    revision has no safetensors weights (then the model's own weights are used)."""
    from safetensors import safe_open

    index = _fetch(repo_id, "model.safetensors.index.json", revision, cache_dir, offline)
    if index is not None:
        with open(index, encoding="utf-8") as fh:
            weight_map = json.load(fh)["weight_map"]
        files = {}
        for shard in sorted(set(weight_map.values())):
            files[shard] = _fetch(repo_id, shard, revision, cache_dir, offline)
            if files[shard] is None:
                return None
        return {name: files[shard] for name, shard in weight_map.items()}
    single = _fetch(repo_id, "model.safetensors", revision, cache_dir, offline)
    if single is None:
        return None
    with safe_open(single, framework="pt") as fh:
        return {name: single for name in fh.keys()}


def find_tensor_name(names, name: str) -> str:
    """The stored name of parameter ``name``: itself, or the same name with a different prefix
    (e.g. OPT's files store ``decoder.layers.0.fc1.weight`` for ``model.decoder.layers.0.fc1.weight``)."""
    names = list(names)
    if name in names:
        return name
    hits = [k for k in names if name.endswith("." + k) or k.endswith("." + name)]
    if len(hits) != 1:
        raise KeyError(f"parameter {name!r} {'is ambiguous' if hits else 'not found'} in the checkpoint (matches: {hits})")
    return hits[0]


def stable_ranks_from_safetensors(index: dict[str, str], pattern: str, n_layers: int, device: str = "cpu") -> list[dict]:
    """Per layer: n, m and the stable rank of ``pattern.format(i=layer)``, one tensor in memory at a time."""
    from safetensors import safe_open

    rows = []
    for i in range(n_layers):
        key = find_tensor_name(index, pattern.format(i=i))
        with safe_open(index[key], framework="pt") as fh:
            w = fh.get_tensor(key)
        rows.append(_rank_row(i, w, device, "safetensors"))
        del w
    return rows


def stable_ranks_from_model(model, pattern: str, n_layers: int, device: str = "cpu") -> list[dict]:
    return [_rank_row(i, model.get_parameter(pattern.format(i=i)), device, "model") for i in range(n_layers)]


def _rank_row(layer: int, w: torch.Tensor, device: str, source: str) -> dict:
    n, m = w.shape
    return {"layer": layer, "n": n, "m": m, "value": stable_rank(w.to(device)), "source": source}


# ---------------------------------------------------------------- attention entropy


def validation_text(valid_pt: str, vocab_json: str, max_words: int | None = None) -> str:
    """WikiText validation text rebuilt from the prepared token ids: words joined by spaces, each
    <eos> a line break [D]; the first ``max_words`` ids (words and <eos> alike)."""
    ids = load_tensor(valid_pt)
    if max_words is not None:
        ids = ids[:max_words]
    with open(vocab_json, encoding="utf-8") as fh:
        vocab = json.load(fh)
    lines, line = [], []
    for i in ids.tolist():
        word = vocab[i]
        if word == "<eos>":
            lines.append(" ".join(line))
            line = []
        else:
            line.append(word)
    lines.append(" ".join(line))
    return "\n".join(lines)


def token_windows(tokenizer, text: str, window: int, windows: int) -> torch.Tensor:
    """[windows, window] token ids: non-overlapping windows spread evenly over the tokenized text, no
    special tokens added, so every model sees the same kind of input [D]."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    n_avail = len(ids) // window
    if n_avail < windows:
        raise ValueError(
            f"the validation text gives {n_avail} windows of {window} tokens, fewer than windows = {windows}; raise max_words"
        )
    starts = np.unique(np.linspace(0, n_avail - 1, windows).round().astype(int)) * window
    return torch.tensor([ids[s : s + window] for s in starts], dtype=torch.long)


@torch.no_grad()
def layer_attention_entropy(model, windows: torch.Tensor, batch_size: int, device: str = "cpu") -> np.ndarray:
    """[n_layers] mean of -sum_j a_ij log(a_ij + 1e-8) over windows, heads and query rows."""
    model.eval()
    body = model.base_model  # the transformer without the LM head: the vocabulary logits are not needed
    total = None
    for b in range(0, len(windows), batch_size):
        out = body(input_ids=windows[b : b + batch_size].to(device), output_attentions=True)
        if not out.attentions or out.attentions[0] is None:
            raise RuntimeError("the model returned no attention maps; load it with attn_implementation='eager'")
        # per layer: [B, heads, T, T] -> sum over windows of the mean over heads and rows
        ent = torch.stack([attention_entropy(a.double()).mean(dim=(1, 2)).sum() for a in out.attentions])
        total = ent if total is None else total + ent
    return (total / len(windows)).cpu().numpy()


def load_checkpoint(spec: CheckpointModel, revision: str, cache_dir: str | None, offline: bool, dtype: str = "float32"):
    """(model, tokenizer) of one revision, eager attention, in ``dtype``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs = dict(revision=revision, cache_dir=cache_dir, local_files_only=offline)
    from featlearn.hf import dtype_keyword

    model = AutoModelForCausalLM.from_pretrained(spec.repo_id, attn_implementation="eager", **dtype_keyword(getattr(torch, dtype)), **kwargs)
    tokenizer = AutoTokenizer.from_pretrained(spec.repo_id, **kwargs)
    return model, tokenizer


# ---------------------------------------------------------------- one checkpoint -> tidy table

COLUMNS = ("model", "revision", "step", "layer", "n_layers", "metric", "value", "n", "m", "gaussian_stable_rank",
           "window", "uniform_entropy", "source")


def analyse_checkpoint(cfg: dict, inputs: dict, outputs: dict, ctx) -> None:
    """Fig. 7, one checkpoint (output ``table``): per layer the up-projection's stable rank (metric ``stable_rank``, with n, m
    and the Gaussian value nm/(sqrt n + sqrt m)^2) and the attention entropy on WikiText validation
    windows (metric ``attention_entropy``, with the window length and the uniform causal bound), read from
    the prepared ``valid`` and ``vocab`` inputs.

    Settings: model, revision, cache_dir (Hugging Face cache; null: the default one), offline
    (FEATLEARN_OFFLINE overrides, as for the datasets), window, windows, batch_size, max_words
    (validation ids rebuilt into text; null: all), dtype. The device is the job's (``ctx.device``).
    """
    model, revision = cfg["model"], cfg["revision"]
    spec = model_spec(model)
    step = revision_step(spec, revision)
    cache_dir, offline = cfg["cache_dir"], resolve_offline(bool(cfg["offline"]))
    ok, reason = available(spec.repo_id, revision, cache_dir, offline)
    if not ok:
        raise FileNotFoundError(reason)
    device = ctx.device
    tag = f"[joma fig7] {spec.repo_id}@{revision}"
    n_layers = int(_config(spec, revision, cache_dir, offline)["num_hidden_layers"])

    ranks = None
    index = safetensors_index(spec.repo_id, revision, cache_dir, offline)
    if index is not None:
        print(f"{tag}: stable rank of {n_layers} layers from safetensors", file=sys.stderr, flush=True)
        ranks = stable_ranks_from_safetensors(index, spec.up_proj, n_layers, device)

    print(f"{tag}: loading the model ({cfg['dtype']}, {device})", file=sys.stderr, flush=True)
    net, tokenizer = load_checkpoint(spec, revision, cache_dir, offline, cfg["dtype"])
    try:
        if ranks is None:
            print(f"{tag}: no safetensors file; stable rank from the loaded model", file=sys.stderr, flush=True)
            ranks = stable_ranks_from_model(net, spec.up_proj, n_layers, device)
        text = validation_text(inputs["valid"], inputs["vocab"], cfg["max_words"])
        wins = token_windows(tokenizer, text, cfg["window"], cfg["windows"])
        print(f"{tag}: attention entropy on {len(wins)} windows of {cfg['window']} tokens", file=sys.stderr, flush=True)
        net.to(device)
        entropy = layer_attention_entropy(net, wins, cfg["batch_size"], device)
    finally:
        del net
        gc.collect()
        if device == "cuda":
            torch.cuda.empty_cache()
    if len(entropy) != n_layers:
        raise RuntimeError(f"{tag}: {len(entropy)} attention maps for {n_layers} layers")

    base = {"model": spec.repo_id, "revision": revision, "step": step, "n_layers": n_layers}
    rows = [
        {**base, "metric": "stable_rank", **r, "gaussian_stable_rank": gaussian_stable_rank(r["n"], r["m"])}
        for r in ranks
    ]
    bound = uniform_causal_entropy(cfg["window"])
    rows += [
        {**base, "layer": i, "metric": "attention_entropy", "value": float(h), "window": cfg["window"],
         "uniform_entropy": bound, "source": "model"}
        for i, h in enumerate(entropy)
    ]
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    write_csv(df, outputs["table"])
    sr = df[df["metric"] == "stable_rank"]["value"]
    print(f"{tag}: stable rank {sr.min():.1f}..{sr.max():.1f}, entropy {entropy.min():.3f}..{entropy.max():.3f} "
          f"(uniform {bound:.3f})", file=sys.stderr, flush=True)

