# Claims: each paper's claim tables -> results/<paper>/claims.csv -> results/scorecard.{csv,md,html}.
# What the run says about itself: results/run.json (its record), results/<paper>/README.md (one page per
# paper, HTML copy in the report) and results/benchmarks.md (compute, from the benchmark files).


# Every paper file has registered what it leaves out by now: say it once, at start-up.
for _what, _why in sorted(SKIPPED.items()):
    print(f"featlearn: skipping {_what} ({_why})", file=sys.stderr)


rule paper_claims:
    input:
        lambda wc: PAPER_CLAIMS[wc.paper],
    output:
        f"{RESULTS}/{{paper}}/claims.csv",
    log:
        f"{LOGS}/{{paper}}/claims.log",
    wildcard_constraints:
        paper="|".join(PAPERS),
    localrule: True
    conda:
        ENV
    params:
        unchecked=lambda wc: json.dumps(PAPER_UNCHECKED[wc.paper], sort_keys=True),
        gates=lambda wc: json.dumps(PAPER_GATES[wc.paper], sort_keys=True),
        few_seeds=lambda wc: json.dumps(PAPER_FEW_SEEDS[wc.paper], sort_keys=True),
        scale=SCALE,
    shell:
        "python -m featlearn claims-merge --paper {wildcards.paper} --out {output}"
        " --unchecked {params.unchecked:q} --gates {params.gates:q} --few-seeds {params.few_seeds:q}"
        " --scale {params.scale} {input} > {log} 2>&1"


rule scorecard:
    input:
        claims=[f"{RESULTS}/{p}/claims.csv" for p in PAPERS if config["papers"][p]],
        run=RUN_RECORD,
        evidence=featlearn.pipeline.evidence.evidence_inputs(EVIDENCE),
    output:
        csv=f"{RESULTS}/scorecard.csv",
        md=f"{RESULTS}/scorecard.md",
        html=report(
            f"{RESULTS}/scorecard.html",
            caption="../report/scorecard.rst",
            category="scorecard",
        ),
    log:
        f"{LOGS}/scorecard.log",
    localrule: True
    conda:
        ENV
    params:
        skipped=json.dumps(SKIPPED, sort_keys=True),
    shell:
        "python -m featlearn scorecard --out-csv {output.csv} --out-md {output.md}"
        " --out-html {output.html} --run {input.run} --skipped {params.skipped:q}"
        f" --evidence {shlex.quote(EVIDENCE)} {{input.claims}} > {{log}} 2>&1"


rule run_record:
    output:
        RUN_RECORD,
    log:
        f"{LOGS}/run_record.log",
    localrule: True
    conda:
        ENV
    params:
        scale=SCALE,
        config_sha=config_sha256(config),
        code_sha=code_hash("."),
        device=config["device"],
        job_device=lambda wildcards: run_device(),
        precision=config["precision"],
    shell:
        "python -m featlearn run-record --out {output} --scale {params.scale}"
        " --config-sha {params.config_sha} --code-sha {params.code_sha}"
        " --device {params.device:q} --job-device {params.job_device:q}"
        " --precision {params.precision} > {log} 2>&1"


rule paper_page:
    input:
        targets=lambda wc: PAPER_TARGETS[wc.paper],
        claims=f"{RESULTS}/{{paper}}/claims.csv",
        run=RUN_RECORD,
        evidence=lambda wc: featlearn.pipeline.evidence.evidence_inputs(
            EVIDENCE, wc.paper
        ),
    output:
        md=f"{RESULTS}/{{paper}}/README.md",
        manifest=f"{RESULTS}/{{paper}}/page.json",
        html=report(
            f"{RESULTS}/{{paper}}/{{paper}}_results.html",
            caption="../report/paper_page.rst",
            category="{paper}",
            labels=report_labels("000", "results page"),
        ),
    log:
        f"{LOGS}/{{paper}}/page.log",
    wildcard_constraints:
        paper="|".join(PAPERS),
    localrule: True
    conda:
        ENV
    params:
        manifest=lambda wc: page_manifest(wc.paper),
    shell:
        "printf '%s\\n' {params.manifest:q} > {output.manifest} && "
        "python -m featlearn paper-page --manifest {output.manifest} --claims {input.claims}"
        " --run {input.run} --out-md {output.md} --out-html {output.html}"
        f" --evidence {shlex.quote(EVIDENCE)} > {{log}} 2>&1"


# What `python -m featlearn evidence add` copies of one figure of a paper-scale run into evidence/paper/ (its files,
# its claims as claims.csv would hold them, where its jobs ran); the target that runs one figure for the evidence.
rule figure_evidence:
    input:
        files=lambda wc: figure_evidence_inputs(wc.paper, wc.figure),
        prerequisites=lambda wc: figure_evidence_prerequisites(wc.paper, wc.figure),
        run=RUN_RECORD,
    output:
        f"{RESULTS}/{{paper}}/evidence/{{figure}}.json",
    log:
        f"{LOGS}/{{paper}}/evidence_{{figure}}.log",
    wildcard_constraints:
        paper="|".join(PAPERS),
        figure=r"(fig|table|check)_\w+",
    localrule: True
    conda:
        ENV
    params:
        entry=lambda wc: json.dumps(figure_entry(wc.paper, wc.figure), sort_keys=True),
        gates=lambda wc: json.dumps(PAPER_GATES[wc.paper], sort_keys=True),
        few_seeds=lambda wc: json.dumps(PAPER_FEW_SEEDS[wc.paper], sort_keys=True),
        prerequisites=lambda wc: json.dumps(
            figure_evidence_prerequisites(wc.paper, wc.figure)
        ),
    shell:
        "python -m featlearn evidence prepare --paper {wildcards.paper} --entry {params.entry:q}"
        " --gates {params.gates:q} --few-seeds {params.few_seeds:q} --run {input.run}"
        " --prerequisites {params.prerequisites:q}"
        " --out {output} > {log} 2>&1"


rule compute_table:
    input:
        targets=[t for t in all_targets() if t != f"{RESULTS}/benchmarks.md"],
        run=RUN_RECORD,
    output:
        md=f"{RESULTS}/benchmarks.md",
        csv=f"{RESULTS}/benchmarks.csv",
        manifest=f"{RESULTS}/benchmarks.json",
    log:
        f"{LOGS}/compute_table.log",
    localrule: True
    conda:
        ENV
    params:
        manifest=compute_manifest(),
    shell:
        "printf '%s\\n' {params.manifest:q} > {output.manifest} && "
        "python -m featlearn compute-table --manifest {output.manifest} --run {input.run}"
        " --out-md {output.md} --out-csv {output.csv} > {log} 2>&1"
