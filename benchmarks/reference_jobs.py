"""Make or refresh the committed wall times of the CPU jobs without a cost model (featlearn.pipeline.reference).

A machine that has not run those jobs (a lent GPU with an empty results folder) gets their times from
``benchmarks/reference/cpu_jobs.json``; this script makes the entries from a run of them:

    python benchmarks/reference_jobs.py targets                     # default config: the files to ask snakemake for
    snakemake --cores all --directory <dir> $(python benchmarks/reference_jobs.py targets)   # (or from the repo root)
    python benchmarks/reference_jobs.py write --results results     # their benchmark files into the reference
    python benchmarks/reference_jobs.py targets --configfile config/paper.yaml --only-new

``--only-new`` lists only the jobs the reference lacks at these settings (for the paper config: the jobs whose
settings differ from the default's and that the paper-scale evidence does not time either). The run must come from
a committed state (its run record says so); each entry keeps the run's date, commit, scale and CPU.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def main(argv=None) -> int:
    from featlearn.pipeline.estimate import build_dag
    from featlearn.pipeline.reference import (REFERENCE_FILE, entries_from_run, read_reference, reference_seconds,
                                              write_reference)
    from featlearn.pipeline.workflow import merged_config

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", choices=("targets", "write"))
    p.add_argument("--configfile", nargs="*", default=[], help="overlays merged onto config/config.yaml")
    p.add_argument("--results", default="results", help="results folder of the run (write) or of the targets")
    p.add_argument("--reference", default=str(ROOT / REFERENCE_FILE))
    p.add_argument("--only-new", action="store_true", help="targets: only jobs the reference lacks at these settings")
    args = p.parse_args(argv)
    config = merged_config(args.configfile, str(ROOT / "config"))
    if args.action == "targets":
        targets = job_targets(config, args.results)
        if args.only_new:
            entries = read_reference(args.reference)
            timed = {n.label for n in build_dag(config, args.results) if reference_seconds(n, entries)}
            targets = {label: t for label, t in targets.items() if label not in timed}
        print("\n".join(targets.values()))
        return 0
    nodes = build_dag(config, args.results)
    new = entries_from_run(nodes, args.results)
    data = write_reference(args.reference, new)
    print(f"{len(new)} entries from {args.results} -> {args.reference} ({len(data['jobs'])} in all)", file=sys.stderr)
    for e in new:
        print(f"  {e['label']}: {e['wall_s']} s", file=sys.stderr)
    return 0


def job_targets(config: dict, results: str = "results", online: bool = False) -> dict[str, str]:
    """One output file of each unmodelled CPU job of ``config``'s DAG, by job label: the targets with which
    ``snakemake`` runs those jobs (and what they depend on) and no other."""
    import importlib

    import featlearn.pipeline.workflow as wf
    from featlearn import PAPERS
    from featlearn.pipeline.dag import files_of
    from featlearn.pipeline.estimate import build_dag
    from featlearn.pipeline.reference import unmodelled_cpu
    from featlearn.pipeline.registry import Paths

    nodes = build_dag(config, results, online=online)
    wanted = {n.label: n for n in unmodelled_cpu(nodes)}
    paths = Paths(results)
    status = wf.dataset_status(config, f"{results}/data/raw")
    prepared_on = wf.prepared_enabled(status)

    def dataset_on(name: str) -> bool:
        return prepared_on[name] if name in prepared_on else status[name].enabled

    targets = {n.label: paths.prepared(n.wildcards["name"], "stats.json") for n in wanted.values()
               if n.rule == "data_prepare"}
    for paper in PAPERS:
        reg = importlib.import_module(f"featlearn.{paper}.registry").registry(config, paths, dataset_on)
        for job in reg.jobs:
            for n in wanted.values():
                if n.rule == job.name:
                    first = files_of(next(iter(job.outputs.values())))[0]
                    targets[n.label] = first.format(**n.wildcards)
    return targets


if __name__ == "__main__":
    sys.exit(main())
