"""The command line: ``python -m featlearn <command> ...`` (what the Snakemake rules run) is :func:`main`.

It imports no library before it knows the command: a job of a run with a job server only hands its command
line to the server (:mod:`featlearn.pipeline.jobclient`), and each command imports what it needs."""

from __future__ import annotations

import argparse
import importlib
import json
import sys


def _data_fetch(args) -> None:
    from featlearn.data.fetch import fetch, resolve_mirror, resolve_offline
    from featlearn.data.registry import get_dataset

    ds = get_dataset(args.dataset)
    fetch(
        ds.file(args.file),
        args.out,
        mirror=resolve_mirror(args.mirror),
        mirror_dir=ds.mirror_dir,
        offline=resolve_offline(args.offline),
    )


def _data_prepare(args) -> None:
    from featlearn.data.prepare import prepare

    stats = prepare(args.name, args.raw_dir, args.out_dir, seed=args.seed)
    print(json.dumps(stats, indent=2))


def _data_summary(args) -> None:
    from featlearn.data.summary import write_summary

    df = write_summary(args.stats, args.out_csv, args.figures, args.scale, dpi=args.dpi)
    print(df.to_string(index=False))


def _claims_merge(args) -> None:
    from featlearn.pipeline.claims import merge_claims
    from featlearn.pipeline.scorecard import headline

    unchecked = json.loads(args.unchecked) if args.unchecked else {}
    gates = json.loads(args.gates) if args.gates else {}
    few_seeds = json.loads(args.few_seeds) if args.few_seeds else {}
    claims = merge_claims(args.parts, args.out, paper=args.paper, unchecked_claims=unchecked, scale=args.scale, gates=gates,
                          few_seeds=few_seeds)
    print(f"{args.paper}: {headline(claims)}")


def _scorecard(args) -> None:
    from featlearn.pipeline.scorecard import build_scorecard, headline

    skipped = json.loads(args.skipped) if args.skipped else {}
    record = None
    if args.run:
        with open(args.run) as f:
            record = json.load(f)
    evidence = None
    if args.evidence is not None:
        from featlearn.pipeline.evidence import read_evidence

        evidence = read_evidence(args.evidence)
    claims = build_scorecard(args.parts, args.out_csv, args.out_md, skipped, args.out_html, record, evidence)
    print(f"scorecard: {headline(claims)}")


# module -> the subcommands its register(sub) adds
COMMAND_MODULES = {
    "featlearn.pipeline.runrecord": ("run-record",),
    "featlearn.pipeline.pages": ("paper-page", "compute-table"),
    "featlearn.pipeline.config_docs": ("config-docs",),
    "featlearn.pipeline.compute": ("compute",),
    "featlearn.pipeline.figure": ("figure",),
    "featlearn.scan_snap.bench": ("scan-snap-bench",),
    "featlearn.templates.sweeps.bench": ("templates-bench",),
    "featlearn.lm_bench": ("lm-bench",),
    "featlearn.pipeline.estimate": ("estimate",),
    "featlearn.pipeline.jobserver": ("job-server",),
    "featlearn.pipeline.targets": ("figures",),
    "featlearn.pipeline.evidence": ("evidence",),
    "featlearn.pipeline.status": ("status",),
}


def _command(argv: list[str] | None) -> str | None:
    """The subcommand named on the command line (None when there is none, e.g. for --help)."""
    args = sys.argv[1:] if argv is None else argv
    return next((a for a in args if not a.startswith("-")), None)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="featlearn", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("data-fetch", help="fetch one raw file (mirror or network), checksummed")
    p.add_argument("--dataset", required=True)
    p.add_argument("--file", required=True, help="raw file name in the registry")
    p.add_argument("--out", required=True)
    p.add_argument("--mirror", default=None, help="mirror folder (FEATLEARN_DATA_MIRROR overrides)")
    p.add_argument("--offline", action="store_true", help="never use the network (FEATLEARN_OFFLINE overrides)")
    p.set_defaults(func=_data_fetch)

    p = sub.add_parser("data-prepare", help="build a prepared dataset from verified raw files")
    p.add_argument("--name", required=True)
    p.add_argument("--raw-dir", required=True)
    p.add_argument("--out-dir", required=True)
    p.add_argument("--seed", type=int, default=2021)
    p.set_defaults(func=_data_prepare)

    p = sub.add_parser("data-summary", help="table and figure of prepared dataset sizes")
    p.add_argument("--stats", nargs="*", default=[], help="stats.json of each prepared dataset")
    p.add_argument("--out-csv", required=True)
    p.add_argument("--figures", nargs="+", required=True)
    p.add_argument("--scale", required=True)
    p.add_argument("--dpi", type=int, default=150)
    p.set_defaults(func=_data_summary)

    p = sub.add_parser("claims-merge", help="concatenate a paper's claim tables into its claims.csv")
    p.add_argument("--paper", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--unchecked", default="", help="JSON: claim id -> [figure, statement, why] of skipped figures")
    p.add_argument("--scale", default="")
    p.add_argument("--gates", default="", help="JSON: claim id pattern -> ids of the sanity checks those claims rest on")
    p.add_argument("--few-seeds", default="", help="JSON: claim id pattern -> why those claims rest on fewer than 3 seeds")
    p.add_argument("parts", nargs="*")
    p.set_defaults(func=_claims_merge)

    p = sub.add_parser("scorecard", help="gather every paper's claims.csv")
    p.add_argument("--out-csv", required=True)
    p.add_argument("--out-md", required=True)
    p.add_argument("--out-html", default=None, help="the scorecard as an HTML page (for the report)")
    p.add_argument("--run", default=None, help="the run record (results/run.json): scale and provenance")
    p.add_argument("--skipped", default=None, help="JSON object: what was skipped -> why")
    p.add_argument("--evidence", default=None, help="the committed paper-scale evidence (evidence/paper), shown beside "
                   "this run's verdicts")
    p.add_argument("parts", nargs="*")
    p.set_defaults(func=_scorecard)

    # Commands of other modules: only the module of the command being run is imported (a figure job should
    # not pay for importing torch through the benchmark modules); --help imports them all.
    wanted = _command(argv)
    load_all = wanted is None or (wanted not in sub.choices and not any(wanted in c for c in COMMAND_MODULES.values()))
    for module, commands in COMMAND_MODULES.items():
        if load_all or wanted in commands:
            importlib.import_module(module).register(sub)
    return parser


# The commands of the workflow's compute jobs: each ends its log with its own CPU time and peak memory
# (featlearn.pipeline.jobclient.own_usage_line), which the benchmark file's samples undercount.
USAGE_COMMANDS = frozenset({"compute", "figure", "data-prepare"})


def main(argv: list[str] | None = None) -> int:
    from featlearn.pipeline.jobclient import run_via_server

    # a job of a run with a job server: a worker forked from the warm server runs it (None: run it here)
    status = run_via_server(sys.argv[1:] if argv is None else argv)
    if status is not None:
        return status

    from featlearn.allocator import keep_freed_memory
    from featlearn.data.fetch import DataError

    keep_freed_memory()

    args = build_parser(argv).parse_args(argv)
    try:
        args.func(args)
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.command in USAGE_COMMANDS:
        from featlearn.pipeline.jobclient import own_usage_line

        sys.stdout.flush()
        print(own_usage_line(), file=sys.stderr, flush=True)
    return 0

