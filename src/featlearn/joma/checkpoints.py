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

import numpy as np
import pandas as pd
import torch

from featlearn.data.fetch import resolve_offline
from featlearn.io import load_tensor, write_csv
from featlearn.joma.hub import (
    CheckpointModel,
    fetch_file,
    available,
    model_spec,
    revision_step,
)
from featlearn.lm.attention import attention_entropy, uniform_causal_entropy
from featlearn.lm.rank import gaussian_stable_rank, stable_rank

def _config(spec: CheckpointModel, revision: str, cache_dir: str | None, offline: bool) -> dict:
    path = fetch_file(spec.repo_id, "config.json", revision, cache_dir, offline)
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

    index = fetch_file(repo_id, "model.safetensors.index.json", revision, cache_dir, offline)
    if index is not None:
        with open(index, encoding="utf-8") as fh:
            weight_map = json.load(fh)["weight_map"]
        files = {}
        for shard in sorted(set(weight_map.values())):
            files[shard] = fetch_file(repo_id, shard, revision, cache_dir, offline)
            if files[shard] is None:
                return None
        return {name: files[shard] for name, shard in weight_map.items()}
    single = fetch_file(repo_id, "model.safetensors", revision, cache_dir, offline)
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

    model = AutoModelForCausalLM.from_pretrained(spec.repo_id, attn_implementation="eager",
                                                 **dtype_keyword(getattr(torch, dtype)), **kwargs)
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

