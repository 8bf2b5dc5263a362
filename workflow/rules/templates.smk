# Paper `templates`: Boix-Adsera et al. 2023, "When can transformers reason with abstract symbols?".
# Models, hyperparameters, figure specs and claims follow the paper; where the paper is silent the
# source of a value (authors' code, or a decision of this project) is named next to it.
#
# Adding a figure is adding a rule, a module and a caption:
#   1. a compute rule (training/simulation) that writes tidy tables under results/templates/, with log,
#      benchmark, threads, resources and params code=code_hash("templates");
#   2. a rule fig_templates_<n> (localrule) that reads only those tables and writes
#      report_figure("templates/fig<n>", "templates", "templates_fig<n>.rst") plus other_formats("templates/fig<n>"), and
#      its claims to results/templates/claims/<n>.csv;
#   3. register both below, and a caption in workflow/report/.

PAPER_TARGETS["templates"] += []
PAPER_CLAIMS["templates"] += []

# ---- sweeps of small trainings (Figs. 2c, 3c, 5, 8-23, 25) ----

# One training job per figure grid (every curve's n trains all its variants x lrs x seeds at once), one
# plotting rule per figure, and one cheap job for the data and identity-scaling checks (claims 1-2).
TS = f"{RESULTS}/templates"
TS_CFG = config["templates"]["sweeps"]
TS_CODE = code_hash(
    "templates/sweep_experiments.py",
    "templates/sweep.py",
    "templates/models.py",
    "templates/tasks.py",
)
TS_PLOT = code_hash("templates/sweep_figures.py", "plotting.py", "claims.py")
# figure -> grid (training job); Fig. 23 is drawn from grid 17's runs. Figures with claims (claims 3-10).
TS_FIGURE_GRID = {
    **{g: g for g in ("2c", "3c", "5", *map(str, range(8, 23)), "25") if g != "23"},
    "23": "17",
}
TS_GRIDS = sorted(set(TS_FIGURE_GRID.values()))
TS_WITH_CLAIMS = ("2c", "3c", "5", "8", "17", "22", "23", "25")
TS_SHARED = {
    k: v for k, v in TS_CFG.items() if not k.startswith("fig") and k != "threads"
}
TS_SETTINGS = {
    grid: json.dumps({**TS_SHARED, f"fig{grid}": TS_CFG[f"fig{grid}"]}, sort_keys=True)
    for grid in TS_GRIDS
}
PAPER_TARGETS["templates"] += [
    f"{FIGURES}/templates/fig{fig}.png" for fig in TS_FIGURE_GRID
]
PAPER_CLAIMS["templates"] += [f"{TS}/claims/checks.csv"] + [
    f"{TS}/claims/{fig}.csv" for fig in TS_WITH_CLAIMS
]


rule templates_checks:
    output:
        table=f"{TS}/checks.csv",
        claims=f"{TS}/claims/checks.csv",
    log:
        f"{LOGS}/templates/checks.log",
    benchmark:
        f"{BENCH}/templates/checks.tsv"
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        scale=SCALE,
        code=TS_CODE + TS_PLOT,
    shell:
        "python -m featlearn templates-checks --out {output.table}"
        " --claims {output.claims} --scale {params.scale} > {log} 2>&1"


rule templates_sweep:
    output:
        f"{TS}/sweeps/fig{{grid}}_runs.csv",
    log:
        f"{LOGS}/templates/sweep_fig{{grid}}.log",
    benchmark:
        f"{BENCH}/templates/sweep_fig{{grid}}.tsv"
    wildcard_constraints:
        grid="|".join(TS_GRIDS),
    conda:
        ENV
    threads: TS_CFG["threads"]
    resources:
        mem_mb=4000,
        runtime=120,
        gpu=1 if config["device"] != "cpu" else 0,
    params:
        settings=lambda wildcards: TS_SETTINGS[wildcards.grid],
        device=config["device"],
        code=TS_CODE,
    shell:
        "python -m featlearn templates-sweep --figure {wildcards.grid}"
        " --settings {params.settings:q} --device {params.device} --threads {threads}"
        " --out {output} > {log} 2>&1"


# One plotting rule per figure, fig_templates_<figure> (e.g. `snakemake fig_templates_9`).
for _fig, _grid in TS_FIGURE_GRID.items():

    rule:
        name:
            f"fig_templates_{_fig}"
        input:
            f"{TS}/sweeps/fig{_grid}_runs.csv",
        output:
            png=report_figure(
                f"templates/fig{_fig}", "templates", f"templates_fig{_fig}.rst"
            ),
            other=other_formats(f"templates/fig{_fig}"),
            claims=[f"{TS}/claims/{_fig}.csv"] if _fig in TS_WITH_CLAIMS else [],
        log:
            f"{LOGS}/templates/fig{_fig}.log",
        localrule: True
        conda:
            ENV
        params:
            fig=_fig,
            scale=SCALE,
            dpi=config["report"]["dpi"],
            code=TS_PLOT,
            claims=lambda wildcards, output: (
                f"--claims {output.claims}" if output.claims else ""
            ),
        shell:
            "python -m featlearn templates-sweep-figure --figure {params.fig} --tables {input}"
            " --figures {output.png} {output.other} {params.claims}"
            " --scale {params.scale} --dpi {params.dpi} > {log} 2>&1"


# Throughput of the sweep engine against one-at-a-time training (not part of the `templates` target):
# `snakemake templates_bench` writes results/templates/bench.json and its benchmark file.
TB_CFG = config["templates"]["bench"]


rule templates_bench:
    output:
        f"{TS}/bench.json",
    log:
        f"{LOGS}/templates/bench.log",
    benchmark:
        f"{BENCH}/templates/bench.tsv"
    conda:
        ENV
    threads: TB_CFG["threads"]
    resources:
        mem_mb=4000,
        runtime=60,
        gpu=1 if config["device"] != "cpu" else 0,
    params:
        settings=json.dumps(
            {
                "task": {"name": "aba_abb"},
                "arch": "transformer",
                "model": TS_CFG["transformer"],
                "batch": TS_CFG["batch"],
                "device": config["device"],
                **{k: v for k, v in TB_CFG.items() if k != "threads"},
            },
            sort_keys=True,
        ),
        code=TS_CODE + code_hash("templates/bench.py"),
    shell:
        "python -m featlearn templates-bench --settings {params.settings:q}"
        " --threads {threads} --out {output} > {log} 2>&1"


# ---- kernel theory (Sec. 3) ----

# N matrices (Eq. 7), K_attn at beta = 0 and kernel ridge regression on unseen symbols: one cheap job.
TK = f"{RESULTS}/templates"
TK_CFG = config["templates"]["kernels"]
TK_CODE = code_hash("templates/kernels.py", "templates/tasks.py")
TK_PLOT = code_hash("templates/kernels_figures.py", "plotting.py", "claims.py")
PAPER_TARGETS["templates"] += [f"{FIGURES}/templates/kernels.png"]
PAPER_CLAIMS["templates"] += [f"{TK}/claims/kernels.csv"]


rule templates_kernels:
    output:
        n_matrix=f"{TK}/kernel_n_matrix.csv",
        beta0=f"{TK}/kernel_beta0.csv",
        krr=f"{TK}/kernel_krr.csv",
    log:
        f"{LOGS}/templates/kernels.log",
    benchmark:
        f"{BENCH}/templates/kernels.tsv"
    conda:
        ENV
    threads: TK_CFG["threads"]
    resources:
        mem_mb=2000,
        runtime=15,
    params:
        settings=json.dumps(
            {k: v for k, v in TK_CFG.items() if k != "threads"}, sort_keys=True
        ),
        code=TK_CODE,
    shell:
        "python -m featlearn templates-kernels --settings {params.settings:q}"
        " --threads {threads} --out {output.n_matrix} {output.beta0} {output.krr}"
        " > {log} 2>&1"


rule fig_templates_kernels:
    input:
        rules.templates_kernels.output.n_matrix,
        rules.templates_kernels.output.beta0,
        rules.templates_kernels.output.krr,
    output:
        png=report_figure("templates/kernels", "templates", "templates_kernels.rst"),
        other=other_formats("templates/kernels"),
        claims=f"{TK}/claims/kernels.csv",
    log:
        f"{LOGS}/templates/fig_kernels.log",
    localrule: True
    conda:
        ENV
    params:
        scale=SCALE,
        dpi=config["report"]["dpi"],
        code=TK_PLOT,
    shell:
        "python -m featlearn templates-kernels-figure --tables {input}"
        " --figures {output.png} {output.other} --claims {output.claims}"
        " --scale {params.scale} --dpi {params.dpi} > {log} 2>&1"


# ---- GPT-2 (Figs. 6, 7, 24) ----

from featlearn.templates.gpt2_checkpoints import available as gpt2_available

TG = f"{RESULTS}/templates"
TG_CFG = config["templates"]["gpt2"]
TG_LM_CODE = code_hash("templates/gpt2.py", "templates/gpt2_checkpoints.py")
TG_T5_CODE = code_hash(
    "templates/gpt2.py", "templates/gpt2_checkpoints.py", "templates/tasks.py"
)
TG_PLOT = code_hash("templates/gpt2_figures.py", "plotting.py", "claims.py")
TG_GPU = 1 if config["device"] != "cpu" else 0

# Fig. 6: GPT-2 from scratch on WikiText, one job per (dataset, variant).
TG_WIKI = TG_CFG["wikitext"]
TG_WIKI_DATASETS = [d for d in TG_WIKI["datasets"] if dataset_on(d)]
TG_WIKI_LOGS = [
    f"{TG}/gpt2_wikitext/{d}/{v}.csv"
    for d in TG_WIKI_DATASETS
    for v in ("vanilla", "identity")
]
if TG_WIKI_DATASETS:
    PAPER_TARGETS["templates"] += [f"{FIGURES}/templates/fig6.png", f"{TG}/fig6.md"]
    PAPER_CLAIMS["templates"] += [f"{TG}/claims/6.csv"]
else:
    SKIPPED["templates Fig. 6"] = (
        f"none of the WikiText datasets {TG_WIKI['datasets']} is available"
    )

# Figs. 7 and 24: public checkpoints that are cached or downloadable.
TG_PRE = TG_CFG["pretrained"]
TG_CKPTS, _tg_skipped = pretrained_checkpoints(
    TG_PRE, config["data"]["offline"], available=gpt2_available
)
if TG_PRE["enabled"] is False:
    _tg_skipped = ["templates.gpt2.pretrained.enabled is false"]
TG_FIG7 = [(m, r) for m, r in TG_CKPTS if m == TG_PRE["fig7_model"]][:1]
TG_T5 = f"{TG}/gpt2_t5/{{}}/{{}}_{{}}.csv"  # model, revision, init
if not TG_CKPTS:
    SKIPPED["templates Figs. 7, 24"] = (
        f"no GPT-2 checkpoint is usable: {_tg_skipped[0]}"
    )
else:
    PAPER_TARGETS["templates"] += [f"{FIGURES}/templates/fig24.png"]
    if _tg_skipped:
        SKIPPED["templates Fig. 24 checkpoints"] = (
            f"{len(_tg_skipped)} of {len(_tg_skipped) + len(TG_CKPTS)} GPT-2 checkpoints"
            f" left out; first: {_tg_skipped[0]}"
        )
if TG_FIG7:
    PAPER_TARGETS["templates"] += [f"{FIGURES}/templates/fig7.png"]
elif TG_CKPTS:
    SKIPPED["templates Fig. 7"] = (
        f"{TG_PRE['fig7_model']} is not among the usable GPT-2 checkpoints"
    )


rule templates_gpt2_wikitext:
    input:
        train=prepared("{dataset}", "train.pt"),
        valid=prepared("{dataset}", "valid.pt"),
        vocab=prepared("{dataset}", "vocab.json"),
    output:
        f"{TG}/gpt2_wikitext/{{dataset}}/{{variant}}.csv",
    log:
        f"{LOGS}/templates/gpt2_wikitext/{{dataset}}/{{variant}}.log",
    benchmark:
        f"{BENCH}/templates/gpt2_wikitext/{{dataset}}/{{variant}}.tsv"
    wildcard_constraints:
        dataset="wikitext2|wikitext103",
        variant="vanilla|identity",
    conda:
        ENV
    threads: TG_WIKI["threads"]
    resources:
        mem_mb=TG_WIKI["mem_mb"],
        runtime=120,
        gpu=TG_GPU,
    params:
        settings=json.dumps(
            {
                k: v
                for k, v in TG_WIKI.items()
                if k not in ("datasets", "threads", "mem_mb")
            },
            sort_keys=True,
        ),
        work_dir=lambda wc: f"{TG}/gpt2_wikitext/{wc.dataset}/{wc.variant}.resume",
        device=config["device"],
        code=TG_LM_CODE,
    shell:
        "python -m featlearn templates-gpt2 --experiment wikitext --variant {wildcards.variant}"
        " --settings {params.settings:q} --threads {threads} --device {params.device}"
        " --inputs {input.train} {input.valid} {input.vocab} --work-dir {params.work_dir}"
        " --out {output} > {log} 2>&1"


rule fig_templates_6:
    input:
        TG_WIKI_LOGS,
    output:
        png=report_figure("templates/fig6", "templates", "templates_fig6.rst"),
        other=other_formats("templates/fig6"),
        csv=f"{TG}/fig6.csv",
        md=report(
            f"{TG}/fig6.md",
            caption="../report/templates_fig6.rst",
            category="templates",
        ),
        claims=f"{TG}/claims/6.csv",
    log:
        f"{LOGS}/templates/fig6.log",
    localrule: True
    conda:
        ENV
    params:
        scale=SCALE,
        dpi=config["report"]["dpi"],
        code=TG_PLOT,
    shell:
        "python -m featlearn templates-gpt2-figure --figure 6 --tables {input}"
        " --figures {output.png} {output.other} {output.csv} {output.md}"
        " --claims {output.claims} --scale {params.scale} --dpi {params.dpi} > {log} 2>&1"


rule templates_gpt2_finetune:
    output:
        f"{TG}/gpt2_t5/{{model}}/{{revision}}_{{init}}.csv",
    log:
        f"{LOGS}/templates/gpt2_t5/{{model}}/{{revision}}_{{init}}.log",
    benchmark:
        f"{BENCH}/templates/gpt2_t5/{{model}}/{{revision}}_{{init}}.tsv"
    wildcard_constraints:
        model="gpt2|gpt2-medium|gpt2-large",
        revision=r"[A-Za-z0-9.-]+",
        init="pretrained|scratch",
    conda:
        ENV
    threads: TG_PRE["threads"]
    resources:
        mem_mb=TG_PRE["mem_mb"],
        runtime=240,
        gpu=TG_GPU,
    params:
        settings=lambda wc: json.dumps(
            {
                k: TG_PRE[k]
                for k in ("cache_dir", "n", "seeds", "lr", "batch", "epochs")
            }
            | {"revision": wc.revision, "offline": config["data"]["offline"]},
            sort_keys=True,
        ),
        device=config["device"],
        code=TG_T5_CODE,
    shell:
        "python -m featlearn templates-gpt2 --experiment finetune --model {wildcards.model}"
        " --init {wildcards.init} --settings {params.settings:q} --threads {threads}"
        " --device {params.device} --out {output} > {log} 2>&1"


rule templates_gpt2_heads:
    output:
        f"{TG}/gpt2_heads/{{model}}/{{revision}}.csv",
    log:
        f"{LOGS}/templates/gpt2_heads/{{model}}/{{revision}}.log",
    benchmark:
        f"{BENCH}/templates/gpt2_heads/{{model}}/{{revision}}.tsv"
    wildcard_constraints:
        model="gpt2|gpt2-medium|gpt2-large",
        revision=r"[A-Za-z0-9._-]+",
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=TG_PRE["mem_mb"],
        runtime=20,
    params:
        settings=lambda wc: json.dumps(
            TG_PRE["heads"]
            | {
                "cache_dir": TG_PRE["cache_dir"],
                "revision": wc.revision,
                "offline": config["data"]["offline"],
            },
            sort_keys=True,
        ),
        code=TG_T5_CODE,
    shell:
        "python -m featlearn templates-gpt2 --experiment heads --model {wildcards.model}"
        " --settings {params.settings:q} --out {output} > {log} 2>&1"


rule fig_templates_7:
    input:
        [TG_T5.format(m, r, i) for m, r in TG_FIG7 for i in ("pretrained", "scratch")],
        [f"{TG}/gpt2_heads/{m}/{r}.csv" for m, r in TG_FIG7],
    output:
        png=report_figure("templates/fig7", "templates", "templates_fig7.rst"),
        other=other_formats("templates/fig7"),
    log:
        f"{LOGS}/templates/fig7.log",
    localrule: True
    conda:
        ENV
    params:
        scale=SCALE,
        dpi=config["report"]["dpi"],
        code=TG_PLOT,
    shell:
        "python -m featlearn templates-gpt2-figure --figure 7 --tables {input}"
        " --figures {output.png} {output.other} --scale {params.scale} --dpi {params.dpi}"
        " > {log} 2>&1"


rule fig_templates_24:
    input:
        [TG_T5.format(m, r, "pretrained") for m, r in TG_CKPTS],
    output:
        png=report_figure("templates/fig24", "templates", "templates_fig24.rst"),
        other=other_formats("templates/fig24"),
    log:
        f"{LOGS}/templates/fig24.log",
    localrule: True
    conda:
        ENV
    params:
        scale=SCALE,
        dpi=config["report"]["dpi"],
        code=TG_PLOT,
    shell:
        "python -m featlearn templates-gpt2-figure --figure 24 --tables {input}"
        " --figures {output.png} {output.other} --scale {params.scale} --dpi {params.dpi}"
        " > {log} 2>&1"


rule templates:
    input:
        paper_outputs("templates"),
