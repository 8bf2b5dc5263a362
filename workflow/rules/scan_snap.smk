# Paper `scan_snap`: Tian, Wang, Chen, Du 2023, "Scan and Snap" (1-layer transformer dynamics).
# Models, hyperparameters, figure specs and claims follow the paper; where the paper is silent the
# source of a value (authors' code, or a decision of this project) is named next to it.
#
# Adding a figure is adding a rule, a module and a caption:
#   1. a compute rule (training/simulation) that writes tidy tables under results/scan_snap/, with log,
#      benchmark, threads, resources and params code=code_hash("scan_snap");
#   2. a rule fig_scan_snap_<n> (localrule) that reads only those tables and writes
#      report_figure("scan_snap/fig<n>", "scan_snap", "scan_snap_fig<n>.rst") plus other_formats("scan_snap/fig<n>"), and
#      its claims to results/scan_snap/claims/fig<n>.csv;
#   3. register both below, and a caption in workflow/report/.

PAPER_TARGETS["scan_snap"] += []
PAPER_CLAIMS["scan_snap"] += []


rule scan_snap:
    input:
        paper_outputs("scan_snap"),
