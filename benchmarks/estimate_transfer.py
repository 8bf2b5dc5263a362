"""How well another device's probe records, scaled, stand in for this device's (``--scale-from``): checked on probes
that both devices measured, from a probe cache alone.

For each probe kind, the probes that both devices hold (the same rule, kind, shape and arithmetic) are split as the
estimate's calibration splits them (``featlearn.pipeline.estimate.calibration_order``: the fastest, the slowest and
a middle step on the other device, among probes that took at most 30 s there). The ratio of this device's times to
the other's, the median over those, predicts each of the kind's other probes from the other device's record; the
prediction is compared with what this device measured (a probe it did not use):

    python benchmarks/estimate_transfer.py --cache probes.json --scale-from "AMD EPYC CPU, 1 threads" \\
        --device "AMD EPYC CPU, 2 threads"

A time is a step's with its probe epoch's share of an evaluation (``estimate.with_eval``), as the ratio compares
them. Nothing is measured; the cache is not written.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def _torch_of(cache: dict, device: str) -> str:
    """The torch version most of ``device``'s records were measured with (the estimate's reading of ``--scale-from``)."""
    from featlearn.pipeline.estimate import foreign_torch

    try:
        return foreign_torch(cache, device, "")
    except ValueError as exc:
        raise SystemExit(str(exc)) from exc


def pairs(cache: dict, theirs: str, mine: str) -> dict[str, list[tuple[dict, dict, str]]]:
    """Per probe kind: (their record, my record, shape) of every probe that both devices hold."""
    from featlearn.pipeline.estimate import with_eval

    t_theirs, t_mine = _torch_of(cache, theirs), _torch_of(cache, mine)
    out: dict[str, list] = collections.defaultdict(list)
    for k, rec in cache.items():
        key = json.loads(k)
        if key.get("device") != theirs or key.get("torch") != t_theirs or "kind" not in key or key["kind"] == "startup":
            continue
        other = cache.get(json.dumps({**key, "device": mine, "torch": t_mine}, sort_keys=True))
        if other is not None and with_eval(rec) and with_eval(other):
            out[key["kind"]].append((rec, other, json.dumps(key["shape"], sort_keys=True)))
    return dict(out)


def check(by_kind: dict[str, list[tuple[dict, dict, str]]], calibration: int) -> dict[str, dict]:
    """Per kind: the ratio from ``calibration`` probes and the errors of the others' predictions (predicted / measured
    - 1), with the error of their summed time."""
    from featlearn.pipeline.estimate import calibration_order, with_eval

    out = {}
    for kind, rows in sorted(by_kind.items()):
        picks = calibration_order([r[0] for r in rows])[:calibration]
        if not picks:
            continue
        ratio = statistics.median(with_eval(rows[i][1]) / with_eval(rows[i][0]) for i in picks)
        held = [r for i, r in enumerate(rows) if i not in picks]
        errs = [ratio * with_eval(t) / with_eval(m) - 1.0 for t, m, _ in held]
        out[kind] = {"pairs": len(rows), "calibration": len(picks), "ratio": ratio, "held_out": len(held),
                     "median_abs_error": statistics.median(abs(e) for e in errs) if errs else None,
                     "largest_abs_error": max((abs(e) for e in errs), default=None),
                     "summed_time_error": (ratio * sum(with_eval(t) for t, _, _ in held)
                                           / sum(with_eval(m) for _, m, _ in held) - 1.0) if held else None,
                     "pair_ratios": sorted(with_eval(m) / with_eval(t) for t, m, _ in rows)}
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cache", required=True, help="a probe cache holding both devices' records")
    p.add_argument("--scale-from", required=True, help="the device whose records are scaled, as the cache names it")
    p.add_argument("--device", required=True, help="the device they stand in for, as the cache names it")
    p.add_argument("--calibration", type=int, default=None, help="probes per kind measured on both (default: the "
                   "estimate's CALIBRATION_PROBES)")
    p.add_argument("--json", default=None, help="write the per-kind results here too")
    args = p.parse_args(argv)
    from featlearn.pipeline.estimate import CALIBRATION_PROBES

    cache = json.loads(Path(args.cache).read_text())
    res = check(pairs(cache, args.scale_from, args.device), args.calibration or CALIBRATION_PROBES)

    def pct(x):
        return "—" if x is None else f"{x:+.0%}" if x < 0 else f"{x:.0%}"

    print(f"{args.device} from {args.scale_from}'s records: per kind, the ratio of the calibration probes and the "
          "errors of the probes it did not use")
    print("| kind | probes on both | ratio (calibration) | held out | median error | largest | summed time | ratios seen |")
    print("|---|---|---|---|---|---|---|---|")
    for kind, r in res.items():
        seen = r["pair_ratios"]
        print(f"| `{kind}` | {r['pairs']} | {r['ratio']:.3g} ({r['calibration']}) | {r['held_out']} | "
              f"{pct(r['median_abs_error'])} | {pct(r['largest_abs_error'])} | {pct(r['summed_time_error'])} | "
              f"{seen[0]:.3g}-{seen[-1]:.3g} |")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
