"""What Scan and Snap computes, draws and checks: its compute jobs and figures (read by Snakemake and Python).

Figures 3, 8, 9 are the theory (Sec. 5); 4, 5, 6, 11, 12 the synthetic experiments (Sec. 6); 7 and 10 the
WikiText language models. Settings come from ``config["scan_snap"]`` only; a figure's settings are the part
of the config it reads, so that changing another part does not redraw it.
"""

from __future__ import annotations

from featlearn.lm import epoch_budget
from featlearn.pipeline.registry import CHECK, Figure, Job, PaperRegistry, Paths, Resources, dataset_unchecked
from featlearn.pipeline.sizing import gpu_rate, lm_tokens, runtime_minutes

PAPER = "scan_snap"
SYNTHETIC_CODE = tuple(
    f"scan_snap/{m}.py" for m in ("data", "model", "train", "metrics", "theory", "experiments")
) + ("seeding.py",)
LM_CODE = ("lm", "training.py", "scan_snap/wikitext.py")
PLOT_CODE = ("scan_snap/figures.py", "plotting.py", "pipeline/claims.py")
# The claims each figure checks (the claims functions of scan_snap/figures.py write exactly these).
CLAIM_IDS = {
    "generator": ("gen_freq",),
    "3": ("th_t0", "th_late_B", "th_lnln"),
    "4": ("1b", "2", "3a", "3b", "4a", "4b", "4c", "5a", "5b", "5c", "6a", "6b", "7", "8a", "8b"),
    "5": ("adam_subsets",),
    "6": ("9a", "9b", "10", "10b", "11a"),
    "7": ("wiki_freeze_*",),
    "8": ("th_h",),
    "10": ("wiki_entropy_lr_*", "wiki_converged_*"),
}
EXPERIMENTS = "featlearn.scan_snap.experiments"
FIGURES = "featlearn.scan_snap.figures"
COST = "featlearn.scan_snap.cost"  # the cost models of the estimate (python -m featlearn estimate)


# The settings every WikiText LM run shares, from config scan_snap.wikitext: the model and its training.
LM_KEYS = ("seed", "val_windows", "n_head", "d_model", "d_ff", "clip", "batch_size", "bptt", "eval_batch_size")


def lm_runs(cfg: dict) -> dict[str, tuple[str, dict]]:
    """Every WikiText LM run, by name: (its dataset, its settings). Fig. 7's model variants ``fig7_<name>`` on
    ``fig7.dataset``; Fig. 10's learning rates ``fig10_<dataset>_lr<lr>`` on each of ``fig10.datasets``."""
    wiki = cfg["wikitext"]
    # the CUDA graphs switch (scan_snap.wikitext.cuda_graphs) only when on: the settings, and the estimate's probes of
    # the runs, stay as they were without it
    common = {k: wiki[k] for k in LM_KEYS} | ({"cuda_graphs": True} if wiki["cuda_graphs"] else {})
    f7, f10 = wiki["fig7"], wiki["fig10"]
    budget7 = {k: f7[k] for k in ("iterations", "log_every", "checkpoint_every")}
    budget10 = {k: f10[k] for k in ("iterations", "log_every", "checkpoint_every")}
    return {
        **{f"fig7_{name}": (f7["dataset"], {**common, **v, **budget7}) for name, v in f7["variants"].items()},
        **{
            f"fig10_{dataset}_lr{lr:g}": (dataset, {**common, "n_layer": 1, "dropout": f10["dropout"], "lr": lr, **budget10,
                                                    **epoch_budget(f10, dataset)})
            for dataset in f10["datasets"]
            for lr in f10["lrs"]
        },
    }


def lm_variants(cfg: dict) -> dict[str, dict]:
    """Settings of every WikiText LM run (see :func:`lm_runs`)."""
    return {name: settings for name, (_, settings) in lm_runs(cfg).items()}


# The datasets of the paper's Fig. 10 (Scan and Snap Sec. 7: WikiText-2 and WikiText-103): a run without one lists its
# claims as unchecked.
FIG10_PAPER_DATASETS = ("wikitext2", "wikitext103")

# Why claims rest on fewer than 3 seeds (issue 37): claim id pattern -> why.
FEW_SEEDS = {
    "wiki_*": "one language model per variant or learning rate at every scale (scan_snap.lm's Figs. 7 and 10 have no "
              "seeds): a claim across runs reads one run each",
}

def registry(config: dict, paths: Paths, dataset_on) -> PaperRegistry:
    cfg = config[PAPER]
    out = lambda *parts: paths.paper(PAPER, *parts)  # noqa: E731

    def synthetic(name, experiment, outputs, stem, *, gpu=False, mem_mb=2000, runtime=20, threads=None, cost=None,
                  trains=True):
        return Job(
            name=f"scan_snap_{name}",
            paper=PAPER,
            run=f"{EXPERIMENTS}:{experiment}",
            outputs={k: out(v) for k, v in outputs.items()},
            # a training job's settings carry the paper's CUDA graphs switch (scan_snap.cuda_graphs)
            settings={**cfg[stem], "cuda_graphs": cfg["cuda_graphs"]} if trains else cfg[stem],
            stem=stem,
            code=SYNTHETIC_CODE,
            threads=cfg["threads"] if threads is None else threads,
            resources=Resources(mem_mb=mem_mb, runtime=runtime, gpu=gpu),
            cost=cost and f"{COST}:{cost}",
        )

    syn_small = synthetic("syn_small", "syn_small", {"steps": "syn_small_steps.csv", "composition": "syn_small_composition.csv"},
                          "syn_small", cost="syn_small_cost")
    adam = synthetic("adam", "adam", {"steps": "adam_steps.csv", "composition": "adam_composition.csv"}, "adam",
                     cost="adam_cost")
    # The 640-run sweep: one process, one vectorised training per query count.
    syn_medium = synthetic("syn_medium", "syn_medium", {"final": "syn_medium_final.csv", "recall": "syn_medium_recall.csv"},
                           "syn_medium", gpu=True, mem_mb=4000, runtime=60, cost="syn_medium_cost")
    generator = synthetic("generator", "generator_check", {"freq": "generator_freq.csv"}, "generator", runtime=10, threads=1,
                          trains=False)
    theory = synthetic("theory", "theory_tables",
                       {"snapping": "theory_snapping.csv", "decoder": "theory_decoder.csv", "t0": "theory_t0.csv"},
                       "theory", runtime=10, threads=1, trains=False)
    jobs = [generator, syn_small, adam, syn_medium, theory]

    def figure(fig_id, inputs, **kw):
        return Figure.of(PAPER, fig_id, FIGURES, inputs, PLOT_CODE, **kw)

    th = theory.outputs
    figures = [
        figure("generator", dict(generator.outputs), kind=CHECK, claim_ids=CLAIM_IDS["generator"]),
        figure("3", {"snapping": th["snapping"]}, settings={"M": cfg["theory"]["M"], "K": cfg["theory"]["K"]},
               claim_ids=CLAIM_IDS["3"]),
        figure("4", dict(syn_small.outputs), claim_ids=CLAIM_IDS["4"]),
        figure("5", dict(adam.outputs), claim_ids=CLAIM_IDS["5"]),
        figure("6", {"final": syn_medium.outputs["final"]}, claim_ids=CLAIM_IDS["6"]),
        figure("8", {"decoder": th["decoder"]}, claim_ids=CLAIM_IDS["8"]),
        # Fig. 9's one statement (B_n(t0) depends only on eta_Z/eta_Y) holds by construction of the formula:
        # a unit test, not a claim
        figure("9", {"t0": th["t0"]}, claims=False),
        figure("11", {"recall": syn_medium.outputs["recall"]}, claims=False),
        figure("12", {"recall": syn_medium.outputs["recall"]}, claims=False),
    ]

    # WikiText language models (Figs. 7, 10): one training job per run, each on its figure's dataset.
    wiki = cfg["wikitext"]
    f7, f10 = wiki["fig7"], wiki["fig10"]
    skipped = {}
    runs = {name: run for name, run in lm_runs(cfg).items() if dataset_on(run[0])}
    if runs:
        lm_out = lambda kind: out("lm", f"{{variant}}_{kind}.csv")  # noqa: E731
        files = (("train", "train.pt"), ("valid", "valid.pt"), ("vocab", "vocab.json"))
        jobs.append(
            Job(
                name="scan_snap_wikitext",
                paper=PAPER,
                run="featlearn.scan_snap.wikitext:run_variant",
                inputs=lambda wc: {k: paths.prepared(runs[wc.variant][0], f) for k, f in files},
                outputs={"log": lm_out("log"), "maps": lm_out("maps")},
                settings=lambda wc: runs[wc.variant][1],
                stem="wikitext_{variant}",
                code=LM_CODE,
                threads=cfg["threads"],
                # the time limit from the run's size and its model's measured GPU throughput (featlearn.pipeline.sizing),
                # never below 2 hours (enough for the default scale on a CPU)
                resources=Resources(mem_mb=6000, gpu=True, runtime=lambda wc: runtime_minutes(
                    lm_tokens(runs[wc.variant][1], runs[wc.variant][0], wiki["batch_size"], wiki["bptt"]),
                    gpu_rate("scan_snap_lm", int(runs[wc.variant][1]["n_layer"]), runs[wc.variant][0]), floor=120)),
                wildcards={"variant": "|".join(runs)},
                work_dir=lambda wc: out("lm", f"{wc.variant}.resume"),
                cost=f"{COST}:wikitext_cost",
                precision=wiki.get("precision"),
            )
        )
    if dataset_on(f7["dataset"]):
        figures.append(figure("7", {"maps": [out("lm", f"fig7_{v}_maps.csv") for v in f7["variants"]]},
                              settings={"variants": list(f7["variants"]), "map_steps": f7["map_steps"]},
                              claim_ids=CLAIM_IDS["7"]))
    else:
        skipped["scan_snap Fig. 7"] = f"dataset {f7['dataset']} is switched off"
    on10 = [d for d in f10["datasets"] if dataset_on(d)]
    if on10:
        figures.append(figure("10", {"logs": [out("lm", f"fig10_{d}_lr{lr:g}_log.csv") for d in on10 for lr in f10["lrs"]]},
                              settings={"datasets": on10, "lrs": f10["lrs"]}, claim_ids=CLAIM_IDS["10"]))
    for d in f10["datasets"]:
        if d not in on10:
            skipped[f"scan_snap Fig. 10 ({d})"] = f"dataset {d} is switched off"
    unchecked = dataset_unchecked("Fig. 10", CLAIM_IDS["10"], FIG10_PAPER_DATASETS, on10, f10["datasets"], dataset_on,
                                  sanity=("wiki_converged_*",))
    return PaperRegistry(PAPER, jobs=tuple(jobs), figures=tuple(figures), skipped=skipped, unchecked=unchecked,
                         few_seeds=FEW_SEEDS)
