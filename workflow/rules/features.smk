# Paper `features`: Sun, Li, Lu 2023, "Unraveling Feature Extraction Mechanisms in Neural Networks" (NTK view).
# Models, hyperparameters, figure specs and claims follow the paper; where the paper is silent the
# source of a value (authors' code, or a decision of this project) is named next to it.
#
# Adding a figure is adding a rule, a module and a caption:
#   1. a compute rule (training/simulation) that writes tidy tables under results/features/, with log,
#      benchmark, threads, resources and params code=code_hash("features");
#   2. a rule fig_features_<n> (localrule) that reads only those tables and writes
#      report_figure("features/fig<n>", "features", "features_fig<n>.rst") plus other_formats("features/fig<n>"), and
#      its claims to results/features/claims/<n>.csv;
#   3. register both below, and a caption in workflow/report/.

PAPER_TARGETS["features"] += []
PAPER_CLAIMS["features"] += []

# ---- classification models, extraction, theory (Figs. 2-4, 6, 8-13; Tables 3, 5, 6) ----
# Extraction (Table 6) per dataset; one training job per (dataset, model, optimiser) that trains every
# activation, sigma_v and seed it needs at once (job table: featlearn/features/jobs.py); the linear NTK
# flow on SST; figures and tables read only the tidy tables.
from featlearn.features import jobs as FJ

FT = f"{RESULTS}/features"
FT_CFG = config["features"]["cls"]
FT_EXTRACT_CODE = code_hash("features/extract.py")
FT_TRAIN_CODE = code_hash(
    "features/models.py",
    "features/train.py",
    "features/experiments.py",
    "features/extract.py",
)
FT_THEORY_CODE = code_hash(
    "features/theory.py",
    "features/simulate.py",
    "features/experiments.py",
    "features/extract.py",
)
FT_PLOT = code_hash("features/figures.py", "plotting.py", "claims.py")
FT_FIG_SETTINGS = json.dumps(
    {"sigma_v": FT_CFG["sigma_v"], "activations": FT_CFG["activations"]},
    sort_keys=True,
)
FT_ON = [d for d in FJ.DATASETS if dataset_on(d)]
FT_FIGURES_ON = [
    n for n, (needs, _) in FJ.FIGURES.items() if all(d in FT_ON for d in needs)
]
for _d in FJ.DATASETS:
    if _d not in FT_ON:
        SKIPPED[f"features {FJ.USES[_d]}"] = f"dataset {_d} is not available"

if FT_ON:
    PAPER_TARGETS["features"] += [f"{FT}/table{n}.md" for n in (6, 3, 5)]
    PAPER_CLAIMS["features"] += [f"{FT}/claims/table{n}.csv" for n in (6, 3, 5)]
PAPER_TARGETS["features"] += [f"{FIGURES}/features/fig{n}.png" for n in FT_FIGURES_ON]
PAPER_CLAIMS["features"] += [f"{FT}/claims/{n}.csv" for n in FT_FIGURES_ON]


rule features_extract:
    input:
        train=prepared("{dataset}", "train.tsv"),
    output:
        f"{FT}/extracted/{{dataset}}.csv",
    log:
        f"{LOGS}/features/extract_{{dataset}}.log",
    benchmark:
        f"{BENCH}/features/extract_{{dataset}}.tsv"
    wildcard_constraints:
        dataset="|".join(FJ.DATASETS),
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=4000,
        runtime=10,
    params:
        settings=json.dumps(FT_CFG["extract"], sort_keys=True),
        code=FT_EXTRACT_CODE,
    shell:
        "python -m featlearn features-compute --experiment extract --dataset {wildcards.dataset}"
        " --settings {params.settings:q} --inputs {input.train} --out {output} > {log} 2>&1"


rule features_train:
    input:
        lambda wc: FJ.job_inputs(wc.job, PREPARED_DIR, FT),
    output:
        scores=f"{FT}/train/{{job}}/scores.csv",
        metrics=f"{FT}/train/{{job}}/metrics.csv",
        summary=f"{FT}/train/{{job}}/summary.csv",
    log:
        f"{LOGS}/features/train_{{job}}.log",
    benchmark:
        f"{BENCH}/features/train_{{job}}.tsv"
    wildcard_constraints:
        job="|".join(FJ.JOBS),
    conda:
        ENV
    threads: FT_CFG["threads"]
    resources:
        mem_mb=lambda wc: 6000 if FJ.JOBS[wc.job][0] in ("imdb", "ag_news") else 3000,
        runtime=60,
        gpu=1 if config["device"] != "cpu" else 0,
    params:
        settings=lambda wc: json.dumps(
            FJ.job_settings(FT_CFG, wc.job, config["seed"], config["device"]),
            sort_keys=True,
        ),
        code=FT_TRAIN_CODE,
    shell:
        "python -m featlearn features-compute --experiment train --settings {params.settings:q}"
        " --inputs {input} --threads {threads}"
        " --out {output.scores} {output.metrics} {output.summary} > {log} 2>&1"


rule features_theory:
    input:
        train=prepared("sst", "train.tsv"),
        vocab=prepared("sst", "vocab.json"),
        extracted=f"{FT}/extracted/sst.csv",
    output:
        curves=f"{FT}/theory/curves.csv",
        scores=f"{FT}/theory/scores.csv",
    log:
        f"{LOGS}/features/theory.log",
    benchmark:
        f"{BENCH}/features/theory.tsv"
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=3000,
        runtime=30,
    params:
        settings=json.dumps(
            FT_CFG["theory"]
            | {k: FT_CFG["train"][k] for k in ("sigma_e", "sigma_w", "d")}
            | {
                "sigma_v": FT_CFG["sigma_v"],
                "seed": config["seed"],
                "subsample_seed": config["seed"],
                "max_train": FT_CFG["datasets"]["sst"]["max_train"],
            },
            sort_keys=True,
        ),
        code=FT_THEORY_CODE,
    shell:
        "python -m featlearn features-compute --experiment theory --settings {params.settings:q}"
        " --inputs {input.train} {input.vocab} {input.extracted}"
        " --out {output.curves} {output.scores} > {log} 2>&1"


rule table_features_6:
    input:
        extracted=[f"{FT}/extracted/{d}.csv" for d in FT_ON],
        stats=[prepared(d, "stats.json") for d in FT_ON],
    output:
        csv=f"{FT}/table6.csv",
        md=report(
            f"{FT}/table6.md",
            caption="../report/features_table6.rst",
            category="features",
        ),
        claims=f"{FT}/claims/table6.csv",
    log:
        f"{LOGS}/features/table6.log",
    localrule: True
    conda:
        ENV
    params:
        scale=SCALE,
        code=FT_PLOT,
    shell:
        "python -m featlearn features-figure --figure table6 --tables {input.extracted}"
        " {input.stats} --figures {output.csv} {output.md} --claims {output.claims}"
        " --scale {params.scale} > {log} 2>&1"


# Tables 3 and 5: accuracies next to the paper's (table_features_3, table_features_5).
for _n in ("3", "5"):

    rule:
        name:
            f"table_features_{_n}"
        input:
            FJ.table_inputs(_n, FT, FT_ON),
        output:
            csv=f"{FT}/table{_n}.csv",
            md=report(
                f"{FT}/table{_n}.md",
                caption=f"../report/features_table{_n}.rst",
                category="features",
            ),
            claims=f"{FT}/claims/table{_n}.csv",
        log:
            f"{LOGS}/features/table{_n}.log",
        localrule: True
        conda:
            ENV
        params:
            n=_n,
            settings=FT_FIG_SETTINGS,
            scale=SCALE,
            code=FT_PLOT,
        shell:
            "python -m featlearn features-figure --figure table{params.n} --tables {input}"
            " --figures {output.csv} {output.md} --claims {output.claims}"
            " --settings {params.settings:q} --scale {params.scale} > {log} 2>&1"


# One rule per figure: fig_features_2, fig_features_3, ...
for _n in FJ.FIGURES:

    rule:
        name:
            f"fig_features_{_n}"
        input:
            FJ.figure_inputs(_n, FT),
        output:
            png=report_figure(f"features/fig{_n}", "features", f"features_fig{_n}.rst"),
            other=other_formats(f"features/fig{_n}"),
            claims=f"{FT}/claims/{_n}.csv",
        log:
            f"{LOGS}/features/fig{_n}.log",
        localrule: True
        conda:
            ENV
        params:
            n=_n,
            settings=FT_FIG_SETTINGS,
            scale=SCALE,
            dpi=config["report"]["dpi"],
            code=FT_PLOT,
        shell:
            "python -m featlearn features-figure --figure {params.n} --tables {input}"
            " --figures {output.png} {output.other} --claims {output.claims}"
            " --settings {params.settings:q} --scale {params.scale} --dpi {params.dpi} > {log} 2>&1"


# ---- language models (Figs. 5, 7) ----
# One training job per dataset trains the LM, feeds each frequent token alone and writes the logits of
# its top-k / bottom-k co-occurring next tokens; the figure rules read only those tables.
FLM = f"{RESULTS}/features/lm"
FLM_CFG = config["features"]["lm"]
FLM_CLAIMS = f"{RESULTS}/features/claims"
FLM_WORD_CODE = code_hash("lm", "features/lm.py", "features/lm_cli.py")
FLM_CHAR_CODE = code_hash("features/gpt.py", "features/lm.py", "features/lm_cli.py")
FLM_PLOT = code_hash("features/lm_figures.py", "plotting.py", "claims.py")
FLM_WORD_DATASETS = [d for d in FLM_CFG["word"]["datasets"] if dataset_on(d)]
FLM_CHAR_DATASET = "tinyshakespeare"

if FLM_WORD_DATASETS:
    PAPER_TARGETS["features"] += [f"{FIGURES}/features/fig7.png"]
    PAPER_CLAIMS["features"] += [f"{FLM_CLAIMS}/7.csv"]
    for _d in sorted(set(FLM_CFG["word"]["datasets"]) - set(FLM_WORD_DATASETS)):
        SKIPPED[f"features Fig. 7 panel {_d}"] = f"dataset {_d} is not available"
else:
    SKIPPED["features Fig. 7"] = (
        f"none of the datasets {FLM_CFG['word']['datasets']} is available"
    )
if dataset_on(FLM_CHAR_DATASET):
    PAPER_TARGETS["features"] += [f"{FIGURES}/features/fig5.png"]
    PAPER_CLAIMS["features"] += [f"{FLM_CLAIMS}/5.csv"]
else:
    SKIPPED["features Fig. 5"] = f"dataset {FLM_CHAR_DATASET} is not available"


rule features_lm_word:
    input:
        train=prepared("{dataset}", "train.pt"),
        valid=prepared("{dataset}", "valid.pt"),
        vocab=prepared("{dataset}", "vocab.json"),
    output:
        log=f"{FLM}/{{dataset}}/log.csv",
        logits=f"{FLM}/{{dataset}}/logits.csv",
    log:
        f"{LOGS}/features/lm/{{dataset}}.log",
    benchmark:
        f"{BENCH}/features/lm/{{dataset}}.tsv"
    wildcard_constraints:
        dataset="ptb|wikitext2",
    conda:
        ENV
    threads: FLM_CFG["threads"]
    resources:
        mem_mb=6000,
        runtime=lambda wc: 30 + FLM_CFG["word"]["iterations"][wc.dataset] // 100,
        gpu=1 if config["device"] != "cpu" else 0,
    params:
        settings=lambda wc: json.dumps(
            {
                k: v
                for k, v in FLM_CFG["word"].items()
                if k not in ("datasets", "iterations")
            }
            | {
                "iterations": FLM_CFG["word"]["iterations"][wc.dataset],
                "n_frequent": FLM_CFG["n_frequent"],
                "seed": FLM_CFG["seed"],
            },
            sort_keys=True,
        ),
        work_dir=lambda wc: f"{FLM}/{wc.dataset}/resume",
        device=config["device"],
        code=FLM_WORD_CODE,
    shell:
        "python -m featlearn features-lm-compute --experiment word --dataset {wildcards.dataset}"
        " --settings {params.settings:q} --threads {threads} --device {params.device}"
        " --inputs {input.train} {input.valid} {input.vocab} --work-dir {params.work_dir}"
        " --out {output.log} {output.logits} > {log} 2>&1"


rule features_lm_char:
    input:
        train=prepared(FLM_CHAR_DATASET, "train.pt"),
        valid=prepared(FLM_CHAR_DATASET, "valid.pt"),
        vocab=prepared(FLM_CHAR_DATASET, "vocab.json"),
    output:
        log=f"{FLM}/{FLM_CHAR_DATASET}/log.csv",
        logits=f"{FLM}/{FLM_CHAR_DATASET}/logits.csv",
    log:
        f"{LOGS}/features/lm/{FLM_CHAR_DATASET}.log",
    benchmark:
        f"{BENCH}/features/lm/{FLM_CHAR_DATASET}.tsv"
    conda:
        ENV
    threads: FLM_CFG["threads"]
    resources:
        mem_mb=4000,
        runtime=30 + FLM_CFG["char"]["iterations"] // 100,
        gpu=1 if config["device"] != "cpu" else 0,
    params:
        settings=json.dumps(
            FLM_CFG["char"]
            | {"n_frequent": FLM_CFG["n_frequent"], "seed": FLM_CFG["seed"]},
            sort_keys=True,
        ),
        dataset=FLM_CHAR_DATASET,
        work_dir=f"{FLM}/{FLM_CHAR_DATASET}/resume",
        device=config["device"],
        code=FLM_CHAR_CODE,
    shell:
        "python -m featlearn features-lm-compute --experiment char --dataset {params.dataset}"
        " --settings {params.settings:q} --threads {threads} --device {params.device}"
        " --inputs {input.train} {input.valid} {input.vocab} --work-dir {params.work_dir}"
        " --out {output.log} {output.logits} > {log} 2>&1"


rule fig_features_7:
    input:
        [f"{FLM}/{d}/{t}.csv" for d in FLM_WORD_DATASETS for t in ("logits", "log")],
    output:
        png=report_figure("features/fig7", "features", "features_fig7.rst"),
        other=other_formats("features/fig7"),
        claims=f"{FLM_CLAIMS}/7.csv",
    log:
        f"{LOGS}/features/fig7.log",
    localrule: True
    conda:
        ENV
    params:
        scale=SCALE,
        dpi=config["report"]["dpi"],
        code=FLM_PLOT,
    shell:
        "python -m featlearn features-lm-figure --figure 7 --tables {input}"
        " --figures {output.png} {output.other} --claims {output.claims}"
        " --scale {params.scale} --dpi {params.dpi} > {log} 2>&1"


rule fig_features_5:
    input:
        rules.features_lm_char.output.logits,
        rules.features_lm_char.output.log,
    output:
        png=report_figure("features/fig5", "features", "features_fig5.rst"),
        other=other_formats("features/fig5"),
        claims=f"{FLM_CLAIMS}/5.csv",
    log:
        f"{LOGS}/features/fig5.log",
    localrule: True
    conda:
        ENV
    params:
        scale=SCALE,
        dpi=config["report"]["dpi"],
        code=FLM_PLOT,
    shell:
        "python -m featlearn features-lm-figure --figure 5 --tables {input}"
        " --figures {output.png} {output.other} --claims {output.claims}"
        " --scale {params.scale} --dpi {params.dpi} > {log} 2>&1"


rule features:
    input:
        paper_outputs("features"),
