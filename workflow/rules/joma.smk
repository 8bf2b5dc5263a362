# Paper `joma`: Tian, Wang, Zhang, Chen, Du 2023, "JoMA" (joint MLP/attention dynamics).
# Models, hyperparameters, figure specs and claims follow the paper; where the paper is silent the
# source of a value (authors' code, or a decision of this project) is named next to it.
#
# Adding a figure is adding a rule, a module and a caption:
#   1. a compute rule (training/simulation) that writes tidy tables under results/joma/, with log,
#      benchmark, threads, resources and params code=code_hash("joma");
#   2. a rule fig_joma_<n> (localrule) that reads only those tables and writes
#      report_figure("joma/fig<n>", "joma", "joma_fig<n>.rst") plus other_formats("joma/fig<n>"), and
#      its claims to results/joma/claims/<n>.csv;
#   3. register both below, and a caption in workflow/report/.

JM = f"{RESULTS}/joma"
JM_CFG = config["joma"]
JM_COMPUTE = code_hash("joma/dynamics.py", "joma/experiments.py")
JM_PLOT = code_hash("joma/figures.py", "plotting.py", "claims.py")

PAPER_TARGETS["joma"] += [f"{FIGURES}/joma/fig4.png"]
PAPER_CLAIMS["joma"] += [f"{JM}/claims/4.csv", f"{JM}/claims/theorem2.csv"]


rule joma_eq6:
    output:
        discrete=f"{JM}/eq6_discrete.csv",
        exact=f"{JM}/eq6_exact.csv",
    log:
        f"{LOGS}/joma/eq6.log",
    benchmark:
        f"{BENCH}/joma/eq6.tsv"
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        settings=json.dumps(JM_CFG["eq6"], sort_keys=True),
        code=JM_COMPUTE,
    shell:
        "python -m featlearn joma-compute --experiment eq6 --settings {params.settings:q}"
        " --out {output.discrete} {output.exact} > {log} 2>&1"


rule joma_theorem2:
    output:
        f"{JM}/theorem2.csv",
    log:
        f"{LOGS}/joma/theorem2.log",
    benchmark:
        f"{BENCH}/joma/theorem2.tsv"
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        settings=json.dumps(JM_CFG["theorem2"], sort_keys=True),
        code=JM_COMPUTE,
    shell:
        "python -m featlearn joma-compute --experiment theorem2 --settings {params.settings:q}"
        " --out {output} > {log} 2>&1"


rule fig_joma_4:
    input:
        rules.joma_eq6.output.discrete,
        rules.joma_eq6.output.exact,
    output:
        png=report_figure("joma/fig4", "joma", "joma_fig4.rst"),
        other=other_formats("joma/fig4"),
        claims=f"{JM}/claims/4.csv",
    log:
        f"{LOGS}/joma/fig4.log",
    localrule: True
    conda:
        ENV
    params:
        settings=json.dumps(
            {
                "log_every": JM_CFG["eq6"]["log_every"],
                "converge_tol": JM_CFG["eq6"]["converge_tol"],
            }
        ),
        scale=SCALE,
        dpi=config["report"]["dpi"],
        code=JM_PLOT,
    shell:
        "python -m featlearn joma-figure --figure 4 --tables {input}"
        " --figures {output.png} {output.other} --claims {output.claims}"
        " --settings {params.settings:q} --scale {params.scale} --dpi {params.dpi} > {log} 2>&1"


rule check_joma_theorem2:
    input:
        rules.joma_theorem2.output,
    output:
        f"{JM}/claims/theorem2.csv",
    log:
        f"{LOGS}/joma/check_theorem2.log",
    localrule: True
    conda:
        ENV
    params:
        scale=SCALE,
        code=JM_PLOT,
    shell:
        "python -m featlearn joma-figure --figure theorem2 --tables {input}"
        " --claims {output} --scale {params.scale} > {log} 2>&1"


rule joma:
    input:
        paper_outputs("joma"),
