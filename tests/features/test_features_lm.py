"""features paper, language models (Figs. 5, 7): co-occurrence ranking, single-token logits, the character
GPT (causality, parameter count, training, resume), and claim 9 on planted logits."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from featlearn.features import lm as L
from featlearn.features.gpt import GPT, GPTConfig, parameter_count
from featlearn.pipeline.compute import Context
from claimtest import assert_fails, assert_passes
from featlearn.features.lm_figures import claims_5, cooccurrence_claims, display_token, draw_5, read_tables, token_gaps
from featlearn.pipeline.figure import write_outputs
from featlearn.io import write_csv

# --- co-occurrence on a hand-made corpus ---------------------------------------------------------------

# vocabulary: 0 a, 1 b, 2 c, 3 d, 4 e, 5 f (never used)
VOCAB = ["a", "b", "c", "d", "e", "f"]
#            a b a b a b a c a d a e d d d c c c
CORPUS = torch.tensor([0, 1, 0, 1, 0, 1, 0, 2, 0, 3, 0, 4, 3, 3, 3, 2, 2, 2])


def test_frequent_tokens_by_count_then_id():
    tokens, counts = L.frequent_tokens(CORPUS, 6, 3)
    assert counts.tolist() == [6, 3, 4, 4, 1, 0]
    assert tokens.tolist() == [0, 2, 3]  # c and d tie at 4: lower id first
    tokens, _ = L.frequent_tokens(CORPUS, 6, 10)
    assert tokens.tolist() == [0, 2, 3, 1, 4]  # never more than the tokens present


def test_follower_counts_are_bigram_counts():
    assert L.follower_counts(CORPUS, 0, 6).tolist() == [0, 3, 1, 1, 1, 0]  # after a: b x3, c, d, e
    assert L.follower_counts(CORPUS, 3, 6).tolist() == [1, 0, 1, 2, 0, 0]  # after d: a, d d, c
    assert L.follower_counts(CORPUS, 5, 6).sum() == 0


def test_rank_followers_top_bottom_and_ties():
    counts = L.follower_counts(CORPUS, 0, 6)
    _, unigram = L.frequent_tokens(CORPUS, 6, 6)
    top, bottom = L.rank_followers(counts, unigram, 1)
    assert top.tolist() == [1]  # b follows a three times
    # c, d, e follow a once each; ties go to the overall most frequent (c and d: 4, then id), e (1) last
    assert bottom.tolist() == [2]
    top, bottom = L.rank_followers(counts, unigram, 2)
    assert top.tolist() == [1, 2] and bottom.tolist() == [3, 4]
    # f never follows a: it is never a bottom candidate, and the groups never overlap
    top, bottom = L.rank_followers(counts, unigram, 3)
    assert top.tolist() == [1, 2, 3] and bottom.tolist() == [4]
    top, bottom = L.rank_followers(counts, unigram, 4)
    assert len(bottom) == 0 and 5 not in top


def test_cooccurrence_bad_input():
    with pytest.raises(ValueError, match="1-d token stream"):
        L.frequent_tokens(CORPUS.view(2, -1), 6, 3)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        L.frequent_tokens(CORPUS, 4, 3)
    with pytest.raises(ValueError, match="n must be"):
        L.frequent_tokens(CORPUS, 6, 0)
    with pytest.raises(ValueError, match="k must be"):
        L.rank_followers(np.ones(6, int), np.ones(6, int), 0)
    with pytest.raises(ValueError, match="shape"):
        L.rank_followers(np.ones(6, int), np.ones(5, int), 1)


# --- models ------------------------------------------------------------------------------------------


def test_single_token_logits_are_the_models_output_on_one_token(one_thread):
    from featlearn.lm.model import LMConfig, TransformerLM

    torch.manual_seed(0)
    word = TransformerLM(LMConfig(vocab=6, d_model=8, d_ff=8, n_head=2, n_layer=2, dropout=0.2)).eval()
    char = GPT(GPTConfig(vocab=6, block_size=8, n_layer=2, n_head=2, n_embd=8, dropout=0.2)).eval()
    for fn in (lambda idx: word(idx)[0], char):
        got = L.single_token_logits(fn, [3, 0, 5])
        assert got.shape == (3, 6)
        for row, tok in zip(got, (3, 0, 5)):
            assert torch.allclose(row, fn(torch.tensor([[tok]]))[0, 0], atol=1e-6)


def test_cooccurrence_logits_table(one_thread):
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab=6, block_size=8, n_layer=1, n_head=1, n_embd=8, dropout=0.0)).eval()
    df = L.cooccurrence_logits(model, CORPUS, VOCAB, n_frequent=2, k=1, dataset="toy")
    assert list(df.columns) == list(L.LOGIT_COLUMNS)
    assert df[["token", "group", "target", "target_count", "cooccurrence"]].values.tolist() == [
        ["a", "top", "b", 3, 3], ["a", "bottom", "c", 4, 1], ["c", "top", "c", 4, 2], ["c", "bottom", "a", 6, 1]]
    logits = model(torch.tensor([[0]]))[0, 0].detach()
    assert df.loc[0, "logit"] == pytest.approx(float(logits[1]))


def test_gpt_is_causal(one_thread):
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab=11, block_size=9, n_layer=2, n_head=2, n_embd=12, dropout=0.0)).eval()
    x = torch.randint(11, (2, 9))
    with torch.no_grad():
        base = model(x)
        for t in range(1, 9):
            x2 = x.clone()
            x2[:, t] = (x2[:, t] + 1) % 11
            out = model(x2)
            assert torch.allclose(out[:, :t], base[:, :t], atol=1e-6)  # earlier positions unchanged
            assert not torch.allclose(out[:, t], base[:, t])


@pytest.mark.parametrize("shape", [(65, 256, 6, 6, 384), (65, 64, 4, 4, 128), (7, 5, 1, 2, 4)])
def test_gpt_parameter_count_formula(shape):
    vocab, block, n_layer, n_head, n_embd = shape
    cfg = GPTConfig(vocab, block, n_layer, n_head, n_embd, dropout=0.2)
    model = GPT(cfg)
    assert sum(p.numel() for p in model.parameters()) == parameter_count(cfg)
    assert model(torch.zeros(1, 2, dtype=torch.long)).shape == (1, 2, vocab)
    if n_layer == 6:  # nanoGPT reports 10.65M for this shape, without the 256 x 384 position table
        assert parameter_count(cfg) - block * n_embd == 10_646_784


def test_gpt_bad_config_and_input():
    with pytest.raises(ValueError, match="multiple of n_head"):
        GPTConfig(vocab=5, block_size=4, n_layer=1, n_head=3, n_embd=8, dropout=0.0)
    with pytest.raises(ValueError, match="vocab"):
        GPTConfig(vocab=0, block_size=4, n_layer=1, n_head=1, n_embd=4, dropout=0.0)
    with pytest.raises(ValueError, match="dropout"):
        GPTConfig(vocab=5, block_size=4, n_layer=1, n_head=1, n_embd=4, dropout=1.0)
    model = GPT(GPTConfig(vocab=5, block_size=4, n_layer=1, n_head=1, n_embd=4, dropout=0.2))
    with pytest.raises(ValueError, match="block_size"):
        model(torch.zeros(1, 5, dtype=torch.long))


def test_learning_rate_schedule():
    run = L.CharRun(**{**TINY, "lr": 1e-3, "min_lr": 1e-4, "warmup": 10, "lr_decay_iters": 110}, iterations=200, eval_every=50,
                    checkpoint_every=50)
    assert L.learning_rate(5, run) == pytest.approx(5e-4)
    assert L.learning_rate(10, run) == pytest.approx(1e-3)
    assert L.learning_rate(60, run) == pytest.approx(5.5e-4)  # half-way down the cosine
    assert L.learning_rate(110, run) == pytest.approx(1e-4) and L.learning_rate(500, run) == pytest.approx(1e-4)


def test_random_windows_are_shifted_pairs():
    ids = torch.arange(50)
    x, y = L.random_windows(ids, 6, 4, torch.Generator().manual_seed(0))
    assert x.shape == (4, 6) and torch.equal(y, x + 1)
    with pytest.raises(ValueError, match="too short"):
        L.random_windows(torch.arange(5), 6, 1, torch.Generator())


TINY = dict(n_layer=1, n_head=2, n_embd=16, block_size=8, dropout=0.0, batch_size=8, warmup=2, lr=1e-2, min_lr=1e-3,
            lr_decay_iters=40, weight_decay=0.1, beta2=0.99, grad_clip=1.0, eval_batches=2, seed=3)


def test_tiny_char_training_lowers_the_loss(tmp_path, one_thread):
    stream = torch.tensor([0, 1, 2, 3, 1, 2] * 100)  # a learnable pattern
    run = L.CharRun(**TINY, iterations=40, eval_every=20, checkpoint_every=100)
    _, log = L.train_char_gpt(run, stream, stream[:200], 4, tmp_path)
    val = log[log["metric"] == "val_loss"].sort_values("step")["value"].to_numpy()
    assert val[0] > 1.2  # about ln 4 at initialisation
    assert val[-1] < val[0] - 0.5
    assert not (tmp_path / "resume.pt").exists()


def test_char_training_resumes_to_the_same_result(tmp_path, one_thread, monkeypatch):
    stream = torch.tensor([0, 1, 2, 3, 1, 2, 0, 0] * 40)
    run = L.CharRun(**TINY, iterations=8, eval_every=4, checkpoint_every=3)
    straight, log_a = L.train_char_gpt(run, stream, stream, 4, tmp_path / "a")

    real = L.learning_rate

    def crash_at_7(step, r):
        if step == 7:
            raise KeyboardInterrupt("killed")
        return real(step, r)

    monkeypatch.setattr(L, "learning_rate", crash_at_7)
    with pytest.raises(KeyboardInterrupt):
        L.train_char_gpt(run, stream, stream, 4, tmp_path / "b")
    assert (tmp_path / "b" / "resume.pt").is_file()  # written at step 6
    monkeypatch.setattr(L, "learning_rate", real)
    resumed, log_b = L.train_char_gpt(run, stream, stream, 4, tmp_path / "b")
    for (name, a), b in zip(straight.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), name
    pd.testing.assert_frame_equal(log_a, log_b)
    monkeypatch.setattr(L, "learning_rate", crash_at_7)
    with pytest.raises(KeyboardInterrupt):
        L.train_char_gpt(run, stream, stream, 4, tmp_path / "c")
    monkeypatch.setattr(L, "learning_rate", real)
    other = L.CharRun(**TINY, iterations=9, eval_every=4, checkpoint_every=3)
    _, log_other = L.train_char_gpt(other, stream, stream, 4, tmp_path / "c")  # the checkpoint of `run` is discarded
    _, log_clean = L.train_char_gpt(other, stream, stream, 4, tmp_path / "d")
    pd.testing.assert_frame_equal(log_other, log_clean)


# --- claim 9 and the figure ------------------------------------------------------------------------------


def planted(n_tokens: int, n_separated: int, k: int = 3, dataset: str = "ptb") -> pd.DataFrame:
    """Logit table where the first ``n_separated`` tokens have top logits above bottom ones."""
    rows = []
    for t in range(n_tokens):
        sign = 1.0 if t < n_separated else -1.0
        for group, base in (("top", sign), ("bottom", -sign)):
            for j in range(k):
                target_count = 10 if group == "top" else 1000  # bottom targets frequent overall
                rows.append((dataset, t, t, f"w{t}", 100 - t, group, 50 + j, f"x{j}", target_count,
                             5 - j if group == "top" else 1, base + 0.1 * j))
    return pd.DataFrame(rows, columns=L.LOGIT_COLUMNS)


def _claim9(df: pd.DataFrame, cid: str = "9_ptb"):
    return {c.claim_id: c for c in cooccurrence_claims(df, "Fig. 7", "test")}[cid]


def test_claim_passes_at_18_of_20_and_fails_at_17():
    assert token_gaps(planted(20, 18))["unigram_top_higher"].sum() == 0  # frequency alone would not separate
    ok = _claim9(planted(20, 18))
    assert_passes("features", [ok], "9_ptb")
    assert ok.measured == 18 and ok.target == ">= 18"
    bad = _claim9(planted(20, 17))
    assert_fails("features", [bad], "9_ptb")
    assert bad.measured == 17
    assert ok.baseline_measured == 0 and ok.verdict == "reproduced"


def test_claim_is_not_discriminating_when_frequency_alone_separates():
    # top targets frequent overall, bottom ones rare: a unigram model separates every token too
    df = planted(20, 20)
    df["target_count"] = np.where(df["group"] == "top", 1000, 10)
    c = _claim9(df)
    assert c.passed and c.baseline_measured == 20 and c.verdict == "not discriminating"


def test_claim_counts_an_empty_bottom_group_as_not_separated():
    df = planted(20, 20)
    df = df[~((df["token_rank"] < 3) & (df["group"] == "bottom"))]
    gaps = token_gaps(df)
    assert gaps["top_higher"].sum() == 17 and gaps["gap"].isna().sum() == 3
    assert not _claim9(df).passed


def test_claim_per_dataset():
    df = pd.concat([planted(20, 20, dataset="ptb"), planted(20, 10, dataset="wikitext2")])
    claims = {c.claim_id: c for c in cooccurrence_claims(df, "Fig. 7", "test")}
    assert claims["9_ptb"].passed and not claims["9_wikitext2"].passed


def test_figure_and_claims_from_tables(tmp_path):
    logits = planted(20, 19, dataset="tinyshakespeare")
    logits.loc[logits["token_rank"] == 0, "token"] = "\n"
    logits.loc[logits["token_rank"] == 1, "token"] = "NA"
    lp, gp = tmp_path / "logits.csv", tmp_path / "log.csv"
    write_csv(logits, lp)
    write_csv(pd.DataFrame({"dataset": "tinyshakespeare", "step": [0, 10], "metric": "val_loss", "value": [4.2, 2.5]}), gp)
    df, logs = read_tables([str(lp)], [str(gp)])
    assert set(df["token"].head(12)) == {"\n", "NA"}  # tokens read verbatim
    assert len(logs) == 2
    tables, cfg = {"logits": [str(lp)], "log": [str(gp)]}, {"scale": "test"}
    write_outputs(draw_5(tables, cfg), [str(tmp_path / "fig5.png")], 50)
    claims = claims_5(tables, cfg)
    assert (tmp_path / "fig5.png").stat().st_size > 1000
    assert [c.claim_id for c in claims] == ["9_tinyshakespeare", "9f_tinyshakespeare"] and claims[0].measured == 19
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="not a logit table"):
        read_tables([str(tmp_path / "other.csv")], [])
    with pytest.raises(ValueError, match="not a training log"):
        read_tables([str(lp)], [str(tmp_path / "other.csv")])
    assert display_token(" ") == "space" and display_token("$") == r"\$"


def test_lm_jobs_and_figures_are_registered():
    import yaml

    from featlearn.features.registry import registry
    from featlearn.pipeline.registry import Paths, load

    config = yaml.safe_load((Path(__file__).parents[2] / "config" / "config.yaml").read_text())
    reg = registry(config, Paths("results"), lambda d: True)
    jobs = {j.name: j for j in reg.jobs}
    assert load(jobs["features_lm_word"].run) is L.word_run and load(jobs["features_lm_char"].run) is L.char_run
    fig7 = next(f for f in reg.figures if f.rule == "fig_features_7")
    assert fig7.inputs["logits"] == ["results/features/lm/ptb/logits.csv", "results/features/lm/wikitext2/logits.csv"]
    assert callable(load(fig7.draw)) and callable(load(fig7.claims))


# --- the compute entry points: tables from prepared files, byte-identical on rerun -------------------------


def _prepared(tmp_path, n_vocab: int = 6):
    from featlearn.data.prepare import write_vocab
    from featlearn.io import save_tensor

    stream = torch.randint(n_vocab, (300,), generator=torch.Generator().manual_seed(0))  # every pair occurs
    save_tensor(tmp_path / "train.pt", stream)
    save_tensor(tmp_path / "valid.pt", stream[:120])
    write_vocab(tmp_path / "vocab.json", ["\n", " ", "a", "NA", "$", "e"][:n_vocab])
    return {s: str(tmp_path / f) for s, f in (("train", "train.pt"), ("valid", "valid.pt"), ("vocab", "vocab.json"))}


@pytest.mark.parametrize("kind", ["word", "char"])
def test_runs_write_identical_tables_twice(tmp_path, one_thread, kind):
    inputs = _prepared(tmp_path)
    if kind == "word":
        settings = dict(n_layer=1, n_head=2, d_model=8, d_ff=8, dropout=0.2, lr=1.0, clip=0.5, batch_size=4, bptt=5,
                        iterations=6, log_every=3, checkpoint_every=3, val_windows=2, eval_batch_size=10, seed=1)
        run = L.word_run
    else:
        settings = dict(TINY, iterations=6, eval_every=3, checkpoint_every=3)
        run = L.char_run
    settings |= {"n_frequent": 4, "top_k": 2, "dataset": "toy"}
    outs = []
    for rep in ("a", "b"):
        log, logits = tmp_path / rep / "log.csv", tmp_path / rep / "logits.csv"
        run(settings, inputs, {"log": str(log), "logits": str(logits)},
            Context(device="cpu", work_dir=str(tmp_path / rep / "resume")))
        outs.append((log.read_bytes(), logits.read_bytes()))
    assert outs[0] == outs[1]
    df, logs = read_tables([str(tmp_path / "a" / "logits.csv")], [str(tmp_path / "a" / "log.csv")])
    assert df["token_rank"].nunique() == 4 and set(df["group"]) == {"top", "bottom"}
    assert "NA" in set(df["target"]) | set(df["token"])  # read back verbatim
    assert set(logs["metric"]) == {"train_loss", "val_loss"} and logs["step"].max() == 6


def varied(n_tokens: int, model: str, k: int = 6, dataset: str = "ptb", seed: int = 0) -> pd.DataFrame:
    """Logit table whose targets' overall counts vary independently of their co-occurrence with the token; the
    logit is a bigram model's (log co-occurrence), a unigram model's (log target count) or a mix."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(n_tokens):
        for group in ("top", "bottom"):
            for j in range(k):
                count = int(rng.integers(10, 10_000))
                cooc = int(rng.integers(50, 100)) if group == "top" else 1
                logit = {"bigram": np.log(cooc), "unigram": np.log(count), "mix": np.log(count) + 0.5 * np.log(cooc)}[model]
                rows.append((dataset, t, t, f"w{t}", 10_000 - t, group, 100 * t + j + (50 if group == "top" else 0), f"x{j}",
                             count, cooc, float(logit + rng.normal(0, 0.01))))
    return pd.DataFrame(rows, columns=L.LOGIT_COLUMNS)


def test_claim_beyond_frequency_on_planted_models():
    """9f passes for a model whose logits carry co-occurrence beyond frequency, fails for a unigram model."""
    for model in ("bigram", "mix"):
        claims = cooccurrence_claims(varied(20, model), "Fig. 7", "test")
        assert_passes("features", claims, "9f_ptb")
        c = {x.claim_id: x for x in claims}["9f_ptb"]
        # the unigram model has no residual gap by construction; the null flips each token's gap sign at random,
        # which puts 18 of 20 above 0 in about 2 of 10,000 draws
        assert c.baseline.startswith("residual gaps with random signs") and c.baseline_draws == 200
        assert c.baseline_pass_rate <= 0.05 and c.verdict == "reproduced"
        assert "a bigram model (logit = log co-occurrence count) gives 20 of 20" in c.note
    # 3 tokens: all 3 positive comes with probability 1/8 under random signs, so 3 tokens cannot discriminate
    few = {x.claim_id: x for x in cooccurrence_claims(varied(3, "bigram"), "Fig. 7", "test")}["9f_ptb"]
    assert few.passed and few.baseline_pass_rate > 0.05 and few.verdict == "not discriminating"
    unigram = cooccurrence_claims(varied(20, "unigram"), "Fig. 7", "test")
    assert_fails("features", unigram, "9f_ptb")
    # the raw claim 9 cannot tell the unigram model apart when frequent targets co-occur more
    df = planted(20, 20)
    df["target_count"] = np.where(df["group"] == "top", 1000, 10)
    df["logit"] = np.log(df["target_count"])
    assert _claim9(df).passed and not _claim9(df, "9f_ptb").passed
