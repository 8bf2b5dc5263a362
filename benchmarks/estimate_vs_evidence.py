"""How well the estimate predicts the wall time of real paper-scale jobs: those of the committed evidence.

Each modelled CPU job that a committed paper-scale figure ran (``evidence/paper/<paper>/<rule>/record.json``, its
``jobs``, with the wall time of the job's Snakemake benchmark file) is estimated as ``python -m featlearn estimate``
estimates it: probed here, on this machine, with the job's declared threads, in its own code at its paper-scale
shape; time = start-up + steps x s/step x (1 + evaluation share). The table gives both times and their ratio.

    python benchmarks/estimate_vs_evidence.py --out results/estimate_vs_evidence.json

Run it on the kind of machine the evidence ran on (the records say: CPUs, and the run's ``host_cpus``); the load of
the machine at either time changes both. Needs the prepared data of the jobs' datasets in ``--results``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def main(argv=None) -> list[dict]:
    from featlearn.pipeline import estimate as E
    from featlearn.pipeline.evidence import EVIDENCE_DIR

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--configfile", nargs="*", default=["config/paper.yaml"])
    ap.add_argument("--evidence", default=str(ROOT / EVIDENCE_DIR))
    ap.add_argument("--results", default=str(ROOT / "results"), help="where the prepared data are (their sizes)")
    ap.add_argument("--cache", default=str(ROOT / "results" / "estimate" / "probes.json"), help="probe cache")
    ap.add_argument("--probe-steps", type=int, default=3)
    ap.add_argument("--out", default=None, help="JSON file of the rows")
    args = ap.parse_args(argv)

    config = E.merged_config([str(ROOT / c) if not os.path.isabs(c) else c for c in args.configfile], ROOT / "config")
    walls = E.evidence_walls(args.evidence)
    nodes = [n for n in E.build_dag(config, args.results) if n.cost_model and n.label in walls]
    if not nodes:
        sys.exit(f"no modelled CPU job in the evidence under {args.evidence}")
    prober = E.Prober("cpu", args.cache, steps=args.probe_steps)
    E.estimate(nodes, prober, config, args.results)
    rows = []
    for n in nodes:
        wall, where = walls[n.label]
        rows.append({"job": n.label, "estimate_s": n.seconds, "evidence_s": wall, "evidence": where,
                     "ratio": n.seconds / wall if n.seconds else None, "source": n.source})
    print("| job | estimate | paper-scale run | estimate / run |\n|---|---|---|---|")
    for r in rows:
        ratio = f"{r['ratio']:.2f}" if r["ratio"] else "—"
        print(f"| {r['job']} | {E.duration(r['estimate_s'])} | {E.duration(r['evidence_s'])} ({r['evidence']}) | {ratio} |")
    ratios = sorted(r["ratio"] for r in rows if r["ratio"])
    if ratios:
        print(f"\n{len(ratios)} jobs: estimate / run median {statistics.median(ratios):.2f}, "
              f"range {ratios[0]:.2f}-{ratios[-1]:.2f}; probe device: {E.device_name('cpu', 1).split(',')[0]}, "
              f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs at the end")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(rows, indent=1) + "\n")
    return rows


if __name__ == "__main__":
    main()
