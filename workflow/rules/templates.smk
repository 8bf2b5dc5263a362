# Paper `templates`: Boix-Adsera et al. 2023, "When can transformers reason with abstract symbols?".
# Every compute job and figure is declared once, in src/featlearn/templates/registry.py (stdlib only); the
# base rules of base_rules.smk turn them into rules (templates_sweep, templates_checks, templates_kernels,
# templates_gpt2_*, templates_bench, fig_templates_<n>, fig_templates_kernels). Adding a figure: see
# docs/CONTRIBUTING.md.

from featlearn.templates.registry import registry as templates_registry

register_paper(templates_registry(config, PATHS, dataset_on))


rule templates:
    input:
        paper_outputs("templates"),
