"""What the templates paper computes, draws and checks: its compute jobs and figures (read by Snakemake and Python).

Sweeps of small trainings (Figs. 2c, 3c, 5, 8-23, 25; claims 1-10): one training job per grid, one figure per
figure id, and one cheap job for the data and identity-scaling checks (claims 1-2). Kernel theory (Sec. 3,
claim 11): one job and one figure. GPT-2 (Figs. 6, 7, 24; claim 12): WikiText training per (dataset,
variant), T5 fine-tuning and pretrained heads per checkpoint. ``templates_bench`` (throughput of the sweep
engine) is declared here too but is not part of the ``templates`` target (a job is a target only through a
figure that reads it).

Settings come from ``config["templates"]`` only. This module is stdlib only (Snakemake imports it at DAG time).
"""

from __future__ import annotations

from dataclasses import dataclass

from featlearn.data.registry import DATASETS
from featlearn.pipeline.registry import TABLE, Drawing, Figure, Job, PaperRegistry, Paths, Resources, dataset_unchecked
from featlearn.pipeline.sizing import gpu_rate, lm_tokens, runtime_minutes
from featlearn.templates.sweeps.grids import GRIDS as GRID_RECORDS
from featlearn.templates.sweeps.grids import SWEEP_FIGURES

PAPER = "templates"

# ---- the sweep figures and their grids: one record each, in sweeps/grids.py (stdlib only)
GRIDS = tuple(GRID_RECORDS)
# figure -> the grid (training job) its runs come from, in figure order; Fig. 23 is drawn from grid 17's runs
FIGURE_GRID = {fig: rec.grid for fig, rec in SWEEP_FIGURES.items()}
FIGURES = tuple(FIGURE_GRID)
# The claims each figure checks (the claims functions write exactly these; <dataset> and <task> are filled in
# by the run): the sweep figures' in their records (claims 3-10), and "checks" the templates_checks job
# (claims 1-2, sanity), "6" Fig. 6 (a figure and a table), "kernels" the kernel figure. Claim 7 is checked for
# k = 2 only (sweeps/figures.claims_23 says why not for k = 4); the kernel identities of claim 11 (11a-c) are
# unit tests, not claims.
CLAIM_IDS = {
    "checks": ("1-match", "1-alphabets", "1-heldout", "1-trivial", "2-identity", "2-parameters"),
    **{fig: rec.claim_ids for fig, rec in SWEEP_FIGURES.items() if rec.claim_ids},
    "kernels": ("11d_trans_*", "11e_krr_*"),
    "6": ("12_*",),
    "calibration": ("calib-vo_mult", "calib-kq_mult"),
}

SWEEP_CODE = ("templates/sweeps/experiments.py", "templates/sweeps/engine.py", "seeding.py", "templates/models.py",
              "templates/tasks.py")
SWEEP_PLOT = ("templates/sweeps/figures.py", "plotting.py", "pipeline/claims.py")
KERNEL_CODE = ("templates/kernels/theory.py", "templates/tasks.py")
KERNEL_PLOT = ("templates/kernels/figures.py", "plotting.py", "pipeline/claims.py")
LM_CODE = ("templates/gpt2/experiments.py", "templates/gpt2/checkpoints.py", "training.py")
T5_CODE = (*LM_CODE, "templates/tasks.py")
GPT2_PLOT = ("templates/gpt2/figures.py", "plotting.py", "pipeline/claims.py")
SWEEPS = "featlearn.templates.sweeps.experiments"
SWEEP_PLOTS = "featlearn.templates.sweeps.figures"
GPT2 = "featlearn.templates.gpt2.experiments"
GPT2_FIGURES = "featlearn.templates.gpt2.figures"
COST = "featlearn.templates.cost"  # the cost models of the estimate (python -m featlearn estimate)
WIKI_VARIANTS = ("vanilla", "identity")


@dataclass(frozen=True)
class NamedFigure(Figure):
    """A figure whose files are not named ``fig<id>``: the kernel figure writes ``kernels.png`` and logs to
    ``fig_kernels.log`` (``Figure.stem`` is always ``fig<id>`` for a figure)."""

    name: str = ""

    @property
    def stem(self) -> str:
        return self.name

    @property
    def log_stem(self) -> str:
        return f"fig_{self.name}"


@dataclass(frozen=True)
class TemplatesRegistry(PaperRegistry):
    """The claims table of ``templates_checks`` (claims 1-2, written by the job itself) comes first in
    ``claims.csv``, before the figures' claims (``PaperRegistry`` puts job claims last)."""

    def claim_tables(self, paths: Paths) -> list[str]:
        return list(self.job_claims) + [f.claims_file(paths) for f in self.figures if f.claims]


def config_schema(schema: dict) -> None:
    """Complete the config schema with one required ``templates.sweeps.fig<id>`` per grid record
    (sweeps/grids.py), described by its record: adding a sweep figure needs no schema edit."""
    sweeps = schema["properties"][PAPER]["properties"]["sweeps"]
    for grid, rec in GRID_RECORDS.items():
        what = f"; swept besides n and lr: {rec.axis}" if rec.axis else ""
        also = [f.id for f in SWEEP_FIGURES.values() if f.runs_from == grid]
        drawn = f" (also drawn as Fig. {', '.join(also)})" if also else ""
        sweeps["properties"].setdefault(f"fig{grid}", {"$ref": "#/$defs/templates_grid",
                                                       "description": f"Grid of {rec.title}{drawn}{what}."})
        if f"fig{grid}" not in sweeps["required"]:
            sweeps["required"].append(f"fig{grid}")


def sweep_settings(cfg: dict, grid: str) -> dict:
    """Settings of the training job of ``grid``: the shared sweep keys and the grid's own ``fig<grid>``."""
    sweeps = cfg["sweeps"]
    return {"grid": grid, "sweeps": {**shared_sweep_keys(sweeps), f"fig{grid}": sweeps[f"fig{grid}"]}}


def shared_sweep_keys(sweeps: dict) -> dict:
    """The keys of ``templates.sweeps`` every training job reads (not the grids, the calibration or threads; nor an
    unset ``max_group_gb`` or a ``flush_denormal`` that is off, so that a run without them has the settings, and the
    cached tables, of a run from before the keys existed)."""
    return {k: v for k, v in sweeps.items() if not k.startswith("fig") and k not in ("threads", "calibration")
            and not (k == "max_group_gb" and v is None) and not (k == "flush_denormal" and not v)}


def wikitext_logs(config: dict, paths: Paths, dataset_on) -> list[str]:
    """Fig. 6's inputs: one log per (available WikiText dataset, variant); none when the GPT-2 tokenizer it is
    configured to use is not available."""
    return [paths.paper(PAPER, "gpt2_wikitext", d, f"{v}.csv") for d in wiki_datasets(config, dataset_on)
            for v in WIKI_VARIANTS]


def wiki_datasets(config: dict, dataset_on) -> list[str]:
    """The WikiText datasets Fig. 6 runs on: those configured and available (none without the tokenizer it needs)."""
    wiki = config[PAPER]["gpt2"]["wikitext"]
    if wiki["tokenizer"] == "gpt2" and not dataset_on("gpt2"):
        return []
    return [d for d in wiki["datasets"] if dataset_on(d)]


# The datasets of the paper's Fig. 6 (a table of WikiText-2 and WikiText-103 perplexities): a run without one lists
# its claim on it as unchecked.
FIG6_PAPER_DATASETS = ("wikitext2", "wikitext103")


def pretrained(config: dict) -> tuple[list[tuple[str, str]], list[str]]:
    """The usable GPT-2 checkpoints (model, revision) of Figs. 7 and 24, and why the others are left out."""
    from featlearn.templates.gpt2.checkpoints import available
    from featlearn.pipeline.workflow import pretrained_checkpoints

    pre = config[PAPER]["gpt2"]["pretrained"]
    ckpts, skipped = pretrained_checkpoints(pre, config["data"]["offline"], available=available)
    if pre["enabled"] is False:
        skipped = ["templates.gpt2.pretrained.enabled is false"]
    return ckpts, skipped


# Why claims rest on fewer than 3 seeds at the default scale (issue 37): claim id pattern -> why. The paper's
# protocol is 5 seeds [P App. A], which config/paper.yaml runs.
FEW_SEEDS = {
    "12_*": "one GPT-2 per (dataset, variant) at every scale (templates.gpt2.wikitext): the paper's Fig. 6 is a table "
            "of one run each",
    "*": "the default scale [D] runs 2 of the paper's 5 seeds (templates.sweeps.seeds; Figs. 9-14 and 16: one), to keep "
         "the sweeps within the default DAG's 2-hour budget on 2 cores; all 5 at paper scale "
         "(config/paper.yaml)",
}

def registry(config: dict, paths: Paths, dataset_on) -> TemplatesRegistry:
    cfg = config[PAPER]
    out = lambda *parts: paths.paper(PAPER, *parts)  # noqa: E731
    sweeps = cfg["sweeps"]

    # ---- sweeps (Figs. 2c, 3c, 5, 8-23, 25)
    checks = Job(
        name="templates_checks",
        paper=PAPER,
        run="featlearn.templates.sweeps.checks:checks",
        outputs={"table": out("checks.csv"), "claims": out("claims", "checks.csv")},
        settings={"scale": config["scale"]},
        stem="checks",
        code=SWEEP_CODE + SWEEP_PLOT,
        threads=1,
        resources=Resources(mem_mb=2000, runtime=10),
    )
    runs = lambda grid: out("sweeps", f"fig{grid}_runs.csv")  # noqa: E731
    sweep = Job(
        name="templates_sweep",
        paper=PAPER,
        run=f"{SWEEPS}:sweep",
        outputs={"runs": runs("{grid}")},
        settings=lambda wc: sweep_settings(cfg, wc.grid),
        stem="sweep_fig{grid}",
        code=SWEEP_CODE,
        # finished groups are kept here until the table is written: a killed job trains only the rest
        work_dir=lambda wc: out("sweeps", f"fig{wc.grid}.resume"),
        threads=sweeps["threads"],
        resources=Resources(mem_mb=4000, runtime=120, gpu=True),
        wildcards={"grid": "|".join(sorted(set(FIGURE_GRID.values())))},
        cost=f"{COST}:sweep_cost",
    )
    figures = []
    for fig, rec in SWEEP_FIGURES.items():
        # the figure's id, and what its claims read from its grid's config (claim 10: Fig. 8's lrs and n)
        settings = {"figure": fig, **{k: sweeps[f"fig{rec.grid}"][k] for k in rec.claim_settings}}
        if rec.reads_calibration:
            settings["calibration_n"] = sweeps["calibration"]["n"]
        figures.append(
            Figure(
                paper=PAPER,
                id=fig,
                inputs={"runs": runs(rec.grid)},
                code=SWEEP_PLOT,
                draw=f"{SWEEP_PLOTS}:draw",
                claims=f"{SWEEP_PLOTS}:claims_{fig}" if rec.claim_ids else None,
                settings=settings,
                claim_ids=rec.claim_ids,
            )
        )

    # The identity multipliers kq_mult, vo_mult: a calibration grid and its figure, whose sanity checks say whether
    # the configured transformer.kq_mult and vo_mult are the values it chooses.
    calib = Job(
        name="templates_calibration",
        paper=PAPER,
        run=f"{SWEEPS}:calibrate",
        outputs={"runs": out("sweeps", "calibration_runs.csv")},
        settings={"sweeps": {**shared_sweep_keys(sweeps), "calibration": sweeps["calibration"]}},
        stem="calibration",
        code=SWEEP_CODE,
        work_dir=out("sweeps", "calibration.resume"),
        threads=sweeps["threads"],
        resources=Resources(mem_mb=4000, runtime=60, gpu=True),
        cost=f"{COST}:calibration_cost",
    )
    figures.append(
        NamedFigure(
            paper=PAPER,
            id="calibration",
            name="calibration",
            inputs=dict(calib.outputs),
            code=SWEEP_PLOT,
            draw=f"{SWEEP_PLOTS}:draw_calibration",
            claims=f"{SWEEP_PLOTS}:claims_calibration",
            settings={"configured": {k: sweeps["transformer"][k] for k in ("kq_mult", "vo_mult")}},
            claim_ids=CLAIM_IDS["calibration"],
        )
    )

    # Throughput of the sweep engine against one-at-a-time training (not part of the `templates` target):
    # `snakemake templates_bench` writes results/templates/bench.json and its benchmark file.
    bench_cfg = cfg["bench"]
    bench = Job(
        name="templates_bench",
        paper=PAPER,
        run="featlearn.templates.sweeps.bench:bench",
        outputs={"bench": out("bench.json")},
        settings={
            "task": {"name": "aba_abb"},
            "arch": "transformer",
            "model": sweeps["transformer"],
            **{k: sweeps[k] for k in ("batch", "eval_every", "n_val", "n_test")},
            **{k: v for k, v in bench_cfg.items() if k != "threads"},
        },
        stem="bench",
        code=SWEEP_CODE + ("templates/sweeps/bench.py",),
        threads=bench_cfg["threads"],
        resources=Resources(mem_mb=4000, runtime=60, gpu=True),
    )

    # ---- kernel theory (Sec. 3): N matrices (Eq. 7), K_attn at beta = 0 and kernel ridge regression
    kcfg = cfg["kernels"]
    kernels = Job(
        name="templates_kernels",
        paper=PAPER,
        run="featlearn.templates.kernels.theory:compute",
        outputs={"n_matrix": out("kernel_n_matrix.csv"), "beta0": out("kernel_beta0.csv"), "krr": out("kernel_krr.csv")},
        settings={k: v for k, v in kcfg.items() if k != "threads"},
        stem="kernels",
        code=KERNEL_CODE,
        threads=kcfg["threads"],
        resources=Resources(mem_mb=2000, runtime=15),
    )
    figures.append(
        NamedFigure(
            paper=PAPER,
            id="kernels",
            name="kernels",
            inputs=dict(kernels.outputs),
            code=KERNEL_PLOT,
            draw="featlearn.templates.kernels.figures:draw_kernels",
            claims="featlearn.templates.kernels.figures:claims_kernels",
            claim_ids=CLAIM_IDS["kernels"],
        )
    )

    # ---- GPT-2 (Figs. 6, 7, 24)
    gcfg = cfg["gpt2"]
    wiki, pre = gcfg["wikitext"], gcfg["pretrained"]
    offline = config["data"]["offline"]
    wiki_settings = {k: v for k, v in wiki.items() if k not in ("datasets", "threads", "mem_mb", "precision")}
    bpe_out = lambda split: out("gpt2_bpe", "{dataset}", f"{split}.pt")  # noqa: E731
    gpt2_files = {"encoder": paths.raw("gpt2", "encoder.json"), "merges": paths.raw("gpt2", "vocab.bpe")}
    bpe = Job(
        name="templates_gpt2_bpe",
        paper=PAPER,
        run=f"{GPT2}:bpe",
        inputs=lambda wc: {"raw": [paths.raw(wc.dataset, f.name) for f in DATASETS[wc.dataset].files], **gpt2_files},
        outputs={"train": bpe_out("train"), "valid": bpe_out("valid"), "stats": out("gpt2_bpe", "{dataset}", "stats.json")},
        settings=lambda wc: {"dataset": wc.dataset},
        stem="gpt2_bpe/{dataset}",
        code=("templates/gpt2/experiments.py", "data/prepare.py", "data/parsers.py"),
        threads=1,
        resources=Resources(mem_mb=lambda wc: 16000 if wc.dataset == "wikitext103" else 4000, runtime=60),
        wildcards={"dataset": "wikitext2|wikitext103"},
    )
    if wiki["tokenizer"] == "gpt2":  # GPT-2's BPE ids; the vocabulary size from its encoder.json
        wiki_inputs = {"train": bpe_out("train"), "valid": bpe_out("valid"), "vocab": gpt2_files["encoder"]}
    else:
        wiki_inputs = {k: paths.prepared("{dataset}", f)
                       for k, f in (("train", "train.pt"), ("valid", "valid.pt"), ("vocab", "vocab.json"))}
    wikitext = Job(
        name="templates_gpt2_wikitext",
        paper=PAPER,
        run=f"{GPT2}:wikitext",
        inputs=wiki_inputs,
        outputs={"log": out("gpt2_wikitext", "{dataset}", "{variant}.csv")},
        settings=lambda wc: {**wiki_settings, "variant": wc.variant},
        stem="gpt2_wikitext/{dataset}/{variant}",
        code=LM_CODE,
        threads=wiki["threads"],
        # the time limit from the run's size and GPT-2's measured GPU throughput (featlearn.pipeline.sizing), never
        # below 2 hours (the default scale's small GPT on a CPU)
        resources=Resources(mem_mb=wiki["mem_mb"], gpu=True, runtime=lambda wc: runtime_minutes(
            # `steps`, when set, wins over `epochs` (as in the training code)
            lm_tokens({**wiki_settings, "epochs": None} if wiki_settings.get("steps") else wiki_settings, wc.dataset,
                      wiki["batch"], wiki["block"], bpe=wiki["tokenizer"] == "gpt2"),
            gpu_rate("gpt2", wiki["n_layer"], wc.dataset), floor=120)),
        wildcards={"dataset": "wikitext2|wikitext103", "variant": "|".join(WIKI_VARIANTS)},
        work_dir=lambda wc: out("gpt2_wikitext", wc.dataset, f"{wc.variant}.resume"),
        cost=f"{COST}:wikitext_cost",
        precision=wiki.get("precision"),
    )
    t5 = lambda model, revision, init: out("gpt2_t5", model, f"{revision}_{init}.csv")  # noqa: E731
    heads_out = lambda model, revision: out("gpt2_heads", model, f"{revision}.csv")  # noqa: E731
    finetune = Job(
        name="templates_gpt2_finetune",
        paper=PAPER,
        run=f"{GPT2}:finetune",
        outputs={"table": t5("{model}", "{revision}", "{init}")},
        settings=lambda wc: {k: pre[k] for k in ("cache_dir", "n", "seeds", "lr", "batch", "epochs")}
        | {"revision": wc.revision, "offline": offline, "model": wc.model, "init": wc.init},
        stem="gpt2_t5/{model}/{revision}_{init}",
        code=T5_CODE,
        threads=pre["threads"],
        resources=Resources(mem_mb=pre["mem_mb"], runtime=240, gpu=True),
        wildcards={"model": "gpt2|gpt2-medium|gpt2-large", "revision": r"[A-Za-z0-9.-]+", "init": "pretrained|scratch"},
        cost=f"{COST}:finetune_cost",
    )
    heads = Job(
        name="templates_gpt2_heads",
        paper=PAPER,
        run=f"{GPT2}:heads",
        outputs={"table": heads_out("{model}", "{revision}")},
        settings=lambda wc: pre["heads"]
        | {"cache_dir": pre["cache_dir"], "revision": wc.revision, "offline": offline, "model": wc.model},
        stem="gpt2_heads/{model}/{revision}",
        code=T5_CODE,
        threads=1,
        resources=Resources(mem_mb=pre["mem_mb"], runtime=20),
        wildcards={"model": "gpt2|gpt2-medium|gpt2-large", "revision": r"[A-Za-z0-9._-]+"},
    )

    skipped = {}
    # Fig. 6 is a figure and a table at once (added last, so that its claims close claims.csv)
    wiki_logs = wikitext_logs(config, paths, dataset_on)
    if not wiki_logs:
        skipped["templates Fig. 6"] = (
            "GPT-2's BPE tokenizer files (data.datasets.gpt2) are not available; set templates.gpt2.wikitext.tokenizer "
            "to word for the word-level vocabulary" if wiki["tokenizer"] == "gpt2" and not dataset_on("gpt2")
            else f"none of the WikiText datasets {wiki['datasets']} is available")

    # Figs. 7 and 24: public checkpoints that are cached or downloadable.
    ckpts, left_out = pretrained(config)
    fig7 = [(m, r) for m, r in ckpts if m == pre["fig7_model"]][:1]
    if not ckpts:
        skipped["templates Figs. 7, 24"] = f"no GPT-2 checkpoint is usable: {left_out[0]}"
    else:
        figures.append(
            Figure(
                paper=PAPER,
                id="24",
                inputs={"finetune": [t5(m, r, "pretrained") for m, r in ckpts]},
                code=GPT2_PLOT,
                draw=f"{GPT2_FIGURES}:draw_24",
            )
        )
        if left_out:
            skipped["templates Fig. 24 checkpoints"] = (
                f"{len(left_out)} of {len(left_out) + len(ckpts)} GPT-2 checkpoints left out; first: {left_out[0]}"
            )
    if fig7:
        figures.append(
            Figure(
                paper=PAPER,
                id="7",
                inputs={
                    "finetune": [t5(m, r, i) for m, r in fig7 for i in ("pretrained", "scratch")],
                    "heads": [heads_out(m, r) for m, r in fig7],
                },
                code=GPT2_PLOT,
                draw=f"{GPT2_FIGURES}:draw_7",
            )
        )
    elif ckpts:
        skipped["templates Fig. 7"] = f"{pre['fig7_model']} is not among the usable GPT-2 checkpoints"
    if wiki_logs:
        figures.append(
            Figure(
                paper=PAPER,
                id="6",
                inputs={"logs": wiki_logs},
                code=GPT2_PLOT,
                draw=f"{GPT2_FIGURES}:draw_6",
                claims=f"{GPT2_FIGURES}:claims_6",
                claim_ids=CLAIM_IDS["6"],
                also=(Drawing(f"{GPT2_FIGURES}:table_6", "fig6", kind=TABLE),),
            )
        )

    return TemplatesRegistry(
        PAPER,
        jobs=(checks, sweep, calib, bench, kernels, bpe, wikitext, finetune, heads),
        figures=tuple(figures),
        skipped=skipped,
        job_claims=(checks.outputs["claims"],),
        few_seeds=FEW_SEEDS,
        # (a Fig. 6 that cannot run at all, e.g. without its tokenizer, has its claims listed by the workflow)
        unchecked=dataset_unchecked("Fig. 6", CLAIM_IDS["6"], FIG6_PAPER_DATASETS, wiki_datasets(config, dataset_on),
                                    wiki["datasets"], dataset_on) if wiki_logs else {},
    )
