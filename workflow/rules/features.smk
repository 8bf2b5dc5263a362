# Paper `features`: Sun, Li, Lu 2023, "Unraveling Feature Extraction Mechanisms in Neural Networks" (NTK view).
# Models, hyperparameters, figure specs and claims follow the paper; where the paper is silent the
# source of a value (authors' code, or a decision of this project) is named next to it.
# Every compute job, figure and table is declared once, in src/featlearn/features/registry.py (the job
# table of the classification experiments included); the base rules of common.smk turn them into rules
# (features_<job>, fig_features_<n>, table_features_<n>). Adding a figure: see docs/CONTRIBUTING.md.

from featlearn.features.registry import registry as features_registry

register_paper(features_registry(config, PATHS, dataset_on))


rule features:
    input:
        paper_outputs("features"),
