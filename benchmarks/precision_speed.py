"""Seconds per training step of each language-model kind in fp32 and in bf16 on this machine (1 thread, as the jobs
run on a small CPU): the speed half of the measurement behind a family's ``precision`` key (docs/performance.md;
``benchmarks/precision_compare.py`` is the verdict half).

For each LM rule of the default DAG, the largest step of its first job is timed with the estimate's own probe (the
job's code on random data of the job's shape, as ``benchmarks/threads.py`` does), in a fresh 1-thread process per
precision (freed memory kept, as in every ``python -m featlearn`` process: ``featlearn.allocator``); the two
precisions alternate ``--repeat`` times and the median is reported.

    python benchmarks/precision_speed.py            # needs the prepared data of a default run (results/data)

Run it with nothing else on the machine; it takes a few minutes. ``--variants bf16-unblocked bf16`` times instead the
bf16 step with ``F.cross_entropy`` against the blocked bf16 cross-entropy the LMs train with (``featlearn.lm.loss``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from threads import representative, write_record  # noqa: E402

# rule -> timed steps
RULES = {"scan_snap_wikitext": 6, "joma_wikitext": 6, "features_lm_word": 6, "templates_gpt2_wikitext": 6}

CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from featlearn.allocator import keep_freed_memory
keep_freed_memory()  # as every `python -m featlearn` process (the jobs, the estimate) does
import torch
from featlearn import precision
from featlearn.pipeline.registry import load
spec, name, steps = json.loads(sys.argv[2]), sys.argv[3], int(sys.argv[4])
if name.endswith("-unblocked"):  # the step as before featlearn.lm.loss: F.cross_entropy on bf16 logits too
    import featlearn.lm.loss
    featlearn.lm.loss.blocked = lambda logits: False
    name = name.removesuffix("-unblocked")
torch.set_num_threads(1)
fn = load(spec["run"])
with precision.scoped(name, "cpu"):
    fn(spec["shape"], int(spec["shape"][spec["dim"]]), "cpu", 1, 1)  # warm-up, untimed
    out = fn(spec["shape"], int(spec["shape"][spec["dim"]]), "cpu", steps, 0)
print(json.dumps({"seconds_per_step": out["seconds_per_step"]}))
"""


def timed(spec: dict, name: str, steps: int) -> float:
    res = subprocess.run([sys.executable, "-c", CHILD, str(ROOT / "src"), json.dumps(spec), name, str(steps)],
                         capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    if res.returncode:
        raise SystemExit(f"probe process failed ({res.returncode}): {res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])["seconds_per_step"]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", default=str(ROOT / "results"), help="results folder with the prepared data")
    ap.add_argument("--rules", nargs="*", default=list(RULES), choices=list(RULES))
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--variants", nargs=2, default=["fp32", "bf16"], choices=["fp32", "bf16", "bf16-unblocked"],
                    help="the two arithmetics timed (the first is the reference)")
    ap.add_argument("--out", default=None, help="JSON file of the rows (default: print only)")
    args = ap.parse_args(argv)
    t0, rows = time.perf_counter(), []
    for rule in args.rules:
        label, spec = representative(rule, args.results)
        ref, new = args.variants
        got = {ref: [], new: []}
        for _ in range(args.repeat):
            for name in got:
                got[name].append(timed(spec, name, RULES[rule]))
        a, b = statistics.median(got[ref]), statistics.median(got[new])
        row = {"rule": rule, "job": label, "probe": spec["kind"], f"{ref}_s_per_step": round(a, 4),
               f"{new}_s_per_step": round(b, 4), f"{new}_over_{ref}": round(b / a, 2)}
        print(f"[precision] {json.dumps(row)}", file=sys.stderr, flush=True)
        rows.append(row)
    write_record(rows, t0, args.out, threads=1)


if __name__ == "__main__":
    main()
