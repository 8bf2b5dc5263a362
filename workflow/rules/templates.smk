# Paper `templates`: Boix-Adsera et al. 2023, "When can transformers reason with abstract symbols?".
# Every compute job and figure is declared once, in src/featlearn/templates/registry.py (stdlib only); the
# base rules of common.smk turn them into rules (templates_sweep, templates_checks, templates_kernels,
# templates_gpt2_*, templates_bench, fig_templates_<n>, fig_templates_kernels). Adding a figure: see
# docs/CONTRIBUTING.md.

from featlearn.templates.registry import registry as templates_registry
from featlearn.templates.registry import wikitext_logs as templates_wikitext_logs
from featlearn.templates.registry import GPT2_PLOT as TEMPLATES_GPT2_PLOT
from featlearn.templates.registry import CLAIM_IDS as TEMPLATES_CLAIM_IDS

register_paper(templates_registry(config, PATHS, dataset_on))

# Fig. 6 is a figure and a table at once (PNG + other formats, CSV + Markdown, claims), which no registry
# kind expresses: one hand-written rule drawing it with the figure command twice (figure, then table and claims).
TG_WIKI_LOGS = templates_wikitext_logs(config, PATHS, dataset_on)
# its record, for the report's order and the results page (the rule below is written by hand)
TG_FIG6 = Figure(
    "templates",
    "6",
    {"logs": TG_WIKI_LOGS},
    TEMPLATES_GPT2_PLOT,
    draw="featlearn.templates.gpt2.figures:draw_6",
    claims="featlearn.templates.gpt2.figures:claims_6",
)
if TG_WIKI_LOGS:
    PAPER_TARGETS["templates"] += [
        PATHS.figure("templates", "fig6", "png"),
        PATHS.paper("templates", "fig6.md"),
    ]
    PAPER_CLAIMS["templates"] += [PATHS.paper("templates", "claims", "6.csv")]
    page_entry(
        TG_FIG6,
        pngs=[PATHS.figure("templates", "fig6", "png")],
        tables=[PATHS.paper("templates", "fig6.md")],
    )


rule fig_templates_6:
    input:
        logs=TG_WIKI_LOGS,
    output:
        png=report_figure(
            "templates/fig6",
            "templates",
            TG_FIG6.caption,
            TG_FIG6.order,
            TG_FIG6.label,
        ),
        other=other_formats("templates/fig6"),
        csv=PATHS.paper("templates", "fig6.csv"),
        md=report_table(TG_FIG6, "fig6"),
        claims=PATHS.paper("templates", "claims", "6.csv"),
    log:
        PATHS.log("templates", "fig6"),
    benchmark:
        PATHS.benchmark("templates", "fig6")
    localrule: True
    conda:
        ENV
    params:
        **usage_param(PATHS.benchmark("templates", "fig6")),
        inputs=lambda wildcards, input: named_paths(input),
        scale=SCALE,
        dpi=config["report"]["dpi"],
        code=figure_code(None, "featlearn.templates.gpt2.figures")
        + code_hash(*TEMPLATES_GPT2_PLOT),
        claim_ids=json.dumps(list(TEMPLATES_CLAIM_IDS["6"])),
    shell:
        SERVER_ENV
        + "python -m featlearn figure --draw=featlearn.templates.gpt2.figures:draw_6"
        " --inputs {params.inputs:q} --figures {output.png} {output.other}"
        " --scale {params.scale} --dpi {params.dpi} > {log} 2>&1 &&"
        " python -m featlearn figure --draw=featlearn.templates.gpt2.figures:table_6"
        " --claims-fn=featlearn.templates.gpt2.figures:claims_6 --inputs {params.inputs:q}"
        " --figures {output.csv} {output.md} --claims={output.claims} --claim-ids {params.claim_ids:q}"
        " --scale {params.scale} --dpi {params.dpi} >> {log} 2>&1"


rule templates:
    input:
        paper_outputs("templates"),
