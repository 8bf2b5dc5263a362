"""lm-bench: every language model trains a few steps at smoke scale on the CPU and reports its throughput; the
FLOPs-per-token formula matches a count by hand."""

from __future__ import annotations

import json
import math

import pytest
import torch

from featlearn.pipeline.cli import main
from featlearn.data.registry import PREPARED
from featlearn.lm.bench import non_embedding_parameters
from featlearn.lm.cost import flops_per_token
from featlearn.lm_bench import MODELS, VOCAB, Spec, build, load_config, specs

FIELDS = ("model", "label", "dataset", "vocab", "batch", "seq", "tokens_per_step", "n_layer", "d_model", "parameters",
          "non_embedding_parameters", "flops_per_token", "optimizer", "device", "dtype", "scale", "steps", "warmup",
          "seconds_per_step", "median_step_seconds", "tokens_per_s", "achieved_tflops", "peak_matmul_tflops", "mfu", "final_loss")


# Word vocabularies cut for speed here (a WikiText-2 step costs about a second on one CPU thread); the shapes,
# batches and optimisers are the smoke config's.
TEST_VOCAB = {name: min(size, 2000) for name, size in VOCAB.items()}


def test_every_model_runs_at_smoke_scale(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("featlearn.lm_bench.VOCAB", TEST_VOCAB)
    out = tmp_path / "lm_bench.json"
    assert main(["lm-bench", "--scale", "smoke", "--device", "cpu", "--steps", "2", "--warmup", "1", "--threads", "1",
                 "--peak-size", "128", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert {r["model"] for r in rows} == set(MODELS)
    smoke = load_config("smoke")
    joma = smoke["joma"]["wikitext"]
    assert len(rows) == len(smoke["scan_snap"]["wikitext"]["fig7"]["variants"]) \
        + len(smoke["features"]["lm"]["word"]["datasets"]) + 1 \
        + len(smoke["templates"]["gpt2"]["wikitext"]["datasets"]) + len(joma["datasets"]) * len(joma["fig6"]["layers"])
    for r in rows:
        assert set(FIELDS) <= set(r), set(FIELDS) - set(r)
        assert r["scale"] == "smoke" and r["device"] == "cpu" and r["steps"] == 2 and r["warmup"] == 1
        for key in ("tokens_per_s", "seconds_per_step", "achieved_tflops", "peak_matmul_tflops", "mfu"):
            assert math.isfinite(r[key]) and r[key] > 0, (r["model"], key, r[key])
        assert math.isfinite(r["final_loss"])
        assert r["tokens_per_step"] == r["batch"] * r["seq"]
        assert r["vocab"] == TEST_VOCAB[r["dataset"]]
    by_model = {r["model"]: r for r in rows}
    # the smoke shapes of the configs (smoke.yaml merged into config.yaml)
    char = smoke["features"]["lm"]["char"]
    assert (by_model["features_char"]["n_layer"], by_model["features_char"]["d_model"], by_model["features_char"]["seq"]) == \
        (char["n_layer"], char["n_embd"], char["block_size"])
    assert by_model["features_char"]["optimizer"] == "AdamW" and by_model["scan_snap_lm"]["optimizer"] == "SGD"
    assert by_model["joma_lm"]["optimizer"] == "Adam"
    assert by_model["templates_gpt2"]["seq"] == smoke["templates"]["gpt2"]["wikitext"]["block"]
    assert "tokens/s" in capsys.readouterr().out  # the summary table


def test_vocabularies_are_the_registry_sizes():
    assert all(VOCAB[name] == PREPARED[name].expected_vocab for name in VOCAB)


def test_paper_scale_reads_the_paper_overlay():
    by_model = {}
    for s in specs(load_config("paper")):
        by_model.setdefault(s.model, []).append(s)
    # Fig. 7 is a WikiText-2 experiment at every scale (only Fig. 10 adds WikiText-103)
    assert [s.dataset for s in by_model["scan_snap_lm"]] == ["wikitext2", "wikitext2"]
    assert by_model["features_char"][0].settings["n_embd"] == 384 and by_model["features_char"][0].settings["block_size"] == 256
    # JoMA Fig. 6: every depth on both datasets
    assert [(s.dataset, s.settings["n_layer"]) for s in by_model["joma_lm"]] == [
        (d, n) for d in ("wikitext2", "wikitext103") for n in (1, 2, 5, 10)]
    gpt2 = by_model["templates_gpt2"]
    assert [s.dataset for s in gpt2] == ["wikitext2", "wikitext103"] and gpt2[0].settings["n_layer"] == 12


def test_flops_per_token_of_a_tiny_tutorial_lm_by_hand():
    V, d, d_ff, L, T = 50, 8, 12, 2, 5
    spec = Spec("features_word", "tiny", "ptb", {"n_layer": L, "n_head": 2, "d_model": d, "d_ff": d_ff, "dropout": 0.0, "lr": 1.0,
                                                   "clip": 0.5, "batch_size": 3, "bptt": T})
    built = build(spec, vocab=V)
    # per layer: in_proj d x 3d + 3d, out_proj d x d + d, linear1 d x d_ff + d_ff, linear2 d_ff x d + d, two LayerNorms 2d each
    layer = (3 * d * d + 3 * d) + (d * d + d) + (d * d_ff + d_ff) + (d_ff * d + d) + 4 * d
    decoder = d * V + V  # untied; the embedding table (V x d) is left out
    assert non_embedding_parameters(built) == L * layer + decoder == 1514
    assert sum(p.numel() for p in built.net.parameters()) == L * layer + decoder + V * d
    assert (flops_per_token(non_embedding_parameters(built), built.n_layer, built.seq, built.d_model)
            == 6 * 1514 + 6 * L * T * d == 9564)


def test_flops_per_token_counts_a_tied_output_layer():
    V, d, L, T = 65, 16, 1, 8
    spec = Spec("features_char", "tiny", "tinyshakespeare",
                {"n_layer": L, "n_head": 2, "n_embd": d, "block_size": T, "dropout": 0.0, "batch_size": 2, "lr": 1e-3,
                 "weight_decay": 0.1, "beta2": 0.99, "grad_clip": 1.0})
    built = build(spec, vocab=V)
    # per layer: attention 4 d^2, MLP 8 d^2, two LayerNorms without bias; final LayerNorm; output V x d (tied)
    n = L * (12 * d * d + 2 * d) + d + V * d
    assert non_embedding_parameters(built) == n == 4160
    assert flops_per_token(n, L, T, d) == 6 * 4160 + 6 * 1 * 8 * 16


def test_bfloat16_is_refused_on_the_cpu():
    with pytest.raises(ValueError, match="CUDA only"):
        main(["lm-bench", "--models", "features_char", "--scale", "smoke", "--device", "cpu", "--dtype", "bfloat16"])


def test_a_training_step_changes_the_weights():
    spec = next(s for s in specs(load_config("smoke"), ["features_char"]))
    built = build(spec)
    before = [p.detach().clone() for p in built.net.parameters()]
    tokens = torch.randint(built.vocab, (built.batch, built.seq + 1))
    built.loss(tokens).backward()
    built.optimizer.step()
    assert any(not torch.equal(a, b) for a, b in zip(before, built.net.parameters()))
