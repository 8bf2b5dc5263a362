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
JM_SIM_COMPUTE = code_hash("joma/attention_sim.py")
JM_SIM_PLOT = code_hash("joma/attention_sim_figures.py", "plotting.py", "claims.py")
JM_LM_CODE = code_hash("lm", "joma/wikitext.py")
JM_HIER_CODE = code_hash("joma/hierarchy.py", "joma/table1.py")
JM_HIER_PLOT = code_hash("joma/table1_figures.py", "plotting.py", "claims.py")
JM_CKPT_CODE = code_hash("joma/checkpoints.py", "lm/rank.py", "lm/attention.py")
JM_CKPT_PLOT = code_hash("joma/checkpoints_figures.py", "plotting.py", "claims.py")
JM_WIKI_PLOT = code_hash("joma/wikitext_figures.py", "lm/attention.py", "plotting.py", "claims.py")

PAPER_TARGETS["joma"] += [
    f"{FIGURES}/joma/fig2.png",
    f"{FIGURES}/joma/fig3.png",
    f"{FIGURES}/joma/fig4.png",
]
PAPER_CLAIMS["joma"] += [
    f"{JM}/claims/2.csv",
    f"{JM}/claims/4.csv",
    f"{JM}/claims/theorem2.csv",
]

# WikiText language models (Figs. 6, 8): one training job per (dataset, layers, lr, seed); the
# 5-layer run at Fig. 6's learning rate serves both figures.
JM_WIKI = JM_CFG["wikitext"]
JM_WIKI_DATASETS = [d for d in JM_WIKI["datasets"] if dataset_on(d)]
JM_BPTT = 35  # tutorial recipe; the uniform causal entropy bound 2.632 is for this window

JM_LM_LOG = f"{JM}/wikitext/{{}}/L{{}}_lr{{:g}}_s{{}}.csv"  # dataset, layers, learning rate, seed

JM_FIG6_LOGS = [
    JM_LM_LOG.format(d, L, JM_WIKI["fig6"]["lr"], s)
    for d in JM_WIKI_DATASETS
    for L in JM_WIKI["fig6"]["layers"]
    for s in JM_WIKI["seeds"]
]
JM_FIG8_LOGS = [
    JM_LM_LOG.format(d, JM_WIKI["fig8"]["n_layer"], lr, s)
    for d in JM_WIKI_DATASETS
    for lr in JM_WIKI["fig8"]["lrs"]
    for s in JM_WIKI["seeds"]
]
if JM_WIKI_DATASETS:
    PAPER_TARGETS["joma"] += [f"{FIGURES}/joma/fig6.png", f"{FIGURES}/joma/fig8.png"]
    PAPER_CLAIMS["joma"] += [f"{JM}/claims/6.csv", f"{JM}/claims/8.csv"]
else:
    SKIPPED["joma Figs. 6, 8"] = (
        f"none of the WikiText datasets {JM_WIKI['datasets']} is available"
    )


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


# Table 1: one training job per grid cell (C, N_ch, N_0, N_1), all seeds in it; Theorem 5 by Monte Carlo.
JM_T1 = JM_CFG["table1"]
JM_T1_CELLS = [
    (C, nch, n0, n1)
    for C in JM_T1["grid"]["C"]
    for nch in JM_T1["grid"]["n_ch"]
    for n0, n1 in JM_T1["grid"]["n"]
]
JM_T1_TABLES = [f"{JM}/table1/cell_C{C}_nch{k}_n{a}-{b}.csv" for C, k, a, b in JM_T1_CELLS]
PAPER_TARGETS["joma"] += [f"{JM}/table1.md", f"{FIGURES}/joma/hblt.png"]
PAPER_CLAIMS["joma"] += [f"{JM}/claims/table1.csv", f"{JM}/claims/hblt.csv"]

# Public checkpoints (Fig. 7): one job per (model, revision) that is cached or downloadable.
JM_PRE = JM_CFG["pretrained"]
JM_CKPTS, _jm_ckpt_skipped = pretrained_checkpoints(JM_PRE, config["data"]["offline"])
JM_CKPT_ON = bool(JM_CKPTS) and dataset_on(JM_PRE["dataset"])
if JM_CKPT_ON:
    PAPER_TARGETS["joma"] += [f"{FIGURES}/joma/fig7.png"]
    PAPER_CLAIMS["joma"] += [f"{JM}/claims/7.csv"]
if _jm_ckpt_skipped:
    _n = len(_jm_ckpt_skipped) + len(JM_CKPTS)
    SKIPPED["joma Fig. 7" if not JM_CKPTS else "joma Fig. 7 checkpoints"] = (
        f"{len(_jm_ckpt_skipped)} of {_n} checkpoints left out; first: {_jm_ckpt_skipped[0]}"
    )
elif not JM_CKPT_ON:
    SKIPPED["joma Fig. 7"] = f"dataset {JM_PRE['dataset']} (validation text) is not available"


rule joma_sim_softmax:
    output:
        steps=f"{JM}/sim_softmax_steps.csv",
        matrices=f"{JM}/sim_softmax_matrices.csv",
        v0=f"{JM}/sim_softmax_v0.csv",
    log:
        f"{LOGS}/joma/sim_softmax.log",
    benchmark:
        f"{BENCH}/joma/sim_softmax.tsv"
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        settings=json.dumps(JM_CFG["sim_softmax"], sort_keys=True),
        code=JM_SIM_COMPUTE,
    shell:
        "python -m featlearn joma-compute --experiment sim_softmax --settings {params.settings:q}"
        " --out {output.steps} {output.matrices} {output.v0} > {log} 2>&1"


rule joma_sim_exp:
    output:
        f"{JM}/sim_exp.csv",
    log:
        f"{LOGS}/joma/sim_exp.log",
    benchmark:
        f"{BENCH}/joma/sim_exp.tsv"
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        settings=json.dumps(JM_CFG["sim_exp"], sort_keys=True),
        code=JM_SIM_COMPUTE,
    shell:
        "python -m featlearn joma-compute --experiment sim_exp --settings {params.settings:q}"
        " --out {output} > {log} 2>&1"


rule fig_joma_2:
    input:
        rules.joma_sim_softmax.output.steps,
        rules.joma_sim_softmax.output.matrices,
        rules.joma_sim_exp.output,
    output:
        png=report_figure("joma/fig2", "joma", "joma_fig2.rst"),
        other=other_formats("joma/fig2"),
        claims=f"{JM}/claims/2.csv",
    log:
        f"{LOGS}/joma/fig2.log",
    localrule: True
    conda:
        ENV
    params:
        scale=SCALE,
        dpi=config["report"]["dpi"],
        code=JM_SIM_PLOT,
    shell:
        "python -m featlearn joma-figure --figure 2 --tables {input}"
        " --figures {output.png} {output.other} --claims {output.claims}"
        " --scale {params.scale} --dpi {params.dpi} > {log} 2>&1"


rule fig_joma_3:
    input:
        rules.joma_sim_softmax.output.matrices,
        rules.joma_sim_softmax.output.v0,
    output:
        png=report_figure("joma/fig3", "joma", "joma_fig3.rst"),
        other=other_formats("joma/fig3"),
    log:
        f"{LOGS}/joma/fig3.log",
    localrule: True
    conda:
        ENV
    params:
        scale=SCALE,
        dpi=config["report"]["dpi"],
        code=JM_SIM_PLOT,
    shell:
        "python -m featlearn joma-figure --figure 3 --tables {input}"
        " --figures {output.png} {output.other}"
        " --scale {params.scale} --dpi {params.dpi} > {log} 2>&1"


rule joma_table1_cell:
    output:
        f"{JM}/table1/cell_C{{C}}_nch{{n_ch}}_n{{n0}}-{{n1}}.csv",
    log:
        f"{LOGS}/joma/table1/cell_C{{C}}_nch{{n_ch}}_n{{n0}}-{{n1}}.log",
    benchmark:
        f"{BENCH}/joma/table1/cell_C{{C}}_nch{{n_ch}}_n{{n0}}-{{n1}}.tsv"
    wildcard_constraints:
        C=r"\d+",
        n_ch=r"\d+",
        n0=r"\d+",
        n1=r"\d+",
    conda:
        ENV
    threads: JM_T1["threads"]
    resources:
        mem_mb=2000,
        runtime=60,
        gpu=1 if config["device"] != "cpu" else 0,
    params:
        settings=lambda wc: json.dumps(
            {k: v for k, v in JM_T1.items() if k not in ("grid", "threads")}
            | {"C": int(wc.C), "n_ch": int(wc.n_ch), "n0": int(wc.n0), "n1": int(wc.n1)},
            sort_keys=True,
        ),
        device=config["device"],
        code=JM_HIER_CODE,
    shell:
        "python -m featlearn joma-compute --experiment table1 --settings {params.settings:q}"
        " --threads {threads} --device {params.device} --out {output} > {log} 2>&1"


rule table_joma_1:
    input:
        JM_T1_TABLES,
    output:
        csv=f"{JM}/table1.csv",
        tex=f"{JM}/table1.tex",
        md=report(f"{JM}/table1.md", caption="../report/joma_table1.rst", category="joma"),
        claims=f"{JM}/claims/table1.csv",
    log:
        f"{LOGS}/joma/table1.log",
    localrule: True
    conda:
        ENV
    params:
        scale=SCALE,
        code=JM_HIER_PLOT,
    shell:
        "python -m featlearn joma-figure --figure table1 --tables {input}"
        " --figures {output.csv} {output.tex} {output.md} --claims {output.claims}"
        " --scale {params.scale} > {log} 2>&1"


rule joma_hblt:
    output:
        f"{JM}/hblt.csv",
    log:
        f"{LOGS}/joma/hblt.log",
    benchmark:
        f"{BENCH}/joma/hblt.tsv"
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        settings=json.dumps(JM_CFG["hblt"], sort_keys=True),
        code=JM_HIER_CODE,
    shell:
        "python -m featlearn joma-compute --experiment hblt --settings {params.settings:q}"
        " --out {output} > {log} 2>&1"


rule fig_joma_hblt:
    input:
        rules.joma_hblt.output,
    output:
        png=report_figure("joma/hblt", "joma", "joma_hblt.rst"),
        other=other_formats("joma/hblt"),
        claims=f"{JM}/claims/hblt.csv",
    log:
        f"{LOGS}/joma/fig_hblt.log",
    localrule: True
    conda:
        ENV
    params:
        scale=SCALE,
        dpi=config["report"]["dpi"],
        code=JM_HIER_PLOT,
    shell:
        "python -m featlearn joma-figure --figure hblt --tables {input}"
        " --figures {output.png} {output.other} --claims {output.claims}"
        " --scale {params.scale} --dpi {params.dpi} > {log} 2>&1"


rule joma_checkpoint:
    input:
        valid=prepared(JM_PRE["dataset"], "valid.pt"),
        vocab=prepared(JM_PRE["dataset"], "vocab.json"),
    output:
        f"{JM}/pretrained/{{model}}/{{revision}}.csv",
    log:
        f"{LOGS}/joma/pretrained/{{model}}/{{revision}}.log",
    benchmark:
        f"{BENCH}/joma/pretrained/{{model}}/{{revision}}.tsv"
    wildcard_constraints:
        model=r"[A-Za-z0-9._-]+",
        revision=r"[A-Za-z0-9._-]+",
    conda:
        ENV
    threads: JM_PRE["threads"]
    resources:
        mem_mb=lambda wc: JM_PRE["mem_mb"],
        runtime=30,
        gpu=1 if config["device"] != "cpu" else 0,
    params:
        settings=json.dumps(
            {
                k: JM_PRE[k]
                for k in ("cache_dir", "window", "windows", "batch_size", "max_words", "dtype")
            }
            | {"offline": config["data"]["offline"]},
            sort_keys=True,
        ),
        device=config["device"],
        code=JM_CKPT_CODE,
    shell:
        "python -m featlearn joma-compute --experiment checkpoint --model {wildcards.model}"
        " --revision {wildcards.revision} --settings {params.settings:q} --threads {threads}"
        " --device {params.device} --inputs {input.valid} {input.vocab} --out {output} > {log} 2>&1"


rule fig_joma_7:
    input:
        [f"{JM}/pretrained/{m}/{r}.csv" for m, r in JM_CKPTS],
    output:
        png=report_figure("joma/fig7", "joma", "joma_fig7.rst"),
        other=other_formats("joma/fig7"),
        claims=f"{JM}/claims/7.csv",
    log:
        f"{LOGS}/joma/fig7.log",
    localrule: True
    conda:
        ENV
    params:
        scale=SCALE,
        dpi=config["report"]["dpi"],
        code=JM_CKPT_PLOT,
    shell:
        "python -m featlearn joma-figure --figure 7 --tables {input}"
        " --figures {output.png} {output.other} --claims {output.claims}"
        " --scale {params.scale} --dpi {params.dpi} > {log} 2>&1"


rule joma_wikitext:
    input:
        train=prepared("{dataset}", "train.pt"),
        valid=prepared("{dataset}", "valid.pt"),
        vocab=prepared("{dataset}", "vocab.json"),
    output:
        f"{JM}/wikitext/{{dataset}}/L{{n_layer}}_lr{{lr}}_s{{seed}}.csv",
    log:
        f"{LOGS}/joma/wikitext/{{dataset}}/L{{n_layer}}_lr{{lr}}_s{{seed}}.log",
    benchmark:
        f"{BENCH}/joma/wikitext/{{dataset}}/L{{n_layer}}_lr{{lr}}_s{{seed}}.tsv"
    wildcard_constraints:
        dataset="wikitext2|wikitext103",
        n_layer=r"\d+",
        lr=r"[0-9.e+-]+",
        seed=r"\d+",
    conda:
        ENV
    threads: JM_CFG["threads"]
    resources:
        mem_mb=6000,
        runtime=lambda wc: 60 + 2 * int(wc.n_layer),
        gpu=1 if config["device"] != "cpu" else 0,
    params:
        settings=lambda wc: json.dumps(
            {
                "n_layer": int(wc.n_layer),
                "lr": float(wc.lr),
                "seed": int(wc.seed),
                "dropout": JM_WIKI["dropout"],
                "iterations": JM_WIKI["iterations"],
                "log_every": JM_WIKI["log_every"],
                "checkpoint_every": JM_WIKI["checkpoint_every"],
                "val_windows": JM_WIKI["val_windows"],
                "bptt": JM_BPTT,
            },
            sort_keys=True,
        ),
        work_dir=lambda wc: f"{JM}/wikitext/{wc.dataset}/L{wc.n_layer}_lr{wc.lr}_s{wc.seed}.resume",
        device=config["device"],
        code=JM_LM_CODE,
    shell:
        "python -m featlearn joma-compute --experiment wikitext --dataset {wildcards.dataset}"
        " --settings {params.settings:q} --threads {threads} --device {params.device}"
        " --inputs {input.train} {input.valid} {input.vocab} --work-dir {params.work_dir}"
        " --out {output} > {log} 2>&1"


rule fig_joma_6:
    input:
        JM_FIG6_LOGS,
    output:
        png=report_figure("joma/fig6", "joma", "joma_fig6.rst"),
        other=other_formats("joma/fig6"),
        rank_png=report_figure("joma/fig6_stable_rank", "joma", "joma_fig6_stable_rank.rst"),
        rank_other=other_formats("joma/fig6_stable_rank"),
        claims=f"{JM}/claims/6.csv",
    log:
        f"{LOGS}/joma/fig6.log",
    localrule: True
    conda:
        ENV
    params:
        settings=json.dumps({"lr": JM_WIKI["fig6"]["lr"], "bptt": JM_BPTT}),
        scale=SCALE,
        dpi=config["report"]["dpi"],
        code=JM_WIKI_PLOT,
    shell:
        "python -m featlearn joma-figure --figure 6 --tables {input}"
        " --figures {output.png} {output.other} {output.rank_png} {output.rank_other}"
        " --claims {output.claims} --settings {params.settings:q} --scale {params.scale}"
        " --dpi {params.dpi} > {log} 2>&1"


rule fig_joma_8:
    input:
        JM_FIG8_LOGS,
    output:
        png=report_figure("joma/fig8", "joma", "joma_fig8.rst"),
        other=other_formats("joma/fig8"),
        claims=f"{JM}/claims/8.csv",
    log:
        f"{LOGS}/joma/fig8.log",
    localrule: True
    conda:
        ENV
    params:
        settings=json.dumps({"n_layer": JM_WIKI["fig8"]["n_layer"], "bptt": JM_BPTT}),
        scale=SCALE,
        dpi=config["report"]["dpi"],
        code=JM_WIKI_PLOT,
    shell:
        "python -m featlearn joma-figure --figure 8 --tables {input}"
        " --figures {output.png} {output.other} --claims {output.claims}"
        " --settings {params.settings:q} --scale {params.scale} --dpi {params.dpi} > {log} 2>&1"


rule joma:
    input:
        paper_outputs("joma"),
