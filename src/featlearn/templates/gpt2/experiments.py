"""GPT-2 with trainable identity scalings (Figs. 6, 7, 24).

Identity scalings [P Sec. 3.3, Thm. 4.2][C gpt2_with_identity]: in every head h of every layer, W_K W_Q^T is
replaced by W_K W_Q^T + a_h I and W_V W_O^T by W_V W_O^T + b_h I, with a_h, b_h trainable scalars initialised at
0, the same definitions as ``featlearn.templates.models.IdentityScaledAttention``. With x the LN'd block input
(ln_1 output) of one sequence, x ∈ R^{T×d}, head h computes

    logits_h = (x W_Q,h)(x W_K,h)^T / sqrt(d_head) + a_h · M(x x^T)       (+KQ, not divided by sqrt(d_head) [C])
    A_h      = softmax(logits_h + causal mask)
    out      = c_proj(concat_h A_h x W_V,h) + Σ_h b_h · A_h x                 (+VO)

where M zeroes the diagonal of x x^T (``mask_diag``, the authors' GPT-2 setting [C: mask_diag_wkwq = True in
their training script]: a token's similarity with itself is left to the learned W_K W_Q^T) or is the identity
(``mask_diag`` false, the equation as printed). At a = b = 0 the model is vanilla GPT-2 and the parameter count grows
by exactly 2·L·H (288 for GPT-2 small [P Fig. 6]). The scaled attention is a subclass of transformers' ``GPT2Attention``
swapped into every block (eager attention; no key/value cache: the model is trained and evaluated, never sampled).

Fig. 6 [P]: GPT-2 from scratch, vanilla vs identity-scaled, same recipe (AdamW lr 3e-4, constant lr, batch 8,
blocks of 1024 tokens, 20 epochs), validation perplexity on WikiText. ``tokenizer: gpt2`` (the default) encodes
WikiText with GPT-2's own byte-level BPE (50,257 tokens; files of the data registry's ``gpt2`` entry), each
line of the raw token file as it stands (with its newline), as the authors' run_clm-based script does with the
Hugging Face ``wikitext-2-v1`` (tokenized) set [C]; perplexity is then per BPE token, as the paper's. ``word``
uses the prepared word-level ids (perplexity per word, not comparable in value with the paper's).

Figs. 7 and 24: public pretrained GPT-2 checkpoints (``from_pretrained(name, revision=...)`` into a cache
folder) against the same architecture from random init, fine-tuned on T5 (αβα vs αββ). [D] (the paper does not
give the recipe): the template tokens get a fresh embedding (N(0, 0.02²), GPT-2's init) fed as input
embeddings next to the model's own position embeddings; the regression output is a fresh Linear(d, 1) on the
final LN'd state of the last position (the causal model sees the whole string there); MSE loss, Adam, the
epoch with the best validation loss gives the reported test loss [P App. A protocol].
"""

from __future__ import annotations

import json
import math
import sys
import time

import numpy as np
import pandas as pd
import torch
from torch import nn
from transformers import GPT2Config, GPT2LMHeadModel, GPT2Model
from transformers.models.gpt2.modeling_gpt2 import GPT2Attention

from featlearn.io import load_tensor, write_csv
from featlearn.lm.loss import next_token_loss
from featlearn.precision import full_precision
from featlearn.training import remove_checkpoint, resumable_training, run_identity
from featlearn.templates.gpt2.checkpoints import PRETRAINED, available, check_model_name  # noqa: F401

VARIANTS = ("vanilla", "identity")


# --------------------------------------------------------------------------------------- the model


class IdentityScaledGPT2Attention(GPT2Attention):
    """GPT-2 causal self-attention with per-head trainable identity scalings a_h (KQ) and b_h (VO)."""

    def __init__(self, config: GPT2Config, layer_idx: int | None = None):
        super().__init__(config, is_cross_attention=False, layer_idx=layer_idx)
        # zeros draw nothing from the RNG: swapping this module in keeps the vanilla model's weights and stream
        self.kq_scale = nn.Parameter(torch.zeros(self.num_heads))
        self.vo_scale = nn.Parameter(torch.zeros(self.num_heads))
        self.mask_diag = bool(getattr(config, "kq_mask_diag", True))

    def forward(self, hidden_states, past_key_values=None, attention_mask=None, **kwargs):
        if past_key_values is not None:
            raise ValueError("identity-scaled GPT-2 keeps no key/value cache: call it with use_cache=False")
        if kwargs.get("encoder_hidden_states") is not None:
            raise ValueError("identity-scaled GPT-2 attention is self-attention only")
        x = hidden_states  # [B, T, d], the LN'd block input
        B, T, _ = x.shape
        q, k, v = (t.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
                   for t in self.c_attn(x).split(self.split_size, dim=2))
        logits = (q @ k.transpose(-1, -2)) * self.scaling
        # W_K W_Q^T + a_h I: adds a_h x x^T (its diagonal zeroed with mask_diag) to every head's logits
        xxt = x @ x.transpose(-1, -2)
        if self.mask_diag:
            xxt = xxt.masked_fill(torch.eye(T, dtype=torch.bool, device=x.device), 0.0)
        logits = logits + self.kq_scale.view(1, -1, 1, 1).to(x.dtype) * xxt.unsqueeze(1)
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        logits = logits.masked_fill(~causal, torch.finfo(logits.dtype).min)
        if attention_mask is not None and attention_mask.dim() == 4:  # additive padding mask (0 or very negative)
            logits = logits + attention_mask[..., :T, :T].to(logits.dtype)
        A = self.attn_dropout(logits.softmax(dim=-1))
        heads = (A @ v).transpose(1, 2).reshape(B, T, self.embed_dim)
        out = self.c_proj(heads)
        # W_V W_O^T + b_h I: adds Σ_h b_h A_h x
        out = out + (A * self.vo_scale.view(1, -1, 1, 1).to(x.dtype)).sum(dim=1) @ x
        return self.resid_dropout(out), A


def gpt2_blocks(model: nn.Module):
    """The transformer blocks of a GPT2LMHeadModel or GPT2Model."""
    body = model.transformer if hasattr(model, "transformer") else model
    return body.h


def add_identity_scalings(model: nn.Module, mask_diag: bool = True) -> nn.Module:
    """Swap IdentityScaledGPT2Attention (a = b = 0) into every block of ``model``, in place, keeping its weights;
    ``mask_diag``: zero the diagonal of x x^T in the +KQ term (the authors' GPT-2 setting)."""
    config = model.config
    config.kq_mask_diag = bool(mask_diag)
    if config._attn_implementation != "eager":
        config._attn_implementation = "eager"
    for i, block in enumerate(gpt2_blocks(model)):
        if isinstance(block.attn, IdentityScaledGPT2Attention):
            continue
        new = IdentityScaledGPT2Attention(config, layer_idx=i).to(
            device=block.attn.c_attn.weight.device, dtype=block.attn.c_attn.weight.dtype)
        missing, unexpected = new.load_state_dict(block.attn.state_dict(), strict=False)
        if unexpected or set(missing) != {"kq_scale", "vo_scale"}:
            raise RuntimeError(f"GPT-2 attention weights did not transfer (missing {missing}, unexpected {unexpected})")
        new.train(block.attn.training)
        block.attn = new
    config.use_cache = False
    return model


def identity_scalings(model: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    """(a, b), each [L, H]: the trained KQ and VO identity scalings of every layer and head."""
    attns = [b.attn for b in gpt2_blocks(model)]
    if not all(isinstance(a, IdentityScaledGPT2Attention) for a in attns):
        raise ValueError("the model has no identity scalings (see add_identity_scalings)")
    return torch.stack([a.kq_scale.detach() for a in attns]), torch.stack([a.vo_scale.detach() for a in attns])


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def small_config(vocab_size: int, n_layer: int, n_embd: int, n_head: int, block: int, dropout: float) -> GPT2Config:
    """A GPT-2 config (pre-LN, GELU, tied embeddings, learned positions) of the given size, eager attention."""
    cfg = GPT2Config(vocab_size=vocab_size, n_positions=block, n_embd=n_embd, n_layer=n_layer, n_head=n_head,
                     resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout, use_cache=False,
                     bos_token_id=0, eos_token_id=0)
    cfg._attn_implementation = "eager"
    return cfg


def build_lm(config: GPT2Config, variant: str, seed: int, mask_diag: bool = True) -> GPT2LMHeadModel:
    """GPT-2 LM from random init (seeded): the same weights for both variants, plus a = b = 0 for 'identity'."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown GPT-2 variant {variant!r}; expected one of {VARIANTS}")
    torch.manual_seed(seed)
    model = GPT2LMHeadModel(config)
    return add_identity_scalings(model, mask_diag) if variant == "identity" else model


# --------------------------------------------------------------------------------------- Fig. 6: WikiText LM


def blocks_of(ids: torch.Tensor, block: int) -> torch.Tensor:
    """[N] token ids -> [N // block, block] contiguous blocks (the remainder is dropped), as in run_clm [C]."""
    n = ids.numel() // block
    if n == 0:
        raise ValueError(f"{ids.numel()} tokens do not fill one block of {block}")
    return ids[: n * block].view(n, block)


def epoch_order(n_blocks: int, seed: int, epoch: int) -> torch.Tensor:
    """The shuffled block order of one epoch, a function of (seed, epoch) only, so a resumed run sees the same data."""
    g = torch.Generator().manual_seed(seed * 100_003 + epoch)
    return torch.randperm(n_blocks, generator=g)


def lm_loss(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy over the block (each block predicts its tokens 2..T)."""
    logits = model(input_ids=x, use_cache=False).logits
    return next_token_loss(logits[:, :-1], x[:, 1:])


def lm_optimizer(model: nn.Module, settings: dict) -> torch.optim.AdamW:
    """AdamW with a constant learning rate [P Fig. 6] (the training's and its cost probe's)."""
    return torch.optim.AdamW(model.parameters(), lr=settings["lr"], weight_decay=settings["weight_decay"])


@torch.no_grad()
def evaluate_lm(model: nn.Module, blocks: torch.Tensor, batch: int, device: str) -> float:
    """Mean next-token loss (nats per token) over the validation blocks."""
    was = model.training
    model.eval()
    total, count = 0.0, 0
    for i in range(0, len(blocks), batch):
        x = blocks[i : i + batch].to(device)
        total += float(lm_loss(model, x)) * x.shape[0] * (x.shape[1] - 1)
        count += x.shape[0] * (x.shape[1] - 1)
    model.train(was)
    return total / count


LM_KEYS = ("n_layer", "n_embd", "n_head", "block", "dropout", "batch", "lr", "weight_decay", "epochs", "steps", "eval_every",
           "val_blocks_log", "val_blocks", "eval_batch", "checkpoint_every", "seed", "tokenizer", "kq_mask_diag")
GPT2_VOCAB = 50_257  # GPT-2's BPE vocabulary (encoder.json)


def gpt2_tokenizer(encoder_json: str, merges: str):
    """GPT-2's byte-level BPE tokenizer from its two release files (no network): byte-level pre-tokenisation with
    GPT-2's regex and no prefix space, then the BPE merges; no special tokens are added. Built with the
    ``tokenizers`` library itself (the same in every transformers version; a test checks it against transformers'
    GPT2TokenizerFast)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    tok = Tokenizer(models.BPE.from_file(str(encoder_json), str(merges)))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    if tok.get_vocab_size() != GPT2_VOCAB:
        raise ValueError(f"{encoder_json} holds {tok.get_vocab_size()} tokens, not GPT-2's {GPT2_VOCAB}")
    return tok


def bpe_ids(lines, tok, batch: int = 4096) -> torch.Tensor:
    """GPT-2 BPE ids of the text lines (each with its newline restored), concatenated, as int64."""
    from array import array

    ids, chunk = array("q"), []

    def flush():
        for enc in tok.encode_batch(chunk):
            ids.extend(enc.ids)
        chunk.clear()

    for line in lines:
        chunk.append(line + "\n")
        if len(chunk) == batch:
            flush()
    if chunk:
        flush()
    return torch.frombuffer(bytearray(ids.tobytes()), dtype=torch.int64)


def bpe(settings: dict, inputs: dict, outputs: dict, ctx) -> None:
    """Compute job ``templates_gpt2_bpe``: the train and validation splits of ``settings["dataset"]`` (its verified
    raw files, input ``raw``) encoded with GPT-2's BPE (inputs ``encoder``, ``merges``) to ``outputs["train"]``,
    ``outputs["valid"]``, with the token counts in ``outputs["stats"]``."""
    from pathlib import Path

    from featlearn.data.prepare import lm_text_lines
    from featlearn.io import save_tensor, write_json

    tok = gpt2_tokenizer(inputs["encoder"], inputs["merges"])
    raw_dir = Path(inputs["raw"][0]).parent
    stats = {"dataset": settings["dataset"], "tokenizer": "gpt2", "vocab_size": tok.get_vocab_size(), "splits": {}}
    for split in ("train", "valid"):
        start = time.perf_counter()
        with lm_text_lines(settings["dataset"], raw_dir, split) as lines:
            ids = bpe_ids(lines, tok)
        save_tensor(outputs[split], ids)
        stats["splits"][split] = {"n_tokens": int(ids.numel())}
        print(f"[templates gpt2 bpe] {settings['dataset']} {split}: {ids.numel():,} BPE tokens "
              f"({time.perf_counter() - start:.0f} s)", file=sys.stderr, flush=True)
    write_json(outputs["stats"], stats)


def train_wikitext(settings: dict, variant: str, train_pt: str, valid_pt: str, vocab_json: str, out_csv: str, work_dir: str,
                   device: str = "cpu") -> pd.DataFrame:
    """Fig. 6, one variant: train GPT-2 from scratch on the prepared WikiText ids and write the tidy log
    (step, metric in {train_loss, val_loss, val_ppl, kq_scale_abs_mean, vo_scale_abs_mean}, value). The last
    val_loss/val_ppl rows (``final`` = True) are on ``val_blocks`` blocks (null: the whole validation split).
    A resume checkpoint is written atomically every ``checkpoint_every`` steps and at least every 10 minutes
    (``featlearn.training.resumable_training``), and removed at the end."""
    s = {k: settings[k] for k in LM_KEYS}
    with open(vocab_json, encoding="utf-8") as fh:
        vocab = len(json.load(fh))  # the word list of a prepared set, or GPT-2's encoder.json (token -> id)
    train = blocks_of(load_tensor(train_pt), s["block"])
    valid = blocks_of(load_tensor(valid_pt), s["block"])
    per_epoch = len(train) // s["batch"]
    if per_epoch == 0:
        raise ValueError(f"{len(train)} training blocks are fewer than one batch of {s['batch']}")
    total = int(s["steps"]) if s["steps"] else int(s["epochs"]) * per_epoch
    tag = f"[templates gpt2 {variant}]"
    config = small_config(vocab, s["n_layer"], s["n_embd"], s["n_head"], s["block"], s["dropout"])
    model = build_lm(config, variant, s["seed"], s["kq_mask_diag"]).to(device)
    n_params = count_parameters(model)
    opt = lm_optimizer(model, s)
    rows: list[dict] = []
    print(f"{tag} {n_params} parameters, {len(train)} training blocks of {s['block']}, {per_epoch} steps per epoch, "
          f"{total} steps", file=sys.stderr, flush=True)
    val_log = valid[: s["val_blocks_log"]]

    def log(step: int, metric: str, value: float, final: bool = False) -> None:
        rows.append({"step": step, "metric": metric, "value": value, "final": final})

    def record(step: int, train_loss: float | None) -> None:
        val = evaluate_lm(model, val_log, s["eval_batch"], device)
        log(step, "val_loss", val)
        log(step, "val_ppl", math.exp(val))
        if train_loss is not None:
            log(step, "train_loss", train_loss)
        if variant == "identity":
            a, b = identity_scalings(model)
            log(step, "kq_scale_abs_mean", float(a.abs().mean()))
            log(step, "vo_scale_abs_mean", float(b.abs().mean()))
        print(f"{tag} step {step}/{total} train {train_loss if train_loss is None else round(train_loss, 3)} "
              f"val loss {val:.3f} (ppl {math.exp(val):.1f})", file=sys.stderr, flush=True)

    order = {}  # epoch -> its block order (each a function of (seed, epoch): a resumed run sees the same data)

    def step(i: int) -> float:
        epoch, j = divmod(i - 1, per_epoch)
        if epoch not in order:
            order.clear()
            order[epoch] = epoch_order(len(train), s["seed"], epoch)
        x = train[order[epoch][j * s["batch"] : (j + 1) * s["batch"]]].to(device)
        loss = lm_loss(model, x)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.detach()  # summed on the device (no host sync per step)

    def load_log(logged: dict) -> None:
        rows[:] = logged["rows"]

    start = resumable_training(
        model, opt, total=total, step=step, record=record, eval_every=s["eval_every"], checkpoint_every=s["checkpoint_every"],
        work_dir=work_dir, settings={**s, "variant": variant, "vocab": vocab}, device=device,
        save_log=lambda: {"rows": rows}, load_log=load_log,
        log=lambda message: print(f"{tag} {message}", file=sys.stderr, flush=True),
        keep_checkpoint=True,  # until the final evaluation on the whole validation split is written
    )
    final_blocks = valid if s["val_blocks"] is None else valid[: s["val_blocks"]]
    with full_precision(device):  # in float32 whatever the training's precision, as every evaluation of the loop
        val = evaluate_lm(model, final_blocks, s["eval_batch"], device)
    log(total, "val_loss", val, final=True)
    log(total, "val_ppl", math.exp(val), final=True)
    print(f"{tag} validation perplexity {math.exp(val):.2f} on {len(final_blocks)} blocks ({total - start} steps trained "
          "in this job)", file=sys.stderr, flush=True)
    df = pd.DataFrame(rows)
    df.insert(0, "variant", variant)
    df["parameters"] = n_params
    df["tokens_per_step"] = s["batch"] * s["block"]
    df["val_tokens"] = len(final_blocks) * (s["block"] - 1)
    df["tokenizer"] = s["tokenizer"]
    write_csv(df, out_csv)
    if not run_identity():  # outside a compute job; inside one, the compute command marks it finished
        remove_checkpoint(work_dir)
    return df


# --------------------------------------------------------------------------------------- pretrained checkpoints

def load_pretrained(name: str, revision: str, cache_dir: str | None, offline: bool, pretrained: bool = True) -> GPT2Model:
    """The GPT-2 body (no LM head) of ``name@revision`` in float32 with eager attention: its pretrained weights,
    or (``pretrained`` False) a random init of the same config (the caller seeds torch)."""
    check_model_name(name)
    ok, reason = available(name, revision, cache_dir, offline)
    if not ok:
        raise FileNotFoundError(reason)
    kwargs = dict(revision=revision, cache_dir=cache_dir, local_files_only=offline)
    if pretrained:
        from featlearn.hf import dtype_keyword

        return GPT2Model.from_pretrained(name, attn_implementation="eager", **dtype_keyword(torch.float32), **kwargs)
    config = GPT2Config.from_pretrained(name, **kwargs)
    config._attn_implementation = "eager"
    return GPT2Model(config)


class TemplateGPT2(nn.Module):
    """A GPT-2 body reading template strings: fresh token embedding -> GPT-2 (its own position embeddings)
    -> final LN'd state at the last position -> Linear(d, 1)."""

    def __init__(self, body: GPT2Model, vocab_size: int):
        super().__init__()
        d = body.config.n_embd
        self.body = body
        self.embed = nn.Embedding(vocab_size, d)
        nn.init.normal_(self.embed.weight, std=body.config.initializer_range)
        self.head = nn.Linear(d, 1)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.body(inputs_embeds=self.embed(tokens), use_cache=False).last_hidden_state
        return self.head(h[:, -1]).squeeze(-1)


def finetune_t5(model: TemplateGPT2, data, settings: dict, device: str) -> dict:
    """Train on data.train (MSE, Adam, batch, epochs); the epoch with the best validation loss gives the test loss."""
    opt = torch.optim.Adam(model.parameters(), lr=settings["lr"])
    tr, va, te = data.train, data.val, data.test
    g = torch.Generator().manual_seed(int(settings["seed"]))

    @torch.no_grad()
    def mse(split) -> float:
        model.eval()
        out = torch.cat([model(split.tokens[i : i + 256].to(device)) for i in range(0, len(split), 256)])
        model.train()
        return float(((out.cpu() - split.targets) ** 2).mean())

    best = {"val_loss": math.inf}
    model.train()
    for epoch in range(1, int(settings["epochs"]) + 1):
        perm = torch.randperm(len(tr), generator=g)
        for i in range(0, len(tr), settings["batch"]):
            idx = perm[i : i + settings["batch"]]
            loss = ((model(tr.tokens[idx].to(device)) - tr.targets[idx].to(device)) ** 2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        val = mse(va)
        if val < best["val_loss"]:
            best = {"val_loss": val, "test_loss": mse(te), "train_loss": mse(tr), "best_epoch": epoch}
    return best


def finetune_table(settings: dict, name: str, init: str, out_csv: str, device: str = "cpu") -> pd.DataFrame:
    """Figs. 7 (left) and 24: ``name`` (pretrained or, for init 'scratch', randomly initialised) fine-tuned on
    T5 for every n and seed; one row per (n, seed) with the test loss at the best validation epoch.
    Settings: cache_dir, revision, offline, n (list), seeds, lr, batch, epochs."""
    from featlearn.templates.tasks import aba_abb, make_datasets

    if init not in ("pretrained", "scratch"):
        raise ValueError(f"init must be 'pretrained' or 'scratch', not {init!r}")
    task = aba_abb()
    rows = []
    tag = f"[templates gpt2 T5 {name} {init}]"
    t0 = time.perf_counter()
    for n in settings["n"]:
        for seed in range(1, int(settings["seeds"]) + 1):
            data = make_datasets(task, int(n), seed)
            torch.manual_seed(seed)
            body = load_pretrained(name, settings["revision"], settings["cache_dir"], bool(settings["offline"]),
                                   pretrained=init == "pretrained")
            model = TemplateGPT2(body, data.vocab.size).to(device)
            res = finetune_t5(model, data, {**settings, "seed": seed}, device)
            rows.append({"model": name, "init": init, "task": task.name, "n": int(n), "seed": seed, **res,
                         "lr": settings["lr"], "epochs": settings["epochs"]})
            print(f"{tag} n {n} seed {seed}: test loss {res['test_loss']:.3f} (epoch {res['best_epoch']}), "
                  f"{time.perf_counter() - t0:.0f}s", file=sys.stderr, flush=True)
            del model, body
    df = pd.DataFrame(rows)
    write_csv(df, out_csv)
    return df


def head_matrices(model: GPT2Model, layer: int, head: int) -> tuple[np.ndarray, np.ndarray]:
    """(W_K W_Q^T, W_V W_O^T) [d, d] of one head (0-indexed), in residual-stream coordinates: the logit of
    query x and key y is x^T (W_Q W_K^T) y / sqrt(d_head), whose transpose W_K W_Q^T is returned, and the head
    maps a value row x to x W_V W_O^T. GPT-2's Conv1D stores weights as [in, out]."""
    body = model.transformer if hasattr(model, "transformer") else model
    attn = body.h[layer].attn
    d, H = attn.embed_dim, attn.num_heads
    if not (0 <= head < H):
        raise ValueError(f"head {head + 1} does not exist: the model has {H} heads per layer")
    dh = d // H
    W = attn.c_attn.weight.detach().double()  # [d, 3d]: columns q | k | v
    cols = slice(head * dh, (head + 1) * dh)
    Wq, Wk, Wv = W[:, :d][:, cols], W[:, d : 2 * d][:, cols], W[:, 2 * d :][:, cols]
    Wo = attn.c_proj.weight.detach().double()[cols, :]  # [dh, d]
    return (Wk @ Wq.T).numpy(), (Wv @ Wo).numpy()


def heads_table(settings: dict, name: str, out_csv: str) -> pd.DataFrame:
    """Fig. 7 right: the top-left ``size``×``size`` corner of W_K W_Q^T of (kq.layer, kq.head) and of W_V W_O^T of
    (vo.layer, vo.head) of the pretrained model (layers and heads 1-indexed as in the paper), in long format
    (matrix, layer, head, i, j, value; i, j 0-indexed)."""
    body = load_pretrained(name, settings["revision"], settings["cache_dir"], bool(settings["offline"]))
    L = body.config.n_layer
    frames = []
    for key, which in (("kq", 0), ("vo", 1)):
        layer, head = int(settings[key]["layer"]), int(settings[key]["head"])
        if not (1 <= layer <= L):
            raise ValueError(f"{key} layer {layer} does not exist: {name} has {L} layers (1-indexed)")
        M = head_matrices(body, layer - 1, head - 1)[which]
        k = min(int(settings["size"]), M.shape[0])
        ii, jj = np.meshgrid(np.arange(k), np.arange(k), indexing="ij")
        frames.append(pd.DataFrame({"model": name, "matrix": "W_K W_Q^T" if key == "kq" else "W_V W_O^T", "layer": layer,
                                    "head": head, "i": ii.ravel(), "j": jj.ravel(), "value": M[:k, :k].ravel(),
                                    "full_diag_mean": float(np.diag(M).mean()),
                                    "full_offdiag_abs_mean": float(np.abs(M - np.diag(np.diag(M))).sum() / (M.size - len(M)))}))
    df = pd.concat(frames, ignore_index=True)
    write_csv(df, out_csv)
    return df


# ---- compute jobs of the registry (featlearn.templates.registry)


def _offline(settings: dict) -> dict:
    """``offline`` as the datasets resolve it (FEATLEARN_OFFLINE overrides the configured value)."""
    from featlearn.data.fetch import resolve_offline

    return {**settings, "offline": resolve_offline(bool(settings["offline"]))}


def wikitext(settings: dict, inputs: dict, outputs: dict, ctx) -> None:
    """Compute job ``templates_gpt2_wikitext``: one variant (``settings["variant"]``) on one prepared WikiText
    (inputs ``train``, ``valid``, ``vocab``) to ``outputs["log"]``; resume checkpoints in ``ctx.work_dir``."""
    lm = {k: v for k, v in settings.items() if k != "variant"}
    train_wikitext(lm, settings["variant"], inputs["train"], inputs["valid"], inputs["vocab"], outputs["log"],
                   work_dir=ctx.work_dir, device=ctx.device)


def finetune(settings: dict, inputs: dict, outputs: dict, ctx) -> None:
    """Compute job ``templates_gpt2_finetune``: ``settings["model"]`` (init ``settings["init"]``) fine-tuned on
    T5 to ``outputs["table"]``."""
    cfg = {k: v for k, v in _offline(settings).items() if k not in ("model", "init")}
    finetune_table(cfg, settings["model"], settings["init"], outputs["table"], device=ctx.device)


def heads(settings: dict, inputs: dict, outputs: dict, ctx) -> None:
    """Compute job ``templates_gpt2_heads``: the pretrained heads of ``settings["model"]`` to ``outputs["table"]``."""
    cfg = {k: v for k, v in _offline(settings).items() if k != "model"}
    heads_table(cfg, settings["model"], outputs["table"])
