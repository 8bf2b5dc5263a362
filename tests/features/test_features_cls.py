"""features paper, classification experiments: extraction tables, training jobs, the NTK flow job, and the
figures' claims on planted tables (including the AG News path on a tiny fixture)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from featlearn.pipeline.compute import Context
from featlearn.features import experiments as ex
from featlearn.features import figures as F
from featlearn.data.parsers import parse_tree
from featlearn.features.extract import extract_table
from featlearn.io import write_csv
from featlearn.features.simulate import theory_job
from featlearn.pipeline.figure import write_outputs

ROWS = [
    (1, "a good film"), (1, "good fun"), (1, "great good plot"), (1, "good great"), (1, "not bad"), (1, "good good"),
    (1, "so good"),
    (0, "bad film"), (0, "bad plot not good"), (0, "dull bad"), (0, "bad bad acting"), (0, "not good at all"),
]
EXTRACT_CFG = {
    "ratio": 3.0, "min_count": {"sst": 1, "imdb": 1, "ag_news": 1},
    "adjectives": {"min_count": 0, "max_classes": 2}, "bigrams": {"min_count": 0, "inclusive_ratio": False},
    "phrases": {"max_words": 10, "rule": "prefix"},
}
AG_WORDS = {0: "war", 1: "goal", 2: "stock", 3: "chip"}


def _write_prepared(folder: Path, splits: dict[str, list[tuple[int, str]]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    words = set()
    for split, rows in splits.items():
        (folder / f"{split}.tsv").write_text("label\ttext\n" + "".join(f"{y}\t{t}\n" for y, t in rows))
        words |= {w for _, t in rows for w in t.split()}
    (folder / "vocab.json").write_text(json.dumps(["<pad>", "unk", "<eos>"] + sorted(words)))
    return folder


def _split_inputs(folder: Path) -> dict[str, str]:
    """The named inputs of a training job: a prepared dataset's splits and vocabulary."""
    return {**{s: str(folder / f"{s}.tsv") for s in ("train", "dev", "test")}, "vocab": str(folder / "vocab.json")}


def _ag_rows(n: int, seed: int) -> list[tuple[int, str]]:
    rng = np.random.default_rng(seed)
    fillers = ["the", "a", "news", "today", "report"]
    rows = []
    for i in range(n):
        c = i % 4
        words = list(rng.choice(fillers, size=4)) + [AG_WORDS[c]] * 2
        rng.shuffle(words)
        rows.append((c, " ".join(words)))
    return rows


def _job_cfg(dataset: str, kind: str, probe: str, **settings) -> dict:
    return {
        "dataset": dataset, "activations": ["relu"], "sigma_v": [0.1], "seeds": [1, 2], "probe": probe, "ks": [0, 2, 4],
        "max_train": 0, "max_eval": 0, "subsample_seed": 1,
        "synthetic": {"n_per_class": 60, "n_eval_per_class": 20, "n_markers": 3, "n_fillers": 10, "min_len": 6,
                      "max_len": 8, "distance": 2, "seed": 5},
        "settings": {"kind": kind, "epochs": 3, "lr": 0.5, "dropout": 0.0, "batch": 16, "optimizer": "adagrad", "d": 64,
                     "sigma_e": 0.1, "sigma_w": 0.1, "sigma_h": 0.1, "kernel": 3, "ffn": 64, "sa_variant": "paper",
                     "mv_bos": True, "bucket_pool": 50, "eval_batch": 256, "threads": 1, **settings},
    }


# ------------------------------------------------------------------------------------------ extraction
def test_extract_table_sst_and_sstwsub():
    sst = extract_table(EXTRACT_CFG, "sst", ROWS)
    assert set(sst["kind"]) == {"token"}
    assert dict(zip(sst["unit"], sst["polarity"]))["good"] == 1 and dict(zip(sst["unit"], sst["polarity"]))["bad"] == -1
    wsub = extract_table(EXTRACT_CFG, "sstwsub", ROWS)
    kinds = wsub.groupby("kind")["unit"].apply(set)
    assert {"good", "bad", "dull"} <= kinds["adjective"] and "film" not in kinds["adjective"]
    assert "bad film" in kinds["bigram"]
    phrases = wsub[wsub["kind"] == "phrase"].set_index("unit")
    assert phrases.loc["not bad", "polarity"] == 1 and phrases.loc["not good at all", "polarity"] == -1
    node_cfg = {**EXTRACT_CFG, "phrases": {"max_words": 10, "rule": "node"}}
    with pytest.raises(ValueError, match="needs the SST training trees"):
        extract_table(node_cfg, "sstwsub", ROWS)
    trees = [parse_tree("(3 (2 not) (1 bad))"), parse_tree("(1 (2 bad) (2 film))")]
    nodes = extract_table(node_cfg, "sstwsub", ROWS, trees)
    assert nodes[nodes["kind"] == "phrase"]["unit"].tolist() == ["not bad"]


def test_adjective_filter_by_number_of_word_classes():
    from featlearn.features.extract import lemminflect_adjective

    assert lemminflect_adjective("predictable", 1) and lemminflect_adjective("good", 2) and lemminflect_adjective("dull", 2)
    assert lemminflect_adjective("left") and not lemminflect_adjective("left", 2)
    assert not lemminflect_adjective("film") and not lemminflect_adjective("film", 2)


def test_extract_table_agnews_is_multiclass():
    df = extract_table(EXTRACT_CFG, "ag_news", _ag_rows(40, 0))
    assert dict(zip(df["unit"], df["cls"])) == {w: c for c, w in AG_WORDS.items()}
    assert (df["polarity"] == 0).all()


def test_subsample_is_seeded_and_keeps_order():
    rows = list(range(100))
    a, b = ex.subsample(rows, 10, 3), ex.subsample(rows, 10, 3)
    assert a == b and a == sorted(a) and len(set(a)) == 10
    assert ex.subsample(rows, 0, 3) is rows and ex.subsample(rows, 500, 3) is rows
    assert ex.subsample(rows, 10, 4) != a


def test_negation_probes():
    table = extract_table(EXTRACT_CFG, "sstwsub", ROWS)
    index = {w: i for i, w in enumerate(["<pad>", "unk"] + sorted({w for _, t in ROWS for w in t.split()}))}
    probes = ex.build_probes("negation", table, index, [])
    for unit in ("not", "good", "not good", "not bad", "not good at all", "good at all"):
        assert unit in probes.phrases
    assert probes.phrases["not good"] == [index["not"], index["good"]]
    bigrams = ex.build_probes("bigrams", table, index, [])
    assert bigrams.bigrams["bad film"] == (index["bad"], index["film"]) and "not good" in bigrams.phrases
    assert not ex.build_probes("none", table, index, []).phrases
    with pytest.raises(ValueError):
        ex.synthetic_splits({**_job_cfg("synthetic", "lrnn", "positions")["synthetic"], "distance": 7})


# ------------------------------------------------------------------------------------------ AG News path
def test_agnews_path_on_a_fixture(tmp_path, one_thread):
    """Extraction, an SA training job with four outputs, and Fig. 4 with claim 6, on a tiny AG News."""
    data = _write_prepared(tmp_path / "prepared" / "ag_news",
                           {"train": _ag_rows(80, 0), "dev": _ag_rows(20, 1), "test": _ag_rows(20, 2)})
    extracted = tmp_path / "extracted" / "ag_news.csv"
    write_csv(extract_table(EXTRACT_CFG, "ag_news", _ag_rows(80, 0)), str(extracted))
    job = tmp_path / "train" / "ag_news_sa"
    outs = {t: str(job / f"{t}.csv") for t in ("scores", "metrics", "summary")}
    inputs = {**_split_inputs(data), "extracted": str(extracted)}
    ex.train_job(_job_cfg("ag_news", "sa", "tokens"), inputs, outs, Context())
    scores = pd.read_csv(outs["scores"])
    assert sorted(scores["out"].unique()) == [0, 1, 2, 3] and scores["epoch"].min() == 0
    summary = pd.read_csv(outs["summary"])
    assert len(summary) == 2 and (summary["test_accuracy"] > 0.9).all()
    png = tmp_path / "fig4.png"
    tables = {**{f"ag_news_sa_{t}": p for t, p in outs.items()}, "extracted_ag_news": str(extracted)}
    write_outputs(F.draw_4(tables, {"scale": "test"}), [str(png)], 40)
    claims = F.claims_4(tables, {"scale": "test"})
    assert png.stat().st_size > 1000
    (claim,) = claims
    assert claim.claim_id == "6-agnews-sa" and claim.measured == 4 and claim.passed


def test_training_job_is_deterministic(tmp_path, one_thread):
    outs = [{t: str(tmp_path / run / f"{t}.csv") for t in ("scores", "metrics", "summary")} for run in ("a", "b")]
    for o in outs:
        ex.train_job(_job_cfg("synthetic", "lrnn", "positions"), {}, o, Context())
    for t in outs[0]:
        assert Path(outs[0][t]).read_bytes() == Path(outs[1][t]).read_bytes()
    scores = pd.read_csv(outs[0]["scores"])
    assert set(scores["k"]) == {0, 2, 4} and set(scores["probe"]) == {"position"}


def test_theory_job_shows_the_relu_bias(tmp_path, one_thread):
    rows = ROWS * 3
    data = _write_prepared(tmp_path / "sst", {"train": rows, "dev": rows[:4], "test": rows[:4]})
    extracted = tmp_path / "extracted" / "sst.csv"
    write_csv(extract_table(EXTRACT_CFG, "sst", rows), str(extracted))
    cfg = {"models": ["mlp-relu", "mlp-tanh", "sa"], "steps": 400, "log_every": 100, "geometric_logs": 3,
           "sa_samples": 8, "seed": 1,
           "sigma_e": 0.1, "sigma_w": 0.1, "d": 16, "sigma_v": [0.1, 0.001], "max_train": 0, "subsample_seed": 1}
    curves, scores = tmp_path / "curves.csv", tmp_path / "scores.csv"
    theory_job(cfg, {"train": str(data / "train.tsv"), "vocab": str(data / "vocab.json"), "extracted": str(extracted)},
               {"curves": str(curves), "scores": str(scores)}, Context())
    c = pd.read_csv(curves)
    assert set(c["model"]) == {"mlp-relu", "mlp-tanh", "sa"} and sorted(c["step"].unique()) == [0, 1, 20, 100, 200, 300, 400]
    last = c[c["step"] == 400].set_index(["model", "sigma_v"])
    assert last.loc[("mlp-relu", 0.001), "bias"] != 0
    assert last.loc[("mlp-tanh", 0.001), "bias"] == 0 and last.loc[("sa", 0.1), "bias"] == 0
    assert (c.groupby(["model", "sigma_v"])["loss"].apply(lambda s: s.is_monotonic_decreasing)).all()
    s = pd.read_csv(scores)
    assert len(s) == len(c) * s["unit"].nunique()


# ------------------------------------------------------------------------------------- planted claims
def _token_scores(units: list[str], pol: list[int], shift: float, sigma_v: float = 0.1, seeds=(1, 2), epochs=2):
    rows = []
    for seed in seeds:
        for epoch in range(epochs + 1):
            for u, p in zip(units, pol):
                rows.append({"run": 0, "seed": seed, "activation": "relu", "sigma_v": sigma_v, "epoch": epoch,
                             "probe": "token", "unit": u, "k": -1, "out": 0, "score": epoch * (p + shift)})
    return pd.DataFrame(rows)


def test_token_statistics_on_planted_scores():
    """(The claims on them: tests/features/test_features_claims.py.)"""
    units = [f"p{i}" for i in range(5)] + [f"n{i}" for i in range(5)]
    pol = [1] * 5 + [-1] * 5
    table = pd.DataFrame({"unit": units, "polarity": pol, "log_odds": [p * (1 + i) for i, p in enumerate(pol)]})
    balanced = F.with_polarity(F.final(_token_scores(units, pol, 0.0)), table)
    st = F.token_stats(balanced)
    assert st["beta"] == pytest.approx(0.0) and st["frac_pos"] == st["frac_neg"] == 1
    biased = F.with_polarity(F.final(_token_scores(units, pol, 1.5)), table)  # every score > 0
    st = F.token_stats(biased)
    assert st["frac_neg"] == 0 and st["beta"] == pytest.approx(1.5)  # final pos 2 * 2.5, neg 2 * 0.5: (5 + 1) / (5 - 1)
    assert list(F.seed_stats(biased).index) == [1, 2]
    assert F.over_seeds([1.0, 3.0]) == {"value": 2.0, "spread": pytest.approx(2 ** 0.5), "seeds": 2, "draws": (1.0, 3.0)}


def test_lrnn_position_claims_on_planted_table(tmp_path):
    def table(scale_k):
        rows = []
        for seed in (1, 2, 3):
            for epoch in (0, 1):
                for u in ("pos0", "pos1", "neg0", "neg1"):
                    sign = 1 if u.startswith("pos") else -1
                    for k, size in scale_k.items():
                        # at epoch 0 (untrained) a seed-dependent sign: seed 2's markers already separate at k = 2
                        score = epoch * sign * size + (1 - epoch) * (0.5 * sign if seed == 2 and k == 2 else 0.0)
                        rows.append({"run": 0, "seed": seed, "activation": "relu", "sigma_v": 0.1, "epoch": epoch,
                                     "probe": "position", "unit": u, "k": k, "out": 0, "score": score})
        return pd.DataFrame(rows)

    for sizes, expect in (({0: 0.1, 2: 1.0, 4: 0.2}, [True, True, True]), ({0: 1.0, 2: 1.0, 4: 0.1}, [True, False, True])):
        path = tmp_path / "train" / "synthetic_lrnn" / "scores.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        table(sizes).to_csv(path, index=False)
        tables, cfg = {"synthetic_lrnn_scores": str(path)}, {"ks": [0, 2, 4], "distance": 2, "scale": "test"}
        write_outputs(F.draw_12(tables, cfg), [str(tmp_path / "fig12.png")], 40)
        claims = F.claims_12(tables, cfg)
        assert [c.claim_id for c in claims] == ["8-lrnn-k2-signs", "8-lrnn-k2-vs-k0", "8-lrnn-k2-vs-k4"]
        assert [c.passed for c in claims] == expect
        # the untrained network of each seed is one draw: seed 2's untrained markers separate, 1 of 3 draws passes
        signs = claims[0]
        assert signs.baseline_draws == 3 and signs.baseline_pass_rate == pytest.approx(1 / 3)
        assert signs.verdict == "not discriminating"


def test_table3_on_planted_summaries(tmp_path):
    """The table (its claims: tests/features/test_features_claims.py)."""
    rows = []
    for act, acc_i, acc_ii in (("relu", 0.80, 0.67), ("tanh", 0.79, 0.79), ("gelu", 0.80, 0.80), ("silu", 0.80, 0.77)):
        for sv, acc in ((0.1, acc_i), (0.001, acc_ii)):
            for seed in (1, 2, 3):
                rows.append({"run": 0, "seed": seed, "activation": act, "sigma_v": sv, "best_epoch": 1,
                             "dev_accuracy": acc, "test_accuracy": acc})
    path = tmp_path / "train" / "sst_mlp" / "summary.csv"
    path.parent.mkdir(parents=True)
    pd.DataFrame(rows).to_csv(path, index=False)
    files = [str(tmp_path / "t3.csv"), str(tmp_path / "t3.md")]
    tables, cfg = {"sst_mlp_summary": str(path)}, {"sigma_v": [0.1, 0.001], "scale": "test"}
    write_outputs(F.draw_table3(tables, cfg), files, 40)
    table = pd.read_csv(files[0])
    assert len(table) == 16 and table["trials"].eq(3).all()
    md = Path(files[1]).read_text()
    assert "| dataset | split | relu I | relu II | tanh I |" in md and "| SST | valid | 80.0 (78.4) | 67.0 (68.0) |" in md


def test_table6_and_claim1(tmp_path):
    extracted = tmp_path / "extracted" / "sst.csv"
    write_csv(pd.DataFrame({"kind": "token", "unit": [f"w{i}" for i in range(677)],
                                "cls": [1] * 410 + [0] * 267, "polarity": [1] * 410 + [-1] * 267}), str(extracted))
    stats = tmp_path / "sst" / "stats.json"
    stats.parent.mkdir()
    stats.write_text(json.dumps({"splits": {"train": {"n": 6920}, "dev": {"n": 872}, "test": {"n": 1820}}}))
    files = [str(tmp_path / "t6.csv"), str(tmp_path / "t6.md")]
    tables, cfg = {"extracted_sst": str(extracted), "stats_sst": str(stats)}, {"scale": "test"}
    write_outputs(F.draw_table6(tables, cfg), files, 40)
    claims = {c.claim_id: c for c in F.claims_table6(tables, cfg)}
    assert claims["1-sst-train-size"].passed and not claims["1-sst-test-size"].passed
    assert claims["1-sst-pos-tokens"].passed and claims["1-sst-neg-tokens"].passed
    assert pd.read_csv(files[0])["measured"].tolist() == [267, 410]


def test_cli_extract_and_bad_inputs(tmp_path):
    from featlearn.pipeline.cli import main

    train = _write_prepared(tmp_path / "sst", {"train": ROWS}) / "train.tsv"
    out = tmp_path / "extracted" / "sst.csv"
    assert main(["compute", "--run", "featlearn.features.extract:extract_job", "--settings",
                 json.dumps({**EXTRACT_CFG, "dataset": "sst"}), "--inputs", json.dumps({"train": str(train)}),
                 "--outputs", json.dumps({"extracted": str(out)}), "--threads", "1", "--device", "cpu"]) == 0
    assert "good" in set(pd.read_csv(out)["unit"])
    with pytest.raises(ValueError, match="unrecognised input"):
        F.Inputs({"something": str(tmp_path / "something.csv")})
    with pytest.raises(ValueError, match="missing input"):
        F.Inputs({}).job("sst_mlp")
    with pytest.raises(KeyError, match="has no figure"):
        _registry(lambda d: True).figure("99")
    with pytest.raises(ValueError, match="unknown training settings"):
        ex.train_job({**_job_cfg("synthetic", "lrnn", "positions"), "settings": {"kind": "lrnn", "bogus": 1}},
                     {}, {t: str(tmp_path / f"{t}.csv") for t in ("scores", "metrics", "summary")}, Context())
    assert not math.isnan(F.token_stats(pd.DataFrame({"seed": [1, 1], "score": [1.0, -1.0], "polarity": [1, -1]}))["beta"])


def _registry(dataset_on):
    import yaml

    from featlearn.features.registry import registry
    from featlearn.pipeline.registry import Paths

    config = yaml.safe_load((Path(__file__).parents[2] / "config" / "config.yaml").read_text())
    return registry(config, Paths("results"), dataset_on)


def test_job_table_settings_and_inputs():
    from featlearn.features import registry as R
    from featlearn.pipeline.registry import Paths

    cls = {
        "activations": ["relu", "tanh"], "sigma_v": [0.1, 0.001], "threads": 1, "adam_lr": 1e-3, "adam_epochs": 5,
        "train": {"batch": 64}, "synthetic": {"ks": [0, 2, 4]},
        "datasets": {d: {"epochs": 3, "lr": 0.01, "seeds": 2, "max_train": 0, "max_eval": 0, "max_len": 0}
                     for d in ("sst", "sstwsub", "imdb", "ag_news", "synthetic")},
    }
    mlp = R.job_settings(cls, "sst_mlp", 7)
    assert mlp["activations"] == ["relu", "tanh"] and mlp["sigma_v"] == [0.1, 0.001] and mlp["seeds"] == [7, 8]
    assert mlp["settings"]["kind"] == "mlp" and mlp["settings"]["lr"] == 0.01
    adam = R.job_settings(cls, "sst_mlp_adam", 7)
    assert adam["settings"]["optimizer"] == "adam" and adam["settings"]["lr"] == 1e-3 and adam["activations"] == ["relu"]
    assert adam["settings"]["epochs"] == 5 and mlp["settings"]["epochs"] == 3
    assert R.job_settings(cls, "sst_mv", 7)["sigma_v"] == [0.1]
    with pytest.raises(ValueError, match="unknown training job"):
        R.job_settings(cls, "sst_rnn", 7)
    paths = Paths("r")
    assert R.job_inputs("synthetic_lrnn", paths) == {}
    imdb = R.job_inputs("imdb_sa", paths)
    assert imdb["vocab"] == "r/data/prepared/imdb/vocab.json" and imdb["extracted"] == "r/features/extracted/imdb.csv"
    fig2 = R.figure_inputs("2", paths)
    assert fig2["sst_sa_mlp_scores"] == "r/features/train/sst_sa_mlp/scores.csv"
    assert fig2["theory_curves"] == "r/features/theory/curves.csv" and fig2["extracted_sst"] == "r/features/extracted/sst.csv"
    assert list(R.table_inputs("3", paths, ["sst", "sstwsub", "imdb"]).values()) == [
        "r/features/train/sst_mlp/summary.csv", "r/features/train/sst_mlp/metrics.csv",
        "r/features/train/imdb_mlp/summary.csv", "r/features/train/imdb_mlp/metrics.csv"]
    assert len(R.table_inputs("5", paths, ["sst"])) == 10
    # every figure's inputs are names the figures read
    for n in R.FIGURES:
        F.Inputs(R.figure_inputs(n, paths))
    for n in ("3", "5", "6"):
        F.Inputs(R.table_inputs(n, paths, list(R.DATASETS)))
    # every job a figure reads exists, and every model kind is one the trainer knows
    from featlearn.features.models import KINDS

    assert all(j in R.JOBS for _, jobs in R.FIGURES.values() for j in jobs)
    assert all(kind in KINDS for _, kind, *_ in R.JOBS.values())


def test_registry_names_existing_functions_and_skips_absent_datasets():
    from featlearn.pipeline.registry import load

    reg = _registry(lambda d: True)
    for job in reg.jobs:
        assert callable(load(job.run)), job.name
    for fig in reg.figures:
        assert callable(load(fig.draw)) and callable(load(fig.claims)), fig.rule
    assert [f.rule for f in reg.figures][:4] == ["table_features_6", "table_features_3", "table_features_5", "fig_features_2"]
    assert not reg.skipped
    off = _registry(lambda d: d not in ("ag_news", "wikitext2"))
    assert "fig_features_4" not in {f.rule for f in off.figures} and "fig_features_7" in {f.rule for f in off.figures}
    assert set(off.skipped) == {"features Fig. 4 (claim 6); Table 6 row Agnews; Agnews columns of Tables 3, 5",
                                "features Fig. 7 panel wikitext2"}
    # the skipped figure's claim stays in the scorecard as unchecked, with the reason
    assert (not reg.unchecked and set(off.unchecked) == {"6-agnews-sa"}
            and "ag_news is not available" in off.unchecked["6-agnews-sa"][2])
