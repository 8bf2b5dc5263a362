"""Training throughput of the project's language models at the sizes the configs train them.

``python -m featlearn lm-bench --scale paper --device cuda --dtype bfloat16 --out lm_bench.json`` builds
each model from random init (random token ids of its vocabulary: no data files), runs ``--warmup`` steps,
then times ``--steps`` training steps of forward + backward + optimiser step, each as the model's own
training does it (its optimiser and gradient clipping; left out: the features character GPT's learning-rate
schedule and the per-step ``loss.item()`` of the training loops, so the host never waits for the device
inside the timed loop), and reports one row per (model, dataset[, variant]):

- ``tokens_per_s`` = batch x sequence / ``seconds_per_step`` (wall clock over the timed steps, the device
  synchronised before and after; ``median_step_seconds`` from per-step CUDA events or clock readings);
- ``flops_per_token`` = 6 N + 6 n_layer T d_model, with N the non-embedding parameters and T the training
  sequence length (Kaplan et al. 2020: forward 2 N + 2 n_layer T d_model, backward twice the forward; the
  attention term counts the whole T x T score and mixing products, without halving for the causal mask).
  N counts every parameter that takes part in a matrix product per token: all parameters except the
  token and position embedding tables, plus the output layer (V x d) also where it is tied to the token
  embedding (the character GPT, GPT-2), since it is a V x d matrix product per token either way;
- ``achieved_tflops`` = flops_per_token x tokens_per_s, and ``mfu`` = achieved / ``peak_matmul_tflops``,
  the median throughput of a large square matrix product (2 n^3 FLOPs) in the same dtype on the same device.

Models: ``scan_snap_lm`` (the tutorial transformer of ``featlearn.lm`` with Scan and Snap's SGD, one row per
Fig. 7 variant: Fig. 10's runs are its 1-layer shape), ``features_word`` (the same transformer, features
Fig. 7's 2 layers and 2 heads, per dataset), ``features_char`` (the character GPT of features Fig. 5),
``templates_gpt2`` (transformers' GPT-2 with identity scalings, per dataset), ``joma_lm`` (the same
tutorial transformer with Adam, at each of JoMA Fig. 6's depths, per dataset).

``--dtype bfloat16`` runs forward and loss under ``torch.autocast`` (CUDA only; weights, gradients and
optimiser state stay float32). float32 matrix products follow ``torch.get_float32_matmul_precision()``
(PyTorch's default "highest": no TF32), as the project's training does; the row records it.
"""

from __future__ import annotations

import json
import statistics
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

import torch

from featlearn.lm.bench import Built, autocast, device_name, time_steps, timed, tutorial_lm

MODELS = ("scan_snap_lm", "joma_lm", "features_word", "features_char", "templates_gpt2")
SCALES = ("smoke", "default", "paper")
CONFIG_DIR = Path(__file__).resolve().parents[2] / "config"

# Vocabulary sizes of the prepared datasets, as ``featlearn.data.registry.PREPARED`` expects them: WikiText-2
# 33,278 and WikiText-103 267,735 word types with <eos> (Merity et al. 2016; pytorch/examples
# word_language_model's Dictionary), PTB 10,000 words (Mikolov's PTB release), Tiny Shakespeare 65 characters
# (nanoGPT's shakespeare_char). The templates GPT-2 trains on the word-level WikiText vocabulary, not GPT-2's
# 50,257 BPE tokens, as featlearn.templates.gpt2 builds it today.
WIKITEXT2_VOCAB = 33_278
WIKITEXT103_VOCAB = 267_735
PTB_VOCAB = 10_000
TINYSHAKESPEARE_VOCAB = 65
VOCAB = {"wikitext2": WIKITEXT2_VOCAB, "wikitext103": WIKITEXT103_VOCAB, "ptb": PTB_VOCAB,
         "tinyshakespeare": TINYSHAKESPEARE_VOCAB}

# Which templates GPT-2 variant is timed (``vanilla`` or ``identity``; both use eager attention).
GPT2_VARIANT = "identity"
PEAK_REPEATS = 7


# --------------------------------------------------------------------------------------- configuration


def load_config(scale: str, config_dir: str | Path = CONFIG_DIR) -> dict:
    """config.yaml, merged with smoke.yaml or paper.yaml for those scales."""
    from featlearn.pipeline.workflow import scale_config

    return scale_config(scale, config_dir)


@dataclass(frozen=True)
class Spec:
    """One model at one setting: ``settings`` are the keys its training reads (shape, dropout, optimiser)."""

    model: str
    label: str
    dataset: str
    settings: dict


def specs(config: dict, models=MODELS) -> list[Spec]:
    """The settings of every model the configs train (one per dataset, and per variant for scan_snap)."""
    from featlearn.features.registry import LM_CHAR_DATASET, lm_char_settings, lm_word_settings
    from featlearn.joma.registry import wikitext_settings
    from featlearn.scan_snap.registry import lm_runs

    out = []
    for model in models:
        if model == "scan_snap_lm":
            # Fig. 7's model variants (Fig. 10's runs are the 1-layer model at other learning rates)
            out += [Spec(model, f"{dataset} {name[len('fig7_'):]}", dataset, settings)
                    for name, (dataset, settings) in lm_runs(config["scan_snap"]).items() if name.startswith("fig7_")]
        elif model == "joma_lm":
            wiki = config["joma"]["wikitext"]
            common = wikitext_settings(wiki) | {"lr": wiki["fig6"]["lr"], "seed": wiki["seeds"][0]}
            out += [Spec(model, f"{d} {n}L", d, {**common, "n_layer": n})
                    for d in wiki["datasets"] for n in wiki["fig6"]["layers"]]
        elif model == "features_word":
            lm = config["features"]["lm"]
            out += [Spec(model, d, d, lm_word_settings(lm, d)) for d in lm["word"]["datasets"]]
        elif model == "features_char":
            out.append(Spec(model, LM_CHAR_DATASET, LM_CHAR_DATASET, lm_char_settings(config["features"]["lm"])))
        elif model == "templates_gpt2":
            wiki = config["templates"]["gpt2"]["wikitext"]
            out += [Spec(model, f"{d} {GPT2_VARIANT}", d, {**wiki, "variant": GPT2_VARIANT}) for d in wiki["datasets"]]
        else:
            raise ValueError(f"unknown model {model!r}; expected one of {MODELS}")
    return out


# --------------------------------------------------------------------------------------- models


def build(spec: Spec, vocab: int | None = None) -> Built:
    """The model, optimiser and loss of ``spec`` (vocabulary: ``VOCAB[spec.dataset]`` unless given), on the CPU:
    the tutorial transformer (:func:`featlearn.lm.bench.tutorial_lm`), the character GPT
    (:func:`featlearn.features.cost.char_gpt`) or GPT-2 (:func:`featlearn.templates.cost.gpt2_lm`)."""
    vocab = VOCAB[spec.dataset] if vocab is None else vocab
    torch.manual_seed(int(spec.settings.get("seed", 1)))
    if spec.model == "scan_snap_lm":
        from featlearn.scan_snap.wikitext import OPTIMIZER

        return tutorial_lm(spec.settings, vocab, OPTIMIZER)  # SGD with its own ffn_lr
    if spec.model == "features_word":
        from featlearn.features.lm import WORD_OPTIMIZER

        return tutorial_lm(spec.settings, vocab, WORD_OPTIMIZER)
    if spec.model == "joma_lm":
        from featlearn.joma.wikitext import OPTIMIZER

        return tutorial_lm(spec.settings, vocab, OPTIMIZER)
    if spec.model == "features_char":
        from featlearn.features.cost import char_gpt

        return char_gpt(spec.settings, vocab)
    if spec.model == "templates_gpt2":
        from featlearn.templates.cost import gpt2_lm

        return gpt2_lm(spec.settings, vocab)
    raise ValueError(f"unknown model {spec.model!r}; expected one of {MODELS}")


# --------------------------------------------------------------------------------------- timing


def matmul_peak(device: torch.device, dtype: torch.dtype, size: int, repeats: int = PEAK_REPEATS) -> float:
    """TFLOP/s of a size x size matrix product in ``dtype`` (median of ``repeats``, after two warm-up products)."""
    gen = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(size, size, device=device, dtype=dtype, generator=gen)
    b = torch.randn(size, size, device=device, dtype=dtype, generator=gen)
    for _ in range(2):
        a @ b
    seconds = statistics.median(timed(lambda: a @ b, repeats, device))
    return 2 * size**3 / seconds / 1e12


def benchmark(spec: Spec, device: str, dtype: torch.dtype = torch.float32, steps: int = 10, warmup: int = 3,
              vocab: int | None = None) -> dict:
    """Time ``steps`` training steps of ``spec`` after ``warmup`` ones; one result row (module docstring)."""
    return {"model": spec.model, "label": spec.label, "dataset": spec.dataset,
            **time_steps(build(spec, vocab), device, dtype, steps, warmup)}


def run_benchmark(models, scale: str, device: str, dtype: torch.dtype, steps: int, warmup: int,
                  peak_size: int | None = None, out: str | None = None, config_dir: str | Path = CONFIG_DIR) -> list[dict]:
    """Every (model, setting) of ``models`` at ``scale``, each row with the matmul peak and the model-FLOP
    utilisation; the rows are rewritten to ``out`` (JSON) after each model, so a killed run keeps its rows."""
    dev = torch.device(device)
    autocast(dev, dtype)  # refuse bfloat16 on the CPU before building anything
    peak_size = peak_size or (8192 if dev.type == "cuda" else 1024)
    peak = matmul_peak(dev, dtype, peak_size)
    say(f"{device_name(dev)} {str(dtype).replace('torch.', '')} matmul peak {peak:.2f} TFLOP/s (n = {peak_size})")
    rows = []
    for spec in specs(load_config(scale, config_dir), models):
        try:
            row = benchmark(spec, device, dtype, steps, warmup)
        except Exception as exc:  # one model's failure (out of memory above all) must not cost the others' rows
            traceback.print_exc()
            error = "out of memory" if isinstance(exc, torch.cuda.OutOfMemoryError) else type(exc).__name__
            row = {"model": spec.model, "label": spec.label, "dataset": spec.dataset, "device": str(dev),
                   "dtype": str(dtype).replace("torch.", ""), "error": f"{error}: {str(exc).splitlines()[0] if str(exc) else ''}"}
        row |= {"scale": scale, "peak_matmul_tflops": peak, "peak_matmul_size": peak_size}
        if "error" not in row:
            row["mfu"] = row["achieved_tflops"] / peak
            say(f"{spec.model} {spec.label}: {row['tokens_per_s']:.0f} tokens/s, {row['seconds_per_step'] * 1e3:.1f} ms/step, "
                f"{row['achieved_tflops']:.3f} TFLOP/s, MFU {row['mfu']:.1%}")
        else:
            say(f"{spec.model} {spec.label}: {row['error']}")
        rows.append(row)
        if dev.type == "cuda":
            torch.cuda.empty_cache()
        if out:
            from featlearn.io import write_text

            write_text(out, json.dumps(rows, indent=2) + "\n")
    return rows


def summary_table(rows: list[dict]) -> str:
    """A fixed-width text table of the rows."""
    head = f"{'model':<15} {'setting':<20} {'dtype':<9} {'params':>9} {'tokens/s':>11} {'ms/step':>9} {'TFLOP/s':>8} {'MFU':>6}"
    lines = [head]
    for r in rows:
        name = f"{r['model']:<15} {r['label']:<20} {r['dtype']:<9}"
        if "error" in r:
            lines.append(f"{name} {r['error']}")
            continue
        lines.append(f"{name} {r['parameters'] / 1e6:>8.2f}M {r['tokens_per_s']:>11.0f} {r['seconds_per_step'] * 1e3:>9.2f} "
                     f"{r['achieved_tflops']:>8.3f} {r['mfu']:>6.1%}")
    if rows:
        lines.append(f"matmul peak {rows[0]['peak_matmul_tflops']:.3g} TFLOP/s "
                     f"(n = {rows[0]['peak_matmul_size']}, {rows[0]['device']})")
    return "\n".join(lines)


def say(message: str) -> None:
    print(f"[lm-bench] {message}", file=sys.stderr, flush=True)


def register(sub) -> None:
    """``python -m featlearn lm-bench [--models ...] [--scale S] [--device D] [--dtype T] [--out JSON]``."""
    from featlearn.devices import resolve_device

    def run(args) -> None:
        torch.set_num_threads(args.threads)
        dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[args.dtype]
        rows = run_benchmark(args.models, args.scale, resolve_device(args.device), dtype, args.steps, args.warmup,
                             args.peak_size, args.out)
        print(summary_table(rows))
        if any("error" in r for r in rows):
            raise SystemExit(f"lm-bench: {sum('error' in r for r in rows)} of {len(rows)} models failed (rows with 'error')")

    p = sub.add_parser("lm-bench", help="training throughput (tokens/s, TFLOP/s, MFU) of the project's language models")
    p.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    p.add_argument("--scale", choices=SCALES, default="default", help="config.yaml, with smoke.yaml or paper.yaml merged in")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32", help="bfloat16: torch.autocast, CUDA only")
    p.add_argument("--steps", type=int, default=10, help="timed training steps per model")
    p.add_argument("--warmup", type=int, default=3, help="untimed training steps first")
    p.add_argument("--peak-size", type=int, default=None, help="matmul size of the peak (default 8192 on CUDA, 1024 on the CPU)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default=None, help="JSON file of the rows")
    p.set_defaults(func=run)
