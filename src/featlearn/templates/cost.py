"""The templates paper's cost models for ``python -m featlearn estimate`` (docs/estimate.md), named by its
registry's job records: a sweep or the calibration grid, the engine's groups of each curve (:func:`sweep_cost`,
:func:`calibration_cost`, probed by :func:`sweep_probe`), the fine-tuning of a public GPT-2 on template strings
(:func:`finetune_cost`, :func:`finetune_probe`) and the GPT-2 language model of Fig. 6 (:func:`wikitext_cost`,
:func:`wikitext_probe`; :func:`gpt2_lm` builds it as its training does, also for ``python -m featlearn lm-bench``).
Standard library only at import time."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import time

from featlearn.pipeline.estimate import Cost, Node, Part, lm_cost, probe, sync


# The architectures whose step cost grows with the vocabulary beyond the FLOPs: probed at the group's own n (its
# vocabulary), not at n = the minibatch. Measured on a CPU (1 thread, 4 runs, paper-scale Fig. 22 and 25 groups,
# 2026-12-02), a group of n 2,048 or 8,192 probed at its own n against at n 1,024: the one-hot MLP 1.40x and 3.62x
# (Adam updates its vocabulary x positions x hidden first layer every step, while its FLOPs per sample are
# hidden x positions), the RNN 1.04x and 1.27x, the LSTM 0.97x and 1.10x, the transformer 0.94-1.11x (its step is
# its body's FLOPs; its embedding tables are a few percent of the update). The transformer keeps the minibatch's n,
# trained over the alphabet of the group's n (its vocabulary: :func:`probe_alphabet`; docs/estimate.md).
OWN_VOCABULARY_ARCHS = ("mlp", "mlp_xxt", "rnn", "lstm")


def probe_n(group) -> int:
    """The n a group's probe trains at: its own for ``OWN_VOCABULARY_ARCHS``, else its minibatch's (n <= batch: the
    same)."""
    return group.n if group.arch in OWN_VOCABULARY_ARCHS else min(group.n, group.batch)


def probe_alphabet(group) -> int | None:
    """The training alphabet of a group's probe where it differs from the probe's n: a transformer group of n > batch
    is probed at n = batch over the alphabet of its own n, so that the embedding tables Adam updates every step are the
    job's (before 2026-12-07 they were those of n = batch: at the default scale a group of n 1,024 at batch 16 trained
    a step in 7.8 ms against its probe's 7.1 ms, and evaluated in 8.5 ms against 4.3 ms; at paper scale grid 3c's
    groups of n 262,144 of aba_abb have 262,346 tokens, 214 times their probes' 1,226). None: the probe's own n."""
    return group.n if probe_n(group) < group.n else None


def groups_cost(node: Node, curves: list) -> Cost:
    """The engine's groups (``expand_groups``) of each of a job's ``curves`` (name, settings); a group of R
    runs trains epochs x ceil(n / batch) steps. FLOPs per step = 6 x P_ne x samples x positions x R (P_ne: the
    non-embedding parameters of one run's model at the job's vocabulary; a sequence model applies them at each
    of the task's positions [D: upper bound for a readout on the last position only]; the MLPs' one-hot first
    layer counts hidden x inputs, as it is computed); parameters updated per step = R x P (Adam's dense update, the
    cost that grows with the vocabulary; P at the vocabulary of the n the group is probed at, :func:`probe_n`);
    memory = 4 B x R (6 P + 8 samples x positions x width + 4 samples x outputs), width the widest layer's output,
    outputs the vocabulary of a next-token task (its logits) or 1 (:func:`featlearn.templates.sweeps.engine.run_memory_bytes`,
    which also caps a group's runs where ``max_group_gb`` is set)."""
    from featlearn.templates.sweeps.engine import (expand_groups, group_vocab, group_work, model_size, run_memory_bytes,
                                                   step_flops)

    parts = []
    for _, settings in curves:
        for g in expand_groups({**settings, "progress": False}):
            R = len(g.runs)
            vocab = group_vocab(g)  # the job's vocabulary
            size = model_size(g, vocab)  # one run's model, counted on the meta device
            alphabet = probe_alphabet(g)
            shape = {"task": settings["task"], "arch": g.arch, "model": g.model, "variants": sorted({r.variant for r in g.runs}),
                     "runs": R, "batch": g.batch, "n_probe": probe_n(g), "trainable": list(g.trainable) if g.trainable else None,
                     **({"alphabet": alphabet} if alphabet else {}),
                     "dtype": str(g.dtype), "eval_every": g.eval_every, "n_val": g.n_val, "n_test": g.n_test,
                     # (absent when off: earlier probes stay valid). Not flush_denormal: a probe trains a few epochs
                     # from fresh parameters, which hold no denormal floats then, so it times the same step either way
                     # (and on a GPU the switch does nothing); one key for both keeps every cached probe valid
                     # (docs/estimate.md)
                     **({"cuda_graphs": True} if g.cuda_graphs else {})}
            flops = step_flops(g, size)
            # a group trains on one thread whatever the job's threads (engine.group_pool: a CPU job of N threads
            # trains N groups at once; Cost.workers)
            sweep = probe("sweep", shape, "runs", 1, f"{__name__}:sweep_probe")
            if alphabet:  # a record of before the alphabet (the committed GPU caches) answers where the shape's is missing
                before = {k: v for k, v in shape.items() if k != "alphabet"}
                sweep = dataclasses.replace(sweep, fallback_json=probe("sweep", before, "runs").shape_json)
            parts.append(Part(sweep,
                              g.epochs * g.steps_per_epoch, R, flops,
                              R * run_memory_bytes(g, vocab),
                              # what the probe updates (its vocabulary is the job's): the measure it is fitted on
                              updates_per_step=R * size.parameters,
                              work=group_work(g, size),  # a job of several workers takes its groups largest work first
                              # every eval_every epochs and at the last (engine._train_group); a forward pass of the
                              # validation and test samples, a third of a trained sample's FLOPs each
                              evals=g.epochs // g.eval_every + (g.epochs % g.eval_every > 0),
                              eval_flops=flops / (3 * min(g.n, g.batch)) * (g.n_val + g.n_test)))
    return Cost(parts, 0.0, "evaluation (validation every epoch, test where validation improves) timed by the probe "
                "apart from the steps, and added once per evaluating epoch (an upper bound: test at each)",
                "FLOPs = 6 P_ne x samples x positions x R per step (MLP: 6 P_ne x samples x R, first layer hidden x inputs); "
                "parameters updated = R x P per step; "
                "memory = 4 B x R (6P + 8 samples x positions x width + 4 samples x outputs) [D]",
                f"{len(parts)} groups", workers=max(1, node.threads))


def sweep_cost(node: Node, results: str = "results") -> Cost:
    """templates_sweep: the curves of the job's grid (``featlearn.templates.sweeps.experiments.figure_curves``)."""
    from featlearn.templates.sweeps.experiments import figure_curves

    return groups_cost(node, figure_curves(node.settings["grid"], node.settings["sweeps"]))


def calibration_cost(node: Node, results: str = "results") -> Cost:
    """templates_calibration: the calibration grid's curves (``featlearn.templates.sweeps.experiments.calibration_curves``)."""
    from featlearn.templates.sweeps.experiments import calibration_curves

    return groups_cost(node, calibration_curves(node.settings["sweeps"]))


# Epochs of a fresh group that a CPU probe trains untimed (at least; more where the warm-up asks): measured on a CPU
# (1 thread, 20 runs, paper-scale groups, 2026-12-07, docs/estimate.md), a fresh MLP group of n 8,192 in a fresh process
# takes 3.2x and 1.3x its later epochs' steps in its first and second epochs, whose Adam second moments are mostly exact
# zeros (PyTorch's CPU square root of zero is slow) and whose memory is touched for the first time; from the third epoch
# on its steps vary by a few per cent.
CPU_UNTIMED_EPOCHS = 2


def sweep_probe(shape: dict, dim_value: int, device: str, steps: int, warmup: int) -> dict:
    """One engine group of the job's shape (R = ``dim_value`` runs) at the shape's ``n_probe`` (:func:`probe_n`: an
    MLP's, RNN's or LSTM's own n, a transformer's minibatch), ``steps`` timed steps rounded up to whole epochs
    (``train_group``). The steps and the evaluations of the timed epochs are timed apart (``train_group``'s
    ``before_eval`` and ``on_epoch``): ``seconds_per_step`` is a training step alone, ``seconds_per_eval`` one
    evaluation (the validation set, and the test set where validation improved: a fresh group's early epochs, where it
    mostly does, so an upper bound for a job's later ones). The estimate adds a job's evaluations to its steps
    (``Part.evals``): a group of n > B trains ceil(n / B) steps an epoch and evaluates once, while the probe of a
    transformer at n = B evaluates after each of its one-step epochs. ``probe_steps_per_epoch`` says how the two
    shared the probe's epochs (what a record of before the split measured as one step).

    On a CPU the timed epochs come after at least ``CPU_UNTIMED_EPOCHS`` untimed epochs of the same group (``warmup``
    steps rounded up to epochs, where more), so that the probe times the group's later steps, not a fresh group's
    first ones (:data:`sweep_probe.cpu_method`, part of a CPU probe's cache key). On a GPU a group of ``warmup`` steps
    is trained first and a fresh group is timed, as before; its clock is read after a device synchronisation at both
    ends of each evaluation (the committed GPU probes keep their keys: their records, without ``seconds_per_eval``,
    hold a step and its epoch's evaluation in ``seconds_per_step``, as they were measured)."""
    from dataclasses import replace

    from featlearn.templates.sweeps.engine import RunSpec, expand_groups, train_group

    variants = shape["variants"]
    settings = {"task": shape["task"], "arch": shape["arch"], "model": shape["model"], "variants": variants,
                "n": [shape["n_probe"]], "lrs": [1e-3], "seeds": 1, "epochs": 1, "batch": shape["batch"], "max_group": 10**6,
                "trainable": shape["trainable"], "device": device, "eval_every": shape["eval_every"], "n_val": shape["n_val"],
                "n_test": shape["n_test"],
                "dtype": shape["dtype"].replace("torch.", ""), "progress": False,
                "cuda_graphs": shape.get("cuda_graphs", False)}  # captured steps replay after 3 eager ones: probe more steps
    import torch

    runs = [RunSpec(1 + i // len(variants), 1e-3, variants[i % len(variants)]) for i in range(dim_value)]
    group = replace(expand_groups(settings)[0], runs=runs, train_alphabet=shape.get("alphabet"))
    per_epoch = group.steps_per_epoch
    epochs = math.ceil(steps / per_epoch)
    untimed = math.ceil(warmup / per_epoch)
    cuda = str(device).startswith("cuda")
    evals: dict[int, float] = {}  # timed epoch -> the clock when its evaluation began
    ends: dict[int, float] = {}  # epoch -> the clock at its end

    def clock() -> float:
        sync(device)
        return time.perf_counter()

    def eval_begins(epoch: int) -> None:
        evals[epoch] = clock()

    def stamp(epoch: int) -> None:
        ends[epoch] = clock() if epoch in evals else time.perf_counter()

    def split(first: int, last: int, seconds: float) -> dict:
        """``seconds`` of the epochs after ``first`` up to ``last``, their evaluations and their steps apart."""
        timed = [e for e in evals if first < e <= last]
        eval_s = sum(ends[e] - evals[e] for e in timed)
        out = {"seconds_per_step": max(0.0, seconds - eval_s) / ((last - first) * per_epoch),
               "probe_steps_per_epoch": per_epoch, "evaluations_timed": len(timed)}
        if timed:
            out["seconds_per_eval"] = eval_s / len(timed)
        return out

    if str(device).split(":")[0] == "cpu":
        untimed = max(CPU_UNTIMED_EPOCHS, untimed)
        train_group(replace(group, epochs=untimed + epochs), on_epoch=stamp, before_eval=eval_begins)
        return split(untimed, untimed + epochs, ends[untimed + epochs] - ends[untimed])
    if cuda:  # the group's CUDA peak, to check the engine's memory formula (run_memory_bytes) against
        torch.cuda.reset_peak_memory_stats()
    if untimed:
        train_group(replace(group, epochs=untimed))
    out = split(0, epochs, train_group(replace(group, epochs=epochs), on_epoch=stamp, before_eval=eval_begins).seconds)
    if cuda:
        out["peak_memory_bytes"] = torch.cuda.max_memory_allocated()
    return out


# What a CPU sweep probe times (its cache key's "method", ``featlearn.pipeline.estimate.Prober.key``): CPU probes
# cached before it (a fresh group's first epochs after a warm-up group: 1.4-2.3x as long a step on the n 8,192 MLP
# groups; then a step with its epoch's evaluation, counted at every step of a job's epoch of n > B; then a transformer
# of n > B over the alphabet of n = B) are measured again.
sweep_probe.cpu_method = (f"after {CPU_UNTIMED_EPOCHS} untimed epochs of the same group; "
                          "steps and evaluations timed apart; a transformer over its job's alphabet")


def _gpt2_config(model: str, revision: str, cache_dir: str | None):
    """The architecture of a public GPT-2 checkpoint, from the Hugging Face cache only (as a dry run resolves it)."""
    from transformers import GPT2Config

    return GPT2Config.from_pretrained(model, revision=revision, cache_dir=cache_dir, local_files_only=True)


def gpt2_non_embedding(d: int, n_layer: int, d_ff: int | None = None) -> int:
    """Parameters of a GPT-2 body outside its embedding tables, plus the fine-tuning head Linear(d, 1): per block
    the attention c_attn (d x 3d + 3d) and c_proj (d^2 + d), the MLP (d x d_ff + d_ff, d_ff x d + d) and two
    layer norms (4 d); the final layer norm (2 d) [C: transformers' GPT2Model]."""
    d_ff = d_ff or 4 * d
    block = 3 * d * d + 3 * d + d * d + d + 2 * d * d_ff + d_ff + d + 4 * d
    return n_layer * block + 2 * d + d + 1


def finetune_cost(node: Node, results: str = "results") -> Cost:
    """templates_gpt2_finetune: one run per (n, seed), each ``epochs`` x ceil(n / batch) Adam steps on template
    strings (``featlearn.templates.gpt2.experiments.finetune_t5``); FLOPs per step = 6 x P_ne x B x length;
    memory as the LMs with no vocabulary output (a regression head)."""
    from featlearn.lm.cost import memory_bytes
    from featlearn.templates.tasks import aba_abb, make_datasets

    s = node.settings
    cfg = _gpt2_config(s["model"], s["revision"], s.get("cache_dir"))
    d, L, H = cfg.n_embd, cfg.n_layer, cfg.n_head
    task = aba_abb()
    parts = []
    for n in s["n"]:
        data = make_datasets(task, int(n), 1)
        V, T, B = data.vocab.size, task.length, min(int(s["batch"]), int(n))
        p_ne = gpt2_non_embedding(d, L, cfg.n_inner)
        P = p_ne + (cfg.vocab_size + cfg.n_positions + V) * d
        shape = {"config": {"n_embd": d, "n_layer": L, "n_head": H, "n_positions": cfg.n_positions, "n_inner": cfg.n_inner,
                            "vocab_size": cfg.vocab_size, "activation_function": cfg.activation_function},
                 "vocab": V, "length": T, "batch": B}
        steps = int(s["seeds"]) * int(s["epochs"]) * math.ceil(int(n) / int(s["batch"]))
        parts.append(Part(probe("gpt2_t5", shape, "batch", node.threads, f"{__name__}:finetune_probe"), steps, int(s["seeds"]),
                          6 * p_ne * B * T, memory_bytes(P, 2, B, T, L, d, cfg.n_inner or 4 * d, H, 0)))
    n_total = sum(int(n) for n in s["n"])
    share = (len(s["n"]) * 200 + n_total) / 3 / n_total
    return Cost(parts, share, "validation and test (100 each) and the train split forward after every epoch: an upper bound "
                "(test and train are evaluated only when validation improves) [D]",
                "FLOPs = 6 P_ne B T per step; memory = 4 B x [4 P + B T L (9d + 2 d_ff + 2 H T)]",
                f"{s['model']}@{s['revision']}: {L} layers, d {d}")


def finetune_probe(shape: dict, dim_value: int, device: str, steps: int, warmup: int) -> dict:
    """A GPT-2 body of the checkpoint's architecture (random init: the same cost) in ``TemplateGPT2``, trained with
    Adam and the MSE of ``finetune_t5`` on ``dim_value`` random template strings."""
    import torch
    from transformers import GPT2Config, GPT2Model

    from featlearn.templates.gpt2.experiments import TemplateGPT2

    cfg = GPT2Config(**shape["config"])
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = TemplateGPT2(GPT2Model(cfg), shape["vocab"]).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    x = torch.randint(shape["vocab"], (dim_value, shape["length"]), device=device)
    y = torch.randn(dim_value, device=device)

    def step() -> None:
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(warmup):
        step()
    sync(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    sync(device)
    return {"seconds_per_step": (time.perf_counter() - t0) / steps}


def gpt2_lm(settings: dict, vocab: int):
    """The GPT-2 LM of ``featlearn.templates.gpt2.experiments.train_wikitext`` (AdamW, no clipping), a
    :class:`featlearn.lm.bench.Built`."""

    from featlearn.lm.bench import Built
    from featlearn.templates.gpt2.experiments import build_lm, lm_loss, lm_optimizer, small_config

    s = settings
    config = small_config(vocab, s["n_layer"], s["n_embd"], s["n_head"], s["block"], s["dropout"])
    net = build_lm(config, s["variant"], s["seed"])
    opt = lm_optimizer(net, s)

    def loss(tokens):
        return lm_loss(net, tokens[:, :-1])  # blocks of `block` tokens predicting their tokens 2..block

    return Built(net, opt, loss, None, vocab, s["batch"], s["block"], s["n_layer"], s["n_embd"], net.lm_head.weight)


@functools.lru_cache(maxsize=None)
def _gpt2_size(settings_json: str, vocab: int):
    from featlearn.lm.bench import size_of

    s = json.loads(settings_json)
    return size_of(lambda: gpt2_lm(s, vocab), 4 * s["n_embd"], s["n_head"], 2)


def _gpt2_budget(s: dict, data: dict, size):
    """``steps``, or ``epochs`` x ⌊⌊train tokens / T⌋ / B⌋ AdamW steps; evaluations of ``val_blocks_log`` blocks at
    step 0, every ``eval_every`` steps and at the end, and a final one of ``val_blocks`` (null: all) blocks, each
    block forward 1/3 of a step per batch [D]."""
    from featlearn.lm.cost import LMBudget, evaluations

    B, T = size.batch, size.seq
    per_epoch = None if data["train"] is None else data["train"] // T // B
    if s.get("steps"):
        total = int(s["steps"])
    elif per_epoch is None:
        raise ValueError(f"epochs budget but no train size of {s.get('dataset')}")
    else:
        total = int(s["epochs"]) * per_epoch
    final = (data["valid"] // T) if s.get("val_blocks") is None and data["valid"] else (s.get("val_blocks") or 0)
    ev_blocks = evaluations(total, s["eval_every"]) * s["val_blocks_log"] + final
    return LMBudget(total, ev_blocks / B / 3, f"{ev_blocks} validation blocks forward (= 1/3 of a step per batch of {B}) [D]")


def wikitext_cost(node: Node, results: str = "results") -> Cost:
    """templates_gpt2_wikitext: GPT-2 (d_ff = 4 d, AdamW) on the word-level ids, or on GPT-2's BPE ids (their own
    sizes, GPT-2's vocabulary), probed as ``lm:templates_gpt2``."""
    bpe = node.settings.get("tokenizer") == "gpt2"
    extra = {}
    if bpe:
        from featlearn.pipeline.sizing import BPE_PER_WORD
        from featlearn.templates.gpt2.experiments import GPT2_VOCAB

        dataset = node.settings.get("dataset") or node.wildcards.get("dataset")
        extra = {"stats": f"{results}/templates/gpt2_bpe/{dataset}/stats.json", "tokens_per_word": BPE_PER_WORD,
                 "vocab": GPT2_VOCAB}
    return lm_cost(node, results, "templates_gpt2", lambda s, vocab: _gpt2_size(json.dumps(s, sort_keys=True), vocab),
                   _gpt2_budget, f"{__name__}:wikitext_probe", **extra)


def wikitext_probe(shape: dict, dim_value: int, device: str, steps: int, warmup: int) -> dict:
    """GPT-2 at the job's shape (batch ``dim_value``)."""
    import torch

    from featlearn.lm.bench import probe_steps
    from featlearn.lm.cost import probe_settings

    settings = probe_settings(shape, "batch", dim_value)
    torch.manual_seed(int(settings["seed"]))
    return probe_steps(gpt2_lm(settings, shape["vocab"]), device, steps, warmup)
