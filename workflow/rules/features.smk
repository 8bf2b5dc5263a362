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
