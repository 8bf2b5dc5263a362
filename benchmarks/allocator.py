"""What keeping freed memory in the process (``featlearn.allocator``) saves: CPU training steps of the
language models with glibc's default malloc against the setting every ``python -m featlearn`` job uses.

Runs ``python -m featlearn lm-bench`` on the CPU, alternating ``FEATLEARN_MALLOC=default`` and the job
setting ``--repeats`` times each (fresh processes, so neither inherits the other's heap), and prints the
median seconds per step of each model, the ratio, and each process's peak resident memory.

    python benchmarks/allocator.py [--models features_word scan_snap_lm] [--repeats 3] [--steps 10]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def one_run(models: list[str], steps: int, malloc: str, threads: int) -> tuple[dict[str, float], float]:
    """Seconds per step of each model (key: model/dataset) and the process's peak RSS in MiB."""
    env = dict(os.environ, FEATLEARN_MALLOC=malloc)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rows.json")
        cmd = [sys.executable, "-m", "featlearn", "lm-bench", "--device", "cpu", "--models", *models,
               "--steps", str(steps), "--threads", str(threads), "--out", out]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own resource usage (ru_maxrss in KiB)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            raise subprocess.CalledProcessError(proc.returncode, cmd)
        with open(out) as fh:
            rows = json.load(fh)
    return {f"{r['model']} {r['label']}/{r['dataset']}": r["seconds_per_step"] for r in rows}, usage.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=["features_word", "scan_snap_lm"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    times: dict[str, dict[str, list[float]]] = {"default": {}, "keep": {}}
    rss: dict[str, list[float]] = {"default": [], "keep": []}
    for i in range(args.repeats):
        for malloc in ("default", "keep"):
            per_model, peak = one_run(args.models, args.steps, malloc, args.threads)
            for key, s in per_model.items():
                times[malloc].setdefault(key, []).append(s)
            rss[malloc].append(peak)
            times = ", ".join(f"{k} {v:.3f} s/step" for k, v in per_model.items())
            print(f"repeat {i + 1}/{args.repeats} malloc={malloc}: " + times, file=sys.stderr, flush=True)
    print("| model/dataset | glibc default s/step | kept freed memory s/step | ratio |")
    print("|---|---|---|---|")
    for key in times["default"]:
        a, b = statistics.median(times["default"][key]), statistics.median(times["keep"][key])
        print(f"| {key} | {a:.3f} | {b:.3f} | {b / a:.2f} |")
    print(f"\nmedians of {args.repeats} alternating runs of {args.steps} steps; peak resident memory of a run (MiB, "
          f"median): glibc default {statistics.median(rss['default']):.0f}, kept {statistics.median(rss['keep']):.0f}")


if __name__ == "__main__":
    main()
