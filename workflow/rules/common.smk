# Helpers only: config lookups, output paths, dataset switches, code hashes, and the registry helpers
# (register_paper collects each paper's records; workflow/rules/base_rules.smk turns them into rules).

import json
import os
import shlex
import sys
from pathlib import Path

# The package lives in src/. This file imports it, and every job's shell puts it on PYTHONPATH, so
# rules also run in environments where it is not installed (e.g. `--sdm conda`).
SRC = str(Path(workflow.basedir) / "src")
if SRC not in sys.path:
    sys.path.insert(0, SRC)
shell.prefix(
    f"export PYTHONPATH={shlex.quote(SRC)}:$(printenv PYTHONPATH || true); set -euo pipefail; "
    # with the job server on, featlearn commands use it; "-": no benchmark file to record usage beside
    + ("export FEATLEARN_USAGE=-; " if config["job_server"] else "")
)

from featlearn import PAPERS
from featlearn.data.registry import DATASETS, PREPARED
from featlearn.pipeline.workflow import (
    PAPER_DATASETS,
    code_hash,
    config_differences,
    config_sha256,
    dataset_status,
    paper_scale_config,
    prepared_enabled,
    pretrained_checkpoints,
)

import featlearn.devices
import featlearn.keptwork
import featlearn.pipeline.evidence
import featlearn.pipeline.jobclient
import featlearn.pipeline.jobserver
import featlearn.pipeline.sizing
import featlearn.pipeline.workflow
import featlearn.precision

# A dry run builds the DAG without network: uncached checkpoints are then listed as skipped.
featlearn.pipeline.workflow.HUB_CONTACT["allowed"] = (
    not featlearn.pipeline.workflow.is_dry_run(sys.argv)
)

RESULTS = "results"
RAW = f"{RESULTS}/data/raw"
PREPARED_DIR = f"{RESULTS}/data/prepared"
FIGURES = f"{RESULTS}/figures"
LOGS = f"{RESULTS}/logs"
BENCH = f"{RESULTS}/benchmarks"
ENV = "../../envs/featlearn.yaml"
SCALE = config["scale"]
# Committed results of paper-scale runs, figure by figure (featlearn.pipeline.evidence): the scorecard and the
# results pages show them beside this run's verdicts, and rerun when they change. They belong to the repository,
# so they are found beside the Snakefile whatever the working directory.
EVIDENCE = os.path.relpath(
    Path(workflow.basedir) / featlearn.pipeline.evidence.EVIDENCE_DIR
)

# enabled: auto and a dataset to download: a real run first checks that its hosts answer (a dry run does not)
DATASET_STATUS = dataset_status(
    config,
    RAW,
    reachable=(
        featlearn.pipeline.workflow.hosts_reachable
        if featlearn.pipeline.workflow.HUB_CONTACT["allowed"]
        else None
    ),
)
PREPARED_ON = prepared_enabled(DATASET_STATUS)

# Filled by each paper's rules file: figure/table outputs and claim-table parts.
PAPER_TARGETS = {p: [] for p in PAPERS}
PAPER_CLAIMS = {p: [] for p in PAPERS}
# claims of skipped figures: id -> (figure, statement, why)
PAPER_UNCHECKED = {p: {} for p in PAPERS}
# claim id pattern -> the sanity checks those claims rest on (a failed one makes them unchecked)
PAPER_GATES = {p: {} for p in PAPERS}
PAPER_FEW_SEEDS = {p: {} for p in PAPERS}
# What this run leaves out and why (shown at start-up and in the scorecard).
SKIPPED = {}

for _name, _status in DATASET_STATUS.items():
    if not _status.enabled:
        _users = sorted(
            p
            for p, names in PAPER_DATASETS.items()
            if any(PREPARED[n].raw == _name for n in names)
        )
        SKIPPED[f"dataset {_name}"] = (
            f"{_status.reason}; figures of {', '.join(_users) or 'the papers'} that need it are skipped"
        )


def prepare_input(wildcards):
    """Raw files that a prepared dataset is built from."""
    return raw_files(PREPARED[wildcards.name].raw)


def raw_files(dataset):
    """Verified raw files of one registry dataset."""
    return [f"{RAW}/{dataset}/{f.name}" for f in DATASETS[dataset].files]


def prepared(name, filename):
    """Path of one file of a prepared dataset."""
    return f"{PREPARED_DIR}/{name}/{filename}"


def prepared_stats():
    return [prepared(n, "stats.json") for n, on in PREPARED_ON.items() if on]


def dataset_on(name):
    """Whether prepared dataset ``name`` (or a raw-only registry entry such as ``gpt2``) is available in this
    run (paper rules test this)."""
    return PREPARED_ON[name] if name in PREPARED_ON else DATASET_STATUS[name].enabled


def report_labels(order, name):
    """Report labels: ``#`` sorts a paper's items in the paper's order (the report sorts labels as text),
    ``item`` names them as the paper does."""
    return {"#": order, "item": name}


def report_figure(stem, category, caption, order="X", name=None):
    """The PNG of figure ``stem`` (e.g. "joma/fig4"), shown by `snakemake --report` under
    ``category`` with the caption file workflow/report/<caption>, sorted by ``order``.
    """
    return report(
        f"{FIGURES}/{stem}.png",
        caption=f"../report/{caption}",
        category=category,
        labels=report_labels(order, name or stem.split("/")[-1]),
    )


def other_formats(stem):
    """The figure's files in the other configured formats (PDF by default)."""
    return [
        f"{FIGURES}/{stem}.{ext}"
        for ext in config["report"]["figure_formats"]
        if ext != "png"
    ]


def paper_page(paper):
    """The paper's results page, written by the paper_page rule: Markdown beside its results, HTML for the
    report."""
    return {
        "md": f"{RESULTS}/{paper}/README.md",
        "html": f"{RESULTS}/{paper}/{paper}_results.html",
    }


def paper_outputs(paper):
    return PAPER_TARGETS[paper] + [
        f"{RESULTS}/{paper}/claims.csv",
        paper_page(paper)["md"],
    ]


def all_targets():
    targets = [
        f"{RESULTS}/data/summary.csv",
        f"{RESULTS}/scorecard.md",
        f"{RESULTS}/benchmarks.md",
    ]
    for paper in PAPERS:
        if config["papers"][paper]:
            targets += paper_outputs(paper)
    return targets


def data_flags():
    flags = []
    if config["data"]["mirror"]:
        flags.append(f"--mirror {shlex.quote(str(config['data']['mirror']))}")
    if config["data"]["offline"]:
        flags.append("--offline")
    return " ".join(flags)


# ---- code hashes (params.code): a job reruns when any featlearn module it may import changes (featlearn.pipeline.imports
# walks the imports statically), plus the files its registry record lists.
from featlearn.pipeline.imports import entry_module, modules_hash


def job_code(job):
    """Code hash of a compute job: the import closure of its run module and of the compute command."""
    return modules_hash(
        (entry_module(job.run), "featlearn.pipeline.compute"), extra=job.code
    )


def figure_code(fig):
    """Code hash of a figure rule: the import closure of the figure command and of its draw (further drawings
    included) and claims modules."""
    functions = (fig.draw, fig.claims, *(d.draw for d in fig.also))
    entries = [entry_module(s) for s in functions if s]
    return modules_hash(("featlearn.pipeline.figure", *entries), extra=fig.code)


# ---- the two base rules: every paper's registry (featlearn/<paper>/registry.py) is turned into rules here.
from featlearn.pipeline.registry import CHECK, FIGURE, TABLE, Figure, Paths

PATHS = Paths(RESULTS)


def named_paths(files):
    """A rule's named inputs or outputs as a JSON object for the command line (lists stay lists)."""
    return json.dumps(
        {k: v if isinstance(v, str) else list(v) for k, v in files.items()},
        sort_keys=True,
    )


# Records of every registered paper; workflow/rules/base_rules.smk turns them into rules.
REGISTERED_JOBS = []
REGISTERED_FIGURES = []


# ------------------------------------------------------------------ job server (config key job_server)
# With job_server on, the featlearn commands of a local run are forked from one warm process that has
# imported torch and the plotting libraries once (src/featlearn/pipeline/jobserver.py); the smoke overlay turns it
# on. A rule with a benchmark file adds **usage_param(<benchmark pattern>) to its params and starts its shell
# command with SERVER_ENV, so the worker's CPU time and memory are recorded beside the benchmark file, which
# sees only the client process. Only for a local run on Linux without conda or containers (the server runs
# Snakemake's own Python).
JOB_SERVER = {"on": config["job_server"], "handle": None}
SERVER_ENV = (
    f"export {featlearn.pipeline.jobclient.USAGE_ENV}={{params.usage:q}}; "
    if JOB_SERVER["on"]
    else ""
)


def usage_param(benchmark):
    """params.usage for SERVER_ENV: the job's usage file (wildcards filled in); nothing when the server is off."""
    return {"usage": f"{benchmark}.server.json"} if JOB_SERVER["on"] else {}


def start_job_server():
    methods = {m.name for m in workflow.deployment_settings.deployment_method}
    if (
        JOB_SERVER["on"]
        and workflow.local_exec
        and workflow.is_main_process
        and sys.platform.startswith("linux")
        and not methods & {"CONDA", "APPTAINER"}
    ):
        JOB_SERVER["handle"] = featlearn.pipeline.jobserver.start(
            f"{LOGS}/job_server", SRC, os.getpid()
        )


def stop_job_server():
    featlearn.pipeline.jobserver.stop(JOB_SERVER["handle"])
    JOB_SERVER["handle"] = None


def sweep_finished_work():
    """When the workflow ends (onsuccess, onerror): remove the resume checkpoints, parts and clocks that finished
    compute jobs kept until Snakemake accepted their outputs (featlearn.keptwork.sweep_finished). A job Snakemake
    failed after its outputs were written (killed at a time limit while its job script wrapped up) has had them
    deleted, so its work stays for the rerun. Not with --keep-incomplete, which keeps a failed job's outputs.
    """
    if workflow.is_main_process and not workflow.execution_settings.keep_incomplete:
        featlearn.keptwork.sweep_finished(RESULTS)


def job_settings(job):
    """The settings param of a job's rule: its JSON settings (a function, for jobs with wildcards)."""
    return lambda wildcards: job.settings_json(wildcards)


def job_work_dir(job):
    """The resume folder param of a job's rule ("" for jobs that keep none)."""
    if callable(job.work_dir):
        return job.work_dir
    return job.work_dir or ""


# Per-job limits measured by `python -m featlearn estimate` (results/estimate/resources.json, where it exists):
# a job's runtime and mem_mb are then the estimate's, never below the rule's own (featlearn.pipeline.sizing).
ESTIMATED = featlearn.pipeline.sizing.load_estimate(
    f"{RESULTS}/{featlearn.pipeline.sizing.ESTIMATE_RESOURCES}"
)


def job_limit(job, key):
    """A job's ``runtime`` or ``mem_mb``: the registry's value, or the estimate's where it is larger. On a
    cluster whose partitions are listed (the SLURM profile's slurm-partition-config), a runtime is capped at the
    longest time limit of a partition the job may run on: a longer training is killed at that limit and
    resumes from its checkpoints in the next allocation (the profile's retries)."""
    own = getattr(job.resources, key)

    def limit(wildcards):
        floor = own(wildcards) if callable(own) else own
        value = featlearn.pipeline.sizing.sized(
            ESTIMATED, job.name, job.settings_json(wildcards), key, floor
        )
        if key == "runtime":
            cap = featlearn.pipeline.sizing.partition_runtime_cap(
                partition_config(), gpu_slots(job)(wildcards) > 0
            )
            if cap is not None:
                value = min(value, cap)
        return value

    return limit


def capped_runtime(minutes):
    """The runtime (minutes, or a function of the wildcards) of a rule that is not a registry job (data
    preparation), capped like a job's at the longest time limit of the CPU partitions of a SLURM run, so that it
    is sent to a partition that exists rather than to the cluster's default."""

    def limit(wildcards):
        value = minutes(wildcards) if callable(minutes) else minutes
        cap = featlearn.pipeline.sizing.partition_runtime_cap(partition_config(), False)
        return value if cap is None else min(value, cap)

    return limit


def partition_config():
    """The partitions file of a SLURM run (slurm-partition-config), or None on any other executor."""
    settings = getattr(workflow, "executor_settings", None)
    return getattr(settings, "partition_config", None)


def run_device():
    """The device this run's GPU-capable jobs get, decided before the DAG is built (featlearn.devices.dag_device):
    `auto` on a local run with no GPU visible becomes `cpu`, so no job waits for a GPU slot. Called when jobs
    are created, once Snakemake knows its executor (a cluster run keeps `auto`)."""
    return featlearn.devices.dag_device(config["device"], workflow.local_exec)


def job_device(job):
    """The device a job runs on (a function of the wildcards, evaluated when the job is created): the run's
    device for jobs that can use a GPU, else the CPU."""
    return lambda wildcards: run_device() if job.resources.gpu else "cpu"


# Download and preparation of the data come before everything: they take minutes and every training of real
# data waits for them (Snakemake does not pass a job's priority on to the jobs it waits for).
DATA_PRIORITY = 2000


def job_priority(job):
    """Long jobs first, so the long trainings start early and the short jobs fill the cores around them instead
    of leaving one long job alone at the end of the run: the trainings (jobs that can use a GPU) before the
    rest, then by the registry's runtime limit in minutes (a limit that depends on the wildcards, as the LMs'
    does, counts as 120: those are the longest trainings)."""
    runtime = job.resources.runtime
    return (1000 if job.resources.gpu else 0) + (
        runtime if isinstance(runtime, int) else 120
    )


def job_gpu_memory(job):
    """The job's `gpu_mem_mb` resource: the GPU memory it declares where it asks for a GPU (the estimate's, from
    results/estimate/resources.json, else its rule's mem_mb), 0 on the CPU. profiles/gpu caps the sum of the
    running jobs' values with the global resource gpu_mem_mb, so several jobs share a card as long as they fit.
    """
    mem = job.resources.mem_mb

    def need(wildcards):
        if job_device(job)(wildcards) == "cpu":
            return 0
        floor = mem(wildcards) if callable(mem) else mem
        return featlearn.pipeline.sizing.gpu_memory(
            ESTIMATED, job.name, job.settings_json(wildcards), floor
        )

    return need


def job_precision(job):
    """The arithmetic of a job (featlearn.precision): for the jobs that can use a GPU (the trainings), the job's
    own (its config section's precision) or else the run's (config key precision); fp32 for every other job.
    """
    return featlearn.precision.of_job(
        job.precision, config["precision"], job.resources.gpu
    )


def gpu_slots(job):
    """The job's `gpu` resource: 1 where it will ask for a GPU (device not `cpu`), else 0."""
    return lambda wildcards: 0 if job_device(job)(wildcards) == "cpu" else 1


def figure_outputs(fig):
    """Named outputs of a figure rule: each drawing (PNG in the report, other formats beside it; a table as
    CSV and Markdown, and LaTeX where the record asks), the record's own under png/other or csv/md/tex and
    its further drawings under also<i>_..., and the claims table."""
    out = {}
    for i, (_, kind, stem, order, label, caption) in enumerate(fig.drawings()):
        key = "" if i == 0 else f"also{i - 1}_"
        if kind == FIGURE:
            out[f"{key}png"] = report_figure(
                f"{fig.paper}/{stem}", fig.paper, caption, order, label
            )
            out[f"{key}other"] = other_formats(f"{fig.paper}/{stem}")
        else:
            out[f"{key}csv"] = PATHS.paper(fig.paper, f"{stem}.csv")
            out[f"{key}md"] = report(
                PATHS.paper(fig.paper, f"{stem}.md"),
                caption=f"../report/{caption}",
                category=fig.paper,
                labels=report_labels(order, label),
            )
            if "tex" in fig.table_formats:
                out[f"{key}tex"] = PATHS.paper(fig.paper, f"{stem}.tex")
    if fig.claims:
        out["claims"] = fig.claims_file(PATHS)
    return out


def _files(value):
    return [value] if isinstance(value, str) else list(value)


def drawn_files(output):
    """What the record's own draw function writes: its outputs but the claims table and further drawings."""
    return [
        f
        for name, value in output.items()
        if name != "claims" and not name.startswith("also")
        for f in _files(value)
    ]


def further_drawings(fig, output):
    """JSON for the figure command's --also: each further drawing's function and files."""
    return json.dumps(
        [
            {
                "draw": d.draw,
                "files": [
                    f
                    for name, value in output.items()
                    if name.startswith(f"also{i}_")
                    for f in _files(value)
                ],
            }
            for i, d in enumerate(fig.also)
        ]
    )


from featlearn.pipeline.targets import cannot_run, unchecked_claims
from featlearn.pipeline.targets import unavailable as unavailable_figures


def figure_files(fig):
    """The PNGs and Markdown tables of a figure rule, as the results page lists them."""
    pngs, tables = [], []
    for _, kind, stem, *_ in fig.drawings():
        if kind == FIGURE:
            pngs.append(PATHS.figure(fig.paper, stem, "png"))
        else:
            tables.append(PATHS.paper(fig.paper, f"{stem}.md"))
    return pngs, tables


# What each paper's results page lists: one entry per figure, table or check (see page_entry).
PAGE_FIGURES = {p: [] for p in PAPERS}


def page_entry(fig, pngs=(), tables=(), inputs=None, claims=None):
    """A results-page entry of record ``fig`` (a registry Figure): its label, rule, caption, drawn files,
    claims table and the inputs from which its compute jobs are found."""
    PAGE_FIGURES[fig.paper].append(
        {
            "rule": fig.rule,
            "label": fig.label,
            "order": fig.order,
            "caption": f"workflow/report/{fig.caption}" if fig.kind != CHECK else "",
            "pngs": list(pngs),
            "tables": list(tables),
            "claims": claims if claims is not None else (fig.claims_file(PATHS) or ""),
            "inputs": inputs if inputs is not None else dict(fig.inputs),
            # the figure rule's own benchmark file (drawing and claims)
            "draw": {
                "label": f"{fig.rule} (drawing, claims)",
                "benchmark": PATHS.benchmark(fig.paper, fig.log_stem),
            },
        }
    )


def register_paper(reg):
    """Rules, targets, claims tables and skipped parts of one paper's registry."""
    REGISTERED_JOBS.extend(reg.jobs)
    REGISTERED_FIGURES.extend(reg.figures)
    for fig in reg.figures:
        pngs, tables = figure_files(fig)
        PAPER_TARGETS[reg.paper] += pngs + tables
        page_entry(fig, pngs=pngs, tables=tables)
    PAPER_CLAIMS[reg.paper] += reg.claim_tables(PATHS)
    SKIPPED.update(reg.skipped)
    PAPER_UNCHECKED[reg.paper].update(reg.unchecked)
    PAPER_GATES[reg.paper].update(reg.gates)
    PAPER_FEW_SEEDS[reg.paper].update(reg.few_seeds)


# ---- what the run says about itself (rules in scorecard.smk): its record, results pages, compute table.
from featlearn.pipeline.dag import JobIndex, files_of

RUN_RECORD = f"{RESULTS}/run.json"
_JOB_INDEX = []
_PAPER_SCALE_CONFIG = paper_scale_config(Path(workflow.basedir) / "config")


def _jobs_of(inputs):
    """The compute jobs (label and benchmark file) that a figure's inputs need."""
    files = [p for value in inputs.values() for p in files_of(value)]
    if not _JOB_INDEX:  # built once every paper has registered its jobs
        _JOB_INDEX.append(JobIndex(REGISTERED_JOBS, PATHS))
    return [
        {"label": j.label, "benchmark": j.benchmark}
        for j in _JOB_INDEX[0].upstream(files)
    ]


def _page_figures(paper):
    entries = sorted(PAGE_FIGURES[paper], key=lambda e: e["order"])
    return [
        {
            **{k: v for k, v in e.items() if k not in ("inputs", "draw")},
            "jobs": _jobs_of(e["inputs"]) + [e["draw"]],
        }
        for e in entries
    ]


def figure_entry(paper, name):
    """The results-page entry of one figure, table or check (as its paper's page lists it), by its target name."""
    for entry in _page_figures(paper):
        if entry["rule"] == name:
            return entry
    known = ", ".join(e["rule"] for e in _page_figures(paper))
    raise ValueError(
        f"{paper} has no figure {name!r} in this run; its figures: {known}"
    )


def figure_evidence_inputs(paper, name):
    """What a figure's prepared evidence reads: its drawings, tables and claims table."""
    entry = figure_entry(paper, name)
    return (
        entry["pngs"] + entry["tables"] + ([entry["claims"]] if entry["claims"] else [])
    )


def figure_evidence_prerequisites(paper, name):
    """The claims tables of the paper's other figures that hold the sanity checks a figure's claims rest on (its
    gates): its prepared evidence judges them on this run's checks, so the run makes those tables too.
    """
    figs = [f for f in REGISTERED_FIGURES if f.paper == paper and f.claims]
    own = [f for f in figs if f.rule == name]
    others = {f.claims_file(PATHS): list(f.claim_ids) for f in figs if f.rule != name}
    return featlearn.pipeline.evidence.prerequisite_tables(
        list(own[0].claim_ids) if own else [], PAPER_GATES[paper], others
    )


def page_manifest(paper):
    """What the results page of ``paper`` lists (figures, their jobs, settings that differ from paper
    scale, what was skipped), as JSON for the rule's command line."""
    skipped = {
        what: why
        for what, why in SKIPPED.items()
        if what.startswith(f"{paper} ")
        or (what.startswith("dataset ") and paper in why)
    }
    manifest = {
        "paper": paper,
        "out_dir": f"{RESULTS}/{paper}",
        "figures": _page_figures(paper),
        "differences": config_differences(config, _PAPER_SCALE_CONFIG, paper),
        "skipped": skipped,
    }
    return json.dumps(manifest, sort_keys=True, separators=(",", ":"), default=str)


def data_jobs():
    """The data preparations of this run, as compute-table rows."""
    return [
        {"label": f"prepare {name}", "benchmark": f"{BENCH}/data/prepare_{name}.tsv"}
        for name, on in PREPARED_ON.items()
        if on
    ]


def compute_manifest():
    papers = {p: _page_figures(p) for p in PAPERS if config["papers"][p]}
    return json.dumps(
        {"papers": papers, "data": data_jobs()},
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )
