# Paper `scan_snap`: Tian, Wang, Chen, Du 2023, "Scan and Snap" (1-layer transformer dynamics).
# Every compute job and figure is declared once, in src/featlearn/scan_snap/registry.py; the base rules
# of common.smk turn them into rules (scan_snap_<job>, fig_scan_snap_<n>, check_scan_snap_generator).
# Adding a figure: see docs/CONTRIBUTING.md.

from featlearn.scan_snap.registry import registry as scan_snap_registry

register_paper(scan_snap_registry(config, PATHS, dataset_on))


rule scan_snap:
    input:
        paper_outputs("scan_snap"),
