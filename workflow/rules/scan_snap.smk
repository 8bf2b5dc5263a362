# Paper `scan_snap`: Tian, Wang, Chen, Du 2023, "Scan and Snap" (1-layer transformer dynamics).
# Models, hyperparameters, figure specs and claims follow the paper; where the paper is silent the
# source of a value (authors' code, or a decision of this project) is named next to it.
#
# Adding a figure is adding a rule, a module and a caption:
#   1. a compute rule (training/simulation) that writes tidy tables under results/scan_snap/, with log,
#      benchmark, threads, resources and params code=code_hash("scan_snap");
#   2. a rule fig_scan_snap_<n> (localrule) that reads only those tables and writes
#      report_figure("scan_snap/fig<n>", "scan_snap", "scan_snap_fig<n>.rst") and
#      other_formats("scan_snap/fig<n>"), and
#      its claims to results/scan_snap/claims/<n>.csv;
#   3. register both below, and a caption in workflow/report/.

SS = f"{RESULTS}/scan_snap"
SS_CFG = config["scan_snap"]
SS_FIGURES = ("3", "4", "5", "6", "8", "9", "11", "12")
# Parts of claims.csv: the generator check and every figure that checks claims (11-12 only draw).
SS_CLAIM_PARTS = ("generator", "3", "4", "5", "6", "8", "9")
SS_COMPUTE = code_hash(
    "scan_snap/data.py",
    "scan_snap/model.py",
    "scan_snap/train.py",
    "scan_snap/metrics.py",
    "scan_snap/theory.py",
    "scan_snap/experiments.py",
)
SS_PLOT = code_hash("scan_snap/figures.py", "plotting.py", "claims.py")
SS_LM_CODE = code_hash("lm", "scan_snap/wikitext.py")

# WikiText language models (Figs. 7, 10): one training job per variant.
SS_WIKI = SS_CFG["wikitext"]
SS_WIKI_ON = dataset_on(SS_WIKI["dataset"])
_common = {"seed": SS_WIKI["seed"], "val_windows": SS_WIKI["val_windows"]}
_f7, _f10 = SS_WIKI["fig7"], SS_WIKI["fig10"]
SS_LM = {
    **{
        f"fig7_{name}": {
            **_common,
            **v,
            "iterations": _f7["iterations"],
            "log_every": _f7["log_every"],
            "checkpoint_every": _f7["checkpoint_every"],
        }
        for name, v in _f7["variants"].items()
    },
    **{
        f"fig10_lr{lr:g}": {
            **_common,
            "n_layer": 1,
            "dropout": _f10["dropout"],
            "lr": lr,
            "iterations": _f10["iterations"],
            "log_every": _f10["log_every"],
            "checkpoint_every": _f10["checkpoint_every"],
        }
        for lr in _f10["lrs"]
    },
}
SS_FIG7 = [f"fig7_{name}" for name in _f7["variants"]]
SS_FIG10 = [f"fig10_lr{lr:g}" for lr in _f10["lrs"]]
if SS_WIKI_ON:
    SS_FIGURES += ("7", "10")
    SS_CLAIM_PARTS += ("7", "10")
else:
    SKIPPED["scan_snap Figs. 7, 10"] = f"dataset {SS_WIKI['dataset']} is switched off"

FIG_SHELL = (
    "python -m featlearn scan-snap-figure --figure {params.n} --tables {input}"
    " --figures {output.png} {output.other} {params.claims}"
    " --settings {params.settings:q} --scale {params.scale} --dpi {params.dpi} > {log} 2>&1"
)


PAPER_TARGETS["scan_snap"] += [f"{FIGURES}/scan_snap/fig{n}.png" for n in SS_FIGURES]
PAPER_CLAIMS["scan_snap"] += [f"{SS}/claims/{part}.csv" for part in SS_CLAIM_PARTS]


rule scan_snap_generator:
    output:
        f"{SS}/generator_freq.csv",
    log:
        f"{LOGS}/scan_snap/generator.log",
    benchmark:
        f"{BENCH}/scan_snap/generator.tsv"
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        settings=json.dumps(SS_CFG["generator"], sort_keys=True),
        device="cpu",
        code=SS_COMPUTE,
    shell:
        "python -m featlearn scan-snap-compute --experiment generator"
        " --settings {params.settings:q} --threads {threads} --device {params.device}"
        " --out {output} > {log} 2>&1"


rule scan_snap_syn_small:
    output:
        steps=f"{SS}/syn_small_steps.csv",
        composition=f"{SS}/syn_small_composition.csv",
    log:
        f"{LOGS}/scan_snap/syn_small.log",
    benchmark:
        f"{BENCH}/scan_snap/syn_small.tsv"
    conda:
        ENV
    threads: SS_CFG["threads"]
    resources:
        mem_mb=2000,
        runtime=20,
    params:
        settings=json.dumps(SS_CFG["syn_small"], sort_keys=True),
        device=config["device"],
        code=SS_COMPUTE,
    shell:
        "python -m featlearn scan-snap-compute --experiment syn_small"
        " --settings {params.settings:q} --threads {threads} --device {params.device}"
        " --out {output} > {log} 2>&1"


rule scan_snap_adam:
    output:
        steps=f"{SS}/adam_steps.csv",
        composition=f"{SS}/adam_composition.csv",
    log:
        f"{LOGS}/scan_snap/adam.log",
    benchmark:
        f"{BENCH}/scan_snap/adam.tsv"
    conda:
        ENV
    threads: SS_CFG["threads"]
    resources:
        mem_mb=2000,
        runtime=20,
    params:
        settings=json.dumps(SS_CFG["adam"], sort_keys=True),
        device=config["device"],
        code=SS_COMPUTE,
    shell:
        "python -m featlearn scan-snap-compute --experiment adam"
        " --settings {params.settings:q} --threads {threads} --device {params.device}"
        " --out {output} > {log} 2>&1"


# The 640-run sweep: one process, one vectorised training per query count.
rule scan_snap_syn_medium:
    output:
        final=f"{SS}/syn_medium_final.csv",
        recall=f"{SS}/syn_medium_recall.csv",
    log:
        f"{LOGS}/scan_snap/syn_medium.log",
    benchmark:
        f"{BENCH}/scan_snap/syn_medium.tsv"
    conda:
        ENV
    threads: SS_CFG["threads"]
    resources:
        mem_mb=4000,
        runtime=60,
        gpu=1 if config["device"] != "cpu" else 0,
    params:
        settings=json.dumps(SS_CFG["syn_medium"], sort_keys=True),
        device=config["device"],
        code=SS_COMPUTE,
    shell:
        "python -m featlearn scan-snap-compute --experiment syn_medium"
        " --settings {params.settings:q} --threads {threads} --device {params.device}"
        " --out {output} > {log} 2>&1"


rule scan_snap_theory:
    output:
        snapping=f"{SS}/theory_snapping.csv",
        decoder=f"{SS}/theory_decoder.csv",
        t0=f"{SS}/theory_t0.csv",
    log:
        f"{LOGS}/scan_snap/theory.log",
    benchmark:
        f"{BENCH}/scan_snap/theory.tsv"
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        settings=json.dumps(SS_CFG["theory"], sort_keys=True),
        device="cpu",
        code=SS_COMPUTE,
    shell:
        "python -m featlearn scan-snap-compute --experiment theory"
        " --settings {params.settings:q} --threads {threads} --device {params.device}"
        " --out {output} > {log} 2>&1"


rule scan_snap_wikitext:
    input:
        train=prepared(SS_WIKI["dataset"], "train.pt"),
        valid=prepared(SS_WIKI["dataset"], "valid.pt"),
        vocab=prepared(SS_WIKI["dataset"], "vocab.json"),
    output:
        log=f"{SS}/lm/{{variant}}_log.csv",
        maps=f"{SS}/lm/{{variant}}_maps.csv",
    log:
        f"{LOGS}/scan_snap/wikitext_{{variant}}.log",
    benchmark:
        f"{BENCH}/scan_snap/wikitext_{{variant}}.tsv"
    wildcard_constraints:
        variant="|".join(SS_LM),
    conda:
        ENV
    threads: SS_CFG["threads"]
    resources:
        mem_mb=6000,
        runtime=120,
        gpu=1 if config["device"] != "cpu" else 0,
    params:
        settings=lambda wc: json.dumps(SS_LM[wc.variant], sort_keys=True),
        work_dir=lambda wc: f"{SS}/lm/{wc.variant}.resume",
        device=config["device"],
        code=SS_LM_CODE,
    shell:
        "python -m featlearn scan-snap-compute --experiment wikitext"
        " --settings {params.settings:q} --threads {threads} --device {params.device}"
        " --inputs {input.train} {input.valid} {input.vocab} --work-dir {params.work_dir}"
        " --out {output.log} {output.maps} > {log} 2>&1"


rule fig_scan_snap_7:
    input:
        [f"{SS}/lm/{v}_maps.csv" for v in SS_FIG7],
    output:
        png=report_figure("scan_snap/fig7", "scan_snap", "scan_snap_fig7.rst"),
        other=other_formats("scan_snap/fig7"),
        claims=f"{SS}/claims/7.csv",
    log:
        f"{LOGS}/scan_snap/fig7.log",
    localrule: True
    conda:
        ENV
    params:
        n="7",
        claims=lambda wc, output: f"--claims {output.claims}",
        settings=json.dumps(
            {"variants": list(_f7["variants"]), "map_steps": _f7["map_steps"]}
        ),
        scale=SCALE,
        dpi=config["report"]["dpi"],
        code=SS_PLOT,
    shell:
        FIG_SHELL


rule fig_scan_snap_10:
    input:
        [f"{SS}/lm/{v}_log.csv" for v in SS_FIG10],
    output:
        png=report_figure("scan_snap/fig10", "scan_snap", "scan_snap_fig10.rst"),
        other=other_formats("scan_snap/fig10"),
        claims=f"{SS}/claims/10.csv",
    log:
        f"{LOGS}/scan_snap/fig10.log",
    localrule: True
    conda:
        ENV
    params:
        n="10",
        claims=lambda wc, output: f"--claims {output.claims}",
        settings=json.dumps({"lrs": _f10["lrs"]}),
        scale=SCALE,
        dpi=config["report"]["dpi"],
        code=SS_PLOT,
    shell:
        FIG_SHELL


rule check_scan_snap_generator:
    input:
        rules.scan_snap_generator.output,
    output:
        f"{SS}/claims/generator.csv",
    log:
        f"{LOGS}/scan_snap/check_generator.log",
    localrule: True
    conda:
        ENV
    params:
        scale=SCALE,
        code=SS_PLOT,
    shell:
        "python -m featlearn scan-snap-figure --figure generator --tables {input}"
        " --claims {output} --scale {params.scale} > {log} 2>&1"


rule fig_scan_snap_3:
    input:
        rules.scan_snap_theory.output.snapping,
    output:
        png=report_figure("scan_snap/fig3", "scan_snap", "scan_snap_fig3.rst"),
        other=other_formats("scan_snap/fig3"),
        claims=f"{SS}/claims/3.csv",
    log:
        f"{LOGS}/scan_snap/fig3.log",
    localrule: True
    conda:
        ENV
    params:
        n="3",
        claims=lambda wc, output: f"--claims {output.claims}",
        settings=json.dumps({"M": SS_CFG["theory"]["M"], "K": SS_CFG["theory"]["K"]}),
        scale=SCALE,
        dpi=config["report"]["dpi"],
        code=SS_PLOT,
    shell:
        FIG_SHELL


rule fig_scan_snap_4:
    input:
        rules.scan_snap_syn_small.output,
    output:
        png=report_figure("scan_snap/fig4", "scan_snap", "scan_snap_fig4.rst"),
        other=other_formats("scan_snap/fig4"),
        claims=f"{SS}/claims/4.csv",
    log:
        f"{LOGS}/scan_snap/fig4.log",
    localrule: True
    conda:
        ENV
    params:
        n="4",
        claims=lambda wc, output: f"--claims {output.claims}",
        settings="{}",
        scale=SCALE,
        dpi=config["report"]["dpi"],
        code=SS_PLOT,
    shell:
        FIG_SHELL


rule fig_scan_snap_5:
    input:
        rules.scan_snap_adam.output,
    output:
        png=report_figure("scan_snap/fig5", "scan_snap", "scan_snap_fig5.rst"),
        other=other_formats("scan_snap/fig5"),
        claims=f"{SS}/claims/5.csv",
    log:
        f"{LOGS}/scan_snap/fig5.log",
    localrule: True
    conda:
        ENV
    params:
        n="5",
        claims=lambda wc, output: f"--claims {output.claims}",
        settings="{}",
        scale=SCALE,
        dpi=config["report"]["dpi"],
        code=SS_PLOT,
    shell:
        FIG_SHELL


rule fig_scan_snap_6:
    input:
        rules.scan_snap_syn_medium.output.final,
    output:
        png=report_figure("scan_snap/fig6", "scan_snap", "scan_snap_fig6.rst"),
        other=other_formats("scan_snap/fig6"),
        claims=f"{SS}/claims/6.csv",
    log:
        f"{LOGS}/scan_snap/fig6.log",
    localrule: True
    conda:
        ENV
    params:
        n="6",
        claims=lambda wc, output: f"--claims {output.claims}",
        settings="{}",
        scale=SCALE,
        dpi=config["report"]["dpi"],
        code=SS_PLOT,
    shell:
        FIG_SHELL


rule fig_scan_snap_8:
    input:
        rules.scan_snap_theory.output.decoder,
    output:
        png=report_figure("scan_snap/fig8", "scan_snap", "scan_snap_fig8.rst"),
        other=other_formats("scan_snap/fig8"),
        claims=f"{SS}/claims/8.csv",
    log:
        f"{LOGS}/scan_snap/fig8.log",
    localrule: True
    conda:
        ENV
    params:
        n="8",
        claims=lambda wc, output: f"--claims {output.claims}",
        settings="{}",
        scale=SCALE,
        dpi=config["report"]["dpi"],
        code=SS_PLOT,
    shell:
        FIG_SHELL


rule fig_scan_snap_9:
    input:
        rules.scan_snap_theory.output.t0,
    output:
        png=report_figure("scan_snap/fig9", "scan_snap", "scan_snap_fig9.rst"),
        other=other_formats("scan_snap/fig9"),
        claims=f"{SS}/claims/9.csv",
    log:
        f"{LOGS}/scan_snap/fig9.log",
    localrule: True
    conda:
        ENV
    params:
        n="9",
        claims=lambda wc, output: f"--claims {output.claims}",
        settings="{}",
        scale=SCALE,
        dpi=config["report"]["dpi"],
        code=SS_PLOT,
    shell:
        FIG_SHELL


rule fig_scan_snap_11:
    input:
        rules.scan_snap_syn_medium.output.recall,
    output:
        png=report_figure("scan_snap/fig11", "scan_snap", "scan_snap_fig11.rst"),
        other=other_formats("scan_snap/fig11"),
    log:
        f"{LOGS}/scan_snap/fig11.log",
    localrule: True
    conda:
        ENV
    params:
        n="11",
        claims="",
        settings="{}",
        scale=SCALE,
        dpi=config["report"]["dpi"],
        code=SS_PLOT,
    shell:
        FIG_SHELL


rule fig_scan_snap_12:
    input:
        rules.scan_snap_syn_medium.output.recall,
    output:
        png=report_figure("scan_snap/fig12", "scan_snap", "scan_snap_fig12.rst"),
        other=other_formats("scan_snap/fig12"),
    log:
        f"{LOGS}/scan_snap/fig12.log",
    localrule: True
    conda:
        ENV
    params:
        n="12",
        claims="",
        settings="{}",
        scale=SCALE,
        dpi=config["report"]["dpi"],
        code=SS_PLOT,
    shell:
        FIG_SHELL


rule scan_snap:
    input:
        paper_outputs("scan_snap"),
