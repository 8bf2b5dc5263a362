"""The features paper's cost models for ``python -m featlearn estimate`` (docs/estimate.md), named by its registry's
job records: a classifier training job, every run of it in one batched model (:func:`train_cost`, probed by
:func:`train_probe`), the word LM of Fig. 7, the tutorial transformer of ``featlearn.lm`` trained with SGD
(:func:`lm_word_cost`, :func:`lm_word_probe`), and the character GPT of Fig. 5 (:func:`lm_char_cost`,
:func:`lm_char_probe`; :func:`char_gpt` builds it as its training does, also for ``python -m featlearn lm-bench``).
Standard library only at import time."""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

# the documented sizes of a classification dataset whose prepared files are absent
from featlearn.pipeline.sizing import DOCUMENTED_CLASSIFICATION as DOCUMENTED, length_quantiles, lengths_from_quantiles
from featlearn.pipeline.estimate import FLOAT32, Cost, Node, Part, lm_cost, probe


def documented_data(cfg: dict) -> dict | None:
    """A features training job's split sizes from its dataset's documented sizes (``DOCUMENTED`` and the
    data registry), subsampled as ``load_splits`` subsamples; None for a dataset without them."""
    from featlearn.data.registry import PREPARED

    name = cfg["dataset"]
    if name not in DOCUMENTED or not PREPARED[name].expected_sizes:
        return None
    train, dev, test = PREPARED[name].expected_sizes
    cap = int(cfg.get("max_train") or 0)
    n_train = min(train, cap) if cap > 0 else train
    n_eval = sum(min(n, int(cfg.get("max_eval") or 0)) if cfg.get("max_eval") else n for n in (dev, test))
    max_len = cfg["settings"].get("max_len") or 0
    mean = DOCUMENTED[name]["mean_length"] if not max_len else min(DOCUMENTED[name]["mean_length"], max_len)
    vocab = DOCUMENTED[name].get("vocab", PREPARED[name].expected_vocab)
    quantiles = DOCUMENTED[name].get("length_quantiles")
    if quantiles and max_len:
        quantiles = tuple(min(q, max_len) for q in quantiles)
    return {"n_train": n_train, "mean_length": mean, "eval_instances": n_eval, "vocab": vocab,
            "n_classes": DOCUMENTED[name]["n_classes"], "documented": True, "length_quantiles": quantiles}


def features_data(cfg: dict, results: str = "results") -> dict | None:
    """Sizes of a features training job's splits, as ``featlearn.features.experiments.load_splits`` reads them
    (train subsampled to ``max_train``, dev/test to ``max_eval``, tokens cut at ``max_len``): from the prepared
    files when they exist (the synthetic data are built), else the dataset's documented sizes
    (:func:`documented_data`), else None. Read once per dataset and subsample."""
    keys = ("dataset", "max_train", "max_eval", "subsample_seed", "synthetic")
    found = _features_data(json.dumps({k: cfg.get(k) for k in keys} | {"max_len": cfg["settings"].get("max_len")},
                                      sort_keys=True), results)
    return found if found is not None else documented_data(cfg)


@functools.lru_cache(maxsize=None)
def _features_data(cfg_json: str, results: str) -> dict | None:
    from featlearn.features.experiments import load_splits
    from featlearn.pipeline.registry import Paths

    cfg = json.loads(cfg_json)
    inputs = {}
    if cfg["dataset"] != "synthetic":
        paths = Paths(results)
        inputs = {s: paths.prepared(cfg["dataset"], f"{s}.tsv") for s in ("train", "dev", "test")} | {
            "vocab": paths.prepared(cfg["dataset"], "vocab.json")}
        if not all(Path(v).is_file() for v in inputs.values()):
            return None
    rows, vocab = load_splits(cfg, inputs)
    max_len = cfg["max_len"] or 0

    def lengths(split):
        return [max(1, min(len(t.split()), max_len) if max_len > 0 else len(t.split())) for _, t in rows.get(split, [])]

    train = lengths("train")
    labels = {y for r in rows.values() for y, _ in r}
    return {"n_train": len(train), "mean_length": sum(train) / max(len(train), 1),
            "length_quantiles": length_quantiles(train) if train else None,
            "eval_instances": len(lengths("dev")) + len(lengths("test")), "vocab": len(vocab),
            "n_classes": max(max(labels) + 1, 2)}


@functools.lru_cache(maxsize=32)
def step_lengths(lengths: tuple[int, ...], batch: int, pool: int, seeds: tuple[int, ...], graphs: bool) -> tuple[int, ...]:
    """The length every step of a job's first epoch pads its tokens to, as ``featlearn.features.train.train`` pads
    them: each distinct seed draws its own batches (``epoch_batches`` from that seed's data generator; their longest
    lengths by ``epoch_batch_maxima``), and a step pads the batches of all seeds together to their longest instance
    (with CUDA graphs, further to ``padded_length``). With several seeds that is the longest of several length
    buckets: on SSTwsub (mean 7.2 words, batch 64, pools of 50 batches) a step of one seed is 7.7 tokens long on
    average, one of three seeds about 14.7."""
    import torch

    from featlearn.features.train import epoch_batch_maxima, padded_length
    from featlearn.seeding import derived_seed

    lens = torch.tensor(lengths, dtype=torch.long)
    longest = torch.stack([epoch_batch_maxima(lens, batch, pool, torch.Generator().manual_seed(derived_seed(s, 11)))
                           for s in seeds]).amax(0).tolist()
    return tuple(padded_length(n) if graphs else n for n in longest)


def batches_per_epoch(n: int, batch: int, pool: int) -> int:
    """Minibatches of one epoch of ``featlearn.features.train.epoch_batches``: pools of ``pool x batch`` instances,
    each cut into batches of ``batch`` (the last one of a pool may be smaller)."""
    step = max(1, pool) * batch
    full, rest = divmod(n, step)
    return full * max(1, pool) + math.ceil(rest / batch)


def train_cost(node: Node, results: str = "results") -> Cost:
    """features_train: every activation x sigma_v x seed of the job in one batched model (R runs), epochs x
    minibatches steps. FLOPs per step = 6 x P_ne x batch x L x R (each non-embedding weight used once per token
    [D: an approximation of the per-kind models]), L the mean padded length of a step (:func:`step_lengths`);
    memory = 4 B x R (3 P + 8 batch x L_max x d), L_max the longest step."""
    import torch

    from featlearn.features.models import InitScales, init_params
    from featlearn.features.train import Settings, _spec

    cfg = node.settings
    data = features_data(cfg, results)
    if data is None:
        raise ValueError(f"prepared {cfg['dataset']} splits not found (the job's sizes come from them)")
    st = Settings.from_dict({**cfg["settings"], "device": "cpu"})
    R = len(cfg["activations"]) * len(cfg["sigma_v"]) * len(cfg["seeds"])
    spec = _spec(st, data["vocab"], 1 if data["n_classes"] == 2 else data["n_classes"])
    with torch.device("meta"):  # shapes only: nothing is drawn or allocated (an IMDB embedding table is 100k rows)
        params = init_params(spec, [1], [0.1], InitScales(st.sigma_e, st.sigma_w, st.sigma_h))
    P = sum(p.numel() for p in params.values())
    P_ne = sum(p.numel() for k, p in params.items() if k != "E")
    steps = st.epochs * batches_per_epoch(data["n_train"], st.batch, st.bucket_pool)
    # a step's length: its padded length as the job pads it, averaged over the first epoch's steps, drawn from the
    # train lengths' quantiles (the same from the prepared files and from the documented sizes, which keep those of
    # the same files, so a probe cached on a machine without the data serves one with it); without them the mean
    # length, which is lower
    if data.get("length_quantiles"):
        padded = step_lengths(lengths_from_quantiles(data["length_quantiles"], data["n_train"]), st.batch,
                              st.bucket_pool, tuple(sorted(set(cfg["seeds"]))), bool(st.cuda_graphs))
        mean_padded, L_max = sum(padded) / len(padded), max(padded)
        n_seeds = len(set(cfg["seeds"]))
        lengths_note = (f", padded per step to {mean_padded:.1f} on average (longest {L_max}; "
                        + (f"{n_seeds} seeds draw their own batches)" if n_seeds > 1 else "one seed)"))
    else:
        mean_padded, L_max = data["mean_length"], max(1, round(data["mean_length"]))
        lengths_note = " (a step at the mean length, not the job's longer padded one)"
    L = max(1, round(mean_padded))
    real = max(1, round(data["mean_length"]))
    slots = 2 if st.optimizer == "adam" else 1 if st.optimizer == "adagrad" else 0
    shape = {"kind": st.kind, "d": st.d, "ffn": st.ffn, "kernel": st.kernel, "sa_variant": st.sa_variant, "mv_bos": st.mv_bos,
             "optimizer": st.optimizer, "activations": list(cfg["activations"]), "sigma_v": len(cfg["sigma_v"]),
             "seeds": len(cfg["seeds"]), "runs": R, "batch": st.batch, "length": real,
             "vocab": data["vocab"], "n_classes": data["n_classes"], "dropout": st.dropout, "dtype": st.dtype, "ids": "zipf"}
    if L > real:  # (absent when the steps are not padded beyond the mean length: earlier probes stay valid)
        shape["padded_length"] = L
    if st.cuda_graphs:  # (absent from the shape when off: earlier probes stay valid)
        shape["cuda_graphs"] = True
    eval_share = data["eval_instances"] * (st.epochs + 1) / 3 / max(data["n_train"] * st.epochs, 1)
    return Cost([Part(probe("features", shape, "runs", node.threads, f"{__name__}:train_probe"), steps, R,
                      6 * P_ne * st.batch * L * R, FLOAT32 * R * ((2 + slots) * P + 8 * st.batch * L_max * st.d))],
                eval_share, f"dev + test ({data['eval_instances']} instances) forward after every epoch and at epoch 0 "
                "(1/3 of a training pass) [D]",
                "FLOPs = 6 P_ne B L R per step, L the mean padded length of a step; "
                "memory = 4 B x R ((2 + slots) P + 8 B L_max d), L_max the longest [D]",
                f"{data['n_train']} train instances of mean length {data['mean_length']:.1f}{lengths_note}, vocab {data['vocab']}"
                + (" (documented sizes: the prepared splits are absent)" if data.get("documented") else ""))


def zipf_ids(n: int, vocab: int, low: int, generator):
    """``n`` token ids in ``[low, vocab)`` drawn as words occur in text: the id of frequency rank r (the prepared
    vocabularies are sorted by frequency) with probability proportional to 1 / r (Zipf's law, exponent 1 [D])."""
    import torch

    weights = 1.0 / torch.arange(1, vocab - low + 1, dtype=torch.float64)
    return low + torch.multinomial(weights, n, replacement=True, generator=generator)


def train_probe(shape: dict, dim_value: int, device: str, steps: int, warmup: int) -> dict:
    """``featlearn.features.train.train`` of ``dim_value`` runs for one epoch over ``batch x steps`` random instances
    of the job's mean length in words, followed by pad tokens up to the length the job's steps are padded to on
    average (the shape's ``padded_length``, :func:`step_lengths`): a step computes over as many positions as the
    job's and updates as many embedding rows (the job's padded positions hold the pad token too). No dev/test split
    and no probe units: their share is the stated evaluation share.
    Their token ids follow Zipf's law (the shape's ``ids``, which keeps older probes out of the cache; uniform ids,
    the probe before, touch far more rows of the embedding table per step and made an SST MLP step 1.8x slower on a
    CPU than the job's own, on real text).
    The probe times trainings of ``w`` and ``w + steps`` steps and takes the difference, so that what a training
    pays once (building the model, allocating its state) is left out; w is at least 1, and at least 4 with
    ``cuda_graphs`` on a CUDA device, where a training runs 3 eager steps and captures the fourth, so that the timed
    steps are replays."""
    import torch

    from featlearn.cudagraphs import GraphedSteps, captured
    from featlearn.features.train import PAD_ID, Encoded, Probes, Run, Settings, train

    # the job's order, activations x sigma_v x seeds (``job_runs``): each distinct seed draws its own batches
    acts, n_sv, n_seeds = shape["activations"], shape["sigma_v"], shape["seeds"]
    runs = [Run(seed=1 + i % n_seeds, activation=acts[i // (n_sv * n_seeds) % len(acts)], sigma_v=0.1 * (1 + i // n_seeds % n_sv))
            for i in range(dim_value)]
    # what the shape leaves out does not change a step's cost: any learning rate and initial scale, no bucketing
    # (every instance is as long as the job's steps on average), no truncation, no evaluation batches (no dev or
    # test split)
    st = Settings(kind=shape["kind"], epochs=1, batch=shape["batch"], optimizer=shape["optimizer"], dropout=shape["dropout"],
                  d=shape["d"], kernel=shape["kernel"], ffn=shape["ffn"], sa_variant=shape["sa_variant"], mv_bos=shape["mv_bos"],
                  device=device, dtype=shape["dtype"], threads=0, lr=1e-3, sigma_e=1.0, sigma_w=1.0, sigma_h=1.0,
                  bucket_pool=0, max_len=0, eval_batch=shape["batch"], cuda_graphs=shape.get("cuda_graphs", False))
    gen = torch.Generator().manual_seed(0)

    def split(n: int) -> dict:
        L, padded = shape["length"], shape.get("padded_length", shape["length"])
        ids = zipf_ids(n * L, shape["vocab"], 2, gen).view(n, L)
        ids = torch.cat([ids, torch.full((n, padded - L), PAD_ID)], 1).reshape(-1)
        return {"train": Encoded(ids, torch.arange(n + 1) * padded, torch.randint(shape["n_classes"], (n,), generator=gen))}

    def fit(n_steps: int) -> float:
        return train(st, runs, split(shape["batch"] * n_steps), shape["vocab"], Probes(), n_classes=shape["n_classes"],
                     progress=False).seconds

    # each training starts afresh (its parameters and optimiser state new, first touched in its first step), so a
    # step's cost is the difference of two trainings' times over the steps between them; with graphs the first w
    # steps include the capture
    w = max(warmup, GraphedSteps.WARMUP + 1) if captured(st.cuda_graphs, device) else max(warmup, 1)
    fit(w)  # first-use costs (kernels, libraries) out of both timings
    return {"seconds_per_step": max(0.0, fit(w + steps) - fit(w)) / steps}


def lm_word_cost(node: Node, results: str = "results") -> Cost:
    """features_lm_word: the tutorial transformer with SGD (:mod:`featlearn.lm.cost`), probed as ``lm:features_word``."""
    from featlearn.features.lm import WORD_OPTIMIZER
    from featlearn.lm.bench import tutorial_size
    from featlearn.lm.cost import tutorial_budget

    return lm_cost(node, results, "features_word", lambda s, vocab: tutorial_size(s, vocab, WORD_OPTIMIZER), tutorial_budget,
                   f"{__name__}:lm_word_probe")


def lm_word_probe(shape: dict, dim_value: int, device: str, steps: int, warmup: int) -> dict:
    from featlearn.features.lm import WORD_OPTIMIZER
    from featlearn.lm.bench import tutorial_probe

    return tutorial_probe(shape, dim_value, device, steps, warmup, WORD_OPTIMIZER)


def char_gpt(settings: dict, vocab: int):
    """The character GPT of ``featlearn.features.gpt`` as ``featlearn.features.lm.train_char_gpt`` trains it (AdamW,
    clipping), a :class:`featlearn.lm.bench.Built`, from the run's shape and optimiser settings."""
    from featlearn.features.gpt import GPT, GPTConfig
    from featlearn.features.lm import char_optimizer
    from featlearn.lm.bench import Built
    from featlearn.lm.loss import next_token_loss

    s = settings
    net = GPT(GPTConfig(vocab, s["block_size"], s["n_layer"], s["n_head"], s["n_embd"], s["dropout"]))

    def loss(tokens):
        return next_token_loss(net(tokens[:, :-1]), tokens[:, 1:])

    return Built(net, char_optimizer(net, s["lr"], s["weight_decay"], s["beta2"]), loss, s["grad_clip"], vocab,
                 s["batch_size"], s["block_size"], s["n_layer"], s["n_embd"], net.tok.weight)


@functools.lru_cache(maxsize=None)
def _char_size(settings_json: str, vocab: int):
    from featlearn.lm.bench import size_of

    s = json.loads(settings_json)
    return size_of(lambda: char_gpt(s, vocab), 4 * s["n_embd"], s["n_head"], 2)


def _char_budget(s: dict, data: dict, size):
    """``iterations`` AdamW steps; ``eval_batches`` batches forward (1/3 of a step each) at step 0, every
    ``eval_every`` steps and at the end [D]."""
    from featlearn.lm.cost import LMBudget, evaluations

    total = int(s["iterations"])
    n_ev = evaluations(total, s["eval_every"])
    return LMBudget(total, n_ev * s["eval_batches"] / 3,
                    f"{n_ev} evaluations x {s['eval_batches']} batches forward (1/3 of a step each) [D]")


def lm_char_cost(node: Node, results: str = "results") -> Cost:
    """features_lm_char: the character GPT (d_ff = 4 d, AdamW), probed as ``lm:features_char``."""
    return lm_cost(node, results, "features_char", lambda s, vocab: _char_size(json.dumps(s, sort_keys=True), vocab),
                   _char_budget, f"{__name__}:lm_char_probe")


def lm_char_probe(shape: dict, dim_value: int, device: str, steps: int, warmup: int) -> dict:
    """The character GPT at the job's shape (batch ``dim_value``); with the job's ``cuda_graphs`` switch (in the shape
    only when on) its step is captured as the job captures it, with the job's graph-safe AdamW (on a CUDA device)."""
    import torch

    from featlearn.cudagraphs import captured
    from featlearn.features.lm import char_optimizer
    from featlearn.lm.bench import probe_steps
    from featlearn.lm.cost import probe_settings

    settings = probe_settings(shape, "batch_size", dim_value)
    torch.manual_seed(int(settings["seed"]))
    built = char_gpt(settings, shape["vocab"])
    graphs = captured(settings.get("cuda_graphs", False), device)
    if graphs:  # the learning-rate tensor on the parameters' device: the model moved there first
        built.net.to(device)
        built.optimizer = char_optimizer(built.net, settings["lr"], settings["weight_decay"], settings["beta2"],
                                         graph_safe=True)
    return probe_steps(built, device, steps, warmup, cuda_graphs=graphs)
