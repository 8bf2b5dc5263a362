# Data: checksummed downloads (or mirror copies) -> parsed, prepared caches -> a size summary.


rule data_fetch:
    output:
        f"{RAW}/{{dataset}}/{{filename}}",
    log:
        f"{LOGS}/data/fetch_{{dataset}}_{{filename}}.log",
    wildcard_constraints:
        dataset="|".join(DATASETS),
        filename="|".join(
            sorted(
                {
                    f.name.replace(".", r"\.")
                    for d in DATASETS.values()
                    for f in d.files
                }
            )
        ),
    # before the trainings (their priorities, job_priority in common.smk): minutes of data work unblock them
    priority: DATA_PRIORITY
    localrule: True
    conda:
        ENV
    params:
        flags=data_flags(),
    shell:
        "python -m featlearn data-fetch --dataset {wildcards.dataset} --file {wildcards.filename}"
        " --out {output} {params.flags} > {log} 2>&1"


rule data_prepare_classification:
    input:
        prepare_input,
    output:
        expand(
            f"{PREPARED_DIR}/{{{{name}}}}/{{split}}.tsv",
            split=("train", "dev", "test"),
        ),
        vocab=f"{PREPARED_DIR}/{{name}}/vocab.json",
        stats=f"{PREPARED_DIR}/{{name}}/stats.json",
    log:
        f"{LOGS}/data/prepare_{{name}}.log",
    benchmark:
        f"{BENCH}/data/prepare_{{name}}.tsv"
    wildcard_constraints:
        name="sst|sstwsub|imdb|ag_news",
    priority: DATA_PRIORITY
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=4000,
        runtime=capped_runtime(30),
    params:
        **usage_param(f"{BENCH}/data/prepare_{{name}}.tsv"),
        raw_dir=lambda wc: f"{RAW}/{PREPARED[wc.name].raw}",
        out_dir=lambda wc: f"{PREPARED_DIR}/{wc.name}",
        seed=config["data"]["split_seed"],
        code=modules_hash(("featlearn.data.prepare",)),
    shell:
        SERVER_ENV
        + "python -m featlearn data-prepare --name {wildcards.name} --raw-dir {params.raw_dir}"
        " --out-dir {params.out_dir} --seed {params.seed} > {log} 2>&1"


# The language-model and character corpora: the same command, their own splits, sizes and limits.
use rule data_prepare_classification as data_prepare_lm with:
    output:
        expand(
            f"{PREPARED_DIR}/{{{{name}}}}/{{split}}.pt",
            split=("train", "valid", "test"),
        ),
        vocab=f"{PREPARED_DIR}/{{name}}/vocab.json",
        stats=f"{PREPARED_DIR}/{{name}}/stats.json",
    wildcard_constraints:
        name="wikitext2|wikitext103|ptb",
    resources:
        mem_mb=lambda wc: 12000 if wc.name == "wikitext103" else 4000,
        runtime=capped_runtime(lambda wc: 120 if wc.name == "wikitext103" else 30),


use rule data_prepare_classification as data_prepare_chars with:
    output:
        expand(f"{PREPARED_DIR}/{{{{name}}}}/{{split}}.pt", split=("train", "valid")),
        vocab=f"{PREPARED_DIR}/{{name}}/vocab.json",
        stats=f"{PREPARED_DIR}/{{name}}/stats.json",
    wildcard_constraints:
        name="tinyshakespeare",
    resources:
        mem_mb=2000,
        runtime=capped_runtime(10),


rule data_summary:
    input:
        prepared_stats(),
    output:
        csv=f"{RESULTS}/data/summary.csv",
        png=report_figure("data/overview", "data", "data_overview.rst"),
        other=other_formats("data/overview"),
    log:
        f"{LOGS}/data/summary.log",
    localrule: True
    conda:
        ENV
    params:
        scale=SCALE,
        dpi=config["report"]["dpi"],
        code=modules_hash(("featlearn.data.summary",)),
    shell:
        "python -m featlearn data-summary --stats {input} --out-csv {output.csv}"
        " --figures {output.png} {output.other} --scale {params.scale} --dpi {params.dpi}"
        " > {log} 2>&1"
