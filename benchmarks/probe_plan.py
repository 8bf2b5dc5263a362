"""Which probes an estimate on a device would still have to measure, given a probe cache: planned on any machine.

The estimate (``python -m featlearn estimate``) is run here with every probe stubbed and the device's cached probes
in place, as the device would run it (its name and torch from the cache; ``--max-probes-per-job`` as the device
session passes it). What it would measure is counted by probe kind, with a time for each kind from the cache's own
probes of that kind (the median and the longest wall time of one probe: model building, warm-up and timed steps),
so a device session can tell before it starts whether its probe budget covers them:

    python benchmarks/probe_plan.py --cache benchmarks/device/h200-2026-11-28/probes.json --device-name "NVIDIA H200" \
        --configfile config/paper.yaml --max-probes-per-job 2

Nothing is measured and the cache is not written. The jobs without a cost model take their times as the estimate
gives them (benchmark files, paper-scale evidence, the committed reference of CPU jobs).
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def plan(cache: dict, device_name: str, configfiles: list[str], max_parts: int, results: str,
         figures: list[str] | None = None, scale_from: str | None = None, torch_version: str | None = None) -> dict:
    """{"measure": {kind: count}, "seconds": {kind: (count x the median, count x the longest cached probe of the
    kind)}, "keys": [cache keys of the probes to measure], "untimed": [labels of jobs left without a time],
    "first": probes measured before every job has a time (the calibration of ``scale_from`` and the first round),
    "first_seconds": their "seconds"}
    of the estimate of ``configfiles`` on ``device_name`` with ``cache`` (``figures``: only the jobs of these figure
    rules; ``scale_from``: another device of the cache whose records stand in, ``--scale-from``; ``torch_version``:
    the device's, where the cache holds none of its probes)."""
    import featlearn.pipeline.estimate as E
    from featlearn.pipeline.reference import REFERENCE_FILE
    from featlearn.pipeline.workflow import merged_config

    torch_versions = {json.loads(k)["torch"] for k in cache if json.loads(k).get("device") == device_name}
    if torch_version is not None:
        torch_versions = {torch_version}
    elif not torch_versions and scale_from is not None:  # a device the cache has not seen: under the other's torch
        torch_versions = {E.foreign_torch(cache, scale_from, "")}
    if len(torch_versions) != 1:
        raise SystemExit(f"the cache holds probes of {device_name!r} under {len(torch_versions)} torch versions; "
                         "one is needed (--torch)")
    wanted: collections.Counter = collections.Counter()
    keys: list[str] = []
    first: list = [0, {}]

    class Planned(E.Prober):
        def device_key(self, threads: int) -> str:
            return device_name

        def get(self, rule, p, flops_per_step=None):
            if self.key(rule, p) not in self.cache:
                keys.append(self.key(rule, p))
            return super().get(rule, p, flops_per_step)

        def _measure(self, p, flops_per_step):
            wanted[p.kind] += 1
            full = int(p.shape[p.dim])
            return {"seconds_per_step": 1e-3, "measured_dim": full, "full_dim": full, "dim": p.dim, "steps": 1,
                    "warmup": 0}

        def _save(self):
            pass

    config = merged_config([str(ROOT / c) for c in configfiles], str(ROOT / "config"))
    nodes = E.build_dag(config, results, online=True, figures=figures)
    with tempfile.TemporaryDirectory() as tmp:
        prober = Planned("cpu", Path(tmp) / "none.json", max_parts=max_parts, log=lambda msg: None)
        prober.cache, prober.torch = dict(cache), torch_versions.pop()
        # keyed as the device keys its probes (E.Prober's reading of another machine's cache under its name): no CPU
        # probe method in the keys, an `auto` job's arithmetic the GPU's (bf16), its jobs' groups one at a time
        prober.label, prober._exact = device_name, True
        if scale_from is not None:
            prober.scale_from, prober.foreign_torch = scale_from, E.foreign_torch(cache, scale_from, prober.torch)
        first_round = E.first_round

        def counted(nodes, prober):  # the probes measured by the time every job has a time
            first_round(nodes, prober)
            first[:] = [sum(wanted.values()), dict(wanted)]

        E.first_round = counted
        try:
            E.estimate(nodes, prober, config, results, evidence=ROOT / "evidence" / "paper",
                       config_dir=str(ROOT / "config"), reference=ROOT / REFERENCE_FILE)
        finally:
            E.first_round = first_round
    per_kind = collections.defaultdict(list)
    for k, v in cache.items():
        if json.loads(k).get("device") in (device_name, scale_from) and "probe_seconds" in v:
            per_kind[json.loads(k)["kind"]].append(v["probe_seconds"])
    def timed(counts):
        return {kind: (n * statistics.median(per_kind[kind]), n * max(per_kind[kind])) if per_kind.get(kind) else None
                for kind, n in counts.items()}

    return {"measure": dict(wanted), "seconds": timed(wanted), "keys": list(dict.fromkeys(keys)),
            "untimed": [n.label for n in nodes if n.seconds is None], "first": first[0],
            "first_seconds": timed(first[1])}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cache", required=True, help="the device's probe cache")
    p.add_argument("--device-name", required=True, help="the device as the cache names it, e.g. 'NVIDIA H200'")
    p.add_argument("--configfile", nargs="*", default=[])
    p.add_argument("--max-probes-per-job", type=int, default=2)
    p.add_argument("--figure", nargs="+", default=None, metavar="RULE", help="only the jobs of these figure rules")
    p.add_argument("--results", default=str(Path(tempfile.gettempdir()) / "probe_plan_results"),
                   help="a results folder as the device has it (default: an empty one)")
    p.add_argument("--scale-from", default=None, metavar="NAME",
                   help="another device of the cache whose records stand in for probes not measured (the estimate's "
                        "--scale-from), e.g. the H200's for an H100 the cache has not seen")
    p.add_argument("--torch", default=None, help="the device's torch version (default: its records', else the other's)")
    args = p.parse_args(argv)
    cache = json.loads(Path(args.cache).read_text())
    out = plan(cache, args.device_name, args.configfile, args.max_probes_per_job, args.results, args.figure,
               args.scale_from, args.torch)
    total = sum(out["measure"].values())
    known = [s for s in out["seconds"].values() if s is not None]
    print(f"{total} probes to measure on {args.device_name}: {sum(s[0] for s in known):.0f} s at the cache's median "
          f"probe of each kind, {sum(s[1] for s in known):.0f} s at its longest"
          + ("" if len(known) == len(out["seconds"]) else " (kinds the cache lacks not counted)"))
    for kind, n in sorted(out["measure"].items(), key=lambda kv: -kv[1]):
        s = out["seconds"][kind]
        print(f"  {kind}: {n}" + (f", {s[0]:.0f}-{s[1]:.0f} s" if s is not None else ", no probe of this kind cached"))
    early = [s for s in out["first_seconds"].values() if s is not None]
    print(f"of which measured before every job has a time (calibration and first round): {out['first']}, "
          f"{sum(s[0] for s in early):.0f}-{sum(s[1] for s in early):.0f} s")
    print(f"jobs left without a time once these are measured: {len(out['untimed'])}"
          + (f" ({', '.join(out['untimed'][:10])})" if out["untimed"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
