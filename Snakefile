# featlearn: one DAG from raw data to every figure, claim and the scorecard of four papers.
# Default target: `snakemake --cores all`. One paper: `snakemake joma`. One figure: `snakemake fig_joma_4`.
# Scales: config/config.yaml (default) with overlays config/paper.yaml and config/smoke.yaml.

import sys
from pathlib import Path

from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


sys.path.insert(0, str(Path(workflow.basedir) / "src"))
from featlearn.pipeline.workflow import validate_config

# a bad key stops the run with one line per key: its path and the reason
validate_config(config, "workflow/schemas/config.schema.yaml")


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/features.smk"
include: "workflow/rules/scan_snap.smk"
include: "workflow/rules/joma.smk"
include: "workflow/rules/templates.smk"
include: "workflow/rules/base_rules.smk"
include: "workflow/rules/scorecard.smk"


# The job server (config key job_server, on in the smoke overlay) lives as long as the run.
onstart:
    start_job_server()


# Finished jobs' resume checkpoints are removed when the run ends, once Snakemake has accepted their outputs.
onsuccess:
    stop_job_server()
    sweep_finished_work()


onerror:
    stop_job_server()
    sweep_finished_work()


rule all:
    default_target: True
    input:
        all_targets(),
