# Paper `features`: Sun, Li, Lu 2023, "Unraveling Feature Extraction Mechanisms in Neural Networks" (NTK view).
# Models, hyperparameters, figure specs and claims follow the paper; where the paper is silent the
# source of a value (authors' code, or a decision of this project) is named next to it.
#
# Adding a figure is adding a rule, a module and a caption:
#   1. a compute rule (training/simulation) that writes tidy tables under results/features/, with log,
#      benchmark, threads, resources and params code=code_hash("features");
#   2. a rule fig_features_<n> (localrule) that reads only those tables and writes
#      report_figure("features/fig<n>", "features", "features_fig<n>.rst") plus other_formats("features/fig<n>"), and
#      its claims to results/features/claims/<n>.csv;
#   3. register both below, and a caption in workflow/report/.

PAPER_TARGETS["features"] += []
PAPER_CLAIMS["features"] += []

# ---- classification models, extraction, theory (Figs. 2-4, 6, 8-13; Tables 3, 5, 6) ----

# ---- language models (Figs. 5, 7) ----


rule features:
    input:
        paper_outputs("features"),
