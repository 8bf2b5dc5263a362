"""Templates paper, GPT-2 with trainable identity scalings (Figs. 6, 7, 24) on tiny random GPT-2 models; the
pretrained path runs on tiny models saved in the Hugging Face hub cache layout (no network)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

transformers = pytest.importorskip("transformers")

from featlearn.io import save_tensor  # noqa: E402
from featlearn.templates.gpt2 import experiments as G  # noqa: E402
from featlearn.templates.gpt2 import figures as GF  # noqa: E402
from featlearn.templates.gpt2.checkpoints import available  # noqa: E402
from featlearn.pipeline.workflow import pretrained_checkpoints  # noqa: E402
from hubcache import save_in_hub_cache  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny tensors: see conftest

L, H, D = 3, 4, 32


def tiny_config(vocab=50, dropout=0.0):
    return G.small_config(vocab, L, D, H, 16, dropout)


# --------------------------------------------------------------------------------------- identity scalings


def test_identity_scalings_at_zero_equal_vanilla_and_add_two_parameters_per_head():
    van = G.build_lm(tiny_config(), "vanilla", seed=0)
    idm = G.build_lm(tiny_config(), "identity", seed=0)
    x = torch.randint(0, 50, (3, 16), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert float((van(input_ids=x).logits - idm(input_ids=x).logits).abs().max()) < 1e-6
    assert G.count_parameters(idm) - G.count_parameters(van) == 2 * L * H
    a, b = G.identity_scalings(idm)
    assert a.shape == b.shape == (L, H) and not a.any() and not b.any()
    with pytest.raises(ValueError, match="no identity scalings"):
        G.identity_scalings(van)
    with pytest.raises(ValueError, match="variant"):
        G.build_lm(tiny_config(), "kq", seed=0)


def test_identity_scalings_receive_gradients_and_change_the_output():
    idm = G.build_lm(tiny_config(), "identity", seed=0)
    x = torch.randint(0, 50, (4, 16), generator=torch.Generator().manual_seed(2))
    G.lm_loss(idm, x).backward()
    for block in G.gpt2_blocks(idm):
        assert block.attn.kq_scale.grad is not None and bool((block.attn.kq_scale.grad != 0).all())
        assert block.attn.vo_scale.grad is not None and bool((block.attn.vo_scale.grad != 0).all())
    before = idm(input_ids=x).logits.detach()
    with torch.no_grad():
        G.gpt2_blocks(idm)[0].attn.vo_scale[1] = 0.5
    with torch.no_grad():
        assert float((idm(input_ids=x).logits - before).abs().max()) > 1e-4


@pytest.mark.parametrize("mask_diag", [True, False], ids=["diag-masked", "as-printed"])
def test_scaled_attention_is_the_equation(mask_diag):
    """logits_h = q k^T / sqrt(d_head) + a_h M(x x^T) (causal), out = c_proj(A V) + Σ_h b_h A_h x, with M zeroing the
    diagonal (the authors' GPT-2 setting) or not."""
    cfg = tiny_config()
    cfg.kq_mask_diag = mask_diag
    torch.manual_seed(0)
    attn = G.IdentityScaledGPT2Attention(cfg, layer_idx=0).eval()
    with torch.no_grad():
        attn.kq_scale.copy_(torch.tensor([0.3, -0.2, 0.0, 0.7]))
        attn.vo_scale.copy_(torch.tensor([0.1, 0.0, -0.4, 0.2]))
    x = torch.randn(2, 5, D)
    out, A = attn(x)
    dh = D // H
    q, k, v = attn.c_attn(x).split(D, dim=2)
    want = torch.zeros_like(x)
    for h in range(H):
        s = slice(h * dh, (h + 1) * dh)
        xxt = x @ x.transpose(1, 2)
        if mask_diag:
            xxt = xxt * (1 - torch.eye(5))
        logits = q[..., s] @ k[..., s].transpose(1, 2) / math.sqrt(dh) + attn.kq_scale[h] * xxt
        logits = logits.masked_fill(~torch.ones(5, 5, dtype=torch.bool).tril(), -math.inf)
        Ah = logits.softmax(-1)
        assert torch.allclose(A[:, h], Ah, atol=1e-6)
        want = want + (Ah @ v[..., s]) @ attn.c_proj.weight[s, :] + attn.vo_scale[h] * Ah @ x
    want = want + attn.c_proj.bias
    assert torch.allclose(out, want, atol=1e-5)
    with pytest.raises(ValueError, match="cache"):
        attn(x, past_key_values=object())


def test_swapping_keeps_pretrained_weights_and_eager_attention():
    torch.manual_seed(0)
    body = transformers.GPT2Model(tiny_config())
    w = body.h[1].attn.c_attn.weight.detach().clone()
    G.add_identity_scalings(body)
    assert isinstance(body.h[1].attn, G.IdentityScaledGPT2Attention) and torch.equal(body.h[1].attn.c_attn.weight, w)
    assert body.config._attn_implementation == "eager" and body.config.use_cache is False
    n = G.count_parameters(body)
    G.add_identity_scalings(body)  # idempotent
    assert G.count_parameters(body) == n


# --------------------------------------------------------------------------------------- Fig. 6 training


@pytest.fixture(scope="module")
def lm_files(tmp_path_factory):
    """Prepared-LM-style files: a token stream with a learnable pattern over a 40-word vocabulary."""
    root = tmp_path_factory.mktemp("lm")
    rng = np.random.default_rng(0)
    base = np.arange(40)
    stream = np.concatenate([np.roll(base, int(rng.integers(40)))[: rng.integers(5, 40)] for _ in range(300)])
    save_tensor(root / "train.pt", torch.from_numpy(stream[:6000]).long())
    save_tensor(root / "valid.pt", torch.from_numpy(stream[6000:7000]).long())
    (root / "vocab.json").write_text(json.dumps([f"w{i}" for i in range(40)]))
    return [str(root / f) for f in ("train.pt", "valid.pt", "vocab.json")]


LM = {"n_layer": 2, "n_embd": 32, "n_head": 2, "block": 16, "dropout": 0.1, "batch": 8, "lr": 3e-3, "weight_decay": 0.0,
      "epochs": 1, "steps": 40, "eval_every": 10, "val_blocks_log": 8, "val_blocks": None, "eval_batch": 16,
      "checkpoint_every": 10, "seed": 3, "tokenizer": "word", "kq_mask_diag": True}


def test_build_lm_sets_the_diagonal_mask():
    masked = G.build_lm(tiny_config(), "identity", seed=0)
    printed = G.build_lm(tiny_config(), "identity", seed=0, mask_diag=False)
    assert all(b.attn.mask_diag for b in G.gpt2_blocks(masked)) and not any(b.attn.mask_diag for b in G.gpt2_blocks(printed))


def test_gpt2_bpe_is_gpt2s_tokenizer(shared_data):
    GPT2_FILES = shared_data / "gpt2"
    if not (GPT2_FILES / "encoder.json").is_file():
        pytest.skip("GPT-2's tokenizer files are not in the data mirror")
    tok = G.gpt2_tokenizer(GPT2_FILES / "encoder.json", GPT2_FILES / "vocab.bpe")
    assert tok.get_vocab_size() == 50_257
    # the first line of WikiText-2 in GPT-2's tokenization (also transformers' GPT2TokenizerFast's ids)
    ids = G.bpe_ids(iter([" = Valkyria Chronicles III = ", " "]), tok, batch=1)
    assert ids.tolist() == [796, 569, 18354, 7496, 17740, 6711, 796, 220, 198, 220, 198]
    assert ids.dtype == torch.int64 and tok.decode(ids.tolist()) == " = Valkyria Chronicles III = \n \n"
    try:  # transformers' own class where its constructor takes the two files (its keywords changed in 5.0)
        ref = transformers.GPT2TokenizerFast(vocab=str(GPT2_FILES / "encoder.json"), merges=str(GPT2_FILES / "vocab.bpe"))
    except TypeError:
        ref = transformers.GPT2TokenizerFast(vocab_file=str(GPT2_FILES / "encoder.json"),
                                             merges_file=str(GPT2_FILES / "vocab.bpe"))
    text = ["The tower is 324 metres ( 1 @,@ 063 ft ) tall . \n", " <unk> and émigré \n"]
    assert [e.ids for e in tok.encode_batch(text)] == ref(text)["input_ids"]


def test_tiny_training_lowers_the_loss_and_writes_the_log(tmp_path, lm_files):
    df = G.train_wikitext(LM, "identity", *lm_files, str(tmp_path / "log.csv"), str(tmp_path / "work"))
    val = df[(df.metric == "val_loss") & ~df.final].sort_values("step")["value"].to_numpy()
    assert val[-1] < val[0] - 0.5
    fin = df[df.final]
    assert set(fin["metric"]) == {"val_loss", "val_ppl"}
    assert float(fin[fin.metric == "val_ppl"]["value"].iloc[0]) == pytest.approx(
        math.exp(float(fin[fin.metric == "val_loss"]["value"].iloc[0])))
    assert (df[df.metric == "kq_scale_abs_mean"]["value"].iloc[-1]) > 0  # the scalings moved
    assert int(df["val_tokens"].iloc[0]) == (1000 // 16) * 15
    assert not (tmp_path / "work" / "resume.pt").exists()
    assert pd.read_csv(tmp_path / "log.csv").shape == df.shape


def test_interrupted_training_resumes_to_the_same_table(tmp_path, lm_files, monkeypatch):
    G.train_wikitext(LM, "vanilla", *lm_files, str(tmp_path / "full.csv"), str(tmp_path / "w1"))
    real, calls = G.lm_loss, {"n": 0}

    def dies_at_step_25(model, x):
        calls["n"] += 1
        if calls["n"] == 25:
            raise KeyboardInterrupt
        return real(model, x)

    monkeypatch.setattr(G, "lm_loss", dies_at_step_25)
    with pytest.raises(KeyboardInterrupt):
        G.train_wikitext(LM, "vanilla", *lm_files, str(tmp_path / "resumed.csv"), str(tmp_path / "w2"))
    assert (tmp_path / "w2" / "resume.pt").exists() and not (tmp_path / "resumed.csv").exists()
    monkeypatch.setattr(G, "lm_loss", real)
    G.train_wikitext(LM, "vanilla", *lm_files, str(tmp_path / "resumed.csv"), str(tmp_path / "w2"))
    assert (tmp_path / "resumed.csv").read_bytes() == (tmp_path / "full.csv").read_bytes()


def test_resume_checkpoint_of_other_settings_is_refused(tmp_path, lm_files, monkeypatch):
    real, calls = G.lm_loss, {"n": 0}

    def dies(model, x):
        calls["n"] += 1
        if calls["n"] == 15:
            raise KeyboardInterrupt
        return real(model, x)

    monkeypatch.setattr(G, "lm_loss", dies)
    with pytest.raises(KeyboardInterrupt):
        G.train_wikitext(LM, "vanilla", *lm_files, str(tmp_path / "a.csv"), str(tmp_path / "w"))
    monkeypatch.setattr(G, "lm_loss", real)
    # a checkpoint of other settings is discarded: the run starts afresh and leaves no checkpoint behind
    G.train_wikitext({**LM, "lr": 1e-2}, "vanilla", *lm_files, str(tmp_path / "a.csv"), str(tmp_path / "w"))
    assert not (tmp_path / "w" / "resume.pt").exists() and (tmp_path / "a.csv").exists()


def test_blocks_and_epoch_order():
    b = G.blocks_of(torch.arange(50), 16)
    assert b.shape == (3, 16) and int(b[2, 0]) == 32
    with pytest.raises(ValueError, match="one block"):
        G.blocks_of(torch.arange(10), 16)
    assert torch.equal(G.epoch_order(10, 1, 0), G.epoch_order(10, 1, 0))
    assert not torch.equal(G.epoch_order(10, 1, 0), G.epoch_order(10, 1, 1))


def _lm_log(variant, ppl, dataset_dir):
    rows = [{"variant": variant, "step": s, "metric": "val_ppl", "value": v, "final": False}
            for s, v in ((0, 1000.0), (10, ppl + 5))]
    rows.append({"variant": variant, "step": 10, "metric": "val_ppl", "value": ppl, "final": True})
    df = pd.DataFrame(rows)
    df["parameters"] = 100 + (2 * L * H if variant == "identity" else 0)
    df["tokens_per_step"] = 64
    df["val_tokens"] = 900
    dataset_dir.mkdir(parents=True, exist_ok=True)
    path = dataset_dir / f"{variant}.csv"
    df.to_csv(path, index=False)
    return str(path)


def _fig6(logs: list[str], out: list[str]) -> list:
    """What rule fig_templates_6 does: the figure (out[0]), the table (out[1] CSV, out[2] Markdown), the claims."""
    from featlearn.pipeline.figure import write_outputs

    inputs, cfg = {"logs": logs}, {"scale": "test"}
    write_outputs(GF.draw_6(inputs, cfg), out[:1], 40)
    write_outputs(GF.table_6(inputs, cfg), out[1:], 40)
    return GF.claims_6(inputs, cfg)


def test_fig6_table_and_claim_on_planted_logs(tmp_path):
    logs = [_lm_log("vanilla", 120.0, tmp_path / "wikitext2"), _lm_log("identity", 110.0, tmp_path / "wikitext2")]
    out = [str(tmp_path / f) for f in ("fig6.png", "fig6.csv", "fig6.md")]
    claims = _fig6(logs, out)
    assert (len(claims) == 1 and claims[0].claim_id == "12_wikitext2" and claims[0].passed
            and claims[0].measured == pytest.approx(10.0))
    md = Path(out[2]).read_text()
    assert "| WikiText-2 | 10 | 120.00 | 110.00 | 24 | 64.00 | 60.46 |" in md
    logs = [_lm_log("vanilla", 100.0, tmp_path / "b" / "wikitext2"), _lm_log("identity", 104.0, tmp_path / "b" / "wikitext2")]
    (claim,) = _fig6(logs, out)
    assert not claim.passed and claim.measured == pytest.approx(-4.0)
    with pytest.raises(ValueError, match="identity"):
        _fig6(logs[:1], out)


# --------------------------------------------------------------------------------------- pretrained checkpoints


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """A cache with tiny random 'gpt2' (revisions main and v2) and 'gpt2-medium' (main, .bin weights)."""
    root = tmp_path_factory.mktemp("hub")
    cache = root / "cache"
    weights = {}
    for name, rev, seed, layout in (("gpt2", "main", 0, "safetensors"), ("gpt2", "v2", 1, "safetensors"),
                                    ("gpt2-medium", "main", 2, "bin")):
        torch.manual_seed(seed)
        model = transformers.GPT2LMHeadModel(G.small_config(64, 2, 32, 4, 16, 0.1))
        src = root / "src" / f"{name}_{rev}"
        if layout == "bin":
            model.config.save_pretrained(src)
            torch.save(model.state_dict(), src / "pytorch_model.bin")
        else:
            model.save_pretrained(src)
        save_in_hub_cache(cache, name, rev, src)
        weights[name, rev] = model.transformer.h[1].attn.c_attn.weight.detach().clone()
    return {"cache": str(cache), "weights": weights}


def test_loader_reads_the_requested_model_and_revision(hub):
    for (name, rev), w in hub["weights"].items():
        ok, reason = available(name, rev, hub["cache"], offline=True)
        assert ok, reason
        body = G.load_pretrained(name, rev, hub["cache"], offline=True)
        assert isinstance(body, transformers.GPT2Model) and body.config._attn_implementation == "eager"
        assert torch.equal(body.h[1].attn.c_attn.weight, w)
    torch.manual_seed(5)
    scratch = G.load_pretrained("gpt2", "main", hub["cache"], offline=True, pretrained=False)
    assert not torch.equal(scratch.h[1].attn.c_attn.weight, hub["weights"]["gpt2", "main"])
    assert scratch.config.n_layer == 2


def test_missing_checkpoints_are_reported_and_skipped(hub, tmp_path):
    ok, reason = available("gpt2-large", "main", hub["cache"], offline=True)
    assert not ok and "gpt2-large@main" in reason and "config.json" in reason and "offline" in reason
    ok, reason = available("gpt2", "v9", hub["cache"], offline=True)
    assert not ok and "gpt2@v9" in reason
    assert available("gpt2-large", "main", str(tmp_path), offline=False)[0]  # may download
    assert available("gpt3", "main", hub["cache"], offline=False) == (False, "unknown pretrained GPT-2 'gpt3'; expected one of "
                                                                     "('gpt2', 'gpt2-medium', 'gpt2-large')")
    with pytest.raises(FileNotFoundError, match="gpt2-large@main"):
        G.load_pretrained("gpt2-large", "main", hub["cache"], offline=True)
    pre = {"enabled": "auto", "cache_dir": hub["cache"], "models": {"gpt2": ["main", "v9"], "gpt2-large": ["main"]}}
    keep, why = pretrained_checkpoints(pre, True, available=available)
    assert keep == [("gpt2", "main")] and len(why) == 2 and "gpt2@v9" in why[0]
    assert pretrained_checkpoints({**pre, "enabled": False}, True, available=available)[0] == []
    assert pretrained_checkpoints({**pre, "enabled": True}, True, available=available)[0] == [("gpt2", "main"), ("gpt2", "v9"),
                                                                                             ("gpt2-large", "main")]


def test_finetune_on_t5_and_heads_on_a_cached_model(hub, tmp_path):
    settings = {"cache_dir": hub["cache"], "revision": "main", "offline": True, "n": [8, 16], "seeds": 1, "lr": 1e-3,
                "batch": 8, "epochs": 3}
    paths = {}
    for init in ("pretrained", "scratch"):
        paths[init] = str(tmp_path / f"{init}.csv")
        df = G.finetune_table(settings, "gpt2", init, paths[init])
        assert list(df["n"]) == [8, 16] and (df["init"] == init).all()
        assert df["best_epoch"].between(1, 3).all() and np.isfinite(df["test_loss"]).all()
    again = G.finetune_table(settings, "gpt2", "pretrained", str(tmp_path / "again.csv"))
    assert (tmp_path / "again.csv").read_bytes() == Path(paths["pretrained"]).read_bytes() and len(again) == 2
    with pytest.raises(ValueError, match="init"):
        G.finetune_table(settings, "gpt2", "random", str(tmp_path / "x.csv"))

    heads = {"kq": {"layer": 1, "head": 2}, "vo": {"layer": 2, "head": 4}, "size": 5, "cache_dir": hub["cache"],
             "revision": "main", "offline": True}
    hdf = G.heads_table(heads, "gpt2", str(tmp_path / "heads.csv"))
    assert len(hdf) == 2 * 25 and list(hdf["matrix"].unique()) == ["W_K W_Q^T", "W_V W_O^T"]
    # W_K W_Q^T gives the head's logits: x^T (W_Q W_K^T) y = q . k
    body = G.load_pretrained("gpt2", "main", hub["cache"], offline=True)
    kq, vo = G.head_matrices(body, 0, 1)
    x, y = torch.randn(32, dtype=torch.float64), torch.randn(32, dtype=torch.float64)
    W = body.h[0].attn.c_attn.weight.detach().double()
    q, k = x @ W[:, :32], y @ W[:, 32:64]
    assert float(x @ torch.from_numpy(kq).T @ y) == pytest.approx(float(q[8:16] @ k[8:16]))
    sub = hdf[(hdf.matrix == "W_K W_Q^T")].sort_values(["i", "j"])["value"].to_numpy().reshape(5, 5)
    assert np.allclose(sub, kq[:5, :5])
    with pytest.raises(ValueError, match="layer 9"):
        G.heads_table({**heads, "kq": {"layer": 9, "head": 1}}, "gpt2", str(tmp_path / "h.csv"))
    with pytest.raises(ValueError, match="head 7"):
        G.head_matrices(body, 0, 6)

    from featlearn.pipeline.figure import write_outputs

    fig7 = GF.draw_7({"finetune": [paths["pretrained"], paths["scratch"]], "heads": [str(tmp_path / "heads.csv")]},
                     {"scale": "test"})
    write_outputs(fig7, [str(tmp_path / "fig7.png")], 40)
    write_outputs(GF.draw_24({"finetune": [paths["pretrained"]]}, {"scale": "test"}), [str(tmp_path / "fig24.png")], 40)
    assert (tmp_path / "fig7.png").stat().st_size > 1000 and (tmp_path / "fig24.png").stat().st_size > 1000


def test_paper_scale_fig6_model_has_gpt2_smalls_parameter_count():
    """12 layers, d 768, 12 heads, blocks of 1024 over GPT-2's 50,257 BPE tokens (tied embeddings): the 124,439,808
    parameters of the public `gpt2` checkpoint (the paper's "117M"), plus 2 per head with the identity scalings."""
    cfg = G.small_config(G.GPT2_VOCAB, 12, 768, 12, 1024, 0.1)
    with torch.device("meta"):
        van = transformers.GPT2LMHeadModel(cfg)
        idm = G.add_identity_scalings(transformers.GPT2LMHeadModel(cfg))
    assert G.count_parameters(van) == 124_439_808
    assert G.count_parameters(idm) - G.count_parameters(van) == 2 * 12 * 12
