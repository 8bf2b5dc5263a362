# Claims: each paper's claim tables -> results/<paper>/claims.csv -> results/scorecard.{csv,md}.

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
        scale=SCALE,
    shell:
        "python -m featlearn claims-merge --paper {wildcards.paper} --out {output}"
        " --unchecked {params.unchecked:q} --scale {params.scale} {input} > {log} 2>&1"


rule scorecard:
    input:
        [f"{RESULTS}/{p}/claims.csv" for p in PAPERS if config["papers"][p]],
    output:
        csv=f"{RESULTS}/scorecard.csv",
        md=report(
            f"{RESULTS}/scorecard.md",
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
        " --skipped {params.skipped:q} {input} > {log} 2>&1"
