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

# ---- GPT-2 (Figs. 6, 7, 24) ----


rule templates:
    input:
        paper_outputs("templates"),
