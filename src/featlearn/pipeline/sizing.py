"""Scheduler time limits (Snakemake ``runtime``, minutes) of the long language-model jobs, from their size.

A job's limit is the tokens it trains on, over a measured GPU throughput of its model, times a margin, plus
start-up: ``START + MARGIN x EVAL x tokens / (tokens per second)``. The throughputs were measured with
``python -m featlearn lm-bench`` at float32 on one NVIDIA H200 (JoMA and Scan and Snap WikiText-2 LMs, JoMA
WikiText-103) or H100 (the WikiText-103 vocabulary of Scan and Snap, GPT-2) and are listed in
``docs/performance.md``; ``EVAL`` is the share the evaluations added to the real WikiText-2 jobs there.
``MARGIN`` covers a slower GPU than those (e.g. an A100 or a V100 at about half to a third of the speed) and
a busy node. A job never gets less than its rule's fixed limit, which holds for the default scale on a CPU;
a paper-scale job run on CPUs needs its limit raised by hand (``--set-resources``). Stdlib only (PyYAML for a
SLURM partitions file).
"""

from __future__ import annotations

import functools
import math

START_MINUTES = 15
MARGIN = 3.0
EVAL = 1.1

# Training tokens of each dataset's train split: word-level with an end-of-line token per line (this
# project's preparation; WikiText-103 from Merity et al. 2016, Table 1, which counts the same way).
TRAIN_TOKENS = {"wikitext2": 2_088_628, "wikitext103": 103_227_021}
# Validation tokens, counted the same way: WikiText-103 shares WikiText-2's validation articles (Merity et al.
# 2016, Table 1: 217,646 tokens in both); the estimate sizes a whole-split evaluation by them without stats.json.
VALID_TOKENS = {"wikitext2": 217_646, "wikitext103": 217_646}
# Documented sizes of a classification dataset whose prepared files are absent (python -m featlearn estimate
# --assume-online: featlearn.features.cost sizes its jobs by them, the estimate its data jobs):
# splits and vocabulary as featlearn.data.registry expects them (AG News: Zhang, Zhao, LeCun 2015's 120,000 train
# rows less this project's 10,000 dev rows, 7,600 test, 4 classes), and the mean length in words of the title +
# description of the test split (37.7 over its 7,600 rows, measured with featlearn.data.parsers.read_ag_news_csv;
# the train split is assumed alike [D]). SST (phrases: sstwsub), IMDB: the train split's mean length in words and the
# vocabulary of this project's prepared files (featlearn.features.experiments.load_splits at the default settings,
# no cap; IMDB from the data mirror's rebuild, see docs/data.md), so an estimate on a machine without the data (a
# GPU machine without network access) still sizes their jobs. With ``max_len`` the mean is capped at it, an overestimate [D].
# ``length_quantiles``: the train split's lengths in words at LENGTH_QUANTILE_POINTS (per cent; the last per cent in
# tenths, where the long tail is), from the same prepared files, which the features cost model reads to draw the
# job's batches as the job draws them (featlearn.features.cost.step_lengths: a step is padded to its longest
# instance, and the longest of several length buckets with several seeds). AG News: those of its test split, measured
# as its mean length is (its train split is absent here; assumed alike [D]).
LENGTH_QUANTILE_POINTS = tuple(range(100)) + tuple(99 + k / 10 for k in range(1, 10)) + (100,)
DOCUMENTED_CLASSIFICATION = {
    "ag_news": {"mean_length": 37.7, "n_classes": 4, "length_quantiles": (
        11, 18, 19, 21, 22, 23, 24, 25, 26, 26, 26, 27, 28, 28, 28, 29, 29, 29, 30, 30, 30, 31, 31, 31, 31, 32, 32, 32, 32,
        33, 33, 33, 33, 34, 34, 34, 34, 34, 35, 35, 35, 35, 35, 36, 36, 36, 36, 37, 37, 37, 37, 37, 38, 38, 38, 38, 38,
        39, 39, 39, 39, 40, 40, 40, 40, 40, 41, 41, 41, 41, 42, 42, 42, 42, 43, 43, 43, 43, 44, 44, 44, 44, 45, 45, 46,
        46, 46, 47, 47, 48, 48, 49, 49, 50, 51, 52, 54, 57, 62, 69, 71, 72, 74, 75, 80, 83, 94, 105, 118, 137)},
    "sst": {"mean_length": 17.57, "n_classes": 2, "vocab": 16176, "length_quantiles": (
        1, 2, 3, 3, 4, 4, 5, 5, 5, 6, 6, 7, 7, 7, 8, 8, 8, 9, 9, 9, 9, 10, 10, 10, 11, 11, 11, 11, 12, 12, 12, 12, 13,
        13, 13, 13, 14, 14, 14, 14, 15, 15, 15, 15, 15, 16, 16, 16, 16, 17, 17, 17, 17, 18, 18, 18, 18, 19, 19, 19, 19,
        20, 20, 20, 20, 21, 21, 21, 21, 22, 22, 22, 23, 23, 23, 24, 24, 24, 25, 25, 25, 26, 26, 26, 27, 27, 27, 28, 28,
        29, 30, 30, 31, 31, 32, 33, 34, 36, 37, 40, 40, 41, 41, 42, 42, 43, 44, 45, 47, 48)},
    "sstwsub": {"mean_length": 7.17, "n_classes": 2, "vocab": 17226, "length_quantiles": (
        1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
        3, 3, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 7, 7, 7, 7, 8, 8, 8, 8, 9, 9, 9, 10,
        10, 10, 11, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15, 16, 16, 17, 18, 19, 19, 20, 21, 22, 24, 26, 28, 32, 32, 33,
        33, 34, 35, 36, 37, 38, 41, 48)},
    "imdb": {"mean_length": 235.35, "n_classes": 2, "vocab": 101706, "length_quantiles": (
        6, 42, 49, 54, 59, 64, 70, 75, 81, 86, 91, 96, 101, 105, 108, 111, 114, 116, 118, 120, 121, 123, 125, 126, 127,
        129, 130, 132, 133, 135, 136, 138, 139, 141, 143, 144, 146, 148, 150, 152, 154, 156, 158, 160, 162, 164, 167,
        169, 171, 174, 176, 179, 182, 185, 188, 191, 194, 197, 200, 204, 207, 211, 215, 218, 223, 227, 232, 237, 242,
        247, 252, 258, 264, 271, 278, 285, 292, 299, 306, 315, 324, 333, 344, 355, 365, 378, 391, 406, 422, 440, 459,
        480, 504, 534, 565, 601, 650, 711, 794, 922, 939, 956, 972, 984, 995, 1004, 1013, 1021, 1043, 2505)},
}


def length_quantiles(lengths: list[int]) -> tuple[int, ...]:
    """The lengths at LENGTH_QUANTILE_POINTS (the nearest rank)."""
    ordered, n = sorted(lengths), len(lengths)
    return tuple(ordered[min(n - 1, round(p / 100 * (n - 1)))] for p in LENGTH_QUANTILE_POINTS)


@functools.lru_cache(maxsize=64)  # the jobs of one dataset ask for the same lengths (a paper-scale split: 100k of them)
def lengths_from_quantiles(quantiles: tuple[int, ...], n: int) -> tuple[int, ...]:
    """``n`` lengths (sorted) with the given quantiles at LENGTH_QUANTILE_POINTS: the i-th at the (i + 1/2) / n
    quantile, interpolated linearly between the two points around it."""
    points, out = LENGTH_QUANTILE_POINTS, []
    j = 0
    for i in range(n):
        p = (i + 0.5) / n * 100
        while j + 2 < len(points) and points[j + 1] < p:
            j += 1
        f = (p - points[j]) / (points[j + 1] - points[j])
        out.append(max(1, round(quantiles[j] + (quantiles[j + 1] - quantiles[j]) * f)))
    return tuple(out)
# GPT-2 BPE tokens per word-level token, measured on WikiText-2 train (2,448,382 / 2,088,628), applied to both.
BPE_PER_WORD = 2_448_382 / 2_088_628

# Tokens per second, float32, one GPU (docs/performance.md): (model, layers, dataset) -> rate.
GPU_TOKENS_PER_S = {
    ("joma_lm", 1, "wikitext2"): 188_876, ("joma_lm", 1, "wikitext103"): 64_541,
    ("joma_lm", 2, "wikitext2"): 132_162, ("joma_lm", 2, "wikitext103"): 62_741,
    ("joma_lm", 5, "wikitext2"): 67_349, ("joma_lm", 5, "wikitext103"): 57_590,
    ("joma_lm", 10, "wikitext2"): 37_696, ("joma_lm", 10, "wikitext103"): 32_691,
    ("scan_snap_lm", 1, "wikitext2"): 212_052, ("scan_snap_lm", 3, "wikitext2"): 104_401,
    ("scan_snap_lm", 1, "wikitext103"): 70_029, ("scan_snap_lm", 3, "wikitext103"): 58_415,
    ("gpt2", 12, "wikitext2"): 27_306, ("gpt2", 12, "wikitext103"): 16_327,
}


def gpu_rate(model: str, layers: int, dataset: str) -> float:
    """The measured rate of the nearest measured depth of ``model`` on ``dataset`` at or above ``layers``
    (a deeper model is slower, so this errs towards a longer limit), else the deepest one measured."""
    depths = sorted(d for m, d, ds in GPU_TOKENS_PER_S if m == model and ds == dataset)
    if not depths:
        raise KeyError(f"no measured throughput for {model} on {dataset}")
    depth = next((d for d in depths if d >= layers), depths[-1])
    return GPU_TOKENS_PER_S[(model, depth, dataset)]


def lm_tokens(settings: dict, dataset: str, batch: int, seq: int, bpe: bool = False) -> int:
    """Tokens one run trains on: ``epochs`` passes over the train split, else ``iterations`` (or ``steps``)
    batches of ``batch`` x ``seq``."""
    if settings.get("epochs"):
        per_epoch = TRAIN_TOKENS[dataset] * (BPE_PER_WORD if bpe else 1.0)
        return int(settings["epochs"] * per_epoch)
    steps = settings.get("iterations") or settings.get("steps") or 0
    return int(steps) * batch * seq


def runtime_minutes(tokens: int, tokens_per_s: float, floor: int) -> int:
    """The time limit in minutes: the sized estimate, or ``floor`` when that is longer."""
    sized = START_MINUTES + math.ceil(MARGIN * EVAL * tokens / tokens_per_s / 60)
    return max(floor, sized)


# ------------------------------------------------------------------------------ from the estimate
# `python -m featlearn estimate` (featlearn.pipeline.estimate) measures each modelled job's time on the device it runs
# on and writes it, per job, to <results>/estimate/resources.json. Where that file has an entry for a job
# (same rule, same settings), the job's limits come from it: runtime START + MARGIN x the estimated seconds,
# memory MEM_BASE_MB + MEM_MARGIN x the estimated peak bytes [D: Python with PyTorch loaded takes about 0.5 GB;
# the peak formula counts parameters, optimiser state and saved activations only]. Never below the rule's own
# fixed limit.
ESTIMATE_RESOURCES = "estimate/resources.json"
MEM_BASE_MB = 1000
MEM_MARGIN = 2.0


def resource_key(rule: str, settings_json: str) -> str:
    """The key of a job in the estimate's resources file: its rule and a digest of its settings JSON (so an
    estimate made under another config does not size this job)."""
    import hashlib

    return f"{rule}:{hashlib.sha256(settings_json.encode()).hexdigest()[:16]}"


# GPU memory of a job that may share its GPU with others (``gpu_mem_mb``, what profiles/gpu packs by): the CUDA
# context and library workspaces of a PyTorch process [D: about 0.5 GB on recent drivers, rounded up], plus the
# peak: the peak PyTorch measured in the estimate's probe (``torch.cuda.max_memory_allocated``) times
# GPU_MEASURED_MARGIN (the caching allocator's fragmentation) where it was measured at the job's own shape, else
# MEM_MARGIN times the formula's peak.
GPU_CONTEXT_MB = 800
GPU_MEASURED_MARGIN = 1.25


# A job's peak resident memory measured by a run of it at the same scale (its benchmark file; the kernel's count, not
# a formula) sizes its mem_mb too, times RSS_MARGIN [D: peaks of one job in runs of the same code on the same
# machine differ by a few percent; the formula's mem_mb was below the measured peak for 3 of 72 default jobs on a
# 2-core AMD EPYC in fp32, by up to 1.27x: features imdb_mlp, 3,170 MB against 2,493, and the two GPT-2 WikiText
# jobs, 2,875 and 2,744 MB against 2,499; docs/estimate.md, "Scheduler limits from the estimate"].
RSS_MARGIN = 1.25


def estimated_limits(seconds: float | None, memory_bytes: float | None, cuda_peak_bytes: float | None = None,
                     gpu: bool = False, rss_mb: float | None = None) -> dict[str, int]:
    """Scheduler limits of one job from its estimate: ``runtime`` in minutes, ``mem_mb`` and, for a job that can
    use a GPU, ``gpu_mem_mb``; a value that was not estimated is left out. ``rss_mb``: the job's peak resident
    memory in a run at the same scale, a floor of ``mem_mb`` (times :data:`RSS_MARGIN`)."""
    out = {}
    if seconds is not None:
        out["runtime"] = START_MINUTES + math.ceil(MARGIN * seconds / 60)
    if memory_bytes is not None:
        out["mem_mb"] = MEM_BASE_MB + math.ceil(MEM_MARGIN * memory_bytes / 2**20)
    if rss_mb and math.isfinite(rss_mb):
        out["mem_mb"] = max(out.get("mem_mb", 0), math.ceil(RSS_MARGIN * rss_mb))
    if gpu:
        if cuda_peak_bytes:
            out["gpu_mem_mb"] = GPU_CONTEXT_MB + math.ceil(GPU_MEASURED_MARGIN * cuda_peak_bytes / 2**20)
        elif memory_bytes is not None:
            out["gpu_mem_mb"] = GPU_CONTEXT_MB + math.ceil(MEM_MARGIN * memory_bytes / 2**20)
    return out


def load_estimate(path: str) -> dict[str, dict]:
    """The per-job limits of the estimate's resources file (empty when there is none or it cannot be read)."""
    import json

    try:
        with open(path) as fh:
            return json.load(fh)["jobs"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def sized(table: dict[str, dict], rule: str, settings_json: str, key: str, floor: int) -> int:
    """``key`` (runtime or mem_mb) of a job: the estimate's value where the table has one for this job, never
    below ``floor`` (the rule's fixed limit)."""
    return max(floor, int(table.get(resource_key(rule, settings_json), {}).get(key, 0)))


def partition_runtime_cap(path, gpu: bool) -> int | None:
    """The longest ``max_runtime`` (minutes) of the partitions in the SLURM partitions file ``path`` that a job
    may run on (a GPU job only where ``max_gpu`` > 0); None without a file, or where a usable partition sets no
    limit."""
    if not path:
        return None
    import yaml

    with open(path) as fh:
        parts = (yaml.safe_load(fh) or {}).get("partitions", {})
    usable = [p for p in parts.values() if not gpu or int(p.get("max_gpu", 0)) > 0] or list(parts.values())
    limits = [p.get("max_runtime") for p in usable]
    if not limits or any(v is None for v in limits):
        return None
    return int(max(limits))


def gpu_memory(table: dict[str, dict], rule: str, settings_json: str, floor: int) -> int:
    """``gpu_mem_mb`` of a GPU job: the estimate's value where the table has one for this job (it may be below
    the host-memory floor: small models need little GPU memory), else ``floor`` (the rule's ``mem_mb``)."""
    value = table.get(resource_key(rule, settings_json), {}).get("gpu_mem_mb")
    return int(value) if value else floor
