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
# activation, sigma_v and seed it needs at once; the linear NTK flow on SST; figures read only tables.
FT = f"{RESULTS}/features"
FT_CFG = config["features"]["cls"]
FT_EXTRACT_CODE = code_hash("features/extract.py", "features/experiments.py")
FT_TRAIN_CODE = code_hash(
    "features/models.py", "features/train.py", "features/experiments.py"
)
FT_THEORY_CODE = code_hash("features/theory.py", "features/experiments.py")
FT_PLOT = code_hash("features/figures.py", "plotting.py", "claims.py")
FT_ACTS = FT_CFG["activations"]
FT_SV = FT_CFG["sigma_v"]
FT_SV1 = FT_SV[:1]  # setting I only (Table 5, negation, synthetic)
# job -> (dataset, model, optimiser, activations, sigma_v, probes); which figure reads it in comments.
FT_JOBS = {
    "sst_mlp": ("sst", "mlp", "adagrad", FT_ACTS, FT_SV, "tokens"),  # Fig. 2, 10; Tables 3, 5
    "sst_cnn": ("sst", "cnn", "adagrad", ["relu"], FT_SV, "tokens"),  # Fig. 2b,e; Table 5
    "sst_sa": ("sst", "sa", "adagrad", ["relu"], FT_SV, "tokens"),  # Fig. 2c,f; Table 5
    "sst_sa_mlp": ("sst", "sa_mlp", "adagrad", ["relu"], FT_SV, "tokens"),  # Fig. 2i
    "sst_mlp_adam": ("sst", "mlp", "adam", ["relu"], FT_SV, "tokens"),  # Fig. 11
    "sst_mv": ("sst", "mv", "adagrad", ["relu"], FT_SV1, "none"),  # Table 5, claim 5
    "sst_lrnn": ("sst", "lrnn", "adagrad", ["relu"], FT_SV1, "none"),  # Table 5
    "sstwsub_mv": ("sstwsub", "mv", "adagrad", ["relu"], FT_SV1, "bigrams"),  # Figs. 3, 6c
    "sstwsub_sa": ("sstwsub", "sa", "adagrad", ["relu"], FT_SV1, "negation"),  # Figs. 6, 9
    "sstwsub_cnn": ("sstwsub", "cnn", "adagrad", ["relu"], FT_SV1, "negation"),  # Fig. 8
    "sstwsub_tr": ("sstwsub", "tr", "adagrad", ["relu"], FT_SV1, "negation"),  # Fig. 8
    "sstwsub_mlp": ("sstwsub", "mlp", "adagrad", ["relu"], FT_SV1, "none"),  # Table 5
    "sstwsub_lrnn": ("sstwsub", "lrnn", "adagrad", ["relu"], FT_SV1, "none"),  # Table 5
    "imdb_mlp": ("imdb", "mlp", "adagrad", FT_ACTS, FT_SV, "tokens"),  # Fig. 13a,c; Tables 3, 5
    "imdb_cnn": ("imdb", "cnn", "adagrad", ["relu"], FT_SV1, "tokens"),  # Fig. 13b; Table 5
    "imdb_sa": ("imdb", "sa", "adagrad", ["relu"], FT_SV1, "tokens"),  # claim 2; Table 5
    "imdb_mv": ("imdb", "mv", "adagrad", ["relu"], FT_SV1, "none"),  # Table 5
    "imdb_lrnn": ("imdb", "lrnn", "adagrad", ["relu"], FT_SV1, "none"),  # Table 5
    "ag_news_sa": ("ag_news", "sa", "adagrad", ["relu"], FT_SV1, "tokens"),  # Fig. 4; Table 5
    "ag_news_mlp": ("ag_news", "mlp", "adagrad", FT_ACTS, FT_SV, "none"),  # Tables 3, 5
    "ag_news_cnn": ("ag_news", "cnn", "adagrad", ["relu"], FT_SV1, "none"),  # Table 5
    "ag_news_mv": ("ag_news", "mv", "adagrad", ["relu"], FT_SV1, "none"),  # Table 5
    "ag_news_lrnn": ("ag_news", "lrnn", "adagrad", ["relu"], FT_SV1, "none"),  # Table 5
    "synthetic_lrnn": ("synthetic", "lrnn", "adagrad", ["relu"], FT_SV1, "positions"),  # Fig. 12
}
FT_DATASETS = ("sst", "sstwsub", "imdb", "ag_news")
FT_ON = {d: dataset_on(d) for d in FT_DATASETS} | {"synthetic": True}
FT_TABLE_DATASETS = [d for d in FT_DATASETS if FT_ON[d]]


def ft_job_tables(job, table="summary"):
    return f"{FT}/train/{job}/{table}.csv"


def ft_jobs_on(*jobs):
    """The jobs whose dataset is available in this run."""
    return [j for j in jobs if FT_ON[FT_JOBS[j][0]]]


def ft_job_settings(job):
    dataset, kind, optimizer, acts, sigma_v, probe = FT_JOBS[job]
    ds = FT_CFG["datasets"][dataset]
    train = dict(FT_CFG["train"])
    train.update(
        kind=kind,
        optimizer=optimizer,
        epochs=ds["epochs"],
        lr=FT_CFG["adam_lr"] if optimizer == "adam" else ds["lr"],
        max_len=ds["max_len"],
        device=config["device"],
        threads=FT_CFG["threads"],
    )
    return {
        "dataset": dataset,
        "activations": acts,
        "sigma_v": sigma_v,
        "seeds": [config["seed"] + i for i in range(ds["seeds"])],
        "probe": probe,
        "ks": FT_CFG["synthetic"]["ks"],
        "max_train": ds["max_train"],
        "max_eval": ds["max_eval"],
        "subsample_seed": config["seed"],
        "synthetic": FT_CFG["synthetic"],
        "settings": train,
    }


def ft_job_inputs(wildcards):
    dataset = FT_JOBS[wildcards.job][0]
    if dataset == "synthetic":
        return []
    out = [prepared(dataset, f) for f in ("train.tsv", "dev.tsv", "test.tsv", "vocab.json")]
    return out + [f"{FT}/extracted/{dataset}.csv"]


def ft_fig_settings(**extra):
    return json.dumps(
        {"sigma_v": FT_SV, "activations": FT_ACTS} | extra, sort_keys=True
    )


_ft_off = [d for d in FT_DATASETS if not FT_ON[d]]
for _d in _ft_off:
    _what = {
        "sst": "Figs. 2, 10, 11; Table 6 row SST; claims 1-4, 10",
        "sstwsub": "Figs. 3, 6, 8, 9; Table 6 rows SSTwsub; claims 5, 7",
        "imdb": "Fig. 13; Table 6 row IMDB; IMDB columns of Tables 3, 5",
        "ag_news": "Fig. 4 (claim 6); Table 6 row Agnews; Agnews columns of Tables 3, 5",
    }[_d]
    SKIPPED[f"features {_what}"] = f"dataset {_d} is not available"

if FT_TABLE_DATASETS:
    PAPER_TARGETS["features"] += [
        f"{FT}/table6.md",
        f"{FT}/table3.md",
        f"{FT}/table5.md",
    ]
    PAPER_CLAIMS["features"] += [
        f"{FT}/claims/table6.csv",
        f"{FT}/claims/table3.csv",
        f"{FT}/claims/table5.csv",
    ]
FT_FIGURES = {
    # figure -> (datasets it needs, training jobs it reads)
    "2": (("sst",), ["sst_mlp", "sst_cnn", "sst_sa", "sst_sa_mlp"]),
    "10": (("sst",), ["sst_mlp"]),
    "11": (("sst",), ["sst_mlp_adam"]),
    "3": (("sst", "sstwsub"), ["sstwsub_mv", "sst_mv"]),
    "6": (("sstwsub",), ["sstwsub_sa", "sstwsub_mv"]),
    "8": (("sstwsub",), ["sstwsub_cnn", "sstwsub_tr"]),
    "9": (("sstwsub",), ["sstwsub_sa"]),
    "12": ((), ["synthetic_lrnn"]),
    "13": (("imdb",), ["imdb_mlp", "imdb_cnn", "imdb_sa"]),
    "4": (("ag_news",), ["ag_news_sa"]),
}
FT_FIGURES_ON = [
    n for n, (needs, _) in FT_FIGURES.items() if all(FT_ON[d] for d in needs)
]
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
        dataset="|".join(FT_DATASETS),
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
        ft_job_inputs,
    output:
        scores=f"{FT}/train/{{job}}/scores.csv",
        metrics=f"{FT}/train/{{job}}/metrics.csv",
        summary=f"{FT}/train/{{job}}/summary.csv",
    log:
        f"{LOGS}/features/train_{{job}}.log",
    benchmark:
        f"{BENCH}/features/train_{{job}}.tsv"
    wildcard_constraints:
        job="|".join(FT_JOBS),
    conda:
        ENV
    threads: FT_CFG["threads"]
    resources:
        mem_mb=lambda wc: 6000 if FT_JOBS[wc.job][0] in ("imdb", "ag_news") else 3000,
        runtime=60,
        gpu=1 if config["device"] != "cpu" else 0,
    params:
        settings=lambda wc: json.dumps(ft_job_settings(wc.job), sort_keys=True),
        data_dir=lambda wc: f"{PREPARED_DIR}/{FT_JOBS[wc.job][0]}",
        code=FT_TRAIN_CODE,
    shell:
        "python -m featlearn features-compute --experiment train --settings {params.settings:q}"
        " --data-dir {params.data_dir} --inputs {input} --threads {threads}"
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
            | {
                k: FT_CFG["train"][k]
                for k in ("sigma_e", "sigma_w", "d")
            }
            | {
                "sigma_v": FT_SV,
                "seed": config["seed"],
                "subsample_seed": config["seed"],
                "max_train": FT_CFG["datasets"]["sst"]["max_train"],
            },
            sort_keys=True,
        ),
        data_dir=f"{PREPARED_DIR}/sst",
        code=FT_THEORY_CODE,
    shell:
        "python -m featlearn features-compute --experiment theory --settings {params.settings:q}"
        " --data-dir {params.data_dir} --inputs {input.extracted}"
        " --out {output.curves} {output.scores} > {log} 2>&1"


rule table_features_6:
    input:
        extracted=[f"{FT}/extracted/{d}.csv" for d in FT_TABLE_DATASETS],
        stats=[prepared(d, "stats.json") for d in FT_TABLE_DATASETS],
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


rule table_features_3:
    input:
        [ft_job_tables(j) for j in ft_jobs_on("sst_mlp", "ag_news_mlp", "imdb_mlp")],
    output:
        csv=f"{FT}/table3.csv",
        md=report(
            f"{FT}/table3.md",
            caption="../report/features_table3.rst",
            category="features",
        ),
        claims=f"{FT}/claims/table3.csv",
    log:
        f"{LOGS}/features/table3.log",
    localrule: True
    conda:
        ENV
    params:
        settings=ft_fig_settings(),
        scale=SCALE,
        code=FT_PLOT,
    shell:
        "python -m featlearn features-figure --figure table3 --tables {input}"
        " --figures {output.csv} {output.md} --claims {output.claims}"
        " --settings {params.settings:q} --scale {params.scale} > {log} 2>&1"


rule table_features_5:
    input:
        [
            ft_job_tables(f"{d}_{m}")
            for d in FT_TABLE_DATASETS
            for m in ("mlp", "cnn", "sa", "mv", "lrnn")
            if f"{d}_{m}" in FT_JOBS
        ],
    output:
        csv=f"{FT}/table5.csv",
        md=report(
            f"{FT}/table5.md",
            caption="../report/features_table5.rst",
            category="features",
        ),
        claims=f"{FT}/claims/table5.csv",
    log:
        f"{LOGS}/features/table5.log",
    localrule: True
    conda:
        ENV
    params:
        settings=ft_fig_settings(),
        scale=SCALE,
        code=FT_PLOT,
    shell:
        "python -m featlearn features-figure --figure table5 --tables {input}"
        " --figures {output.csv} {output.md} --claims {output.claims}"
        " --settings {params.settings:q} --scale {params.scale} > {log} 2>&1"


def ft_figure_inputs(n):
    """The tables figure n reads: its jobs' scores, metrics and summaries, the extracted units of its
    datasets, and (Fig. 2) the theory flow."""
    needs, jobs = FT_FIGURES[n]
    tables = [ft_job_tables(j, t) for j in jobs for t in ("scores", "metrics", "summary")]
    datasets = sorted({FT_JOBS[j][0] for j in jobs} - {"synthetic"})
    tables += [f"{FT}/extracted/{d}.csv" for d in datasets]
    if n == "2":
        tables += [f"{FT}/theory/curves.csv", f"{FT}/theory/scores.csv"]
    return tables


# One rule per figure: fig_features_2, fig_features_3, ...
for _n in FT_FIGURES:

    rule:
        name:
            f"fig_features_{_n}"
        input:
            ft_figure_inputs(_n),
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
            settings=ft_fig_settings(),
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
