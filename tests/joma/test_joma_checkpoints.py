"""JoMA Fig. 7 (pretrained checkpoints) on tiny random GPT-NeoX and OPT models saved in the Hugging Face
hub cache layout, so that the real from_pretrained(name, revision=..., local_files_only=True) path runs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from featlearn.pipeline.compute import Context
from featlearn.io import save_tensor
from featlearn.joma import checkpoints as C
from featlearn.joma import hub as H
from featlearn.joma.checkpoints_figures import claims_7, draw_7, quarters
from featlearn.lm.attention import uniform_causal_entropy
from featlearn.lm.rank import gaussian_stable_rank, stable_rank
from hubcache import save_in_hub_cache

transformers = pytest.importorskip("transformers")

WORDS = ["<eos>", "the", "cat", "sat", "on", "mat", "a", "dog", "ran", "far", "<unk>", ",", "."]
PYTHIA = "EleutherAI/pythia-14m"
OPT = "facebook/opt-125m"
# revision -> (seed, how the files are written)
PYTHIA_REVS = {"step0": (0, "single"), "step1000": (1, "single"), "step143000": (2, "sharded"), "step8": (3, "bin")}


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny tensors: see conftest


def _tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(["[UNK]", *WORDS])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", eos_token="<eos>")


def _model(family: str, seed: int, vocab_size: int):
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM, OPTConfig, OPTForCausalLM

    torch.manual_seed(seed)
    if family == "gpt_neox":
        cfg = GPTNeoXConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
                            intermediate_size=128, max_position_embeddings=64)
        return GPTNeoXForCausalLM(cfg)
    cfg = OPTConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, ffn_dim=128,
                    max_position_embeddings=64, word_embed_proj_dim=32, pad_token_id=0)
    return OPTForCausalLM(cfg)


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """A hub cache with four Pythia-14M revisions (single file, sharded, .bin only) and OPT-125M main."""
    root = tmp_path_factory.mktemp("hub")
    cache = root / "cache"
    tok = _tokenizer()
    weights = {}
    for repo_id, family, revs in ((PYTHIA, "gpt_neox", PYTHIA_REVS), (OPT, "opt", {"main": (7, "single")})):
        for rev, (seed, layout) in revs.items():
            model = _model(family, seed, len(tok))
            src = root / "src" / repo_id.replace("/", "_") / rev
            if layout == "bin":
                model.config.save_pretrained(src)
                torch.save(model.state_dict(), src / "pytorch_model.bin")
            else:
                model.save_pretrained(src, max_shard_size="12KB" if layout == "sharded" else "50GB")
            tok.save_pretrained(src)
            save_in_hub_cache(cache, repo_id, rev, src)
            pattern = H.UP_PROJ[family]
            weights[repo_id, rev] = [model.get_parameter(pattern.format(i=i)).detach().clone()
                                     for i in range(model.config.num_hidden_layers)]
    # prepared WikiText-style validation ids over the tokenizer's words
    rng = np.random.default_rng(0)
    ids = torch.from_numpy(rng.integers(0, len(WORDS), 400)).long()
    save_tensor(root / "valid.pt", ids)
    (root / "vocab.json").write_text(json.dumps(WORDS))
    return {"cache": str(cache), "weights": weights, "valid": str(root / "valid.pt"), "vocab": str(root / "vocab.json")}


def _settings(hub, **kw):
    return {"cache_dir": hub["cache"], "offline": True, "window": 8, "windows": 6, "batch_size": 4, "max_words": 400,
            "dtype": "float32", **kw}


def _analyse(hub, model, revision, out):
    """The compute job of one checkpoint, on the CPU."""
    C.analyse_checkpoint(_settings(hub, model=model, revision=revision), {"valid": hub["valid"], "vocab": hub["vocab"]},
                         {"table": str(out)}, Context(device="cpu"))


def test_model_specs_and_revisions():
    spec = H.model_spec("pythia-70m")
    assert spec is H.model_spec("EleutherAI/pythia-70m")
    assert spec.up_proj.format(i=3) == "gpt_neox.layers.3.mlp.dense_h_to_4h.weight"
    assert H.model_spec("opt-2.7b").up_proj.format(i=0) == "model.decoder.layers.0.fc1.weight"
    assert len(H.PYTHIA_REVISIONS) == 154 and H.PYTHIA_REVISIONS[:3] == ("step0", "step1", "step2")
    assert "step512" in H.PYTHIA_REVISIONS and "step1000" in H.PYTHIA_REVISIONS and H.PYTHIA_REVISIONS[-1] == "step143000"
    assert H.revision_step(spec, "step4000") == 4000 and H.revision_step(spec, "main") == 143000
    assert H.model_spec("opt-125m").revisions == ("main",) and math.isnan(H.revision_step(H.model_spec("opt-125m"), "main"))
    with pytest.raises(ValueError, match="no revision 'step1500'"):
        H.revision_step(spec, "step1500")
    with pytest.raises(ValueError, match="unknown checkpoint model"):
        H.model_spec("gpt2")


def test_loading_picks_the_requested_revision(hub):
    spec = H.model_spec(PYTHIA)
    loaded = {}
    for rev in PYTHIA_REVS:
        model, tok = C.load_checkpoint(spec, rev, hub["cache"], offline=True)
        assert model.config._attn_implementation == "eager"
        loaded[rev] = [model.get_parameter(spec.up_proj.format(i=i)).detach() for i in range(4)]
        for got, saved in zip(loaded[rev], hub["weights"][PYTHIA, rev]):
            assert torch.equal(got, saved)
        assert tok("the cat", add_special_tokens=False)["input_ids"] == [2, 3]
    assert not torch.equal(loaded["step0"][0], loaded["step1000"][0])
    assert not torch.equal(loaded["step1000"][0], loaded["step143000"][0])


def test_the_dtype_keyword_matches_the_transformers_version(hub):
    from featlearn.hf import dtype_keyword

    assert dtype_keyword(torch.float64, "4.46.3") == {"torch_dtype": torch.float64}
    assert dtype_keyword(torch.float64, "4.55.4") == {"torch_dtype": torch.float64}
    assert dtype_keyword(torch.float64, "4.56.0") == {"dtype": torch.float64}
    assert dtype_keyword(torch.float64, "5.0.0rc1") == {"dtype": torch.float64}
    # the installed version honours the keyword it is given: a float32 checkpoint loads in the requested dtype
    model, _ = C.load_checkpoint(H.model_spec(PYTHIA), "step0", hub["cache"], offline=True, dtype="float64")
    assert {p.dtype for p in model.parameters()} == {torch.float64}


def test_stable_rank_from_safetensors_equals_the_loaded_weight(hub):
    for repo_id, rev, n_layers, files in ((PYTHIA, "step0", 4, 1), (PYTHIA, "step143000", 4, 2), (OPT, "main", 2, 1)):
        spec = H.model_spec(repo_id)
        index = C.safetensors_index(spec.repo_id, rev, hub["cache"], offline=True)
        assert index is not None and len(set(index.values())) >= files
        from_files = C.stable_ranks_from_safetensors(index, spec.up_proj, n_layers)
        model, _ = C.load_checkpoint(spec, rev, hub["cache"], offline=True)
        from_model = C.stable_ranks_from_model(model, spec.up_proj, n_layers)
        assert [r["source"] for r in from_files] == ["safetensors"] * n_layers
        for a, b, w in zip(from_files, from_model, hub["weights"][repo_id, rev]):
            assert (a["n"], a["m"]) == (b["n"], b["m"]) == (128, 32)
            assert a["value"] == pytest.approx(b["value"], rel=1e-12)
            assert a["value"] == pytest.approx(stable_rank(w), rel=1e-12)
    # a revision stored only as pytorch_model.bin has no safetensors index
    assert C.safetensors_index(PYTHIA, "step8", hub["cache"], offline=True) is None


def test_stable_rank_of_known_matrices():
    assert stable_rank(torch.eye(7)) == pytest.approx(7.0)
    u, v = torch.randn(20, 1), torch.randn(1, 9)
    assert stable_rank(u @ v) == pytest.approx(1.0)
    g = torch.randn(800, 200, generator=torch.Generator().manual_seed(0))
    assert stable_rank(g) == pytest.approx(gaussian_stable_rank(800, 200), rel=0.1)
    assert gaussian_stable_rank(2048, 512) == pytest.approx(227.56, abs=0.01)


def test_find_tensor_name_accepts_a_different_prefix():
    names = ["decoder.layers.0.fc1.weight", "decoder.layers.1.fc1.weight", "decoder.embed_tokens.weight"]
    assert C.find_tensor_name(names, "model.decoder.layers.1.fc1.weight") == "decoder.layers.1.fc1.weight"
    same = "model.decoder.layers.0.fc1.weight"
    assert C.find_tensor_name([same], same) == same
    with pytest.raises(KeyError):
        C.find_tensor_name(names, "model.decoder.layers.2.fc1.weight")


def test_validation_text_and_windows(tmp_path):
    save_tensor(tmp_path / "v.pt", torch.tensor([0, 1, 2, 0, 3, 4, 1, 5, 0]))
    (tmp_path / "vocab.json").write_text(json.dumps(WORDS))
    assert C.validation_text(tmp_path / "v.pt", tmp_path / "vocab.json") == "\nthe cat\nsat on the mat\n"
    assert C.validation_text(tmp_path / "v.pt", tmp_path / "vocab.json", max_words=6) == "\nthe cat\nsat on"
    tok = _tokenizer()
    text = " ".join(WORDS[1:] * 4)  # 48 words, each one token
    w = C.token_windows(tok, text, window=5, windows=3)
    assert w.shape == (3, 5) and w[0].tolist() == tok(text, add_special_tokens=False)["input_ids"][:5]
    with pytest.raises(ValueError, match="raise max_words"):
        C.token_windows(tok, text, window=5, windows=10)


def test_attention_entropy_is_within_the_uniform_bound(hub):
    spec = H.model_spec(PYTHIA)
    model, tok = C.load_checkpoint(spec, "step1000", hub["cache"], offline=True)
    wins = C.token_windows(tok, C.validation_text(hub["valid"], hub["vocab"]), window=8, windows=6)
    ent = C.layer_attention_entropy(model, wins, batch_size=4)
    assert ent.shape == (4,)
    assert np.all(ent > 0) and np.all(ent <= uniform_causal_entropy(8) + 1e-6)
    # the mean over windows does not depend on how they are batched
    np.testing.assert_allclose(C.layer_attention_entropy(model, wins, batch_size=1), ent, rtol=1e-6)


def test_available_reads_only_the_cache(hub):
    ok, reason = H.available(PYTHIA, "step1000", hub["cache"], offline=True)
    assert ok, reason
    ok, reason = H.available(PYTHIA, "step143000", hub["cache"], offline=True)  # sharded
    assert ok, reason
    ok, reason = H.available("pythia-14m", "step2000", hub["cache"], offline=True)
    assert not ok and "step2000" in reason and "offline" in reason and "config.json" in reason
    ok, reason = H.available(PYTHIA, "step1500", hub["cache"], offline=True)
    assert not ok and "no revision" in reason
    ok, reason = H.available(PYTHIA, "step2000", hub["cache"], offline=False)
    assert ok and "downloaded" in reason


def test_analyse_checkpoint_writes_the_table(hub, tmp_path):
    out = tmp_path / "pythia_step1000.csv"
    _analyse(hub, "pythia-14m", "step1000", out)
    df = pd.read_csv(out)
    assert tuple(df.columns) == C.COLUMNS
    assert len(df) == 8 and set(df["metric"]) == {"stable_rank", "attention_entropy"}
    assert (df["model"] == PYTHIA).all() and (df["step"] == 1000).all() and (df["n_layers"] == 4).all()
    sr = df[df["metric"] == "stable_rank"].sort_values("layer")
    assert sr["layer"].tolist() == [0, 1, 2, 3] and (sr["source"] == "safetensors").all()
    np.testing.assert_allclose(sr["value"], [stable_rank(w) for w in hub["weights"][PYTHIA, "step1000"]], rtol=1e-9)
    np.testing.assert_allclose(sr["gaussian_stable_rank"], gaussian_stable_rank(128, 32))
    ent = df[df["metric"] == "attention_entropy"]
    assert (ent["window"] == 8).all() and np.allclose(ent["uniform_entropy"], uniform_causal_entropy(8))
    assert ((ent["value"] > 0) & (ent["value"] <= ent["uniform_entropy"])).all()
    assert ent["n"].isna().all() and sr["window"].isna().all()

    # a revision with only pytorch_model.bin: stable rank from the loaded model
    out_bin = tmp_path / "pythia_step8.csv"
    _analyse(hub, PYTHIA, "step8", out_bin)
    sr = pd.read_csv(out_bin).query("metric == 'stable_rank'").sort_values("layer")
    assert (sr["source"] == "model").all()
    np.testing.assert_allclose(sr["value"], [stable_rank(w) for w in hub["weights"][PYTHIA, "step8"]], rtol=1e-6)

    # OPT: final revision only, step unknown
    out_opt = tmp_path / "opt.csv"
    _analyse(hub, "opt-125m", "main", out_opt)
    d = pd.read_csv(out_opt)
    assert len(d) == 4 and d["step"].isna().all() and (d["model"] == OPT).all()

    # offline without the files: a clear error, and no table
    missing = tmp_path / "missing.csv"
    with pytest.raises(FileNotFoundError, match="step2000.*offline"):
        _analyse(hub, PYTHIA, "step2000", missing)
    assert not missing.exists()


def _synthetic(model: str, n_layers: int, steps, top_curve, bottom_end: float, n=2048, m=512) -> pd.DataFrame:
    g = gaussian_stable_rank(n, m)
    bottom, top = quarters(n_layers)
    rows = []
    for k, step in enumerate(steps):
        for layer in range(n_layers):
            if layer in top:
                v = g * top_curve[k]
            else:
                v = g * (1 + (bottom_end - 1) * k / max(1, len(steps) - 1))
            rows.append({"model": model, "revision": f"step{step}", "step": step, "layer": layer, "n_layers": n_layers,
                         "metric": "stable_rank", "value": v, "n": n, "m": m, "gaussian_stable_rank": g, "source": "safetensors"})
            rows.append({"model": model, "revision": f"step{step}", "step": step, "layer": layer, "n_layers": n_layers,
                         "metric": "attention_entropy", "value": 2.5 - 0.1 * layer, "window": 35,
                         "uniform_entropy": uniform_causal_entropy(35), "source": "model"})
    return pd.DataFrame(rows, columns=list(C.COLUMNS))


def test_fig7_claims_on_synthetic_tables(tmp_path):
    steps = [0, 1, 64, 1000, 16000, 143000]
    good = _synthetic("EleutherAI/pythia-70m", 6, steps, top_curve=[1.0, 0.99, 0.5, 0.4, 0.6, 0.7], bottom_end=0.6)
    bad = _synthetic("EleutherAI/pythia-160m", 12, steps, top_curve=[1.3, 1.2, 1.1, 1.0, 0.9, 0.8], bottom_end=1.2)
    opt = _synthetic("facebook/opt-125m", 4, [0], top_curve=[0.5], bottom_end=0.5).assign(revision="main", step=np.nan)
    csvs = []
    for name, df in (("good", good), ("bad", bad), ("opt", opt)):
        df.to_csv(tmp_path / f"{name}.csv", index=False)
        csvs.append(str(tmp_path / f"{name}.csv"))
    from featlearn.plotting import save_figure

    figs = [str(tmp_path / "fig7.png")]
    inputs, cfg = {"tables": csvs}, {"scale": "test"}
    save_figure(draw_7(inputs, cfg), *figs, dpi=50)
    claims = {c.claim_id: c for c in claims_7(inputs, cfg)}
    assert all(Path(f).stat().st_size > 0 for f in figs)
    # OPT has only its final revision: none of claim 8 applies
    assert not [k for k in claims if "opt" in k]
    good_ = {k.removesuffix("_pythia-70m"): c for k, c in claims.items() if k.endswith("pythia-70m")}
    assert set(good_) == {"fig7_step0_gaussian", "fig7_top_rebound", "fig7_bottom_below"}
    assert all(c.passed for c in good_.values())
    assert good_["fig7_step0_gaussian"].measured == pytest.approx(0.0, abs=1e-12)
    assert good_["fig7_top_rebound"].measured == pytest.approx(0.7 / 0.4 - 1)
    assert good_["fig7_bottom_below"].measured == pytest.approx(0.6)
    # no interior minimum, rising bottom layers, 30% off at step 0: every claim fails with its value
    bad_ = {k.removesuffix("_pythia-160m"): c for k, c in claims.items() if k.endswith("pythia-160m")}
    assert not any(c.passed for c in bad_.values())
    assert bad_["fig7_step0_gaussian"].measured == pytest.approx(0.3)
    assert bad_["fig7_top_rebound"].measured == 0.0
    assert bad_["fig7_bottom_below"].measured == pytest.approx(1.2)


@pytest.mark.workflow
@pytest.mark.shared_data
def test_fig7_rule_family_runs_on_cached_checkpoints(hub, tmp_path, shared_data):
    """`snakemake fig_joma_7` on smoke: the cached tiny Pythia revisions are analysed through the real
    loader; the uncached Pythia-70M revisions are left out with a message instead of failing."""
    import yaml

    from wfutil import copy_workflow, overlay, snakemake

    work = copy_workflow(tmp_path / "wf")
    name = overlay(work, "only_wikitext2.yaml", {"wikitext2": "auto"})
    extra = {"joma": {"pretrained": {"cache_dir": hub["cache"], "models": {"pythia-14m": ["step0", "step1000", "step143000"]},
                                     "window": 8}}}
    (work / "fig7.yaml").write_text(yaml.safe_dump(extra))
    env = {"FEATLEARN_DATA_MIRROR": str(shared_data), "FEATLEARN_OFFLINE": "1"}
    result = snakemake(work, "fig_joma_7", "--cores", "2", "--configfile", "config/smoke.yaml", name, "fig7.yaml", env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "skipping joma Fig. 7 checkpoints" in result.stderr and "pythia-70m" in result.stderr
    tables = sorted((work / "results" / "joma" / "pretrained" / "pythia-14m").glob("*.csv"))
    assert [t.stem for t in tables] == ["step0", "step1000", "step143000"]
    df = pd.concat(pd.read_csv(t) for t in tables)
    assert set(df["metric"]) == {"stable_rank", "attention_entropy"} and set(df["layer"]) == {0, 1, 2, 3}
    claims = pd.read_csv(work / "results" / "joma" / "claims" / "7.csv")
    assert "fig7_step0_gaussian_pythia-14m" in set(claims["claim_id"])
    assert (work / "results" / "figures" / "joma" / "fig7.png").stat().st_size > 1000
