# Paper `joma`: Tian, Wang, Zhang, Chen, Du 2023, "JoMA" (joint MLP/attention dynamics).
# Models, hyperparameters, figure specs and claims follow the paper; where the paper is silent the
# source of a value (authors' code, or a decision of this project) is named next to it.
#
# Adding a figure is adding a rule, a module and a caption:
#   1. a compute rule (training/simulation) that writes tidy tables under results/joma/, with log,
#      benchmark, threads, resources and params code=code_hash("joma");
#   2. a rule fig_joma_<n> (localrule) that reads only those tables and writes
#      report_figure("joma/fig<n>", "joma", "joma_fig<n>.rst") plus other_formats("joma/fig<n>"), and
#      its claims to results/joma/claims/<n>.csv;
#   3. register both below, and a caption in workflow/report/.

PAPER_TARGETS["joma"] += []
PAPER_CLAIMS["joma"] += []


rule joma:
    input:
        paper_outputs("joma"),
