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


rule templates:
    input:
        paper_outputs("templates"),
