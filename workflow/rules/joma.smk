# Paper `joma`: Tian, Wang, Zhang, Chen, Du 2023, "JoMA" (joint MLP/attention dynamics).
# Every compute job and figure is declared once, in src/featlearn/joma/registry.py; the base rules of
# base_rules.smk turn them into rules (joma_<job>, fig_joma_<n>, table_joma_1, check_joma_theorem2,
# fig_joma_hblt). Adding a figure: see docs/CONTRIBUTING.md.

from featlearn.joma.registry import registry as joma_registry

JOMA = joma_registry(config, PATHS, dataset_on)
register_paper(JOMA)


rule joma:
    input:
        paper_outputs("joma"),
