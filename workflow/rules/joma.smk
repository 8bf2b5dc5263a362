# Paper `joma`: Tian, Wang, Zhang, Chen, Du 2023, "JoMA" (joint MLP/attention dynamics).
# Every compute job and figure is declared once, in src/featlearn/joma/registry.py; the base rules of
# common.smk turn them into rules (joma_<job>, fig_joma_<n>, check_joma_theorem2, fig_joma_hblt).
# Two figure rules are written here, from their registry records, because the base figure rule cannot
# express them: fig_joma_6 draws two figures (attention entropy, stable rank) and table_joma_1 writes a
# LaTeX table beside its CSV and Markdown. Adding a figure: see docs/CONTRIBUTING.md.

from featlearn.joma.registry import figure_command as joma_figure_command
from featlearn.joma.registry import registry as joma_registry

JOMA = joma_registry(config, PATHS, dataset_on)
register_paper(JOMA)


_joma_fig6 = JOMA.hand_written_figure("6")
if _joma_fig6 is not None:
    PAPER_TARGETS["joma"].append(PATHS.figure("joma", "fig6", "png"))
    page_entry(
        _joma_fig6,
        pngs=[
            PATHS.figure("joma", "fig6", "png"),
            PATHS.figure("joma", "fig6_stable_rank", "png"),
        ],
    )

    rule fig_joma_6:
        input:
            **_joma_fig6.inputs,
        output:
            png=report_figure(
                "joma/fig6", "joma", "joma_fig6.rst", _joma_fig6.order, "Fig. 6"
            ),
            other=other_formats("joma/fig6"),
            rank_png=report_figure(
                "joma/fig6_stable_rank",
                "joma",
                "joma_fig6_stable_rank.rst",
                f"{_joma_fig6.order}_stable_rank",
                "Fig. 6 (stable rank)",
            ),
            rank_other=other_formats("joma/fig6_stable_rank"),
            claims=_joma_fig6.claims_file(PATHS),
        log:
            PATHS.log("joma", _joma_fig6.log_stem),
        benchmark:
            PATHS.benchmark("joma", _joma_fig6.log_stem)
        localrule: True
        conda:
            ENV
        params:
            **usage_param(PATHS.benchmark("joma", _joma_fig6.log_stem)),
            inputs=lambda wildcards, input: named_paths(input),
            settings=_joma_fig6.settings_json(),
            claim_ids=_joma_fig6.claim_ids_json(),
            scale=SCALE,
            dpi=config["report"]["dpi"],
            code=figure_code(_joma_fig6),
        shell:
            SERVER_ENV
            + joma_figure_command(_joma_fig6, "{output.png} {output.other}")
            + " > {log} 2>&1; "
            + joma_figure_command(
                _joma_fig6,
                "{output.rank_png} {output.rank_other}",
                claims=False,
                draw=f"{_joma_fig6.draw}_stable_rank",
            )
            + " >> {log} 2>&1"


_joma_table1 = JOMA.hand_written_figure("1")
PAPER_TARGETS["joma"].append(PATHS.paper("joma", "table1.md"))
page_entry(_joma_table1, tables=[PATHS.paper("joma", "table1.md")])


rule table_joma_1:
    input:
        **_joma_table1.inputs,
    output:
        csv=PATHS.paper("joma", "table1.csv"),
        tex=PATHS.paper("joma", "table1.tex"),
        md=report_table(_joma_table1),
        claims=_joma_table1.claims_file(PATHS),
    log:
        PATHS.log("joma", _joma_table1.log_stem),
    benchmark:
        PATHS.benchmark("joma", _joma_table1.log_stem)
    localrule: True
    conda:
        ENV
    params:
        **usage_param(PATHS.benchmark("joma", _joma_table1.log_stem)),
        inputs=lambda wildcards, input: named_paths(input),
        settings=_joma_table1.settings_json(),
        claim_ids=_joma_table1.claim_ids_json(),
        latex_settings=json.dumps({"scale": SCALE}),
        latex=lambda wildcards, output: json.dumps({"tex": output.tex}),
        scale=SCALE,
        dpi=config["report"]["dpi"],
        code=figure_code(_joma_table1, "featlearn.compute"),
    shell:
        # the LaTeX table: a compute step (`figure` writes a table as CSV and Markdown only)
        SERVER_ENV
        + joma_figure_command(_joma_table1, "{output.csv} {output.md}")
        + " > {log} 2>&1; "
        "python -m featlearn compute --run featlearn.joma.table1_figures:write_latex"
        " --settings {params.latex_settings:q} --inputs {params.inputs:q} --outputs {params.latex:q}"
        " --threads 1 --device cpu >> {log} 2>&1"


rule joma:
    input:
        paper_outputs("joma"),
