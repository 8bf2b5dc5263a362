"""``python -m featlearn estimate``: cost formulas against hand-computed values, the scheduler on a planted DAG,
the probe cache, and the command end to end on the smoke config."""

from __future__ import annotations

import collections
import dataclasses
import json
from pathlib import Path
import re

import pytest

from featlearn.features import cost as features_cost
from featlearn.joma import cost as joma_cost
from featlearn.lm import cost as lm_cost
from featlearn.pipeline import estimate as E
from featlearn.scan_snap import cost as scan_snap_cost
from featlearn.templates import cost as templates_cost


# ------------------------------------------------------------------------------------------- formulas


def test_lm_formulas_by_hand():
    # (6 N + 6 L T d) B T with N = 1000, L = 2, T = 35, d = 200, B = 20: (6,000 + 84,000) x 700
    assert lm_cost.flops_per_step(1000, 2, 35, 200, 20) == 63_000_000
    # 4 bytes x [P (2 + slots) + B T (L (9d + 2 d_ff + 2 H T) + 3 V)]:
    # P = 100, Adam: 400 floats; B T = 6, one layer: 9*4 + 2*8 + 2*1*3 = 58, 3 V = 30 -> 6 x 88 = 528
    assert lm_cost.memory_bytes(100, 2, 2, 3, 1, 4, 8, 1, 10) == 4 * (400 + 528)
    # evaluations at step 0, every 2 steps and at the end: 0, 2, 4, 6 / 0, 4, 5
    assert lm_cost.evaluations(6, 2) == 4 and lm_cost.evaluations(5, 4) == 3
    # features: 2 pools of 3 x 64 (3 batches each) and a rest of 70 (2 batches)
    assert features_cost.batches_per_epoch(2 * 192 + 70, 64, 3) == 8
    assert features_cost.batches_per_epoch(100, 64, 0) == 2


def _node(rule: str, settings: dict, wildcards: dict | None = None, threads: int = 1) -> E.Node:
    return E.Node(rule, rule, "x", wildcards or {}, settings, True, threads, "none.tsv")


def test_joma_wikitext_cost_by_hand(tmp_path):
    """One layer of the tutorial LM (d 200, d_ff 200, 1 head) on WikiText-2's 33,278 words, 6 steps of 20 x 35
    tokens, evaluated at steps 0, 2, 4, 6 on 2 windows of 10 streams."""
    settings = {"dataset": "wikitext2", "n_layer": 1, "n_head": 1, "d_model": 200, "d_ff": 200, "lr": 1e-4, "seed": 1,
                "dropout": 0.2, "clip": 0.5, "batch_size": 20, "iterations": 6, "log_every": 2, "checkpoint_every": 2,
                "val_windows": 2, "eval_batch_size": 10, "bptt": 35}
    node = _node("joma_wikitext", settings, {"dataset": "wikitext2"})
    cost = joma_cost.wikitext_cost(node, results=str(tmp_path))  # the documented sizes (no prepared data)
    V = 33_278
    layer = (200 * 600 + 600) + (200 * 200 + 200) * 3 + 4 * 200  # in_proj, out_proj, linear1, linear2, two norms
    N = layer + 200 * V + V  # + the untied decoder
    assert cost.steps == 6 and cost.runs == 1
    assert cost.flops == 6 * (6 * N + 6 * 1 * 35 * 200) * 20 * 35
    P = N + V * 200  # + the embedding
    assert cost.memory == 4 * (P * 4 + 20 * 35 * (9 * 200 + 2 * 200 + 2 * 35) + 20 * 35 * 3 * V)
    assert cost.eval_share == pytest.approx(4 * 2 * (10 / 20) / 3 / 6)


def test_table1_cell_cost_by_hand():
    """M = 100, T = 30, d = 16, d_hidden = 32, 3 blocks, C = 20 classes, 2 seeds, 20 steps: one forward per class."""
    s = {"C": 20, "n_ch": 2, "n0": 10, "n1": 20, "seeds": [1, 2], "M": 100, "T": 30, "d": 16, "d_hidden": 32, "layers": 3,
         "steps": 20, "batch": 128, "lr": 1e-4, "wd": 0.0, "vectorise": False}
    cost = joma_cost.table1_cost(_node("joma_table1_cell", s))
    block = 3 * 16 * 16 + 2 * 2 * 16 + (16 * 32 + 32) + (32 * 16 + 16)
    p_ne = 3 * block + 16 * 20 + 20
    assert p_ne == 6052
    assert cost.steps == 20 and cost.runs == 2
    assert cost.flops == 20 * 6 * p_ne * 20 * 30 * 2


def test_scan_snap_cost_counts_every_runset():
    s = {"seq_len": 128, "batch": 128, "iterations": 20, "num_last": [1, 3], "num_next_per_last": 2, "eta_z": [0.5, 3],
         "ratios": [2, 10], "seeds": 2, "init": "default"}
    cost = scan_snap_cost.syn_medium_cost(_node("scan_snap_syn_medium", s))
    from featlearn.scan_snap.data import SequenceClasses

    Ms = [SequenceClasses(n, 2, 128).M for n in (1, 3)]
    assert [p.runs for p in cost.parts] == [8, 8] and cost.steps == 40
    assert cost.flops == sum(20 * 6 * 128 * M * M * 8 for M in Ms)


def test_finetune_cost_and_probe_with_a_small_gpt2(tmp_path, monkeypatch, one_thread):
    """A 2-layer, d 64 'checkpoint' (the Hugging Face cache is stood in for): runs, steps and FLOPs by hand, and its
    probe trains the real TemplateGPT2 for a step."""
    from transformers import GPT2Config, GPT2Model

    monkeypatch.setattr(templates_cost, "_gpt2_config",
                        lambda model, revision, cache_dir: GPT2Config(n_embd=64, n_layer=2, n_head=2, n_positions=16))
    s = {"model": "gpt2", "revision": "main", "cache_dir": None, "n": [16, 100], "seeds": 2, "lr": 1e-4, "batch": 64, "epochs": 3}
    cost = templates_cost.finetune_cost(_node("templates_gpt2_finetune", s))
    body = GPT2Model(GPT2Config(n_embd=64, n_layer=2, n_head=2, n_positions=16))
    p_ne = sum(p.numel() for name, p in body.named_parameters() if not name.startswith(("wte", "wpe"))) + 64 + 1
    assert [p.steps for p in cost.parts] == [2 * 3 * 1, 2 * 3 * 2]  # ceil(16 / 64) = 1, ceil(100 / 64) = 2 per epoch
    assert cost.runs == 4
    assert cost.flops == 6 * 6 * p_ne * 16 * 3 + 12 * 6 * p_ne * 64 * 3  # batch min(64, n), strings of 3 tokens
    rec = E.Prober("cpu", tmp_path / "c.json", steps=1, warmup=0).get("templates_gpt2_finetune", cost.parts[0].probe)
    assert rec["seconds_per_step"] > 0 and rec["measured_dim"] == 16


def test_features_cost_of_the_synthetic_job(repo, tmp_path, monkeypatch):
    """The L-RNN job on its own synthetic data (no prepared files): runs = activations x sigma_v x seeds, steps =
    epochs x minibatches of the length-sorted pools, evaluation share from the dev and test sizes."""
    from featlearn.features.experiments import synthetic_splits
    from featlearn.features.registry import job_settings

    config = E.merged_config([str(repo / "config" / "smoke.yaml")], repo / "config")
    cfg = job_settings(config["features"]["cls"], "synthetic_lrnn", config["seed"])
    cost = features_cost.train_cost(_node("features_train", cfg), results=str(tmp_path))
    rows = synthetic_splits(cfg["synthetic"])
    n, st = len(rows["train"]), cfg["settings"]
    assert cost.runs == len(cfg["activations"]) * len(cfg["sigma_v"]) * len(cfg["seeds"])
    assert n <= st["batch"] * st["bucket_pool"]  # one pool: ceil(n / batch) minibatches an epoch
    assert cost.steps == st["epochs"] * -(-n // st["batch"]) == 2 * 4  # smoke: 2 epochs of 200 instances, batch 64
    assert cost.eval_share == pytest.approx((len(rows["dev"]) + len(rows["test"])) * (st["epochs"] + 1) / 3 / (n * st["epochs"]))
    # a probe step is as long as the job's steps are padded to on average (its seeds' batches padded together),
    # its instances as long as the job's on average
    from featlearn.pipeline.sizing import length_quantiles, lengths_from_quantiles

    words = [max(1, len(t.split())) for _, t in rows["train"]]
    padded = features_cost.step_lengths(lengths_from_quantiles(length_quantiles(words), n), st["batch"],
                                        st["bucket_pool"], tuple(sorted(set(cfg["seeds"]))), False)
    shape = cost.parts[0].probe.shape
    assert shape["length"] == round(sum(words) / len(words))
    assert shape.get("padded_length", shape["length"]) == round(sum(padded) / len(padded)) >= shape["length"]
    assert "padded per step to" in cost.note
    # no prepared SST files here: the documented sizes (a machine without the data, e.g. a lent GPU), and without
    # them the cost model says what is missing
    sst = _node("features_train", job_settings(config["features"]["cls"], "sst_mlp", 1))
    assert "documented sizes" in features_cost.train_cost(sst, results=str(tmp_path)).note
    assert features_cost.train_cost(sst, results=str(tmp_path)).parts[0].probe.shape["ids"] == "zipf"
    monkeypatch.delitem(features_cost.DOCUMENTED, "sst")
    with pytest.raises(ValueError, match="prepared sst splits not found"):
        features_cost.train_cost(sst, results=str(tmp_path))


def test_features_step_lengths_known_values():
    """A step pads to the longest instance of every seed's batch: with length-sorted pools one seed's batches are
    all short or all long, while three seeds draw their own and a step is short only when all three are."""
    lengths = (1,) * 320 + (20,) * 320  # 10 batches of 64 in one pool of 10: 5 of length 1, 5 of length 20
    one = features_cost.step_lengths(lengths, 64, 10, (1,), False)
    assert sorted(one) == [1] * 5 + [20] * 5
    three = features_cost.step_lengths(lengths, 64, 10, (1, 2, 3), False)
    assert len(three) == 10 and set(three) <= {1, 20} and sum(three) / 10 > sum(one) / 10
    assert features_cost.step_lengths((5,) * 200, 64, 0, (1, 2), False) == (5,) * 4
    # with CUDA graphs a step pads further, to a multiple of 8 (below 128)
    assert set(features_cost.step_lengths(lengths, 64, 10, (1, 2, 3), True)) <= {8, 24}


def test_length_quantiles_known_values_and_the_documented_padding(repo):
    """Quantiles at the nearest rank, lengths rebuilt from them with the same quantiles; the documented SSTwsub
    sizes (a machine without the data) give a paper-scale job the padded steps its prepared files give (14.7 tokens
    on average from the quantiles, 14.66 from the files' own lengths, mean 7.2 words), and a capped length caps them."""
    from featlearn.pipeline.sizing import LENGTH_QUANTILE_POINTS, length_quantiles, lengths_from_quantiles

    assert length_quantiles(list(range(1, 1002)))[:3] == (1, 11, 21) and length_quantiles([5] * 7) == (5,) * 110
    assert len(LENGTH_QUANTILE_POINTS) == 110 and LENGTH_QUANTILE_POINTS[-2:] == (99.9, 100)
    rebuilt = lengths_from_quantiles(length_quantiles(list(range(1, 1002))), 1001)
    assert rebuilt[0] >= 1 and rebuilt[-1] <= 1001 and abs(sum(rebuilt) / 1001 - 501) < 1
    assert length_quantiles(list(rebuilt))[10:100] == length_quantiles(list(range(1, 1002)))[10:100]
    from featlearn.features.registry import job_settings

    config = E.merged_config([str(repo / "config" / "paper.yaml")], repo / "config")
    cfg = job_settings(config["features"]["cls"], "sstwsub_sa", 1)
    data = features_cost.documented_data(cfg)
    assert data["length_quantiles"][-1] == 48
    shape = features_cost.train_cost(_node("features_train", cfg), results="/nonexistent").parts[0].probe.shape
    assert (shape["length"], shape["padded_length"]) == (7, 15)
    capped = features_cost.documented_data({**cfg, "settings": {**cfg["settings"], "max_len": 10}})
    assert max(capped["length_quantiles"]) == 10


@pytest.mark.shared_data
def test_the_documented_ag_news_lengths_are_its_test_splits(shared_data):
    """AG News's train split is absent offline: its documented mean length and length quantiles are those of its
    test split, read as the data layer reads it."""
    from featlearn.data.parsers import read_ag_news_csv
    from featlearn.pipeline.sizing import DOCUMENTED_CLASSIFICATION, length_quantiles

    path = shared_data / "ag_news" / "test.csv"
    if not path.is_file():
        pytest.skip("AG News test split not in the mirror")
    words = [max(1, len(t.split())) for _, t in read_ag_news_csv(path)]
    assert DOCUMENTED_CLASSIFICATION["ag_news"]["length_quantiles"] == length_quantiles(words)
    assert DOCUMENTED_CLASSIFICATION["ag_news"]["mean_length"] == pytest.approx(sum(words) / len(words), abs=0.05)


def test_features_step_lengths_are_the_training_loops(monkeypatch):
    """The estimate's padded lengths are those the training loop pads its steps to (two seeds drawing their own
    batches from length-sorted pools), read off the tokens its forward pass gets."""
    import torch

    from featlearn.features import train as T

    gen = torch.Generator().manual_seed(3)
    lengths = torch.randint(1, 30, (300,), generator=gen)
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])
    enc = T.Encoded(torch.randint(2, 50, (int(offsets[-1]),), generator=gen), offsets, torch.randint(2, (300,), generator=gen))
    seen = []
    forward = T.forward

    def spy(spec, params, toks, *args, **kwargs):
        seen.append(toks.shape[-1])
        return forward(spec, params, toks, *args, **kwargs)

    monkeypatch.setattr(T, "forward", spy)
    st = T.Settings(kind="mlp", epochs=1, batch=16, optimizer="adagrad", dropout=0.0, d=8, kernel=3, ffn=8,
                    sa_variant="paper", mv_bos=False, device="cpu", dtype="float32", threads=0, lr=1e-3, sigma_e=1.0,
                    sigma_w=1.0, sigma_h=1.0, bucket_pool=4, max_len=0, eval_batch=64, cuda_graphs=False)
    T.train(st, [T.Run(seed=1), T.Run(seed=2)], {"train": enc}, 50, T.Probes(), progress=False)
    expected = features_cost.step_lengths(tuple(lengths.tolist()), 16, 4, (1, 2), False)
    assert len(seen) == len(expected) and tuple(seen) == expected


def test_the_features_probe_pads_its_instances_as_the_job_pads_its_steps(monkeypatch):
    """The probe's instances hold the job's mean length in words and pad tokens up to its mean padded length: the
    training gets steps of the padded length whose pad positions hold the pad id, as the job's do."""
    from featlearn.features import train as T

    seen = []
    real_train = T.train

    def spy(settings, runs, splits, *args, **kwargs):
        enc = splits["train"]
        seen.append((enc.lengths.unique().tolist(), (enc.ids.view(len(enc), -1)[:, 7:] == T.PAD_ID).all().item(),
                     (enc.ids.view(len(enc), -1)[:, :7] >= 2).all().item()))
        return real_train(settings, runs, splits, *args, **kwargs)

    monkeypatch.setattr(T, "train", spy)
    shape = {"kind": "mlp", "d": 8, "ffn": 8, "kernel": 3, "sa_variant": "paper", "mv_bos": False, "optimizer": "adagrad",
             "activations": ["relu"], "sigma_v": 1, "seeds": 1, "runs": 1, "batch": 4, "length": 7, "padded_length": 15,
             "vocab": 100, "n_classes": 2, "dropout": 0.0, "dtype": "float32", "ids": "zipf"}
    assert features_cost.train_probe(shape, 1, "cpu", 2, 1)["seconds_per_step"] >= 0
    assert seen and all(s == ([15], True, True) for s in seen)


def test_features_probes_draw_token_ids_as_text_has_them():
    """The classifiers' probes draw ids by Zipf's law over the frequency-sorted vocabulary (uniform ids made the probe
    of an SST MLP 1.8x slower than the job on real text): the shape says so, ids stay in range, and rank r has about
    the share 1 / (r H) of the draws."""
    import torch

    ids = features_cost.zipf_ids(200_000, 1_002, 2, torch.Generator().manual_seed(0))
    assert int(ids.min()) >= 2 and int(ids.max()) < 1_002
    harmonic = sum(1 / r for r in range(1, 1_001))
    for rank in (1, 2, 10):
        assert (ids == 1 + rank).float().mean().item() == pytest.approx(1 / (rank * harmonic), rel=0.1)
    assert len(torch.unique(ids[:1_152])) < 600  # a batch of 64 x 18 tokens touches far fewer rows than uniform ids


def test_sweep_cost_counts_groups_runs_and_epochs(repo):
    """Smoke grid 8: n in (8, 32), lrs (1e-3, 1e-1), 1 seed, the vanilla transformer, 5 epochs of one minibatch
    (n < batch 1024): one group of 2 runs per n, 5 steps each; a step's FLOPs scale with its n samples."""
    from featlearn.templates.registry import sweep_settings

    config = E.merged_config([str(repo / "config" / "smoke.yaml")], repo / "config")
    cost = templates_cost.sweep_cost(_node("templates_sweep", sweep_settings(config["templates"], "8"), {"grid": "8"}))
    assert [(p.runs, p.steps) for p in cost.parts] == [(2, 5), (2, 5)]
    assert cost.runs == 4 and cost.steps == 10
    assert cost.parts[1].flops_per_step == 4 * cost.parts[0].flops_per_step  # 32 samples against 8
    assert [p.probe.shape["n_probe"] for p in cost.parts] == [8, 32]
    # flush_denormal on or off: the same probes (a fresh probe holds no denormals), so cached probes answer either way
    for flush in (False, True):
        config["templates"]["sweeps"]["flush_denormal"] = flush
        again = templates_cost.sweep_cost(_node("templates_sweep", sweep_settings(config["templates"], "8"), {"grid": "8"}))
        assert [p.probe for p in again.parts] == [p.probe for p in cost.parts]
        assert all("flush_denormal" not in p.probe.shape for p in again.parts)


def test_list_makespan_takes_the_tasks_in_order_on_the_first_free_worker():
    assert E.list_makespan([4, 3, 3, 2], 2) == 6  # 4 | 3, 3 | 4, 2
    assert E.list_makespan([5, 1, 1, 1], 2) == 5
    assert E.list_makespan([1, 1, 5], 2) == 6  # the order is kept: the long task comes last
    assert E.list_makespan([2, 3], 1) == 5 and E.list_makespan([], 3) == 0


def test_the_parts_of_a_job_of_several_workers_are_taken_largest_work_first():
    """A templates sweep job of several workers hands its groups to its pool largest ``group_work`` first
    (``engine.GroupQueue``), so the estimate schedules its parts in that order: a long part listed last no longer
    comes last. Ties (and parts without a work) keep their listed order."""
    assert E.work_order([(1.0, "a"), (5.0, "b"), (None, "c"), (5.0, "d")]) == [(5.0, "b"), (5.0, "d"), (1.0, "a"),
                                                                                (None, "c")]
    seconds = [(1.0, 1.0), (1.0, 1.0), (5.0, 5.0)]
    assert E.list_makespan([t for _, t in E.work_order(seconds)], 2) == 5  # in the listed order: 6


def test_a_cpu_sweep_job_of_several_threads_is_estimated_as_its_groups_at_once(repo, tmp_path):
    """A sweep job of 2 threads trains its groups 2 at once on a CPU, each on one thread (``engine.group_pool``): its
    probes are the 1-thread job's, its time the groups' makespan on 2 workers, its memory the 2 largest groups'
    together; estimated for a GPU, the same job trains its groups one after another."""
    from featlearn.templates.registry import sweep_settings

    config = E.merged_config([str(repo / "config" / "smoke.yaml")], repo / "config")
    settings = sweep_settings(config["templates"], "8")  # two groups of 5 steps

    def job(threads):
        node = dataclasses.replace(_node("templates_sweep", settings, {"grid": "8"}, threads=threads),
                                   cost_model="featlearn.templates.cost:sweep_cost")
        return node

    def fake(shape, dim, device, steps, warmup):
        return {"seconds_per_step": 1.0}

    def seconds(node, device="cpu", label=None):
        prober = E.Prober(device, tmp_path / "c.json", probes={"sweep": fake}, label=label)
        prober.startup = lambda: 0.0
        return E.estimate([node], prober, {"scale": "smoke"}, str(tmp_path / "results"))[0]

    one, two = seconds(job(1)), seconds(job(2))
    assert [p.probe for p in two.cost.parts] == [p.probe for p in one.cost.parts]  # 1-thread probes either way
    assert one.seconds == pytest.approx(10.0) and two.seconds == pytest.approx(5.0)
    assert "2 workers of one thread" in two.source
    assert two.cost.memory == pytest.approx(sum(p.memory_bytes for p in one.cost.parts))
    assert one.cost.memory == pytest.approx(max(p.memory_bytes for p in one.cost.parts))
    cache = json.loads((tmp_path / "c.json").read_text())
    gpu_cache = {json.dumps({**json.loads(k), "device": "NVIDIA H200"}, sort_keys=True): v for k, v in cache.items()}
    (tmp_path / "g.json").write_text(json.dumps(gpu_cache))
    on_gpu = E.Prober("cuda", tmp_path / "g.json", probe=False, label="NVIDIA H200")
    on_gpu.startup = lambda: 0.0
    assert not on_gpu.on_cpu and E.Prober("cpu", tmp_path / "c.json", probe=False).on_cpu
    assert E.estimate([job(2)], on_gpu, {"scale": "smoke"}, str(tmp_path / "results"))[0].seconds == pytest.approx(10.0)


def test_a_sweep_group_beyond_one_minibatch_is_probed_at_its_own_vocabulary(repo):
    """An MLP group of n > batch is probed at its own n, whose vocabulary sizes its one-hot first layer: probed at
    n = batch (as before), a paper-scale n 8,192 group of Fig. 25 was timed with less than a sixth of its parameters and its job
    at a third of its time. Groups of n <= batch keep their probe (and cached probes); each part counts the parameters
    Adam updates per step, R x P, which grow with n where the FLOPs per sample do not."""
    from featlearn.templates.registry import sweep_settings
    from featlearn.templates.sweeps.engine import expand_groups, group_vocab, model_size

    config = E.merged_config([str(repo / "config" / "smoke.yaml")], repo / "config")
    settings = sweep_settings(config["templates"], "25")
    settings["sweeps"]["fig25"]["n"] = [8, 64, 200]
    settings["sweeps"]["batch"] = 64
    cost = templates_cost.sweep_cost(_node("templates_sweep", settings, {"grid": "25"}))
    assert [p.probe.shape["n_probe"] for p in cost.parts] == [8, 64, 200] * 2  # mlp, then mlp_xxt
    assert [p.steps // settings["sweeps"]["epochs"] for p in cost.parts[:3]] == [1, 1, 4]
    from featlearn.templates.sweeps.experiments import figure_curves

    groups = [g for _, s in figure_curves("25", settings["sweeps"]) for g in expand_groups({**s, "progress": False})]
    for part, g in zip(cost.parts, groups):
        assert part.updates_per_step == len(g.runs) * model_size(g, group_vocab(g)).parameters
    mlp = cost.parts[:3]
    assert mlp[2].flops_per_step == mlp[1].flops_per_step  # one minibatch of 64 samples either way...
    assert mlp[2].updates_per_step > 1.4 * mlp[1].updates_per_step  # ...but a wider first layer to update
    # the probe itself: an epoch of 4 minibatches timed whole, per step
    shape = dict(mlp[2].probe.shape, model={"depth": 2, "hidden": 8})
    assert templates_cost.sweep_probe(shape, 2, "cpu", 2, 1)["seconds_per_step"] > 0
    # grid 22's transformers keep the minibatch's n (their probes, and the cached ones, stay); its FCNet, RNN and LSTM
    # are probed at their own n
    settings = sweep_settings(config["templates"], "22")
    settings["sweeps"]["fig22"]["n"] = [8, 200]
    settings["sweeps"]["batch"] = 64
    by_arch: dict = {}
    for part in templates_cost.sweep_cost(_node("templates_sweep", settings, {"grid": "22"})).parts:
        by_arch.setdefault(part.probe.shape["arch"], set()).add(part.probe.shape["n_probe"])
    assert by_arch["transformer"] == {8, 64}
    assert by_arch["mlp"] == by_arch["rnn"] == by_arch["lstm"] == {8, 200}


def test_fit_step_cost_recovers_a_planted_plane_and_stays_non_negative():
    """Two measures of a step's work (FLOPs, parameters updated): a planted a + b F + c U is recovered exactly, a
    measure the time does not grow with gets no weight (never a negative one), and one measure reduces to
    fit_step_time."""
    plane = lambda f, u: 0.002 + 3e-12 * f + 4e-9 * u  # noqa: E731
    pts = [((f, u), plane(f, u)) for f, u in [(1e9, 1e5), (4e9, 1e5), (4e9, 2e6), (2e9, 8e6), (5e8, 3e6)]]
    fit = E.fit_step_cost(pts)
    for f, u in [(3e9, 5e6), (1e9, 1e7), (0.0, 0.0)]:
        assert fit((f, u)) == pytest.approx(plane(f, u), rel=1e-9)
    # time independent of the updates, falling a little with them in the noise: no negative coefficient
    noisy = [((1e9, 1e5), 0.011), ((3e9, 4e6), 0.0129), ((1e10, 1e6), 0.0201)]
    fit = E.fit_step_cost(noisy)
    assert all(fit(x) > 0 for x in [(0.0, 1e9), (1e9, 1e9)])
    assert fit((1e9, 1e12)) >= fit((1e9, 0.0))  # never decreasing in a measure
    line = [(1e9, 0.011), (3e9, 0.013), (1e10, 0.02)]
    assert E.fit_step_cost([((f,), t) for f, t in line])((5e9,)) == pytest.approx(E.fit_step_time(line)(5e9))
    assert E.fit_step_cost([]) is None


def test_groups_with_the_same_flops_and_more_parameters_are_interpolated_by_the_updates(tmp_path):
    """A family whose step time grows with the parameters Adam updates, at equal FLOPs (the one-hot MLPs beyond one
    minibatch): its representatives include the largest update count, the groups between are predicted by the
    planted a + b F + c U, and a group beyond the probed update counts is not extrapolated."""
    def step(f, u):
        return 0.003 + 1e-12 * f + 2e-8 * u

    def fake(shape, dim, device, steps, warmup):
        return {"seconds_per_step": step(shape["f"], shape["u"])}

    work = [(1e8, 1e5), (4e8, 2e5), (1.6e9, 5e5), (4e9, 1e6), (4e9, 3e6), (4e9, 9e6), (4e9, 2e7), (2e9, 1e7)]
    parts = [E.Part(E.probe("sweep", {"arch": "mlp", "model": "m", "task": "t", "n_probe": i, "f": f, "u": u, "runs": 20},
                            "runs"), steps=100, runs=20, flops_per_step=f, updates_per_step=u)
             for i, (f, u) in enumerate(work)]
    prober = E.Prober("cpu", tmp_path / "c.json", probes={"sweep": fake}, max_parts=3)
    recs = E.probe_parts("templates_sweep", parts, prober)
    measured = [i for i, r in enumerate(recs) if not r.get("interpolated")]
    assert 0 in measured and 6 in measured and len(measured) == 3  # the least and the most work
    for (f, u), rec in zip(work, recs):
        assert rec["seconds_per_step"] == pytest.approx(step(f, u), rel=1e-6)
    # on FLOPs alone (the old rule) the groups of 4e9 FLOPs would all have had one time
    flops_only = [dataclasses.replace(p, updates_per_step=None) for p in parts]
    recs = E.probe_parts("templates_sweep", flops_only, E.Prober("cpu", tmp_path / "f.json", probes={"sweep": fake},
                                                                 max_parts=3))
    assert len({round(r["seconds_per_step"], 9) for r, (f, _) in zip(recs, work) if f == 4e9 and r.get("interpolated")}) <= 1
    # a cache without the largest group: the groups beyond its update counts stay untimed
    small = E.Prober("cpu", tmp_path / "s.json", probes={"sweep": fake}, max_parts=0)
    for i in (0, 3, 4):
        small.get("templates_sweep", parts[i].probe)
    recs = E.probe_parts("templates_sweep", parts, E.Prober("cpu", tmp_path / "s.json", probe=False,
                                                            probes={"sweep": fake}, max_parts=3))
    assert all("parameters updated" in recs[i]["error"] for i in (5, 6, 7))
    assert recs[1]["seconds_per_step"] == pytest.approx(step(*work[1]), rel=1e-6)


# ------------------------------------------------------------------------------------------- cost models named by the jobs

# The compute jobs the estimate times (docs/estimate.md, "Cost models"); every other job is "not modelled".
TIMED = {"joma_wikitext", "joma_table1_cell", "scan_snap_wikitext", "scan_snap_syn_small", "scan_snap_adam",
         "scan_snap_syn_medium", "features_train", "features_lm_word", "features_lm_char", "templates_sweep",
         "templates_calibration", "templates_gpt2_wikitext", "templates_gpt2_finetune"}


@pytest.mark.parametrize("scale", ["default", "paper"])
def test_every_timed_job_names_a_cost_model_that_resolves(scale, repo, monkeypatch):
    """Each compute job the estimate times names its cost model in its registry record (``Job.cost``), as
    ``module:function`` of its own paper's cost module (the shared LM's through it); the name imports and takes
    (node, results). No job is found by its rule name."""
    import importlib
    import inspect

    import featlearn.pipeline.workflow as wf
    from featlearn import PAPERS
    from featlearn.pipeline.registry import Paths, load

    monkeypatch.setitem(wf.HUB_CONTACT, "allowed", False)
    config = wf.scale_config(scale, repo / "config")
    named = {}
    for paper in PAPERS:
        for job in importlib.import_module(f"featlearn.{paper}.registry").registry(config, Paths("results"), lambda n: True).jobs:
            if job.cost is not None:
                assert job.cost.startswith(f"featlearn.{paper}.cost:"), (job.name, job.cost)
                named[job.name] = job.cost
    assert set(named) == TIMED
    for rule, name in named.items():
        fn = load(name)
        assert callable(fn) and list(inspect.signature(fn).parameters)[:2] == ["node", "results"], (rule, name)


# ------------------------------------------------------------------------------------------- scheduler


def _toy():
    """a(3) and b(4) feed c(2); e(5) alone: GPU jobs. d(1): a CPU job alone; f(20): a CPU job after d."""
    times = {"a": 3.0, "b": 4.0, "c": 2.0, "d": 1.0, "e": 5.0}
    deps = {"c": ["a", "b"]}
    gpu = {"a": True, "b": True, "c": True, "d": False, "e": True}
    return times, deps, gpu


def test_critical_path_of_a_planted_dag():
    times, deps, _ = _toy()
    assert E.critical_path(times, deps) == (6.0, ["b", "c"])
    assert E.critical_path({**times, "f": 20.0}, {**deps, "f": ["d"]}) == (21.0, ["d", "f"])


def test_makespan_of_a_planted_dag():
    times, deps, gpu = _toy()
    assert E.makespan(times, deps, gpu, 1) == 14.0  # all GPU time in a row; the CPU job beside it
    # 2 GPUs: b (longest path) and a at 0; e at 3 when a ends; c at 4 when b ends; e ends at 8
    assert E.makespan(times, deps, gpu, 2) == 8.0
    assert E.makespan(times, deps, gpu, 4) == 6.0  # the critical path
    # a long CPU job is not held back by the GPUs and sets the makespan
    assert E.makespan({**times, "f": 20.0}, {**deps, "f": ["d"]}, {**gpu, "f": False}, 1) == 21.0
    with pytest.raises(ValueError, match="cycle"):
        E.makespan({"x": 1.0, "y": 1.0}, {"x": ["y"], "y": ["x"]}, {"x": True, "y": True}, 1)


# ------------------------------------------------------------------------------------------- probe cache


def test_probe_cache_is_keyed_by_device_and_not_probed_twice(tmp_path, monkeypatch):
    calls = []

    def fake(shape, dim, device, steps, warmup):
        calls.append(dim)
        return {"seconds_per_step": 0.5}

    cache = tmp_path / "probes.json"
    p = E.probe("fake", {"runs": 2, "width": 8}, "runs")
    monkeypatch.setattr(E, "device_name", lambda device, threads: "Other GPU")
    assert E.Prober("cpu", cache, probes={"fake": fake}).get("rule", p)["seconds_per_step"] == 0.5
    assert calls == [2]
    monkeypatch.setattr(E, "device_name", lambda device, threads: "This CPU")
    first = E.Prober("cpu", cache, probes={"fake": fake})
    assert first.get("rule", p)["seconds_per_step"] == 0.5 and first.measured == 1  # another device: probed again
    again = E.Prober("cpu", cache, probes={"fake": fake})
    assert again.get("rule", p)["seconds_per_step"] == 0.5 and again.measured == 0  # from the file
    assert calls == [2, 2]
    keys = [json.loads(k) for k in json.loads(cache.read_text())]
    assert sorted(k["device"] for k in keys) == ["Other GPU", "This CPU"]
    # --no-probe: a shape not in the cache is missing, nothing runs
    other = E.probe("fake", {"runs": 3, "width": 8}, "runs")
    assert E.Prober("cpu", cache, probe=False, probes={"fake": fake}).get("rule", other) is None
    assert calls == [2, 2]


def test_a_cpu_sweep_probe_times_the_groups_later_epochs_not_its_first(repo, monkeypatch):
    """On a CPU the sweep probe trains one group and times its epochs after the untimed ones, whose steps take up to
    3x as long as the later ones on a large MLP group (Adam's zero second moments, memory touched for the first time;
    docs/estimate.md). Timed as before, on a fresh group's first epochs, the planted clock below gives 7 s a step.
    Each epoch's evaluation (0.25 s on the planted clock) is timed apart from its steps."""
    from featlearn.templates.sweeps import engine

    epoch_seconds = {1: 10.0, 2: 4.0}  # a fresh group's first epochs' steps; every later epoch's take 1 s
    clock = [0.0]
    trained = []

    def fake_train_group(group, work_dir=None, key=None, checkpoint_seconds=None, on_epoch=None, before_eval=None):
        trained.append(group.epochs)
        start = clock[0]
        for epoch in range(1, group.epochs + 1):
            clock[0] += epoch_seconds.get(epoch, 1.0)
            if before_eval is not None:
                before_eval(epoch)
            clock[0] += 0.25
            if on_epoch is not None:
                on_epoch(epoch)
        return dataclasses.make_dataclass("R", ["seconds"])(clock[0] - start)

    monkeypatch.setattr(engine, "train_group", fake_train_group)
    monkeypatch.setattr(templates_cost.time, "perf_counter", lambda: clock[0])
    config = E.merged_config([str(repo / "config" / "smoke.yaml")], repo / "config")
    from featlearn.templates.registry import sweep_settings

    settings = sweep_settings(config["templates"], "25")
    settings["sweeps"]["fig25"]["n"] = [8]
    shape = templates_cost.sweep_cost(_node("templates_sweep", settings, {"grid": "25"})).parts[0].probe.shape
    timed = {"seconds_per_step": 1.0, "seconds_per_eval": 0.25, "probe_steps_per_epoch": 1, "evaluations_timed": 2}
    assert templates_cost.sweep_probe(shape, 2, "cpu", 2, 1) == timed  # epochs 3 and 4
    assert trained == [4] and templates_cost.CPU_UNTIMED_EPOCHS == 2  # one group: 2 untimed epochs, 2 timed
    trained.clear()
    assert templates_cost.sweep_probe(shape, 2, "cpu", 1, 3) == {**timed, "evaluations_timed": 1}  # 3 untimed, 1 timed
    assert trained == [4]


def test_a_probe_whose_cpu_method_changed_is_measured_again_on_a_cpu_only(repo, tmp_path, monkeypatch):
    """A probe function's ``cpu_method`` is part of a CPU probe's key: the CPU records cached before the method changed
    are not reused, a GPU's are (its method did not change), and the committed GPU probes of the templates sweeps keep
    answering their shapes."""
    calls = []

    def fake(shape, dim, device, steps, warmup):
        calls.append(device)
        return {"seconds_per_step": 2.0}

    cache = tmp_path / "probes.json"
    p = E.probe("fake", {"runs": 2}, "runs")
    monkeypatch.setattr(E, "device_name", lambda device, threads: "A GPU" if device == "cuda" else "A CPU, 1 threads")
    E.Prober("cuda", cache, probes={"fake": fake}).get("rule", p)
    E.Prober("cpu", cache, probes={"fake": fake}).get("rule", p)
    assert calls == ["cuda", "cpu"]
    fake.cpu_method = "after the first epochs"
    gpu, cpu = E.Prober("cuda", cache, probes={"fake": fake}), E.Prober("cpu", cache, probes={"fake": fake})
    assert "method" not in json.loads(gpu.key("rule", p))
    assert json.loads(cpu.key("rule", p))["method"] == "after the first epochs"
    assert gpu.get("rule", p) and cpu.get("rule", p)
    assert calls == ["cuda", "cpu", "cpu"] and gpu.measured == 0 and cpu.measured == 1
    # the committed H200 probes of the sweeps: the same keys as when they were measured
    committed = repo / "benchmarks" / "device" / "h200-2026-11-28" / "probes.json"
    keys = [k for k in json.loads(committed.read_text()) if json.loads(k).get("kind") == "sweep"]
    assert keys
    h200 = E.Prober("cpu", committed, label="NVIDIA H200")
    for k in keys[:5]:
        rec = json.loads(k)
        sweep = E.probe("sweep", rec["shape"], "runs", 1, "featlearn.templates.cost:sweep_probe")
        assert h200.key(rec["rule"], sweep) == k


def test_another_devices_probes_are_read_without_measuring(tmp_path, monkeypatch):
    """--cached-device: the probes a GPU machine cached answer on a machine without one, under the torch version
    they were measured with; nothing is measured, a shape they lack stays missing, a CPU's name gets its thread
    count as its keys have it, and a device the cache lacks is an error naming the ones it has."""
    calls = []

    def fake(shape, dim, device, steps, warmup):
        calls.append(dim)
        return {"seconds_per_step": 0.5 if device == "gpu" else 2.0}

    cache = tmp_path / "probes.json"
    p = E.probe("fake", {"runs": 2, "width": 8}, "runs")
    monkeypatch.setattr(E, "device_name",
                        lambda device, threads: "Big GPU" if device == "gpu" else f"Small CPU, {threads} threads")
    E.Prober("gpu", cache, probes={"fake": fake}).get("rule", p)
    E.Prober("cpu", cache, probes={"fake": fake}).get("rule", p)
    raw = json.loads(cache.read_text())
    raw = {json.dumps({**json.loads(k), "torch": "9.9+gpu"} if json.loads(k)["device"] == "Big GPU" else json.loads(k),
                      sort_keys=True): v for k, v in raw.items()}  # the GPU machine had another torch
    cache.write_text(json.dumps(raw))
    assert calls == [2, 2]
    gpu = E.Prober("cpu", cache, probes={"fake": fake}, label="Big GPU")
    assert gpu.torch == "9.9+gpu" and not gpu.probe
    assert gpu.get("rule", p)["seconds_per_step"] == 0.5
    assert gpu.get("rule", E.probe("fake", {"runs": 3, "width": 8}, "runs")) is None  # missing, not measured here
    cpu = E.Prober("gpu", cache, probes={"fake": fake}, label="Small CPU")
    assert cpu.get("rule", p)["seconds_per_step"] == 2.0 and cpu.device_key(4) == "Small CPU, 4 threads"
    assert calls == [2, 2] and gpu.measured == cpu.measured == 0
    with pytest.raises(ValueError, match="its devices: Big GPU, Small CPU"):
        E.Prober("cpu", cache, label="Other GPU")


def test_a_probe_is_timed_and_cached_in_its_jobs_precision(tmp_path):
    """A bf16 job's probe runs under bf16 autocast and is cached apart from the fp32 probe of the same shape (whose key
    is the one it had before precisions existed); the process's float32 settings are restored after each probe."""
    import torch

    seen = []

    def fake(shape, dim, device, steps, warmup):
        a = torch.ones(2, 2)
        seen.append(((a @ a).dtype, torch.get_float32_matmul_precision()))
        return {"seconds_per_step": 0.5 if (a @ a).dtype == torch.float32 else 0.25}

    cache = tmp_path / "probes.json"
    fp32 = E.probe("fake", {"runs": 2}, "runs")
    bf16 = dataclasses.replace(fp32, precision="bf16")
    tf32 = dataclasses.replace(fp32, precision="tf32")
    prober = E.Prober("cpu", cache, probes={"fake": fake})
    assert prober.get("rule", fp32)["seconds_per_step"] == 0.5
    assert prober.get("rule", bf16)["seconds_per_step"] == 0.25
    prober.get("rule", tf32)
    assert seen == [(torch.float32, "highest"), (torch.bfloat16, "highest"), (torch.float32, "high")]
    assert torch.get_float32_matmul_precision() == "highest"  # restored after the tf32 probe
    keys = [json.loads(k) for k in json.loads(cache.read_text())]
    assert sorted(k.get("precision", "fp32") for k in keys) == ["bf16", "fp32", "tf32"]


def test_an_auto_probe_is_timed_and_cached_in_what_its_job_resolves_to(tmp_path, monkeypatch):
    """A job's ``auto`` precision is timed and keyed as the arithmetic the job would compute in on the estimate's
    device: bf16 on a CPU with AVX-512 BF16 (the key of a bf16 probe), fp32 on one without (the key of an fp32 probe,
    so each serves the other); read under another machine's label, a GPU's counts as native, a CPU's does not."""
    import torch

    seen = []

    def fake(shape, dim, device, steps, warmup):
        a = torch.ones(2, 2)
        seen.append((a @ a).dtype)
        return {"seconds_per_step": 0.5 if (a @ a).dtype == torch.float32 else 0.25}

    fp32 = E.probe("fake", {"runs": 2}, "runs")
    auto = dataclasses.replace(fp32, precision="auto")
    for native, dtype, per_step in ((False, torch.float32, 0.5), (True, torch.bfloat16, 0.25)):
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda native=native: native)
        cache = tmp_path / f"probes_{native}.json"
        prober = E.Prober("cpu", cache, probes={"fake": fake})
        assert prober.get("rule", auto)["seconds_per_step"] == per_step and seen[-1] == dtype
        reference = fp32 if not native else dataclasses.replace(fp32, precision="bf16")
        assert prober.key("rule", auto) == prober.key("rule", reference)
        assert prober.get("rule", reference)["seconds_per_step"] == per_step and prober.measured == 1  # from the cache
    monkeypatch.setattr(E, "device_name",
                        lambda device, threads: "Big GPU" if device == "gpu" else f"Small CPU, {threads} threads")
    cache = tmp_path / "two_machines.json"
    for device in ("gpu", "cpu"):
        E.Prober(device, cache, probes={"fake": fake}).get("rule", fp32)
    gpu, cpu = (E.Prober("cpu", cache, label=label) for label in ("Big GPU", "Small CPU"))
    assert gpu.arithmetic(auto) == "bf16" and gpu.arithmetic(fp32) == "fp32" and cpu.arithmetic(auto) == "fp32"


def test_a_node_carries_its_jobs_precision(repo, tmp_path):
    """The estimate's DAG gives each job the precision the workflow gives it (featlearn.precision.of_job, which
    common.smk's job_precision calls too): the run's for the trainings, fp32 for the CPU-only jobs; a family's own
    precision (the LMs', whose data this test has not) wins over the run's."""
    from featlearn.precision import of_job

    overlay = tmp_path / "prec.yaml"
    overlay.write_text("precision: tf32\n")
    config = E.merged_config([str(repo / "config" / "smoke.yaml"), _offline_overlay(tmp_path), str(overlay)],
                             repo / "config")
    nodes = {n.rule: n for n in E.build_dag(config, str(tmp_path / "results"))}
    assert nodes["joma_table1_cell"].precision == "tf32" and nodes["joma_eq6"].precision == "fp32"
    assert of_job("bf16", "tf32", True) == "bf16" and of_job(None, "tf32", True) == "tf32"
    assert of_job("bf16", "tf32", False) == "fp32"


def test_fast_probe_steps_are_timed_long_enough(tmp_path):
    """Steps of 10 ms timed 3 at a time (30 ms, within the noise of a training's set-up) are timed again over
    0.5 s (50 steps); a step of 0.5 s is timed once; a probe that measured nothing gets the most steps."""
    seen = []

    def fake(per_step):
        def run(shape, dim, device, steps, warmup):
            seen.append(steps)
            return {"seconds_per_step": per_step}
        return run

    prober = E.Prober("cpu", tmp_path / "c.json", probes={"fast": fake(0.01), "slow": fake(0.5), "zero": fake(0.0)})
    assert prober.get("rule", E.probe("fast", {"runs": 1}, "runs"))["steps"] == 50 and seen == [3, 50]
    assert prober.get("rule", E.probe("slow", {"runs": 1}, "runs"))["steps"] == 3 and seen == [3, 50, 3]
    assert prober.get("rule", E.probe("zero", {"runs": 1}, "runs"))["steps"] == E.MAX_PROBE_STEPS


def test_slow_probe_runs_reduced_and_extrapolates_linearly(tmp_path):
    """A step of 1 + 0.5 x runs seconds: the pilot (1 run, 1.5 s) predicts 15 s for 10 runs, over the 3 s limit,
    so the probe runs 2 runs and extrapolates through both points to the exact 6 s."""
    def fake(shape, dim, device, steps, warmup):
        return {"seconds_per_step": 1 + 0.5 * dim}

    prober = E.Prober("cpu", tmp_path / "c.json", max_seconds=3.0, probes={"fake": fake})
    rec = prober.get("rule", E.probe("fake", {"runs": 10}, "runs"), flops_per_step=1e12)
    assert rec["measured_dim"] == 2 and rec["seconds_per_step"] == pytest.approx(6.0)
    assert "extrapolated" in rec["note"]
    # an evaluation timed apart (0.2 + 0.1 x runs) is extrapolated through the same two points
    both = E.Prober("cpu", tmp_path / "e.json", max_seconds=3.0,
                    probes={"fake": lambda s, dim, *a: {**fake(s, dim, *a), "seconds_per_eval": 0.2 + 0.1 * dim}})
    rec = both.get("rule", E.probe("fake", {"runs": 10}, "runs"), flops_per_step=1e12)
    assert rec["seconds_per_step"] == pytest.approx(6.0) and rec["seconds_per_eval"] == pytest.approx(1.2)
    tries = []

    def bad(*a):
        tries.append(a)
        raise RuntimeError("CUDA out of memory")

    failing = E.Prober("cpu", tmp_path / "other.json", probes={"bad": bad})
    assert failing.get("rule", E.probe("bad", {"runs": 1}, "runs"))["error"] == "out of memory"
    assert failing.cache == {} and failing.measured == 0  # a failure is not cached: the next run tries again
    assert failing.get("rule", E.probe("bad", {"runs": 1}, "runs"))["error"] == "out of memory"
    assert len(tries) == 1  # this run does not (the estimate's two rounds ask for the same probes)


# ------------------------------------------------------------------------------------------- the DAG


def _offline_overlay(tmp_path):
    overlay = tmp_path / "offline.yaml"
    overlay.write_text("data: {offline: true, datasets: {ag_news: {enabled: false}, wikitext103: {enabled: false}}}\n")
    return str(overlay)


def test_dag_of_the_smoke_config_without_data(repo, tmp_path):
    """Offline with no data: the jobs that need no dataset are all there, with the registry's dependencies."""
    config = E.merged_config([str(repo / "config" / "smoke.yaml"), _offline_overlay(tmp_path)], repo / "config")
    nodes = {n.label: n for n in E.build_dag(config, str(tmp_path / "results"))}
    rules = [n.rule for n in nodes.values()]
    from featlearn.templates.registry import GRIDS

    assert rules.count("templates_sweep") == len(GRIDS) == 19
    assert rules.count("joma_table1_cell") == 3 * 2 * 2  # the grid C x n_ch x n of config.yaml
    for rule in ("scan_snap_syn_small", "scan_snap_adam", "scan_snap_syn_medium", "joma_eq6", "templates_calibration",
                 "templates_checks"):
        assert rule in rules
    # of the data-bound jobs only the features job on its own synthetic data remains
    bound = [label for label, n in nodes.items()
             if n.rule.startswith(("features_", "joma_wikitext", "scan_snap_wikitext", "data_prepare"))]
    assert bound == ["features_train[job=synthetic_lrnn]"]
    assert nodes["features_train[job=synthetic_lrnn]"].deps == []
    # each node carries the cost model its job's record names
    assert {n.rule for n in nodes.values() if n.cost_model} == TIMED & set(rules)
    assert nodes["joma_table1_cell[C=20,n0=10,n1=20,n_ch=2]"].cost_model == "featlearn.joma.cost:table1_cost"
    assert set(nodes["joma_table1_cell[C=20,n0=10,n1=20,n_ch=2]"].settings["seeds"]) == {1, 2}


def test_assume_online_counts_the_jobs_of_datasets_absent_offline(repo, tmp_path, monkeypatch):
    """Offline with no data (``enabled: auto``), the data-bound jobs are left out as Snakemake leaves them out;
    --assume-online counts them as a machine with network access would run them, and sizes the AG News and
    WikiText-103 ones by the datasets' documented sizes. A dataset switched off in the config stays off."""
    monkeypatch.delenv("FEATLEARN_DATA_MIRROR", raising=False)
    monkeypatch.setenv("FEATLEARN_OFFLINE", "1")
    overlay = tmp_path / "auto.yaml"
    overlay.write_text("data: {offline: true, mirror: null, datasets: {ag_news: {enabled: auto}, wikitext103: {enabled: "
                       "auto}, ptb: {enabled: false}}}\n")
    config = E.merged_config([str(repo / "config" / "paper.yaml"), str(overlay)], repo / "config")
    offline = {n.label for n in E.build_dag(config, str(tmp_path / "results"))}
    online = {n.label: n for n in E.build_dag(config, str(tmp_path / "results"), online=True)}
    assert offline < set(online)
    added = set(online) - offline
    assert "data_prepare[name=wikitext103]" in added and "data_prepare[name=ag_news]" in added
    assert any("wikitext103" in label and n.rule == "joma_wikitext" for label, n in online.items())
    assert any(n.rule == "features_train" and n.settings["dataset"] == "ag_news" for n in online.values())
    assert "data_prepare[name=ptb]" not in online  # off in the config: not assumed on
    # the sizes of an AG News job come from the documented sizes (no prepared splits here)
    node = next(n for n in online.values() if n.rule == "features_train" and n.settings["dataset"] == "ag_news")
    data = features_cost.features_data(node.settings, str(tmp_path / "results"))
    assert data["documented"] and data["n_train"] == 110_000 and data["eval_instances"] == 17_600
    assert data["vocab"] == 85_568 and data["n_classes"] == 4 and data["mean_length"] == pytest.approx(37.7)
    capped = features_cost.documented_data({**node.settings, "max_train": 20_000, "max_eval": 2_000,
                                            "settings": {**node.settings["settings"], "max_len": 30}})
    assert (capped["n_train"], capped["eval_instances"], capped["mean_length"]) == (20_000, 4_000, 30)
    imdb = features_cost.documented_data({**node.settings, "dataset": "imdb"})
    assert (imdb["n_train"], imdb["vocab"], imdb["n_classes"]) == (39_877, 101_706, 2)
    assert features_cost.documented_data({**node.settings, "dataset": "wikitext2"}) is None  # no documented length


@pytest.mark.shared_data
def test_estimate_command_on_the_smoke_config(repo, tmp_path, monkeypatch, shared_data, one_thread):
    """The command end to end with one-step probes: every compute job of the smoke DAG is a row of the Markdown,
    the probed ones with a time."""
    from featlearn.pipeline.cli import main

    monkeypatch.setenv("FEATLEARN_DATA_MIRROR", str(shared_data))
    results, out, cache = tmp_path / "results", tmp_path / "estimate.md", tmp_path / "probes.json"
    files = [str(repo / "config" / "smoke.yaml"), _offline_overlay(tmp_path)]
    args = ["estimate", "--configfile", *files, "--out", str(out), "--cache", str(cache), "--probe-steps", "1",
            "--probe-warmup", "0", "--max-probe-seconds", "0.2", "--device", "cpu", "--results", str(results),
            "--config-dir", str(repo / "config"), "--resources-out", str(tmp_path / "resources.json")]
    assert main(args) == 0
    md = out.read_text()
    nodes = E.build_dag(E.merged_config(files, repo / "config"), str(results))
    rows = {line.split(" | ")[0].lstrip("| "): line for line in md.splitlines() if line.startswith("| ") and " | " in line}
    assert ({"features_train", "joma_wikitext", "scan_snap_wikitext", "templates_gpt2_wikitext", "data_prepare"}
            <= {n.rule for n in nodes})
    for n in nodes:
        assert n.label in rows, n.label
    for n in nodes:  # every modelled job without a data dependency has a probed time
        if n.rule in ("templates_sweep", "joma_table1_cell", "scan_snap_syn_medium", "joma_wikitext"):
            assert re.search(r"\| probe", rows[n.label]), rows[n.label]
            assert not rows[n.label].split(" | ")[8].startswith("—")
    for g in (1, 2, 4):
        assert f"makespan, {g} GPU" in md
    assert "critical path" in md and "Critical path: " in md
    # each paper's jobs one after another (its GPU-hours on the device): every job counted once
    by_paper = [line.split(" | ") for line in md.split("### By paper")[1].split("\n\n")[1].splitlines()[2:]]
    assert {r[0].lstrip("| "): int(r[1]) for r in by_paper} == dict(collections.Counter(n.paper for n in nodes))
    assert json.loads(cache.read_text())  # the probes are cached for the next run
    # the same estimate made from the cache as another machine would make it (--cached-device): the same times
    label = E.device_name("cpu", 1).split(", ")[0]
    again = tmp_path / "again.md"
    cached = ["estimate", "--configfile", *files, "--out", str(again), "--cache", str(cache), "--cached-device", label,
              "--results", str(results), "--config-dir", str(repo / "config"), "--resources-out", ""]
    assert main(cached) == 0
    rows_again = {line.split(" | ")[0].lstrip("| "): line for line in again.read_text().splitlines()
                  if line.startswith("| ") and " | " in line}
    for n in nodes:
        assert rows_again[n.label].split(" | ")[8] == rows[n.label].split(" | ")[8], n.label
    assert f"device: {label}, torch" in again.read_text() and "0 measured now" in again.read_text()
    # a spent probe budget: no probe starts, the report and the jobs' rows say so
    spent = tmp_path / "spent.md"
    assert main([*args[:args.index("--out")], "--out", str(spent), "--cache", str(tmp_path / "none.json"),
                 *args[args.index("--probe-steps"):], "--probe-budget", "0", "--resources-out", ""]) == 0
    text = spent.read_text()
    assert "0 measured now" in text and "probe budget 0 s (--probe-budget), 0 s taken" in text
    assert "probes not started" in text and "probe budget spent (--probe-budget 0 s)" in text
    # this CPU at 2 threads, another device to the cache, from its 1-thread records (--scale-from) and a budget of a
    # few probes: every job the 1-thread estimate timed has a time, and the report's head says how
    scaled = tmp_path / "scaled.md"
    assert main([*args[:args.index("--out")], "--out", str(scaled), "--cache", str(cache), *args[args.index("--probe-steps"):],
                 "--threads", "2", "--scale-from", E.device_name("cpu", 1), "--probe-budget", "2",
                 "--resources-out", ""]) == 0
    text = scaled.read_text()
    assert f"another device's records (--scale-from {E.device_name('cpu', 1)}" in text
    assert int(re.search(r"torch [^)]*\): (\d+) parts not measured here", text).group(1)) > 0
    rows_scaled = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines() if line.startswith("| ")}
    for n in nodes:
        if not rows[n.label].split(" | ")[8].startswith("—"):
            assert not rows_scaled[n.label].split(" | ")[8].startswith("—"), rows_scaled[n.label]
    # one figure's jobs from the same cache (--figure): their rows only, with the same times, and the workflow's
    # limits file is not written over by a partial estimate
    monkeypatch.chdir(tmp_path)
    one = tmp_path / "one.md"
    assert main(["estimate", "--configfile", *files, "--out", str(one), "--cache", str(cache), "--cached-device", label,
                 "--results", str(results), "--config-dir", str(repo / "config"), "--figure", "fig_scan_snap_4"]) == 0
    labels = {n.label for n in nodes}
    rows_one = {line.split(" | ")[0].lstrip("| "): line for line in one.read_text().splitlines()
                if line.startswith("| ") and " | " in line and line.split(" | ")[0].lstrip("| ") in labels}
    assert set(rows_one) == {"scan_snap_syn_small"}
    for job, row in rows_one.items():
        assert row.split(" | ")[8] == rows[job].split(" | ")[8], job
    assert "only the jobs of `fig_scan_snap_4` (--figure)" in one.read_text()
    assert not (tmp_path / "results" / "estimate" / "resources.json").exists()
    # the whole DAG's estimate writes the limits where the workflow of its results folder reads them
    elsewhere = tmp_path / "elsewhere"
    assert main(["estimate", "--configfile", *files, "--out", str(one), "--cache", str(cache), "--cached-device", label,
                 "--results", str(elsewhere), "--config-dir", str(repo / "config")]) == 0
    assert json.loads((elsewhere / "estimate" / "resources.json").read_text())["jobs"]
    assert not (tmp_path / "results" / "estimate" / "resources.json").exists()
    # the scheduler limits the workflow reads: one entry per probed job, keyed by rule and settings
    from featlearn.pipeline.sizing import resource_key

    limits = json.loads((tmp_path / "resources.json").read_text())["jobs"]
    sweep = next(n for n in nodes if n.rule == "templates_sweep")
    entry = limits[resource_key(sweep.rule, json.dumps(sweep.settings, sort_keys=True))]
    assert entry["job"] == sweep.label and entry["runtime"] >= 15 and entry["mem_mb"] > 1000


@pytest.mark.workflow
def test_dag_matches_snakemake_dry_run(repo, tmp_path, shared_data, monkeypatch):
    """The estimate's jobs per rule are the compute jobs a forced Snakemake dry run of the smoke config schedules."""
    from wfutil import copy_workflow, snakemake

    work = copy_workflow(tmp_path / "wf")
    overlay = _offline_overlay(tmp_path)
    dry = snakemake(work, "-n", "--forceall", "--cores", "1", "--configfile", "config/smoke.yaml", overlay,
                    env={"FEATLEARN_DATA_MIRROR": str(shared_data)})
    assert dry.returncode == 0, dry.stderr[-2000:]
    stats = dry.stdout.split("Job stats:")[1].split("total")[0]
    counts = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", stats, re.M)}
    monkeypatch.setenv("FEATLEARN_DATA_MIRROR", str(shared_data))
    config = E.merged_config([str(repo / "config" / "smoke.yaml"), overlay], repo / "config")
    nodes = E.build_dag(config, str(work / "results"))
    ours: dict[str, int] = {}
    for n in nodes:
        ours[n.rule] = ours.get(n.rule, 0) + 1
    assert ours.pop("data_prepare") == sum(v for k, v in counts.items() if k.startswith("data_prepare_"))
    theirs = {k: v for k, v in counts.items() if k.split("_")[0] in ("features", "scan", "joma", "templates")}
    assert ours == theirs


def test_representatives_spread_over_the_flops():
    flops = [5.0, 1.0, 9.0, 3.0, 7.0, 2.0]
    assert E.representatives(flops, 2) == [1, 2]  # the smallest and the largest
    got = E.representatives(flops, 3)
    assert 1 in got and 2 in got and len(got) == 3
    assert E.representatives(flops, 10) == sorted(range(6), key=lambda i: flops[i])
    # two measures (FLOPs, parameters updated): each one's extremes, so the chosen span both ranges. Grid 3c's
    # groups of 40 runs at small n had the most parameters updated and middling FLOPs; the first measure's extremes
    # alone left them outside the probes' range, without a time
    work = [(1.0, 4.0), (2.0, 9.0), (3.0, 1.0), (5.0, 5.0), (8.0, 6.0), (9.0, 2.0)]
    assert E.representatives(work, 2) == [0, 1, 2, 5]  # FLOPs 1 and 9, updates 1 and 9
    assert E.representatives(work, 5) == [0, 1, 2, 4, 5]  # then evenly along the sorted order, up to 5
    assert E.representatives(work, 1) == [5]


def test_fit_step_time_recovers_a_planted_line_and_stays_non_negative():
    fit = E.fit_step_time([(1e9, 0.011), (3e9, 0.013), (1e10, 0.02)])
    assert abs(fit(5e9) - 0.015) < 1e-9 and abs(fit(0) - 0.010) < 1e-9
    flat = E.fit_step_time([(1e9, 0.02), (2e9, 0.01)])  # time falling with FLOPs: a constant, not a negative slope
    assert flat(1e12) == pytest.approx(0.015)
    origin = E.fit_step_time([(1e9, 0.001), (2e9, 0.003)])  # negative intercept: through the origin
    assert origin(0) == 0.0 and origin(4e9) > 0
    assert E.fit_step_time([]) is None


def test_a_job_with_many_groups_is_probed_at_a_few_and_interpolated(tmp_path):
    """Issue 34: a job with 20 distinct groups measures `max_parts` of them (the smallest and largest FLOPs among
    them) and interpolates the others; on a planted step time a + b x FLOPs the interpolation is exact, and
    groups held out of the fit are predicted as measured."""
    calls = []

    def fake(shape, dim, device, steps, warmup):
        calls.append(shape["n_probe"])
        return {"seconds_per_step": 0.004 + 2e-11 * shape["flops"]}

    parts = [E.Part(E.probe("sweep", {"arch": "transformer", "model": "m", "task": "t", "n_probe": i, "flops": 1e8 * (i + 1),
                                      "runs": 4},
                            "runs"), steps=10, runs=4, flops_per_step=1e8 * (i + 1)) for i in range(20)]
    prober = E.Prober("cpu", tmp_path / "c.json", probes={"sweep": fake}, max_parts=4)
    recs = E.probe_parts("templates_sweep", parts, prober)
    assert len(set(calls)) == 4 and 0 in calls and 19 in calls  # (each timed twice: its steps are fast)
    assert sum(1 for r in recs if r.get("interpolated")) == 16
    for part, rec in zip(parts, recs):
        assert rec["seconds_per_step"] == pytest.approx(0.004 + 2e-11 * part.flops_per_step, rel=1e-6)
    # without a limit every group is measured
    every = E.Prober("cpu", tmp_path / "all.json", probes={"sweep": fake}, max_parts=0)
    assert not any(r.get("interpolated") for r in E.probe_parts("templates_sweep", parts, every))
    # --no-probe with a cache of other groups (the measured four, and two more): the representatives it lacks are
    # interpolated from what it has, not left without a time; nothing runs
    cache = json.loads((tmp_path / "c.json").read_text())
    extra = E.Prober("cpu", tmp_path / "c.json", probes={"sweep": fake}, max_parts=0)
    for i in (5, 12):
        extra.get("templates_sweep", parts[i].probe)
    more = [dataclasses.replace(p, probe=E.probe("sweep", {**p.probe.shape, "arch": "mlp"}, "runs")) for p in parts]
    assert len(json.loads((tmp_path / "c.json").read_text())) == len(cache) + 2
    n_calls = len(calls)
    cached_only = E.Prober("cpu", tmp_path / "c.json", probe=False, probes={"sweep": fake}, max_parts=4)
    recs = E.probe_parts("templates_sweep", parts, cached_only)
    assert len(calls) == n_calls and all(r is not None for r in recs)
    assert sum(1 for r in recs if r.get("interpolated")) == 14  # 20 groups, 6 in the cache
    for part, rec in zip(parts, recs):
        assert rec["seconds_per_step"] == pytest.approx(0.004 + 2e-11 * part.flops_per_step, rel=1e-6)
    # a cache of middle groups only: no extrapolation beyond the FLOPs they span
    middle = E.Prober("cpu", tmp_path / "m.json", probes={"sweep": fake}, max_parts=0)
    for i in (5, 12):
        middle.get("templates_sweep", parts[i].probe)
    recs = E.probe_parts("templates_sweep", parts,
                         E.Prober("cpu", tmp_path / "m.json", probe=False, probes={"sweep": fake}, max_parts=4))
    assert [i for i, r in enumerate(recs) if "seconds_per_step" in r] == list(range(5, 13))
    assert all("outside the FLOPs range" in recs[i]["error"] for i in (*range(5), *range(13, 20)))
    # a family the cache has nothing of stays without a time
    assert all(r is None for r in E.probe_parts("templates_sweep", more, cached_only))
    # a failed representative keeps its error
    def oom(shape, dim, device, steps, warmup):
        raise RuntimeError("CUDA out of memory")

    failing = E.Prober("cpu", tmp_path / "f.json", probes={"sweep": oom}, max_parts=4, log=lambda msg: None)
    recs = E.probe_parts("templates_sweep", parts, failing)
    assert sum(1 for r in recs if r is not None and r.get("error") == "out of memory") == 4
    assert sum(1 for r in recs if r is None) == 16  # nothing to interpolate from


def test_a_sweep_job_counts_each_evaluation_once_per_epoch_not_at_every_step(repo, tmp_path):
    """A transformer group of n > batch is probed at n = batch, where an epoch is one step and its evaluation; the job
    trains ceil(n / batch) steps an epoch and evaluates once. The probe times the two apart, and the job's time is
    steps x s/step + evaluations x s/evaluation: smoke grid 14 at n 32 and batch 8 (4 steps an epoch, 5 epochs), a
    planted step of 1 s and evaluation of 3 s: 20 + 15 = 35 s, where a step with its evaluation at each step gave
    80 s. A record cached before the split (no ``seconds_per_eval``) keeps the time it was measured as."""
    from featlearn.templates.registry import sweep_settings

    config = E.merged_config([str(repo / "config" / "smoke.yaml")], repo / "config")
    settings = sweep_settings(config["templates"], "14")
    settings["sweeps"]["fig14"].update(n=[32], batch=[8], lrs=[1e-3])
    node = dataclasses.replace(_node("templates_sweep", settings, {"grid": "14"}),
                               cost_model="featlearn.templates.cost:sweep_cost")
    (part,) = templates_cost.sweep_cost(node).parts
    epochs = settings["sweeps"]["epochs"]
    assert part.probe.shape["n_probe"] == 8 and part.steps == 4 * epochs and part.evals == epochs
    assert part.eval_flops == pytest.approx(part.flops_per_step / (3 * 8) * 200)  # 100 validation + 100 test samples

    def seconds(fake, name):
        prober = E.Prober("cpu", tmp_path / f"{name}.json", probes={"sweep": fake})
        prober.startup = lambda: 0.0
        return E.estimate([dataclasses.replace(node)], prober, {"scale": "smoke"}, str(tmp_path / "results"))[0].seconds

    assert seconds(lambda *a: {"seconds_per_step": 1.0, "seconds_per_eval": 3.0}, "apart") == pytest.approx(7.0 * epochs)
    shown = E.estimate([dataclasses.replace(node)], E.Prober("cpu", tmp_path / "apart.json", probe=False,
                                                             probes={"sweep": lambda *a: {}}),
                       {"scale": "smoke"}, str(tmp_path / "results"))[0]
    assert E.eval_share(shown) == pytest.approx(15.0 / 20.0)  # the report's column: evaluations over steps
    assert seconds(lambda *a: {"seconds_per_step": 4.0}, "before") == pytest.approx(16.0 * epochs)
    assert E.part_time(part, {"seconds_per_step": 1.0, "seconds_per_eval": 3.0}) == pytest.approx(7.0 * epochs)


def test_a_transformer_group_beyond_one_minibatch_is_probed_over_its_own_alphabet(repo, tmp_path, monkeypatch):
    """A transformer group of n > batch is probed at n = batch (one step an epoch) over the training alphabet of its
    own n, so its vocabulary, the embedding tables Adam updates every step, is the job's (before, that of n = batch).
    A record cached under the shape of before (the committed GPU caches) still answers, and says so; the shape's own
    record, once cached, is the one used."""
    from featlearn.templates.registry import sweep_settings
    from featlearn.templates.sweeps import engine
    from featlearn.templates.sweeps.experiments import figure_curves

    config = E.merged_config([str(repo / "config" / "smoke.yaml")], repo / "config")
    settings = sweep_settings(config["templates"], "14")
    settings["sweeps"]["fig14"].update(n=[32], batch=[8], lrs=[1e-3])
    (part,) = templates_cost.sweep_cost(_node("templates_sweep", settings, {"grid": "14"})).parts
    (group,) = [g for _, c in figure_curves("14", settings["sweeps"]) for g in engine.expand_groups({**c, "progress": False})]
    shape = part.probe.shape
    assert shape["n_probe"] == 8 and shape["alphabet"] == 32
    assert "alphabet" not in json.loads(part.probe.fallback_json) and json.loads(part.probe.fallback_json)["n_probe"] == 8
    vocab = engine.group_vocab(group)
    assert vocab > engine.group_vocab(dataclasses.replace(group, n=8))  # the alphabet of n 32 against that of n 8
    assert part.updates_per_step == len(group.runs) * engine.model_size(group, vocab).parameters
    probed = []
    real = engine.train_group
    monkeypatch.setattr(engine, "train_group", lambda g, **kw: probed.append(g) or real(g, **kw))
    templates_cost.sweep_probe(shape, 1, "cpu", 1, 0)
    assert {g.n for g in probed} == {8} and {engine.group_vocab(g) for g in probed} == {vocab}
    assert engine.group_data(probed[0])[0].vocab.size == vocab
    # without probing (--no-probe, another device's cache), a record of the shape without the alphabet answers, noted;
    # a probing estimate measures the shape itself, and its record is the one used from then on
    cache = tmp_path / "c.json"
    fakes = {"sweep": lambda *a: {"seconds_per_step": 2.0}}  # (a probe function without a CPU method: keys without one)
    old = dataclasses.replace(part.probe, shape_json=part.probe.fallback_json, fallback_json="")
    E.Prober("cpu", cache, probes={"sweep": lambda *a: {"seconds_per_step": 2.0}}).get("templates_sweep", old)
    reader = E.Prober("cpu", cache, probe=False, probes=fakes)
    rec = reader.get("templates_sweep", part.probe)
    assert rec["seconds_per_step"] == 2.0 and "without alphabet" in rec["note"]
    assert reader.cached("templates_sweep", part.probe)
    prober = E.Prober("cpu", cache, probes={"sweep": lambda *a: {"seconds_per_step": 3.0}})
    assert not prober.cached("templates_sweep", part.probe)
    assert prober.get("templates_sweep", part.probe)["seconds_per_step"] == 3.0 and prober.measured == 1
    assert E.Prober("cpu", cache, probe=False, probes=fakes).get("templates_sweep", part.probe)["seconds_per_step"] == 3.0
    # the first round, which gives every job a time before the rest is probed, takes the earlier shape's record and
    # leaves the measurement to the second round
    (tmp_path / "r.json").write_text(json.dumps({k: v for k, v in json.loads(cache.read_text()).items()
                                                 if k == reader.key("templates_sweep", old)}))
    calls = []
    rounds = E.Prober("cpu", tmp_path / "r.json", probes={"sweep": lambda *a: calls.append(a) or {"seconds_per_step": 3.0}})
    node = dataclasses.replace(_node("templates_sweep", settings, {"grid": "14"}), cost=templates_cost.sweep_cost(
        _node("templates_sweep", settings, {"grid": "14"})))
    E.first_round([node], rounds)
    assert calls == [] and rounds.measured == 0 and not rounds.older_first
    assert rounds.get("templates_sweep", part.probe)["seconds_per_step"] == 3.0 and len(calls) == 1
    # a probing estimate whose budget is spent answers from the earlier shape's record too
    E.Prober("cpu", tmp_path / "b.json", probes={"sweep": lambda *a: {"seconds_per_step": 2.0}}).get("templates_sweep", old)
    spent = E.Prober("cpu", tmp_path / "b.json", probes={"sweep": lambda *a: {"seconds_per_step": 3.0}}, budget=0.0)
    assert spent.get("templates_sweep", part.probe)["seconds_per_step"] == 2.0 and spent.measured == 0


def test_the_real_sweep_probe_times_its_evaluations_apart(repo):
    """The probe of a tiny transformer group of smoke grid 14 on this CPU: a step and an evaluation, each timed."""
    from featlearn.templates.registry import sweep_settings

    config = E.merged_config([str(repo / "config" / "smoke.yaml")], repo / "config")
    settings = sweep_settings(config["templates"], "14")
    settings["sweeps"]["fig14"].update(n=[32], batch=[8], lrs=[1e-3])
    (part,) = templates_cost.sweep_cost(_node("templates_sweep", settings, {"grid": "14"})).parts
    rec = templates_cost.sweep_probe(part.probe.shape, 1, "cpu", 2, 1)
    assert rec["seconds_per_step"] > 0 and rec["seconds_per_eval"] > 0 and rec["probe_steps_per_epoch"] == 1


def test_evaluations_are_interpolated_on_their_flops_where_every_probe_timed_them_apart(tmp_path):
    """Between probes, a step's time is fitted on its work and an evaluation's on its FLOPs (planted: 1 ms + 1e-11 s a
    FLOP, exact). A family with a record of before the split fits steps with their probe epoch's evaluation in
    them, as that record holds them, and its interpolated parts carry no separate evaluation."""
    def fake(shape, dim, device, steps, warmup):
        return {"seconds_per_step": 0.004 + 2e-11 * shape["flops"], "seconds_per_eval": 0.001 + 1e-11 * shape["eflops"],
                "probe_steps_per_epoch": 1}

    def part(i, arch="transformer"):
        shape = {"arch": arch, "model": "m", "task": "t", "n_probe": i, "flops": 1e8 * (i + 1), "eflops": 5e7 * (i + 1),
                 "runs": 4}
        return E.Part(E.probe("sweep", shape, "runs"), steps=10, runs=4, flops_per_step=1e8 * (i + 1), evals=2,
                      eval_flops=5e7 * (i + 1))

    parts = [part(i) for i in range(8)]
    recs = E.probe_parts("templates_sweep", parts, E.Prober("cpu", tmp_path / "c.json", probes={"sweep": fake}, max_parts=3))
    assert sum(1 for r in recs if r.get("interpolated")) == 5
    for p, r in zip(parts, recs):
        assert r["seconds_per_step"] == pytest.approx(0.004 + 2e-11 * p.flops_per_step, rel=1e-6)
        assert r["seconds_per_eval"] == pytest.approx(0.001 + 1e-11 * p.eval_flops, rel=1e-6)
    # one probe of the family cached before the split (a step with its evaluation): steps fitted as it measured them
    old = [part(i, "mlp") for i in range(8)]
    cache = E.Prober("cpu", tmp_path / "mixed.json", probes={"sweep": fake}, max_parts=0)
    for i in (0, 7):
        cache.get("templates_sweep", old[i].probe)
    key = cache.key("templates_sweep", old[0].probe)
    cache.cache[key] = {"seconds_per_step": E.with_eval(cache.cache[key])}
    cache._save()
    recs = E.probe_parts("templates_sweep", old, E.Prober("cpu", tmp_path / "mixed.json", probe=False, max_parts=2,
                                                          probes={"sweep": fake}))
    for i in range(1, 7):
        assert "seconds_per_eval" not in recs[i]
        assert recs[i]["seconds_per_step"] == pytest.approx(0.005 + 2e-11 * old[i].flops_per_step + 1e-11 * old[i].eval_flops,
                                                            rel=1e-6)


def test_families_are_fitted_apart():
    """Groups of another architecture are not predicted from this one's probes."""
    a = E.probe("sweep", {"arch": "transformer", "model": "m", "task": "t", "n_probe": 1}, "runs")
    b = E.probe("sweep", {"arch": "mlp", "model": "m", "task": "t", "n_probe": 1}, "runs")
    assert E._family(a) != E._family(b)


def test_lm_sizes_without_stats_come_from_the_documented_token_counts(tmp_path):
    """No stats.json (a machine without the data): train and validation tokens from featlearn.pipeline.sizing
    (WikiText-103 shares WikiText-2's validation articles), scaled for BPE, so a whole-split evaluation is sized."""
    wt2 = E.lm_data("wikitext2", str(tmp_path))
    assert (wt2["train"], wt2["valid"], wt2["vocab"]) == (2_088_628, 217_646, 33_278)
    assert wt2["source"].startswith("documented size")
    assert E.lm_data("wikitext103", str(tmp_path))["valid"] == 217_646
    assert E.lm_data("wikitext2", str(tmp_path), tokens_per_word=2.0)["valid"] == 435_292
    assert E.lm_data("ptb", str(tmp_path))["valid"] is None  # no documented count: the cost model says so


def test_the_interpolation_check_from_a_probe_cache(repo, tmp_path, benchmark_script):
    """benchmarks/estimate_interpolation.py --from-cache: leave-one-out over the cached probes of each sweep family.
    Probes that follow a + b x FLOPs exactly are predicted exactly; bent ones are not (the check could fail)."""
    interp = benchmark_script("estimate_interpolation")
    config = E.merged_config([], repo / "config")
    parts = [(n.rule, p) for n in E.build_dag(config, str(tmp_path), online=True)
             if n.rule == "templates_sweep" for p in E.cost_model(n)(n, str(tmp_path)).parts if p.probe]

    def cache(step_time) -> dict:
        path = tmp_path / "probes.json"
        probes = {json.dumps({"rule": rule, "shape": p.probe.shape}): {"seconds_per_step": step_time(p.flops_per_step)}
                  for rule, p in parts}
        path.write_text(json.dumps(probes))
        return interp.from_cache(E, path, [])

    linear = cache(lambda f: 1e-3 + 2e-12 * f)
    assert linear["held_out"] >= 3 and linear["max_rel_error"] < 1e-6
    bent = cache(lambda f: 1e-3 + 1e-24 * f * f)  # quadratic in FLOPs: the straight line misses
    assert bent["held_out"] == linear["held_out"] and bent["max_rel_error"] > 0.05


def _evidence_record(root, paper, rule, date, jobs):
    folder = root / paper / rule
    folder.mkdir(parents=True)
    run = {"scale": "paper", "date_utc": date, "host_cpus": 2, "commit": "0" * 40, "precision": "fp32"}
    (folder / "record.json").write_text(json.dumps({"paper": paper, "rule": rule, "label": rule, "run": run, "jobs": jobs}))


def test_a_cpu_job_without_a_model_takes_its_paper_scale_evidence_time(tmp_path):
    """At the paper scale a CPU job without a cost model and without a benchmark file takes the wall time the committed
    evidence records (the latest run's); a GPU job's, a job the evidence lacks and another scale's estimate do not."""
    root = tmp_path / "evidence"
    _evidence_record(root, "joma", "fig_joma_2", "2026-11-27 10:00:00",
                     [{"label": "joma_sim_exp", "device": "cpu", "wall_s": 20.0},
                      {"label": "fig_joma_2 (drawing, claims)", "device": "", "wall_s": 5.0}])
    _evidence_record(root, "joma", "fig_joma_3", "2026-11-28 10:00:00",
                     [{"label": "joma_sim_exp", "device": "cpu", "wall_s": 16.0},
                      {"label": "joma_wikitext[seed=1]", "device": "NVIDIA H200", "wall_s": 60.0},
                      {"label": "joma_eq6", "device": "cpu", "wall_s": float("nan")},
                     # resumed from an earlier run of itself: its wall time is the last run's only
                     {"label": "joma_theorem2", "device": "cpu", "wall_s": 3.0, "resumed": True}])
    walls = E.evidence_walls(root)
    assert walls == {"joma_sim_exp": (16.0, "paper-scale evidence of 2026-11-28, 2 CPUs")}
    record = json.loads((root / "joma" / "fig_joma_3" / "record.json").read_text())
    record["run"]["host_cpu"] = "Intel(R) Xeon(R) Processor"  # (records from 2026-11-29 name the CPU's model)
    (root / "joma" / "fig_joma_3" / "record.json").write_text(json.dumps(record))
    assert E.evidence_walls(root)["joma_sim_exp"][1] == "paper-scale evidence of 2026-11-28, 2 CPUs (Intel(R) Xeon(R) Processor)"

    def nodes():
        cpu = [dataclasses.replace(_node(rule, {}), gpu=False) for rule in ("joma_sim_exp", "joma_eq6")]
        return [*cpu, _node("joma_sim_exp", {})]  # the last a GPU job

    prober = E.Prober("cpu", tmp_path / "c.json", probe=False)
    paper = E.estimate(nodes(), prober, {"scale": "paper"}, str(tmp_path / "results"), evidence=root)
    assert paper[0].seconds == 16.0 and "paper-scale evidence of 2026-11-28" in paper[0].source
    assert paper[1].seconds is None and paper[2].seconds is None
    default = E.estimate(nodes(), prober, {"scale": "default"}, str(tmp_path / "results"), evidence=root)
    assert all(n.seconds is None for n in default)
    assert E.evidence_walls(tmp_path / "none") == {}


def test_a_benchmark_file_of_another_scale_times_a_job_that_is_the_same_at_both(repo, tmp_path):
    """After a default-scale run, the paper estimate takes the benchmark file of a job the default config runs with
    the same settings (the data preparation), and says so; a job whose settings differ between the two (JoMA's
    softmax simulation: longer at paper scale) keeps its file shown and unused. Without the shipped configs
    nothing is taken."""
    results = tmp_path / "results"
    results.mkdir()
    (results / "run.json").write_text(json.dumps({"scale": "default"}))
    config = E.merged_config([str(repo / "config" / "paper.yaml")], repo / "config")
    nodes = {n.label: n for n in E.build_dag(config, str(results), online=True)}
    chosen = [nodes["data_prepare[name=sst]"], nodes["joma_sim_softmax"]]
    for node in chosen:
        Path(node.benchmark).parent.mkdir(parents=True, exist_ok=True)
        Path(node.benchmark).write_text("s\th:m:s\n3.2\t0:00:03\n")
    assert E.same_at_scale(chosen, "default", repo / "config", str(results)) == {"data_prepare[name=sst]"}
    # the templates checks' settings differ only in the scale their claims are labelled with: the same work
    checks = nodes["templates_checks"]
    assert checks.settings == {"scale": "paper"}
    assert E.same_at_scale([checks], "default", repo / "config", str(results)) == {"templates_checks"}
    prober = E.Prober("cpu", tmp_path / "c.json", probe=False)
    sst, sim = E.estimate(chosen, prober, config, str(results), config_dir=repo / "config")
    assert sst.seconds == 3.2 and "(a `default`-scale run's: the same job at both scales)" in sst.source
    assert sim.seconds is None and "(from a `default`-scale run: not used)" in sim.source
    for node in chosen:
        node.seconds, node.source, node.measured = None, "", None
    sst, _ = E.estimate(chosen, prober, config, str(results))  # no config_dir: only this scale's files count
    assert sst.seconds is None and "not used" in sst.source
    assert E.same_at_scale(chosen, "custom", repo / "config", str(results)) == set()


def test_the_benchmark_file_of_a_job_that_resumed_is_shown_and_not_used(tmp_path):
    """A job whose log says it resumed from an earlier run of itself has a benchmark file that timed its last run only:
    the estimate names the file and does not take its time (nor compare it with the model's)."""
    results = tmp_path / "results"
    (results / "run.json").parent.mkdir(parents=True)
    (results / "run.json").write_text(json.dumps({"scale": "paper"}))
    node = dataclasses.replace(_node("joma_sim_exp", {}), gpu=False, benchmark=str(results / "benchmarks" / "sim.tsv"))
    bench = Path(node.benchmark)
    bench.parent.mkdir(parents=True)
    bench.write_text("s\th:m:s\n12.5\t0:00:12\n")
    log = results / "logs" / "sim.log"
    log.parent.mkdir(parents=True)
    prober = E.Prober("cpu", tmp_path / "c.json", probe=False)
    log.write_text("featlearn: device cpu (asked: cpu); torch threads 1\nprogress: 10 steps\n")
    fresh = E.estimate([dataclasses.replace(node)], prober, {"scale": "paper"}, str(results))[0]
    assert fresh.seconds == 12.5 and fresh.source == "benchmark file 12.5 s"
    log.write_text("featlearn: device cpu (asked: cpu); torch threads 1\n[lm x] resuming at step 40 from w/resume.pt\n")
    resumed = E.estimate([dataclasses.replace(node)], prober, {"scale": "paper"}, str(results))[0]
    assert resumed.seconds is None and resumed.measured is None
    assert resumed.source == "benchmark file 12.5 s (of a job that resumed: its last run only, not used)"


def test_a_job_of_several_parts_names_its_longest(tmp_path, monkeypatch):
    """A job of several parts (a sweep's groups) says how long its longest part takes, evaluation share included: a
    sweep killed at a time limit resumes group by group, so a limit shorter than that group never finishes it."""
    parts = [E.Part(E.probe("sweep", {"n_probe": i, "runs": 4}, "runs"), steps=100 * (i + 1), runs=4) for i in range(3)]
    monkeypatch.setattr(E, "cost_model", lambda node: lambda node, results: E.Cost(parts=parts, eval_share=0.5))
    cache = tmp_path / "c.json"
    prober = E.Prober("cpu", cache, probes={"sweep": lambda *a: {"seconds_per_step": 2.0}}, max_parts=0)
    cache.write_text(json.dumps({json.dumps({"device": E.device_name("cpu", 1), "torch": prober.torch, "kind": "startup"},
                                            sort_keys=True): {"seconds": 3.0}}))  # planted: no interpreter started
    prober = E.Prober("cpu", cache, probes={"sweep": lambda *a: {"seconds_per_step": 2.0}}, max_parts=0)
    node = E.estimate([_node("templates_sweep", {})], prober, {"scale": "paper"}, str(tmp_path / "results"))[0]
    assert node.seconds == pytest.approx(3.0 + 600 * 2.0 * 1.5)
    assert node.source.endswith("; longest part 15 min")  # 300 steps x 2 s x 1.5
    monkeypatch.setattr(E, "cost_model", lambda node: lambda node, results: E.Cost(parts=parts[:1]))
    single = E.estimate([_node("templates_sweep", {})], prober, {"scale": "paper"}, str(tmp_path / "results"))[0]
    assert "longest part" not in single.source


def test_the_estimate_against_the_paper_scale_evidence(repo, tmp_path, benchmark_script):
    """benchmarks/estimate_vs_evidence.py: a modelled CPU job the committed evidence ran is estimated as the estimate
    command does (here from planted probes: start-up + steps x s/step x (1 + evaluation share)) and set beside the
    evidence's wall time; a job of the evidence without a cost model is left out."""
    eve = benchmark_script("estimate_vs_evidence")
    root = tmp_path / "evidence"
    _evidence_record(root, "scan_snap", "fig_scan_snap_5", "2026-11-27 10:00:00",
                     [{"label": "scan_snap_adam", "device": "cpu", "wall_s": 40.0},
                      {"label": "scan_snap_theory", "device": "cpu", "wall_s": 5.0}])
    config = E.merged_config([str(repo / "config" / "paper.yaml")], repo / "config")
    node = next(n for n in E.build_dag(config, str(tmp_path)) if n.label == "scan_snap_adam")
    cost = E.cost_model(node)(node, str(tmp_path))
    cache = tmp_path / "probes.json"
    prober = E.Prober("cpu", cache)
    planted = {prober.key(node.rule, dataclasses.replace(p.probe, precision=node.precision)): {"seconds_per_step": 0.01}
               for p in cost.parts}
    planted[json.dumps({"device": E.device_name("cpu", 1), "torch": prober.torch, "kind": "startup"}, sort_keys=True)] = {
        "seconds": 2.0}
    cache.write_text(json.dumps(planted))
    rows = eve.main(["--evidence", str(root), "--cache", str(cache), "--results", str(tmp_path)])
    expected = 2.0 + sum(p.steps for p in cost.parts) * 0.01 * (1 + cost.eval_share)
    assert [r["job"] for r in rows] == ["scan_snap_adam"]
    assert rows[0]["estimate_s"] == pytest.approx(expected) and rows[0]["ratio"] == pytest.approx(expected / 40.0)


def test_documented_words_of_the_datasets():
    """The size of a data job that needs no file: train tokens of an LM dataset, train items x mean words of a
    classification dataset; unknown names have none."""
    assert E.documented_words("wikitext103") == 103_227_021 and E.documented_words("wikitext2") == 2_088_628
    assert E.documented_words("ptb") == 929_589
    assert E.documented_words("ag_news") == pytest.approx(110_000 * 37.7)
    assert E.documented_words("sst") == pytest.approx(6_920 * 17.57)
    assert E.documented_words("gpt2") is None and E.documented_words("") is None


def test_a_data_job_without_a_time_is_scaled_by_size_from_its_rule(tmp_path):
    """WikiText-103's preparation, absent offline, takes the median seconds per documented word of the same rule's
    timed jobs x its words; a timed job, a GPU job, a modelled job and a rule with no timed job keep what they had."""
    def cpu(rule, dataset, seconds=None, key="name"):
        node = dataclasses.replace(_node(rule, {}, {key: dataset}), gpu=False, label=f"{rule}[{key}={dataset}]")
        node.seconds = seconds
        return node

    wt2, ptb = cpu("data_prepare", "wikitext2", 20.0), cpu("data_prepare", "ptb", 40.0)
    wt103, gpu_job = cpu("data_prepare", "wikitext103"), _node("data_prepare", {}, {"name": "wikitext103"})
    lonely = cpu("features_extract", "ag_news", key="dataset")
    modelled = cpu("data_prepare", "imdb")
    modelled.cost = E.Cost(parts=[])
    E.scale_by_size([wt2, ptb, wt103, gpu_job, lonely, modelled])
    rates = sorted([20.0 / 2_088_628, 40.0 / 929_589])
    assert wt103.seconds == pytest.approx(sum(rates) / 2 * 103_227_021)
    assert "scaled by size" in wt103.source and "data_prepare[name=ptb]" in wt103.source
    assert (wt2.seconds, ptb.seconds) == (20.0, 40.0) and "scaled" not in wt2.source
    assert gpu_job.seconds is None and lonely.seconds is None and modelled.seconds is None


def test_the_estimate_of_a_few_figures_holds_only_the_jobs_they_need(repo, tmp_path, monkeypatch):
    """--figure: the jobs that `snakemake fig_features_3 fig_joma_2` runs (checked against its dry run by hand: the
    same compute jobs, besides the downloads), no other; a name that is no figure rule of the DAG is an error."""
    monkeypatch.setenv("FEATLEARN_OFFLINE", "1")
    config = E.merged_config([str(repo / "config" / "paper.yaml")], repo / "config")
    results = str(tmp_path / "results")
    fig3 = {"data_prepare[name=sst]", "data_prepare[name=sstwsub]", "features_extract[dataset=sst]",
            "features_extract[dataset=sstwsub]", "features_train[job=sst_mv]", "features_train[job=sstwsub_mv]"}
    assert {n.label for n in E.build_dag(config, results, online=True, figures=["fig_features_3"])} == fig3
    both = {n.label for n in E.build_dag(config, results, online=True, figures=["fig_features_3", "fig_joma_2"])}
    assert both == fig3 | {"joma_sim_exp", "joma_sim_softmax"}
    whole = {n.label for n in E.build_dag(config, results, online=True)}
    assert both < whole
    with pytest.raises(ValueError, match="not a figure rule of this config's DAG: fig_features_99"):
        E.build_dag(config, results, online=True, figures=["fig_features_3", "fig_features_99"])


def test_probing_goes_breadth_first_and_stops_at_its_budget(tmp_path, monkeypatch):
    """--probe-budget: two sweep jobs of 10 groups each (one model family) and probes of 10 planted seconds. A
    budget of 35 s lets 4 probes start: breadth first, those are each job's smallest and largest group (in the
    DAG's order), so both jobs get a time (interpolated in between, exact on a planted line), where job
    by job the second job would get none. No probe starts after the budget is spent, the parts left say why, and
    nothing of them is cached: a later estimate without a budget measures the rest (each job's max_parts) and no
    probe twice."""
    clock = [0.0]
    calls = []

    def fake(shape, dim, device, steps, warmup):
        calls.append((shape["job"], shape["n_probe"]))
        clock[0] += 10.0
        return {"seconds_per_step": 0.01 + 1e-10 * shape["flops"]}

    def parts_of(job, flops):
        return [E.Part(E.probe("sweep", {"arch": "transformer", "model": "m", "task": "t", "job": job, "n_probe": i,
                                         "flops": flops * (i + 1), "runs": 4}, "runs"),
                       steps=10, runs=4, flops_per_step=flops * (i + 1)) for i in range(10)]

    jobs = {"a": parts_of("a", 2e8), "b": parts_of("b", 1e8)}
    monkeypatch.setattr(E, "cost_model", lambda node: lambda node, results: E.Cost(parts=jobs[node.settings["grid"]]))
    monkeypatch.setattr(E.Prober, "startup", lambda self: 0.0)
    logs = []

    def prober(budget):
        p = E.Prober("cpu", tmp_path / "c.json", probes={"sweep": fake}, max_parts=4, budget=budget, log=logs.append)
        p.clock = lambda: clock[0]
        p.steps = 30  # (30 planted steps of 0.01 s or more: timed once, long enough)
        return p

    def nodes():
        return [_node("templates_sweep", {"grid": g}) for g in ("a", "b")]

    def exact(job):
        return pytest.approx(sum(10 * (0.01 + 1e-10 * p.flops_per_step) for p in jobs[job]))

    short = prober(35.0)
    a, b = E.estimate(nodes(), short, {"scale": "paper"}, str(tmp_path / "results"))
    assert calls == [("a", 0), ("a", 9), ("b", 0), ("b", 9)]  # the first round, then the budget was spent
    assert short.spent == 40.0 and short.skipped > 0 and short.measured == 4
    for node, job in ((a, "a"), (b, "b")):
        assert node.seconds == exact(job)
        assert "8 of 10 parts interpolated from 2 probes" in node.source
    assert sum("probe budget of 35 s spent" in m for m in logs) == 1  # said once
    # a budget spent before a job's first round: its parts say why, and are not cached
    calls.clear()
    clock[0] = 0.0
    (tmp_path / "c.json").unlink()
    tight = prober(15.0)
    a, b = E.estimate(nodes(), tight, {"scale": "paper"}, str(tmp_path / "results"))
    assert calls == [("a", 0), ("a", 9)] and a.seconds == exact("a")
    assert b.seconds is None and "probe budget spent (--probe-budget 15 s)" in b.source
    assert len(json.loads((tmp_path / "c.json").read_text())) == 2
    # no budget: the rest of each job's 4 representatives, nothing measured twice
    calls.clear()
    whole = prober(None)
    a, b = E.estimate(nodes(), whole, {"scale": "paper"}, str(tmp_path / "results"))
    assert calls == [("b", 0), ("b", 9), ("a", 3), ("a", 6), ("b", 3), ("b", 6)]  # first round, then the rest
    assert a.seconds == exact("a") and b.seconds == exact("b")
    assert "6 of 10 parts interpolated from 4 probes" in a.source


def test_another_devices_records_scaled_stand_in_for_probes_not_measured(tmp_path, monkeypatch):
    """--scale-from: two sweep jobs of 10 groups each, cached on device A (the CPU at 1 thread); device B (the same CPU
    keyed at 2 threads) runs every step in planted twice A's time. With a budget of 3 probes, B measures the
    calibration (the fastest, slowest and a middle step of A's, before any job's first round), and A's records
    times the ratio (exactly 2) stand in for the rest: every job gets B's exact time, each record says whose it
    is, and the stand-ins are not cached under B. A kind B never measured takes the ratio of every kind's probes."""
    clock = [0.0]
    calls = []

    def fake(factor, kind="sweep"):
        def run(shape, dim, device, steps, warmup):
            calls.append((shape["job"], shape["n_probe"]))
            clock[0] += 10.0
            return {"seconds_per_step": factor * (0.01 + 1e-10 * shape["flops"])}
        return run

    def parts_of(job, flops, kind="sweep"):
        return [E.Part(E.probe(kind, {"arch": "transformer", "model": "m", "task": "t", "job": job, "n_probe": i,
                                      "flops": flops * (i + 1), "runs": 4}, "runs"),
                       steps=10, runs=4, flops_per_step=flops * (i + 1)) for i in range(10)]

    jobs = {"a": parts_of("a", 2e8), "b": parts_of("b", 1e8), "c": parts_of("c", 1e8, kind="table1")}
    monkeypatch.setattr(E, "cost_model", lambda node: lambda node, results: E.Cost(parts=jobs[node.settings["grid"]]))
    monkeypatch.setattr(E.Prober, "startup", lambda self: 0.0)
    cache = tmp_path / "c.json"

    def prober(threads, factor, budget=None, scale_from=None):
        p = E.Prober("cpu", cache, probes={"sweep": fake(factor), "table1": fake(factor)}, max_parts=4, budget=budget,
                     threads=threads, scale_from=scale_from, log=lambda m: None)
        p.clock = lambda: clock[0]
        p.steps = 30
        return p

    def nodes(grids=("a", "b")):
        return [_node("templates_sweep", {"grid": g}) for g in grids]

    def exact(job, factor):
        return pytest.approx(sum(10 * factor * (0.01 + 1e-10 * p.flops_per_step) for p in jobs[job]))

    E.estimate(nodes(("a", "b", "c")), prober(1, 1.0), {"scale": "paper"}, str(tmp_path / "results"))
    a_label = E.device_name("cpu", 1)
    on_a = len(json.loads(cache.read_text()))
    calls.clear()
    b = prober(2, 2.0, budget=25.0, scale_from=a_label)
    timed = E.estimate(nodes(("a", "b")), b, {"scale": "paper"}, str(tmp_path / "results"))
    # the calibration: of job b's smallest step and job a's largest and a middle one (A's step times, sorted)
    assert len(calls) == 3 and ("b", 0) in calls and ("a", 9) in calls and b.skipped > 0
    for node, job in zip(timed, ("a", "b")):
        assert node.seconds == exact(job, 2.0)
    recs = [r for n in timed for r in n.per_step if r and r.get("scaled_from")]
    assert recs and all(r["ratio"] == pytest.approx(2.0) and a_label in r["note"] for r in recs)
    assert len(json.loads(cache.read_text())) == on_a + 3  # the calibration cached; the stand-ins not
    assert b.ratio_check() == {"sweep": (pytest.approx(2.0), 3, pytest.approx(0.0), pytest.approx(0.0))}
    line = E.scaled_line(timed, {"scale_from": a_label, "foreign_torch": b.torch, "ratios": b.ratio_check()})
    assert "`sweep` 2 (3 probes, leave-one-out error median 0%, largest 0%)" in line
    # a kind that B never measured (budget spent): the ratio of every kind's probes measured on both
    c = prober(2, 2.0, budget=0.0, scale_from=a_label)
    (job_c,) = E.estimate(nodes(("c",)), c, {"scale": "paper"}, str(tmp_path / "results"))
    assert job_c.seconds is None  # no pair of any kind among this estimate's probes yet: nothing to scale by
    c = prober(2, 2.0, budget=0.0, scale_from=a_label)
    _, job_c = E.estimate(nodes(("a", "c")), c, {"scale": "paper"}, str(tmp_path / "results"))
    assert job_c.seconds == exact("c", 2.0)
    assert all("2 probes of every kind" in r["note"] for r in job_c.per_step if r and r.get("scaled_from"))


def test_a_short_calibration_gives_every_kind_a_pair_before_any_kind_its_third(tmp_path, monkeypatch):
    """Calibration in turns: two kinds cached on device A, probes of 10 planted seconds, a budget for two: B measures
    one probe of each kind (its fastest on A), not two of the first kind, so both kinds scale by their own ratio."""
    clock, calls = [0.0], []

    def fake(factor):
        def run(shape, dim, device, steps, warmup):
            calls.append(shape["kind_"])
            clock[0] += 10.0
            return {"seconds_per_step": factor * 0.01 * (shape["i"] + 1)}
        return run

    parts = {g: [E.Part(E.probe(kind, {"kind_": kind, "i": i, "runs": 1}, "runs"), steps=10, runs=1)
                 for i in range(4)] for g, kind in (("a", "sweep"), ("b", "table1"))}
    monkeypatch.setattr(E, "cost_model", lambda node: lambda node, results: E.Cost(parts=parts[node.settings["grid"]]))
    monkeypatch.setattr(E.Prober, "startup", lambda self: 0.0)
    nodes = lambda: [_node("templates_sweep", {"grid": g}) for g in ("a", "b")]  # noqa: E731

    def prober(threads, factors, **kw):
        p = E.Prober("cpu", tmp_path / "c.json", probes={k: fake(f) for k, f in factors.items()}, threads=threads,
                     log=lambda m: None, **kw)
        p.clock, p.steps = (lambda: clock[0]), 60
        return p

    E.estimate(nodes(), prober(1, {"sweep": 1.0, "table1": 1.0}), {"scale": "paper"}, str(tmp_path / "r"))
    calls.clear()
    b = prober(2, {"sweep": 2.0, "table1": 3.0}, budget=15.0, scale_from=E.device_name("cpu", 1))
    a, t = E.estimate(nodes(), b, {"scale": "paper"}, str(tmp_path / "r"))
    assert calls == ["sweep", "table1"]
    assert b.ratio("sweep")[0] == pytest.approx(2.0) and b.ratio("table1")[0] == pytest.approx(3.0)
    assert a.seconds == pytest.approx(2.0 * 10 * 0.01 * 10) and t.seconds == pytest.approx(3.0 * 10 * 0.01 * 10)


def test_the_ratio_between_devices_is_a_median_checked_leave_one_out(tmp_path):
    """Prober.ratio is the median of a kind's own / foreign times, and ratio_check predicts each pair from the
    others' median: pairs 1, 2 and 3 give 2, and errors 1.5, 0 and 0.5 (median 0.5, largest 1.5)."""
    p = E.Prober("cpu", tmp_path / "c.json", probe=False)
    p.pairs = {"sweep": {"k1": 1.0, "k2": 2.0, "k3": 3.0}, "lm": {"k4": 4.0}}
    assert p.ratio("sweep") == (2.0, 3, "`sweep`") and p.ratio("features") == (2.5, 4, "every kind")
    assert p.ratio_check() == {"lm": (4.0, 1, None, None), "sweep": (2.0, 3, 0.5, 1.5)}


def test_scale_from_names_a_device_of_the_cache_and_of_the_same_class(tmp_path):
    """--scale-from with a device the cache lacks, or a GPU's records for a CPU estimate, stops naming why; the
    device itself under the same torch scales nothing."""
    own = E.Prober("cpu", tmp_path / "c.json", probes={"sweep": lambda *a: {"seconds_per_step": 1.0}})
    own.get("r", E.probe("sweep", {"runs": 1}, "runs"))
    cache = json.loads((tmp_path / "c.json").read_text())
    gpu = {k.replace(E.device_name("cpu", 1), "NVIDIA H200"): v for k, v in cache.items()}
    (tmp_path / "c.json").write_text(json.dumps({**cache, **gpu}))
    with pytest.raises(ValueError, match="no probe in .* was measured on 'NVIDIA H100 80GB HBM3'; its devices: .*NVIDIA H200"):
        E.Prober("cpu", tmp_path / "c.json", scale_from="NVIDIA H100 80GB HBM3")
    with pytest.raises(ValueError, match="a CPU estimate scales the records of another CPU only"):
        E.Prober("cpu", tmp_path / "c.json", scale_from="NVIDIA H200")
    same = E.Prober("cpu", tmp_path / "c.json", scale_from=E.device_name("cpu", 1), log=lambda m: None)
    assert same.scale_from is None


def test_the_limits_file_sizes_the_memory_of_a_job_that_got_no_time():
    """resources_table: a job with a time gets runtime and memory; one whose probe is missing still gets the memory
    its cost model gives (mem_mb = 1,000 MB + 2 x the peak formula, gpu_mem_mb = 800 MB + 2 x it), with no runtime and
    no seconds; a job without a cost model, or with neither a time nor a memory, gets nothing."""
    from featlearn.pipeline.sizing import resource_key

    def node(rule, seconds, memory, gpu=True):
        n = _node(rule, {"rule": rule})
        n.gpu, n.seconds = gpu, seconds
        n.cost = E.Cost([E.Part(None, 10, 1, memory_bytes=memory)])
        return n

    timed, untimed, cpu = node("timed", 120.0, 2**30), node("untimed", None, 3 * 2**30), node("cpu", None, 2**30, gpu=False)
    blank, unmodelled = node("blank", None, None), _node("unmodelled", {"rule": "unmodelled"})
    meta = {"device_name": "d", "date": "t", "configfiles": []}
    jobs = E.resources_table([timed, untimed, cpu, blank, unmodelled], meta)["jobs"]
    key = lambda n: resource_key(n.rule, json.dumps(n.settings, sort_keys=True))  # noqa: E731
    assert set(jobs) == {key(timed), key(untimed), key(cpu)}
    assert jobs[key(timed)] == {"job": "timed", "seconds": 120.0, "runtime": 15 + 6, "mem_mb": 1000 + 2048,
                                "gpu_mem_mb": 800 + 2048}
    assert jobs[key(untimed)] == {"job": "untimed", "mem_mb": 1000 + 6144, "gpu_mem_mb": 800 + 6144}
    assert jobs[key(cpu)] == {"job": "cpu", "mem_mb": 1000 + 2048}


def test_a_runs_measured_peak_memory_sizes_a_jobs_memory_where_the_formula_is_short(tmp_path):
    """resources_table: a job whose benchmark file is usable for its time (a run at this scale) gets mem_mb of at least
    1.25 x that run's peak resident memory (4,000 MB: 5,000, above the formula's 3,048); a file that is shown but not
    used (another scale's run) does not size it."""
    from featlearn.pipeline.sizing import resource_key

    bench = tmp_path / "job.tsv"
    bench.write_text("s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
                     "100.0\t0:01:40\t4000.0\t5000\t3900\t3950\t0\t0\t90\t95.0\n")

    def node(measured):
        n = _node("r", {"rule": "r"})
        n.gpu, n.seconds, n.benchmark, n.measured = False, 100.0, str(bench), measured
        n.cost = E.Cost([E.Part(None, 10, 1, memory_bytes=2**30)])
        return n

    meta = {"device_name": "d", "date": "t", "configfiles": []}
    key = resource_key("r", json.dumps({"rule": "r"}, sort_keys=True))
    assert E.resources_table([node(100.0)], meta)["jobs"][key]["mem_mb"] == 5000
    assert E.resources_table([node(None)], meta)["jobs"][key]["mem_mb"] == 1000 + 2048


@pytest.mark.parametrize("text", ['{"a": 1', "[1, 2]", "\udcff"])
def test_a_probe_cache_that_is_not_one_stops_the_estimate_naming_it_and_is_kept(tmp_path, capsys, text):
    """A cache cut short on its way back from a device, or not a cache at all, is reported by the command (exit 2, no
    traceback) and left as it was: its probes may be minutes of a device's time."""
    from featlearn.pipeline.cli import main

    cache = tmp_path / "probes.json"
    cache.write_bytes(text.encode("utf-8", "surrogateescape"))
    before = cache.read_bytes()
    assert main(["estimate", "--cache", str(cache), "--no-probe", "--out", str(tmp_path / "e.md"),
                 "--results", str(tmp_path / "results"), "--resources-out", ""]) == 2
    err = capsys.readouterr().err
    assert f"{cache} is not a probe cache" in err and "Traceback" not in err
    assert cache.read_bytes() == before
    assert E.read_cache(tmp_path / "none.json") == {}
