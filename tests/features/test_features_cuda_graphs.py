"""CUDA graphs of the features classifiers' training step (issue 34): on a CPU the switch changes nothing; the
graph-safe step (padded batches, dense Adagrad, one activation per model call, Adam's step count on the device)
run uncaptured trains as the eager step does; capture and replay only where a CUDA device is present."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from featlearn.cudagraphs import GraphedSteps
from featlearn.features import train as T

WORDS = ["<pad>", "unk", "good", "bad", "film", "plot", "fun", "dull", "great", "acting", "not", "very"]


def _splits(n: int = 70, seed: int = 0) -> dict[str, T.Encoded]:
    """Instances of 1 to 21 tokens (several padded lengths, short pools), labels from the polar words."""
    gen = torch.Generator().manual_seed(seed)
    index = {w: i for i, w in enumerate(WORDS)}

    def rows(count):
        out = []
        for _ in range(count):
            length = int(torch.randint(1, 22, (1,), generator=gen))
            words = [WORDS[int(i)] for i in torch.randint(2, len(WORDS), (length,), generator=gen)]
            out.append((int(words.count("good") + words.count("great") >= words.count("bad") + words.count("dull")),
                        " ".join(words)))
        return out

    return {split: T.encode(rows(count), index) for split, count in (("train", n), ("dev", 20), ("test", 20))}


def _settings(**kw) -> T.Settings:
    shared = dict(kind="mlp", epochs=2, batch=8, lr=0.05, optimizer="adagrad", dropout=0.0, d=8, sigma_e=0.1, sigma_w=0.1,
                  sigma_h=0.1, kernel=3, ffn=8, sa_variant="paper", mv_bos=True, bucket_pool=2, eval_batch=16,
                  dtype="float64", threads=0)
    return T.Settings(**{**shared, **kw})


PROBES = T.Probes(tokens={"good": 2, "bad": 3}, phrases={"not good": [10, 2]})
RUNS = [T.Run(1, "relu", 0.1), T.Run(2, "tanh", 0.1), T.Run(1, "relu", 0.001)]  # one activation's runs apart


def _train(settings: T.Settings, runs=RUNS, **kw) -> T.Result:
    return T.train(settings, runs, _splits(), len(WORDS), PROBES, progress=False, **kw)


def test_padded_lengths_are_a_few_per_doubling():
    assert [T.padded_length(n) for n in (1, 8, 9, 56, 64, 65, 127, 128, 129, 150, 2500)] == \
        [8, 8, 16, 56, 64, 72, 128, 128, 144, 160, 2560]
    assert all(n <= T.padded_length(n) <= max(n + 7, n * 9 / 8) for n in range(1, 5000))
    assert len({T.padded_length(n) for n in range(1, 2501)}) < 60


@pytest.mark.parametrize("kind, optimizer, dropout", [("mlp", "adagrad", 0.3), ("mv", "adam", 0.0), ("lrnn", "sgd", 0.0)])
def test_the_cuda_graphs_switch_leaves_cpu_training_unchanged(kind, optimizer, dropout):
    """On a CPU the switch does nothing: the eager step runs and every table and parameter is the same, bit for bit."""
    eager = _train(_settings(kind=kind, optimizer=optimizer, dropout=dropout))
    switched = _train(_settings(kind=kind, optimizer=optimizer, dropout=dropout, cuda_graphs=True))
    for a, b in ((eager.scores, switched.scores), (eager.metrics, switched.metrics), (eager.summary, switched.summary)):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert all(torch.equal(eager.params[k], switched.params[k]) for k in eager.params)


def _assert_close(eager: T.Result, graph_safe: T.Result, rtol: float, atol: float) -> None:
    for a, b in ((eager.scores, graph_safe.scores), (eager.metrics, graph_safe.metrics)):
        pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=rtol, atol=atol)
    pd.testing.assert_frame_equal(eager.summary, graph_safe.summary)  # the same best epochs and accuracies
    for k in eager.params:
        # the transformer's key bias has zero gradient in exact arithmetic (the softmax over keys ignores a shift
        # every key shares): it holds rounding noise, of order 1e-9 after Adagrad's normalised steps
        tol = 1e-8 if k == "bk" else atol
        assert torch.allclose(eager.params[k], graph_safe.params[k], rtol=rtol, atol=tol), k


@pytest.mark.parametrize("kind, optimizer, dropout", [
    ("mlp", "adagrad", 0.3), ("cnn", "adagrad", 0.0), ("sa", "adam", 0.2), ("sa_mlp", "sgd", 0.0), ("mv", "adagrad", 0.2),
    ("lrnn", "adam", 0.0), ("tr", "adagrad", 0.0),
])
def test_the_graph_safe_step_is_the_eager_step(kind, optimizer, dropout):
    """The step a CUDA graph holds, run uncaptured on the CPU, trains as the eager step: batches padded to ``batch``
    rows and a rounded length, the embedding table's Adagrad update dense, each activation's runs through the model
    on their own (relu's runs are not consecutive here), Adam's step count on the device, the epoch's loss summed
    on the device. The same tables and parameters up to float rounding (float64)."""
    settings = _settings(kind=kind, optimizer=optimizer, dropout=dropout, lr=0.01 if optimizer == "adam" else 0.05)
    eager = _train(settings)
    graph_safe = _train(T.Settings(**{**settings.__dict__, "cuda_graphs": True}), capture=False)
    _assert_close(eager, graph_safe, rtol=1e-9, atol=1e-12)
    assert not torch.allclose(eager.params["E"], _train(_settings(kind=kind, epochs=0)).params["E"])  # it did train


def test_the_environment_runs_the_graph_safe_step_uncaptured_on_a_cpu(monkeypatch, capsys):
    """With the diagnostic (featlearn.cudagraphs.UNCAPTURED_ENV) a switched-on job trains with the graph-safe step on
    the CPU (padded batches, dense Adagrad): what ``capture=False`` gives, bit for bit."""
    from featlearn.cudagraphs import UNCAPTURED_ENV

    settings = T.Settings(**{**_settings(kind="mlp", optimizer="adagrad", dropout=0.3, lr=0.05).__dict__,
                             "cuda_graphs": True})
    uncaptured = _train(settings, capture=False)
    monkeypatch.setenv(UNCAPTURED_ENV, "1")
    by_environment = _train(settings)
    assert f"{UNCAPTURED_ENV}=1: the graph-safe step runs uncaptured" in capsys.readouterr().err
    for a, b in ((uncaptured.scores, by_environment.scores), (uncaptured.metrics, by_environment.metrics),
                 (uncaptured.summary, by_environment.summary)):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert all(torch.equal(uncaptured.params[k], by_environment.params[k]) for k in uncaptured.params)


def test_the_graph_safe_step_with_one_seed_and_multiclass_labels():
    """One seed (its batch shared by every run, short batches at the ends of pools padded with filler rows) and a
    three-class task (softmax cross-entropy), one activation per job as most jobs have."""
    splits = _splits()
    splits = {k: T.Encoded(v.ids, v.offsets, v.labels + (v.lengths > 10).long()) for k, v in splits.items()}
    runs = [T.Run(3, "gelu", 0.1), T.Run(3, "gelu", 0.001)]
    settings = _settings(kind="cnn", dropout=0.2)
    eager = T.train(settings, runs, splits, len(WORDS), PROBES, n_classes=3, progress=False)
    graph_safe = T.train(T.Settings(**{**settings.__dict__, "cuda_graphs": True}), runs, splits, len(WORDS), PROBES,
                         n_classes=3, progress=False, capture=False)
    assert eager.spec.n_out == 3
    _assert_close(eager, graph_safe, rtol=1e-9, atol=1e-12)


def test_the_switch_leaves_a_training_job_s_tables_unchanged_on_a_cpu(tmp_path):
    """features_train on the synthetic data writes the same CSV files, byte for byte, with the switch on and off."""
    from featlearn.features.experiments import train_job
    from featlearn.pipeline.compute import Context

    synthetic = {"distance": 2, "ks": [0, 2], "max_len": 8, "min_len": 4, "n_eval_per_class": 10, "n_fillers": 20,
                 "n_markers": 4, "n_per_class": 30, "seed": 2021}
    cfg = {"activations": ["relu", "tanh"], "dataset": "synthetic", "ks": [0, 2], "max_eval": 0, "max_train": 0,
           "probe": "positions", "seeds": [1, 2], "sigma_v": [0.1], "subsample_seed": 2021, "synthetic": synthetic,
           "settings": {"batch": 16, "bucket_pool": 2, "d": 8, "dropout": 0.2, "epochs": 2, "eval_batch": 32, "ffn": 8,
                        "kernel": 3, "kind": "lrnn", "lr": 0.01, "max_len": 0, "mv_bos": True, "optimizer": "adagrad",
                        "sa_variant": "paper", "sigma_e": 0.1, "sigma_h": 0.1, "sigma_w": 0.1, "threads": 1}}
    written = []
    for graphs in (False, True):
        out = {k: str(tmp_path / f"{k}_{graphs}.csv") for k in ("scores", "metrics", "summary")}
        train_job({**cfg, "settings": {**cfg["settings"], "cuda_graphs": graphs}}, {}, out, Context(device="cpu"))
        written.append([open(out[k], "rb").read() for k in sorted(out)])
    assert written[0] == written[1]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("kind, optimizer, dropout", [("mlp", "adagrad", 0.3), ("lrnn", "adam", 0.0), ("sa", "sgd", 0.2)])
def test_cuda_graphs_train_as_the_eager_step_does(kind, optimizer, dropout, monkeypatch):
    """On a GPU: the captured and replayed step (3 eager steps per padded length, then its graph, all graphs in one
    memory pool) trains as the eager step does, up to float rounding, and captures one graph per padded length."""
    made = []

    class Recording(GraphedSteps):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            made.append(self)

    monkeypatch.setattr(T, "GraphedSteps", Recording)
    settings = _settings(kind=kind, optimizer=optimizer, dropout=dropout, epochs=6, device="cuda",
                         lr=0.01 if optimizer == "adam" else 0.05)
    eager = _train(settings)
    graphed = _train(T.Settings(**{**settings.__dict__, "cuda_graphs": True}))
    _assert_close(eager, graphed, rtol=1e-7, atol=1e-10)
    assert len(made) == 1 and made[0].shared_pool and 2 <= len(made[0].graphs) <= 3  # lengths 1-21: 8, 16, 24


def test_the_estimate_probes_the_switch_only_when_on(repo, tmp_path):
    """features_train's probe shape names the switch only when it is on (the eager probes keep their cache key), with
    the longer steps a captured step pads to, and its probe trains with it (on a CPU: the eager step)."""
    from featlearn.features import cost as features_cost
    from featlearn.features.registry import job_settings
    from featlearn.pipeline import estimate as E

    config = E.merged_config([str(repo / "config" / "smoke.yaml")], repo / "config")
    cls = config["features"]["cls"]
    assert cls["train"]["cuda_graphs"] is False
    shapes = {}
    for graphs in (False, True):
        cfg = job_settings({**cls, "train": {**cls["train"], "cuda_graphs": graphs}}, "synthetic_lrnn", config["seed"])
        assert cfg["settings"]["cuda_graphs"] is graphs
        node = E.Node("features_train", "features_train", "x", {}, cfg, True, 1, "none.tsv")
        (part,) = features_cost.train_cost(node, results=str(tmp_path)).parts
        shapes[graphs] = part.probe.shape
    # with the switch a step is padded further, to a multiple of 8 (featlearn.features.train.padded_length)
    assert shapes[True]["padded_length"] > shapes[False]["padded_length"]
    assert "cuda_graphs" not in shapes[False] and ({**shapes[True], "padded_length": None}
                                                   == {**shapes[False], "cuda_graphs": True, "padded_length": None})
    small = {**shapes[True], "batch": 4, "length": 3, "d": 4}
    assert features_cost.train_probe(small, 2, "cpu", steps=2, warmup=1)["seconds_per_step"] > 0
