"""How well the estimate's interpolation between probes predicts the groups it did not probe.

For each chosen sweep job of a config's DAG, every distinct group is probed (``featlearn.pipeline.estimate.Prober``, the
job's own code), then the estimate's rule is applied as ``python -m featlearn estimate`` applies it
(``probe_parts``: ``--max-probes-per-job`` representatives by FLOPs and parameters updated per step, the rest
fitted as s/step = a + b x FLOPs + c x updates) and its predictions are compared with the measured s/step of the
groups the fit did not use: the median and the largest relative error, and the job time (sum of steps x s/step,
plus evaluations x s/evaluation where the probe timed them apart) both ways. ``--flops-only`` adds the same
comparison for the rule before 2026-12-02 (FLOPs alone).

    python benchmarks/estimate_interpolation.py                       # default config, CPU, a few sweep jobs
    python benchmarks/estimate_interpolation.py --configfile config/paper.yaml --device cuda --jobs fig22
    python benchmarks/estimate_interpolation.py --configfile config/paper.yaml --jobs fig25 --flops-only

Needs the prepared data of the config where its jobs read data (the sweeps do not).

With ``--from-cache FILE`` nothing is probed: the probes already in a probe cache (e.g. one a GPU run brought
back, ``benchmarks/device/<card>-<date>/probes.json``) are the data. Within every family (task, architecture, model) of
every sweep job holding at least three cached probes, each is left out in turn, the rule (two representatives by
FLOPs and parameters updated, a + b x FLOPs + c x updates) is fitted on the rest, and the left-out probe is
predicted:

    python benchmarks/estimate_interpolation.py --from-cache benchmarks/device/h200-2026-11-28/probes.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def main(argv=None) -> None:
    from featlearn.allocator import keep_freed_memory
    from featlearn.pipeline import estimate as E

    keep_freed_memory()  # as `python -m featlearn estimate` and every job (featlearn.pipeline.cli)

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--configfile", nargs="*", default=[])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--jobs", nargs="*", default=["fig2c", "fig16", "fig9"], help="sweep stems (e.g. fig22, calibration)")
    ap.add_argument("--max-probes-per-job", type=int, default=E.MAX_PROBES_PER_JOB)
    ap.add_argument("--probe-steps", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=None, help="JSON file of the results")
    ap.add_argument("--from-cache", default=None, help="a probe cache: leave-one-out over its probes, no probing")
    ap.add_argument("--flops-only", action="store_true",
                    help="also predict by the FLOPs per step alone (the rule before 2026-12-02), for comparison")
    args = ap.parse_args(argv)
    if args.from_cache:
        return from_cache(E, Path(args.from_cache), args.configfile)

    config = E.merged_config(args.configfile, ROOT / "config")
    nodes = [n for n in E.build_dag(config, str(ROOT / "results")) if n.rule in ("templates_sweep", "templates_calibration")]
    chosen = [n for n in nodes
              if any(n.benchmark.endswith(f"/sweep_{j}.tsv") or n.benchmark.endswith(f"/{j}.tsv") for j in args.jobs)]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "probes.json"
        for node in chosen:
            cost = E.cost_model(node)(node, str(ROOT / "results"))
            t0 = time.perf_counter()
            full = E.Prober(args.device, cache, steps=args.probe_steps, warmup=1, threads=args.threads)
            measured = [full.get(node.rule, p.probe, p.flops_per_step) for p in cost.parts]
            # the estimate's rule, with the measured cache hidden: a fresh cache gets only the representatives

            def rule_prober(name):
                return E.Prober(args.device, Path(tmp) / f"{name}_{node.label}.json", steps=args.probe_steps, warmup=1,
                                threads=args.threads, max_parts=args.max_probes_per_job, probes={
                                    k: (lambda shape, dim, device, steps, warmup, _k=k: next(
                                        {t: m[t] for t in ("seconds_per_step", "seconds_per_eval") if t in m}
                                        for p, m in zip(cost.parts, measured)
                                        if p.probe.shape == shape and p.probe.kind == _k))
                                    for k in {p.probe.kind for p in cost.parts}})

            few = rule_prober("few")
            row = {"job": node.label, "groups": len(cost.parts)}
            rules = [("", cost.parts, few)]
            if args.flops_only:  # the rule before 2026-12-02: representatives and fit by the FLOPs per step alone
                rules.append(("flops_only_", [dataclasses.replace(p, updates_per_step=None) for p in cost.parts],
                              rule_prober("flops")))
            for prefix, parts, prober in rules:
                predicted = E.probe_parts(node.rule, parts, prober)
                errs = [abs(p["seconds_per_step"] - m["seconds_per_step"]) / m["seconds_per_step"]
                        for p, m in zip(predicted, measured) if p.get("interpolated") and m and m.get("seconds_per_step")]
                job_measured = sum(E.part_time(p, m) for p, m in zip(parts, measured))  # steps and evaluations
                job_predicted = sum(E.part_time(p, r) for p, r in zip(parts, predicted))
                # the evaluations, where the probes timed them apart (interpolated on their FLOPs)
                eval_errs = [abs(p["seconds_per_eval"] - m["seconds_per_eval"]) / m["seconds_per_eval"]
                             for p, m in zip(predicted, measured)
                             if p.get("interpolated") and "seconds_per_eval" in p and m and m.get("seconds_per_eval")]
                row.update({f"{prefix}probed": prober.measured, f"{prefix}held_out": len(errs),
                            f"{prefix}median_rel_error": round(statistics.median(errs), 3) if errs else None,
                            f"{prefix}max_rel_error": round(max(errs), 3) if errs else None,
                            f"{prefix}eval_median_rel_error": round(statistics.median(eval_errs), 3) if eval_errs else None,
                            f"{prefix}eval_max_rel_error": round(max(eval_errs), 3) if eval_errs else None,
                            "job_seconds_all_probed": round(job_measured, 1),
                            f"{prefix}job_seconds_interpolated": round(job_predicted, 1),
                            f"{prefix}job_rel_error": round(abs(job_predicted - job_measured) / job_measured, 3)})
            row["probe_seconds"] = round(time.perf_counter() - t0, 1)
            print(json.dumps(row), flush=True)
            rows.append(row)
    record = {"device": args.device, "configfiles": args.configfile, "max_probes_per_job": args.max_probes_per_job,
              "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "rows": rows}
    if args.out:
        Path(args.out).write_text(json.dumps(record, indent=1) + "\n")


def from_cache(E, cache_path: Path, configfiles: list) -> dict:
    """Leave-one-out over the cached probes of each sweep family with three or more of them (see the docstring)."""
    meas = {}
    for key, rec in json.loads(cache_path.read_text()).items():
        key = json.loads(key)
        if "rule" in key and "seconds_per_step" in rec:
            meas[(key["rule"], json.dumps(key["shape"], sort_keys=True))] = rec["seconds_per_step"]
    errs, families = [], 0
    config = E.merged_config(configfiles, ROOT / "config")
    for node in E.build_dag(config, str(ROOT / "results"), online=True):
        if node.rule not in ("templates_sweep", "templates_calibration"):
            continue
        by_family: dict = {}
        for part in E.cost_model(node)(node, str(ROOT / "results")).parts:
            t = part.probe and meas.get((node.rule, json.dumps(part.probe.shape, sort_keys=True)))
            if t:  # the measures of the estimate's rule: FLOPs, and the parameters updated where counted
                work = E._work(part, part.updates_per_step is not None)
                by_family.setdefault(E._family(part.probe), {})[part.probe.shape_json] = (work, t)
        for pts in (list(v.values()) for v in by_family.values() if len(v) >= 3):
            families += 1
            for i, (work, measured) in enumerate(pts):
                rest = pts[:i] + pts[i + 1:]
                chosen = set(E.representatives([w for w, _ in rest], 2))
                fit = E.fit_step_cost([(w, t if j in chosen else None) for j, (w, t) in enumerate(rest)])
                if fit is not None:
                    errs.append(abs(fit(work) - measured) / measured)
    errs.sort()
    row = {"cache": str(cache_path), "configfiles": configfiles, "families": families, "held_out": len(errs),
           "median_rel_error": round(statistics.median(errs), 3) if errs else None,
           "p90_rel_error": round(errs[int(0.9 * len(errs))], 3) if errs else None,
           "max_rel_error": round(errs[-1], 3) if errs else None}
    print(json.dumps(row))
    return row


if __name__ == "__main__":
    main()
