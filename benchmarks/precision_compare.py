"""Compare the language-model figures of a run in another precision with the same figures in fp32, against the
spread of a second fp32 seed: the measurement behind a family's ``precision`` key (docs/performance.md).

    python benchmarks/precision_compare.py --reference RUN_FP32 --candidate RUN_BF16 --seed RUN_FP32_SEED2 \
        --out docs/precision_cpu.md

Each argument is a checkout whose ``results/`` holds the figures (the reference: a whole default run; the candidate:
the same figures rerun with the families' ``precision: bf16``; the seed run: fp32 with other seeds, where it has
the figure). Read from each: every claims table of the figures (measured value and verdict), every validation-loss
curve of their LMs (the last value and the largest gap to the reference's curve, step by step) and the job times
(benchmark files). A precision keeps a figure when every verdict is the reference's, and its measured values and
curves stay as close to the reference as another seed's do (the report gives both gaps; it judges the verdicts
only, and says where the precision's gap exceeds the seed's).

The same comparison serves any change that moves the LMs' last bits at one precision (``--reference-name`` names the
reference's columns, ``--name`` the candidate's): docs/precision_cpu_blocked_ce.md compares the blocked bf16
cross-entropy with ``F.cross_entropy``, both in bf16. ``--figures graphs`` compares instead the figures of the
CUDA-graph switches' trainers that are not LMs (the templates sweeps, Scan and Snap's synthetic runs, the features
classifiers; their claims and job times, no curves): docs/cuda_graphs_cpu.md compares their graph-safe steps, run
uncaptured on a CPU, with the eager steps. ``--only PAPER:STEM ...`` keeps some figures of the set (and, for the graph
set, their tables): ``--figures graphs --only joma:table1``, ``--only features:5``.
"""

from __future__ import annotations

import argparse
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

# (paper, claims table stem, label, log files of its LMs relative to results/ (glob), benchmark files (glob))
FIGURES = (
    ("scan_snap", "7", "Scan and Snap Fig. 7", "scan_snap/lm/fig7_*_log.csv", "scan_snap/wikitext_fig7_*.tsv"),
    ("scan_snap", "10", "Scan and Snap Fig. 10", "scan_snap/lm/fig10_*_log.csv", "scan_snap/wikitext_fig10_*.tsv"),
    ("joma", "6", "JoMA Fig. 6", "joma/wikitext/wikitext2/L*_lr0.0001_s*.csv", "joma/wikitext/wikitext2/L*_lr0.0001_s*.tsv"),
    ("joma", "8", "JoMA Fig. 8", "joma/wikitext/wikitext2/L5_lr*_s*.csv", "joma/wikitext/wikitext2/L5_lr*_s*.tsv"),
    ("features", "7", "features Fig. 7", "features/lm/[pw]*/log.csv", "features/lm/[pw]*.tsv"),
    ("templates", "6", "templates Fig. 6", "templates/gpt2_wikitext/wikitext2/*.csv", "templates/gpt2_wikitext/wikitext2/*.tsv"),
    ("features", "5", "features Fig. 5", "features/lm/tinyshakespeare/log.csv", "features/lm/tinyshakespeare.tsv"),
)


# The same for the trainers with a CUDA-graph switch that are not LMs (no LM curves); docs/gpu.md lists the switches.
GRAPH_FIGURES = (
    ("templates", "2c", "templates Fig. 2c", None, "templates/sweep_fig2c.tsv"),
    ("scan_snap", "4", "Scan and Snap Fig. 4", None, "scan_snap/syn_small.tsv"),
    ("scan_snap", "5", "Scan and Snap Fig. 5", None, "scan_snap/adam.tsv"),
    ("scan_snap", "6", "Scan and Snap Fig. 6", None, "scan_snap/syn_medium.tsv"),
    ("templates", "5", "templates Fig. 5", None, "templates/sweep_fig5.tsv"),
    ("templates", "22", "templates Fig. 22", None, "templates/sweep_fig22.tsv"),
    ("templates", "25", "templates Fig. 25", None, "templates/sweep_fig25.tsv"),
    ("features", "2", "features Fig. 2", None, "features/train_sst_{mlp,cnn,sa,sa_mlp}.tsv"),
    ("features", "11", "features Fig. 11", None, "features/train_sst_mlp_adam.tsv"),
    ("features", "12", "features Fig. 12", None, "features/train_synthetic_lrnn.tsv"),
    ("joma", "table1", "JoMA Table 1", None, "joma/table1/cell_*.tsv"),
)
FIGURE_SETS = {"lm": FIGURES, "graphs": GRAPH_FIGURES}
# The tables the graph-switched trainers write (relative to results/, glob), by figure (``paper:stem``; the calibration
# has no figure of its own in the set), compared number by number with the reference's: how far the graph-safe
# arithmetic moves what the figures are drawn from.
GRAPH_TABLES = {
    "templates:2c": ("templates/sweeps/fig2c_runs.csv",), "templates:5": ("templates/sweeps/fig5_runs.csv",),
    "templates:22": ("templates/sweeps/fig22_runs.csv",), "templates:25": ("templates/sweeps/fig25_runs.csv",),
    "templates:calibration": ("templates/sweeps/calibration_runs.csv",),
    "scan_snap:4": ("scan_snap/syn_small_steps.csv",), "scan_snap:5": ("scan_snap/adam_steps.csv",),
    "scan_snap:6": ("scan_snap/syn_medium_final.csv",),
    "features:2": ("features/train/{sst_mlp,sst_cnn,sst_sa,sst_sa_mlp}/scores.csv",),
    "features:11": ("features/train/sst_mlp_adam/scores.csv",), "features:12": ("features/train/synthetic_lrnn/scores.csv",),
    "joma:table1": ("joma/table1/cell_*.csv",),
}


def tables_of(only: list[str] | None) -> tuple[str, ...]:
    """The table globs of the figures in ``only`` (every figure's without it)."""
    return tuple(g for name, globs in GRAPH_TABLES.items() if not only or name in only for g in globs)


def same_run(name: str) -> str:
    """A run's name with its seed left out (JoMA names its files ``..._s<seed>``), so that runs of two seeds pair."""
    return re.sub(r"_s\d+(\.(csv|tsv))$", r"\1", name)


def made_here(path: Path, root: Path, reference: Path | None) -> bool:
    """False where ``path`` is a byte-identical copy of the reference's file (a run folder started from a copy of the
    reference's results holds the figures it did not rerun as such copies): those are not this run's."""
    if reference is None or root == reference:
        return True
    twin = reference / path.relative_to(root)
    return not (twin.is_file() and twin.read_bytes() == path.read_bytes())


def claims(root: Path, paper: str, stem: str, reference: Path | None = None) -> pd.DataFrame | None:
    """The figure's claims table, where this run drew the figure (its benchmark file, which holds times, is not the
    reference's: a claims table may well be byte-identical to the reference's when its values are counts)."""
    path = root / "results" / paper / "claims" / f"{stem}.csv"
    bench = root / "results" / "benchmarks" / paper / (f"{stem}.tsv" if stem.startswith("table") else f"fig{stem}.tsv")
    return pd.read_csv(path) if path.is_file() and bench.is_file() and made_here(bench, root, reference) else None


def val_curve(path: Path) -> pd.Series:
    """Validation loss by step of one LM's log (the loop's evaluations; a final whole-split value left out)."""
    df = pd.read_csv(path)
    df = df[df["metric"] == "val_loss"]
    if "layer" in df:
        df = df[df["layer"] == -1]
    if "final" in df:
        df = df[~df["final"].astype(bool)]
    return df.groupby("step")["value"].mean()


def final_val(path: Path) -> float:
    """The run's last reported validation loss (the whole-split value where the log has one)."""
    df = pd.read_csv(path)
    df = df[df["metric"] == "val_loss"]
    if "final" in df and df["final"].astype(bool).any():
        return float(df[df["final"].astype(bool)]["value"].iloc[-1])
    return float(val_curve(path).iloc[-1])


def curves(root: Path, pattern: str | None, reference: Path | None = None) -> dict[str, Path]:
    if pattern is None:  # a figure without LMs
        return {}
    return {same_run(p.relative_to(root / "results").as_posix()): p for p in sorted((root / "results").glob(pattern))
            if made_here(p, root, reference)}


def _globs(pattern: str) -> list[str]:
    """A glob with one ``{a,b,...}`` group as the globs it stands for (pathlib's glob has no braces)."""
    m = re.search(r"\{([^{}]*)\}", pattern)
    return [pattern[:m.start()] + alt + pattern[m.end():] for alt in m[1].split(",")] if m else [pattern]


def wall(root: Path, pattern: str, reference: Path | None = None) -> dict[str, float]:
    out = {}
    bench = root / "results" / "benchmarks"
    for p in sorted({p for g in _globs(pattern) for p in bench.glob(g)}):
        if not made_here(p, root, reference):
            continue
        df = pd.read_csv(p, sep="\t")
        out[same_run(p.name)] = float(df["s"].iloc[-1])
    return out


def table_gaps(reference: Path, candidate: Path, patterns=tables_of(None)) -> list[dict]:
    """Per table of the candidate: its rows, and the largest absolute and relative difference of any number against
    the reference's table of the same shape (relative to the larger magnitude, over entries above 1e-12); a table
    byte-identical to the reference's says so (whether its job reran, its log says)."""
    rows = []
    for g in (g for pattern in patterns for g in _globs(pattern)):
        for path in sorted((candidate / "results").glob(g)):
            twin = reference / path.relative_to(candidate)
            if not twin.is_file():
                continue
            name = path.relative_to(candidate / "results").as_posix()
            if not made_here(path, candidate, reference):  # (or a table the candidate did not rewrite: see its log)
                rows.append({"table": name, "rows": math.nan, "abs": 0.0, "rel": 0.0, "note": "byte-identical"})
                continue
            a, b = pd.read_csv(twin), pd.read_csv(path)
            if a.shape != b.shape or list(a.columns) != list(b.columns):
                rows.append({"table": name, "rows": len(b), "abs": math.nan, "rel": math.nan, "note": "other shape"})
                continue
            x, y = a.select_dtypes("number").to_numpy(float), b.select_dtypes("number").to_numpy(float)
            both = ~np.isnan(x) & ~np.isnan(y)
            diff, scale = np.abs(x - y)[both], np.maximum(np.abs(x), np.abs(y))[both]
            big = scale > 1e-12
            rows.append({"table": name, "rows": len(b), "abs": float(diff.max()) if diff.size else 0.0,
                         "rel": float((diff[big] / scale[big]).max()) if big.any() else 0.0,
                         "note": "" if (np.isnan(x) == np.isnan(y)).all() else "NaN where the other has a number"})
    return rows


def fmt(x: float, digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x:.{digits}g}"


def compare(reference: Path, candidate: Path, seed: Path | None, figures=FIGURES) -> tuple[list[dict], list[dict], list[dict]]:
    claim_rows, curve_rows, time_rows = [], [], []
    for paper, stem, label, logs, benches in figures:
        ref, cand = claims(reference, paper, stem), claims(candidate, paper, stem, reference)
        other = claims(seed, paper, stem, reference) if seed else None
        if ref is None or cand is None:
            claim_rows.append({"figure": label, "claim": "(claims missing in a run)"})
        for _, r in ref.iterrows() if ref is not None and cand is not None else ():
            c = cand[cand["claim_id"] == r["claim_id"]]
            o = other[other["claim_id"] == r["claim_id"]] if other is not None else None
            c = c.iloc[0] if len(c) else None
            o = o.iloc[0] if o is not None and len(o) else None
            m_ref, m_c = float(r["measured"]), float(c["measured"]) if c is not None else math.nan
            m_o = float(o["measured"]) if o is not None else math.nan
            claim_rows.append({
                "figure": label, "claim": r["claim_id"], "fp32": m_ref, "candidate": m_c, "seed": m_o,
                "gap": abs(m_c - m_ref), "seed_gap": abs(m_o - m_ref),
                "verdict_fp32": r["verdict"], "verdict_candidate": c["verdict"] if c is not None else "missing",
                "verdict_seed": o["verdict"] if o is not None else "—",
            })
        ref_c, cand_c = curves(reference, logs), curves(candidate, logs, reference)
        seed_c = curves(seed, logs, reference) if seed else {}
        for run, path in ref_c.items():
            a = val_curve(path)
            row = {"figure": label, "run": run, "final_fp32": final_val(path), "final_candidate": math.nan,
                   "final_seed": math.nan, "max_gap": math.nan, "max_seed_gap": math.nan}
            if run in cand_c:
                b = val_curve(cand_c[run])
                row["final_candidate"] = final_val(cand_c[run])
                row["max_gap"] = float((a - b).abs().max())
            if run in seed_c:
                s = val_curve(seed_c[run])
                row["final_seed"] = final_val(seed_c[run])
                row["max_seed_gap"] = float((a - s).abs().max())
            curve_rows.append(row)
        ref_t, cand_t = wall(reference, benches), wall(candidate, benches, reference)
        for run, t in ref_t.items():
            time_rows.append({"figure": label, "job": run, "fp32_s": t, "candidate_s": cand_t.get(run, math.nan)})
    return claim_rows, curve_rows, time_rows


def select(figures, only: list[str] | None):
    """The figures named ``paper:stem`` in ``only`` (all of them without it); an unknown name is an error."""
    if not only:
        return figures
    known = {f"{f[0]}:{f[1]}": f for f in figures}
    unknown = [name for name in only if name not in known]
    if unknown:
        raise SystemExit(f"unknown figure {', '.join(unknown)}: one of {', '.join(known)}")
    return tuple(known[name] for name in only)


def _table(header: list[str], rows: list[list[str]], keep: list[bool]) -> list[str]:
    """A Markdown table of the columns whose ``keep`` is true."""
    def line(cells):
        return "| " + " | ".join(c for c, k in zip(cells, keep) if k) + " |"
    return [line(header), "|" + "---|" * sum(keep)] + [line(r) for r in rows]


def report(claim_rows: list[dict], curve_rows: list[dict], time_rows: list[dict], candidate: str,
           reference: str = "fp32", seeded: bool = True) -> str:
    """The three tables as Markdown; without a seed run (``seeded`` false) its columns are left out."""
    ref = reference
    rows, same, total = [], 0, 0
    for r in claim_rows:
        if "fp32" not in r:
            rows.append([r["figure"], r["claim"]] + [""] * 8)
            continue
        total += 1
        same += r["verdict_fp32"] == r["verdict_candidate"]
        flag = " (over the seed's)" if seeded and r["gap"] > r["seed_gap"] else ""
        rows.append([r["figure"], r["claim"], fmt(r["fp32"]), fmt(r["candidate"]), fmt(r["seed"]),
                     f"{fmt(r['gap'], 2)}{flag if not math.isnan(r['seed_gap']) else ''}", fmt(r["seed_gap"], 2),
                     r["verdict_fp32"], r["verdict_candidate"], r["verdict_seed"]])
    keep = [True] * 4 + [seeded, True, seeded, True, True, seeded]
    lines = _table(["figure", "claim", ref, candidate, f"{ref}, other seed", f"|{candidate} − {ref}|", f"|seed − {ref}|",
                    f"verdict {ref}", f"verdict {candidate}", "verdict other seed"], rows, keep)
    head = [f"**Verdicts: {same} of {total} claims the same in {candidate} as in {ref}.**", ""]
    curve = [[r["figure"], f"`{r['run']}`", fmt(r["final_fp32"]), fmt(r["final_candidate"]), fmt(r["final_seed"]),
              fmt(r["max_gap"], 2), fmt(r["max_seed_gap"], 2)] for r in curve_rows]
    curve = [""] + _table(["figure", "LM run", f"final val loss {ref}", candidate, f"{ref}, other seed",
                           f"largest |{candidate} − {ref}| over the curve", f"largest |seed − {ref}|"], curve,
                          [True] * 4 + [seeded, True, seeded]) if curve_rows else []  # (no LMs: no curves)
    times = ["", f"| figure | job | wall {ref} (s) | wall {candidate} (s) | ratio |", "|---|---|---|---|---|"]
    t_ref = t_c = 0.0
    counted = set()  # a job shared by two figures (JoMA's 5-layer LM at lr 1e-4) counts once in the total
    for r in time_rows:
        times.append(f"| {r['figure']} | `{r['job']}` | {r['fp32_s']:.0f} | {fmt(r['candidate_s'], 4)} | "
                     f"{fmt(r['candidate_s'] / r['fp32_s'], 2)} |")
        if not math.isnan(r["candidate_s"]) and r["job"] not in counted:
            counted.add(r["job"])
            t_ref, t_c = t_ref + r["fp32_s"], t_c + r["candidate_s"]
    times.append(f"| all ({len(counted)} jobs) | | {t_ref:.0f} | {t_c:.0f} | {fmt(t_c / t_ref if t_ref else math.nan, 2)} |")
    return "\n".join(head + lines + curve + times) + "\n"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reference", type=Path, required=True, help="checkout of the fp32 run")
    p.add_argument("--candidate", type=Path, required=True, help="checkout of the run in the other precision")
    p.add_argument("--seed", type=Path, help="checkout of an fp32 run with other seeds (the seed spread)")
    p.add_argument("--name", default="bf16", help="the candidate's precision, for the headers")
    p.add_argument("--reference-name", default="fp32", help="the reference's name, for the headers")
    p.add_argument("--figures", choices=sorted(FIGURE_SETS), default="lm",
                   help="which figures: the LM figures (default) or those of the other CUDA-graph switches' trainers")
    p.add_argument("--only", nargs="+", metavar="PAPER:STEM",
                   help="only these figures of the set (e.g. joma:table1 features:5), their tables and times")
    p.add_argument("--out", type=Path, help="write the Markdown here (default: print it)")
    a = p.parse_args(argv)
    figures = select(FIGURE_SETS[a.figures], a.only)
    text = report(*compare(a.reference, a.candidate, a.seed, figures), a.name, a.reference_name,
                  a.seed is not None)
    if a.figures == "graphs":
        gaps = table_gaps(a.reference, a.candidate, tables_of(a.only))
        head = [f"| table | rows | largest |{a.name} − {a.reference_name}| | largest relative | note |", "|---|---|---|---|---|"]
        body = [f"| `{r['table']}` | {fmt(r['rows'])} | {fmt(r['abs'], 2)} | {fmt(r['rel'], 2)} | {r['note']} |" for r in gaps]
        text += "\n" + "\n".join(head + body) + "\n"
    if a.out:
        a.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
