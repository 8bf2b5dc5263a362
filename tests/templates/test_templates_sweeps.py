"""Sweep figures of the templates paper: the grids, training and drawing, and the checks of claims 1-2 on the
real data and models (every claim on planted tables: test_templates_claims.py)."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

from featlearn.pipeline.registry import load
from featlearn.templates.registry import CLAIM_IDS
from featlearn.templates.sweeps.experiments import data_and_identity_checks, figure_curves, run_figure
from featlearn.templates.sweeps.figures import check_claims, draw
from featlearn.templates.sweeps.grids import SWEEP_FIGURES as _RECORDS

CLAIMED = tuple(fig for fig, rec in _RECORDS.items() if rec.claim_ids)  # the sweep figures with claims

TINY = dict(
    epochs=2,
    batch=1024,
    eval_every=1,
    n_val=100,
    n_test=100,
    seeds=1,
    max_group=64,
    cuda_graphs=False,
    transformer=dict(d_emb=8, depth=1, heads=2, d_head=4, d_mlp=16),
    mlp=dict(hidden=16, depth=3),
    rnn=dict(hidden=8),
    fig2c=dict(n=[4, 8], lrs=[1e-3, 1e-2]),
    fig22=dict(n=[4, 8], lrs=[1e-3]),
    fig25=dict(n=[4, 8], lrs=[1e-3]),
)


def test_variants_of_one_architecture_train_in_one_group():
    curves = figure_curves("22", TINY)
    transformer = [s for labels, s in curves if s["arch"] == "transformer"]
    assert len(transformer) == 1 and transformer[0]["variants"] == ["vanilla", "kq", "vo", "kq_vo"]
    assert [s["arch"] for _, s in curves] == ["transformer", "mlp", "rnn", "lstm"]
    assert all(s["n"] == [4, 8] and s["epochs"] == 2 for _, s in curves)
    with pytest.raises(ValueError, match="unknown sweep figure"):
        figure_curves("99", TINY)


def test_run_figure_writes_every_curve_and_is_deterministic(tmp_path, one_thread):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    run_figure("25", TINY, str(a))
    run_figure("25", TINY, str(b))
    assert a.read_bytes() == b.read_bytes()
    runs = pd.read_csv(a)
    assert set(runs["curve"]) == {"MLP", "MLP + vec(XX^T)"}
    assert sorted(runs["n"].unique()) == [4, 8]
    assert runs["test_metric"].notna().all()
    fig = draw({"runs": str(a)}, {"figure": "25", "scale": "test"})
    legend = [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
    assert "MLP + vec(XXᵀ)" in legend and not any("^T" in t for t in legend)  # typeset as the title writes it


def _claims(fn, runs: pd.DataFrame, tmp_path, name: str = "runs.csv", **settings) -> list:
    """A registry claims function on a planted runs table (written to ``tmp_path``), at scale "test"."""
    path = tmp_path / name
    runs.to_csv(path, index=False)
    return fn({"runs": str(path)}, {**settings, "scale": "test"})


def _figure(fig: str, table, png) -> list:
    """What the figure rule does for sweep figure ``fig``: draw it to ``png`` and return its claims."""
    from featlearn.pipeline.figure import check_declared, write_outputs

    inputs, cfg = {"runs": str(table)}, {"figure": fig, "scale": "test"}
    write_outputs(draw(inputs, cfg), [str(png)], 60)
    if fig not in CLAIMED:
        return []
    claims = load(f"featlearn.templates.sweeps.figures:claims_{fig}")(inputs, cfg)
    check_declared(claims, list(CLAIM_IDS[fig]))  # as the figure command does
    return claims


def test_data_and_identity_checks_pass(one_thread):
    rows = pd.DataFrame(data_and_identity_checks(n=16, seeds=1))
    claims = {c.claim_id: c for c in check_claims(rows, "test")}
    assert all(c.passed for c in claims.values()), [c for c in claims.values() if not c.passed]
    ident = rows[rows["check"] == "identity"]
    assert set(ident["kind"]) == {"regression", "next_token"}
    assert (ident["scalings_loaded_from_vanilla"] > 0).all()  # a_h, b_h are the only new parameters


def test_check_claims_fail_on_a_broken_dataset(one_thread):
    rows = pd.DataFrame(data_and_identity_checks(n=16, seeds=1))
    rows.loc[rows.index[0], "match_fraction"] = 0.99
    rows.loc[rows.index[1], "train_heldout_tokens"] = 3
    claims = {c.claim_id: c for c in check_claims(rows, "test")}
    assert not claims["1-match"].passed and not claims["1-heldout"].passed


def test_figure_writes_png_and_claims(tmp_path, one_thread):
    table = tmp_path / "runs.csv"
    run_figure("2c", TINY, str(table))
    claims = _figure("2c", table, tmp_path / "fig.png")
    assert (tmp_path / "fig.png").stat().st_size > 1000
    assert {c.claim_id for c in claims} == {"3-nstar-ratio", "3-vanilla-small-n"}


# ------------------------------------------------------------------ grids of Figs. 3c, 5, 8-21, 23

from featlearn.templates.registry import FIGURE_GRID, GRIDS  # noqa: E402
from featlearn.templates.sweeps.figures import nstar_ratio  # noqa: E402
from featlearn.templates.sweeps.grids import GRIDS as GRID_RECORDS  # noqa: E402
from featlearn.templates.sweeps.grids import SWEEP_FIGURES  # noqa: E402

AXIS_VALUES = {"d_emb": [8, 16], "depth": [1, 2], "heads": [1, 2], "batch": [2, 1024], "attn_mult": [1, 8], "k": [2, 4],
               "length": [3, 4], "n_wildcards": [2, 3], "n_regular": [0, 1], "r": [2, 3]}


def _tiny_all() -> dict:
    cfg = {k: v for k, v in TINY.items() if not k.startswith("fig")}
    for grid, rec in GRID_RECORDS.items():
        axis = rec.axis
        cfg[f"fig{grid}"] = dict(n=[4, 8], lrs=[1e-3], **({axis: AXIS_VALUES[axis]} if axis else {}))
    return cfg


def test_every_figure_has_a_grid_and_a_plot_spec():
    assert set(FIGURE_GRID) == set(SWEEP_FIGURES)
    assert all(rec.kind in ("curves", "heatmap") and rec.title.startswith(f"Fig. {fig}:") for fig, rec in SWEEP_FIGURES.items())
    assert all(callable(load(f"featlearn.templates.sweeps.figures:claims_{fig}")) for fig in CLAIMED)
    assert FIGURE_GRID["23"] == "17" and set(FIGURE_GRID.values()) == set(GRIDS)


def test_swept_quantities_reach_the_settings():
    cfg = _tiny_all()
    depth = figure_curves("9", cfg)
    assert [s["model"]["depth"] for _, s in depth] == [1, 2] and [m["value"] for m, _ in depth] == [1, 2]
    assert [s["batch"] for _, s in figure_curves("14", cfg)] == [2, 1024]
    readout = figure_curves("15", cfg)
    assert all(s["trainable"] == ["head."] for _, s in readout) and [s["model"]["attn_mult"] for _, s in readout] == [1, 8]
    copy = figure_curves("5", cfg)
    assert [(s["variants"], s["model"]["d_emb"]) for _, s in copy] == [
        (["vanilla"], 8), (["vanilla"], 16), (["vo"], 8), (["vo"], 16)]
    tasks = figure_curves("17", cfg)
    assert [s["task"]["name"] for _, s in tasks] == ["aba_abb", "abab_aabb", "majority", "majority"]
    assert tasks[2][1]["variants"] == ["vanilla", "kq_vo"] and tasks[3][1]["task"]["k"] == 4
    assert figure_curves("23", cfg) == tasks  # one grid serves both figures
    for grid, key in (("18", "length"), ("19", "n_wildcards"), ("20", "n_regular"), ("21", "r")):
        curves = figure_curves(grid, cfg)
        assert [s["task"][key] for _, s in curves] == AXIS_VALUES[key]
        assert all(s["task"]["name"] == "random" and s["task"]["seed"] == "per_run" for _, s in curves)
    # a grid's own schedule and transformer sizes override the shared ones
    cfg["fig3c"].update(epochs=7, seeds=3, transformer={"depth": 4})
    (_, s), = figure_curves("3c", cfg)
    assert (s["epochs"], s["seeds"], s["model"]["depth"], s["model"]["d_emb"]) == (7, 3, 4, 8)


def test_grid_config_errors_are_clear():
    cfg = _tiny_all()
    del cfg["fig9"]["depth"]
    with pytest.raises(ValueError, match="fig9 needs the list 'depth'"):
        figure_curves("9", cfg)
    cfg = _tiny_all()
    cfg["fig8"]["depth"] = [1, 2]
    with pytest.raises(ValueError, match="unknown keys \\['depth'\\]"):
        figure_curves("8", cfg)


@pytest.mark.parametrize("fig", ["5", "9", "15", "21", "23"])
def test_new_figures_train_and_draw(tmp_path, one_thread, fig):
    table = tmp_path / "runs.csv"
    run_figure(fig, _tiny_all(), str(table))
    runs = pd.read_csv(table)
    assert runs["test_metric"].notna().all() and (runs["figure"].astype(str) == FIGURE_GRID[fig]).all()
    claims = _figure(fig, table, tmp_path / "fig.png")
    assert (tmp_path / "fig.png").stat().st_size > 1000
    assert bool(claims) == (fig in ("5", "23"))


def test_nstar_ratio_is_conservative():
    assert nstar_ratio(512, 32, 8192) == 16
    assert nstar_ratio(math.inf, 32, 256) == 8  # vanilla not reached: lower bound n_max / n*(fast)
    assert math.isnan(nstar_ratio(512, math.inf, 8192))


# ------------------------------------------------------------------ calibration of the identity multipliers


def test_calibration_trains_each_multiplier_on_its_task_and_draws(tmp_path, one_thread):
    from featlearn.pipeline.compute import Context
    from featlearn.templates.sweeps.experiments import calibrate, calibration_curves
    from featlearn.templates.sweeps.figures import claims_calibration, draw_calibration

    cfg = {**TINY, "calibration": {"n": {"copy": 4, "aba_abb": 8}, "lrs": [1e-3], "mult": [1, 10], "epochs": 3}}
    curves = calibration_curves(cfg)
    got = [(s["task"]["name"], s["variants"], s["n"], s["model"].get("vo_mult"), s["model"].get("kq_mult"), s["epochs"])
           for _, s in curves]
    assert got == [
        ("copy", ["vanilla"], [4], None, None, 3), ("copy", ["vo"], [4], 1.0, None, 3), ("copy", ["vo"], [4], 10.0, None, 3),
        ("aba_abb", ["vanilla"], [8], None, None, 3), ("aba_abb", ["kq"], [8], None, 1.0, 3),
        ("aba_abb", ["kq"], [8], None, 10.0, 3),
    ]
    out = tmp_path / "calibration_runs.csv"
    calibrate({"sweeps": cfg}, {}, {"runs": str(out)}, Context(device="cpu"))
    runs = pd.read_csv(out)
    assert set(runs["axis"]) == {"kq_mult", "vo_mult"} and (runs["figure"] == "calibration").all()
    assert runs.loc[runs["variant"] == "vo", "vo_mult"].tolist() == [1.0, 10.0]
    from featlearn.pipeline.figure import write_outputs

    settings = {"configured": {"kq_mult": 10, "vo_mult": 10}, "scale": "test"}
    write_outputs(draw_calibration({"runs": str(out)}, settings), [str(tmp_path / "calibration.png")], 60)
    assert (tmp_path / "calibration.png").stat().st_size > 1000
    claims = claims_calibration({"runs": str(out)}, settings)
    assert [c.claim_id for c in claims] == ["calib-kq_mult", "calib-vo_mult"]


def test_a_killed_sweep_trains_only_its_unfinished_groups_and_writes_the_same_table(tmp_path, one_thread, monkeypatch):
    """With a work folder each finished group is kept (``engine.sweep_frames``): a job killed after two of Fig. 25's
    four groups trains only the other two when rerun, and its table is byte-identical to an uninterrupted run's."""
    from featlearn.templates.sweeps import engine
    from featlearn.training import PARTS_DIR

    clean, resumed, work = tmp_path / "clean.csv", tmp_path / "resumed.csv", tmp_path / "fig25.resume"
    run_figure("25", TINY, str(clean))
    real, trained = engine.train_group, []

    def dies_at_the_third_group(group, *args, **kw):
        if len(trained) == 2:
            raise KeyboardInterrupt  # the job is killed while it trains its third group
        trained.append((group.arch, group.n))
        return real(group, *args, **kw)

    monkeypatch.setattr(engine, "train_group", dies_at_the_third_group)
    with pytest.raises(KeyboardInterrupt):
        run_figure("25", TINY, str(resumed), work_dir=str(work))
    assert not resumed.exists() and len(list((work / PARTS_DIR).glob("*.pt"))) == 2

    def counted(group, *args, **kw):
        trained.append((group.arch, group.n))
        return real(group, *args, **kw)

    trained.clear()
    monkeypatch.setattr(engine, "train_group", counted)
    run_figure("25", TINY, str(resumed), work_dir=str(work))
    assert trained == [("mlp_xxt", 4), ("mlp_xxt", 8)]  # the MLP's two groups were loaded
    assert resumed.read_bytes() == clean.read_bytes()


def test_a_cpu_sweep_job_of_two_threads_trains_two_groups_at_once_and_writes_the_same_table(tmp_path, one_thread):
    """A CPU job of ``threads`` > 1 trains its groups in that many 1-thread processes (``engine.group_pool``): Fig. 25's
    table is byte-identical to a 1-thread job's, and every group it trained is kept in its work folder for a rerun,
    which then trains nothing."""
    from featlearn.pipeline.compute import Context
    from featlearn.templates.sweeps import engine
    from featlearn.templates.sweeps.experiments import sweep
    from featlearn.training import PARTS_DIR

    one, two, work = tmp_path / "one.csv", tmp_path / "two.csv", tmp_path / "fig25.resume"
    sweep({"grid": "25", "sweeps": TINY}, {}, {"runs": str(one)}, Context(device="cpu", threads=1))
    sweep({"grid": "25", "sweeps": TINY}, {}, {"runs": str(two)}, Context(device="cpu", threads=2, work_dir=str(work)))
    assert two.read_bytes() == one.read_bytes()
    assert len(list((work / PARTS_DIR).glob("*.pt"))) == 4  # Fig. 25's four groups, kept by the workers

    def never(*args, **kw):
        raise AssertionError("a kept group was trained again")

    real = engine.train_group
    engine.train_group = never
    try:
        run_figure("25", TINY, str(tmp_path / "again.csv"), work_dir=str(work), workers=2)
    finally:
        engine.train_group = real
    assert (tmp_path / "again.csv").read_bytes() == one.read_bytes()


class _RecordingPool:
    """A stand-in for a process pool that runs each call at once and records the order of submission."""

    def __init__(self):
        self.calls = []

    def submit(self, fn, *args):
        from concurrent.futures import Future

        self.calls.append(args)
        done = Future()
        done.set_result(fn(*args))
        return done


def test_a_group_queue_hands_the_costliest_groups_to_the_pool_first():
    """``GroupQueue`` holds a job's groups until the first result is asked for, then submits them largest work first
    (ties in the order queued); a group queued after that goes to the pool at once. Every result is its own call's."""
    from featlearn.templates.sweeps.engine import GroupQueue, collect_frames

    pool = _RecordingPool()
    queue = GroupQueue(pool)
    works = {"a": 1.0, "b": 5.0, "c": 3.0, "d": 5.0}
    parts = [queue.submit(w, lambda name: (pd.DataFrame({"g": [name]}), pd.DataFrame()), name) for name, w in works.items()]
    assert pool.calls == [] and queue.order() == [5.0, 5.0, 3.0, 1.0]  # nothing runs before a result is asked for
    runs, _ = collect_frames(parts)
    assert [c[0] for c in pool.calls] == ["b", "d", "c", "a"]
    assert list(runs["g"]) == ["a", "b", "c", "d"]  # the table keeps the groups' own order
    late = queue.submit(9.0, lambda: "late")
    assert late.result() == "late" and len(pool.calls) == 5 and queue.order() == []


def test_group_work_is_the_formula_of_its_measures_and_ranks_a_paper_grid_by_size():
    """``group_work`` = epochs x (steps/epoch x (4e7 + FLOPs + 460 x R x P + 6.2e7 x R) + 0.93 x the evaluation's
    forward FLOPs);
    ``step_flops`` is the FLOPs the estimate gives a group's step (its part). Paper-scale Fig. 25's costliest groups are
    its n 8,192 ones (8 minibatches an epoch, the largest one-hot first layer), MLP + XX^T before the MLP."""
    from featlearn.lm_bench import load_config
    from featlearn.templates.sweeps import engine as S

    group = S.expand_groups({**figure_curves("25", TINY)[0][1], "progress": False})[1]  # the MLP at n 8
    size = S.model_size(group, S.group_vocab(group))
    R, samples = len(group.runs), min(group.n, group.batch)
    flops = S.step_flops(group, size)
    hidden, inputs = size.first_layer
    assert flops == 6 * (size.outside_embeddings - hidden * inputs + hidden * group.task.length) * samples * R
    expected = group.epochs * (group.steps_per_epoch * (4e7 + flops + 460.0 * R * size.parameters + 6.2e7 * R)
                               + 0.93 * flops / samples / 3 * (group.n_val + group.n_test))
    assert S.group_work(group) == pytest.approx(expected)

    paper = load_config("paper")["templates"]["sweeps"]
    groups = [g for _, st in figure_curves("25", paper) for g in S.expand_groups({**st, "progress": False})]
    ranked = sorted(groups, key=S.group_work, reverse=True)
    assert [(g.arch, g.n) for g in ranked[:2]] == [("mlp_xxt", 8192), ("mlp", 8192)]
    for arch in ("mlp", "mlp_xxt"):
        works = [S.group_work(g) for g in groups if g.arch == arch]
        assert works == sorted(works)  # more samples, more work


def test_a_group_pool_is_none_for_one_worker_or_a_gpu_job():
    from featlearn.templates.sweeps.engine import group_pool

    for workers, device in ((1, "cpu"), (4, "cuda")):
        with group_pool(workers, device) as pool:
            assert pool is None


def test_a_sweep_killed_inside_a_group_takes_that_group_up_from_its_checkpoint(tmp_path, one_thread, monkeypatch,
                                                                                interrupt_after):
    """A sweep job killed in the middle of its second group (checkpoints after every epoch here) loads its first group,
    takes the second up from the epoch its checkpoint kept, and writes the uninterrupted table byte for byte; each
    group's checkpoint goes once its frames are kept, so a finished sweep leaves one part per group."""
    from featlearn.templates.sweeps import engine
    from featlearn.training import PARTS_DIR

    clean, resumed, work = tmp_path / "clean.csv", tmp_path / "resumed.csv", tmp_path / "fig25.resume"
    epochs = 4
    cfg = {**TINY, "epochs": epochs}
    run_figure("25", cfg, str(clean))
    monkeypatch.setattr(engine, "CHECKPOINT_SECONDS", 0.0)
    restore = interrupt_after(engine._Selector, "update", epochs + 2)  # the first group, then 2 epochs of the second
    with pytest.raises(KeyboardInterrupt):
        run_figure("25", cfg, str(resumed), work_dir=str(work))
    assert not resumed.exists() and len(list((work / PARTS_DIR).glob("*.pt"))) == 2  # group 1, group 2's checkpoint
    restore()
    logged = []
    monkeypatch.setattr(engine, "_log", logged.append)
    run_figure("25", cfg, str(resumed), work_dir=str(work))
    assert logged[:2] == ["resuming: [templates] aba_abb mlp n=4 R=1 was finished by an earlier run of this job; loaded",
                          f"resuming: [templates] aba_abb mlp n=8 R=1 at epoch 2 of {epochs} from {work}"]
    assert resumed.read_bytes() == clean.read_bytes()
    assert len(list((work / PARTS_DIR).glob("*.pt"))) == 4  # Fig. 25's four groups, no checkpoint left


def test_a_sweep_job_killed_mid_group_resumes_from_its_finished_groups_and_the_workflow_removes_them(tmp_path):
    """The real compute command, killed with SIGKILL once it has kept its first group: the rerun loads that group (its
    log says so), trains the rest and writes the table of an uninterrupted run; the kept groups go once the workflow
    accepts it."""
    from featlearn.training import FINISHED_FILE, PARTS_DIR, sweep_finished

    # a slow second group (n = 4096: 4 minibatches an epoch), so that the kill lands while it trains
    cfg = {**TINY, "epochs": 40, "fig25": {"n": [4, 4096], "lrs": [1e-3]}}
    work, out, log = tmp_path / "work", tmp_path / "runs.csv", tmp_path / "job.log"
    src = Path(__file__).resolve().parents[2] / "src"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FEATLEARN_")}
    env["PYTHONPATH"] = str(src)
    cmd = [sys.executable, "-m", "featlearn", "compute", "--run", "featlearn.templates.sweeps.experiments:sweep",
           "--settings", json.dumps({"grid": "25", "sweeps": cfg}), "--outputs", json.dumps({"runs": str(out)}),
           "--threads", "1", "--device", "cpu", f"--work-dir={work}"]
    with open(log, "w") as fh:
        job = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 240
        while not list((work / PARTS_DIR).glob("*.pt")) and job.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        job.send_signal(signal.SIGKILL)
        job.wait()
    assert job.returncode == -signal.SIGKILL, log.read_text()  # killed, not finished
    assert not out.exists() and len(list((work / PARTS_DIR).glob("*.pt"))) == 1

    rerun = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    assert "resuming: [templates] aba_abb mlp n=4 R=1 was finished by an earlier run of this job; loaded" in rerun.stderr
    assert "mlp n=4096 R=1 epoch" in rerun.stderr  # the unfinished group trained again
    assert re.search(r"^featlearn: earlier runs of this job: [0-9.]+ s of wall time in 1 run,", rerun.stdout, re.M)
    # the table is written: the kept groups and the job clock stay until the workflow has accepted it, then go
    assert (work / FINISHED_FILE).exists() and (work / "clock.json").exists()
    assert sweep_finished(tmp_path) == [work] and not work.exists()
    clean = tmp_path / "clean.csv"
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # as the job
    try:
        run_figure("25", cfg, str(clean))
    finally:
        torch.set_num_threads(before)
    assert out.read_bytes() == clean.read_bytes()


def test_the_group_checkpoint_benchmark_resumes_a_paper_scale_group_bit_for_bit(tmp_path):
    """``benchmarks/group_checkpoint.py`` on the smallest group of paper-scale Fig. 25 (its MLP at n 8): the group
    killed after two epochs and resumed ends as the uninterrupted one, and the script says so and exits 0."""
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith("FEATLEARN_")}
    env["PYTHONPATH"] = str(root / "src")
    done = subprocess.run([sys.executable, str(root / "benchmarks" / "group_checkpoint.py"), "--n", "8", "--epochs", "4",
                           "--kill-after", "2"], capture_output=True, text=True, env=env, cwd=root, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Fig. 25 mlp n=8: 20 runs, 1 step an epoch, 4 epochs" in done.stdout
    assert "resumed (set-up, load, 2 epochs)" in done.stdout
    assert done.stdout.rstrip().endswith("resumed equals uninterrupted bit for bit: True")


def _benchmark_lines(script: str, *args: str) -> list[dict]:
    """The JSON lines that ``benchmarks/<script>`` prints with ``args`` (it must exit 0), run from the repository."""
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith("FEATLEARN_")}
    env["PYTHONPATH"] = str(root / "src")
    done = subprocess.run([sys.executable, str(root / "benchmarks" / script), *args], capture_output=True, text=True,
                          env=env, cwd=root, timeout=300)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def test_the_group_pool_benchmark_times_one_and_two_workers_and_compares_their_tables():
    """``benchmarks/group_pool.py`` on the smoke config's Fig. 25 cut to 2 epochs: a line per worker count, the
    second's table byte-identical to the first's."""
    rows = _benchmark_lines("group_pool.py", "--scale", "smoke", "--figures", "25", "--epochs", "2", "--workers", "1", "2")
    assert [(r["figure"], r["workers"], r["epochs"]) for r in rows] == [("25", 1, 2), ("25", 2, 2)]
    assert all(r["identical_to_first"] and r["seconds"] > 0 for r in rows)


def test_the_group_order_benchmark_times_each_group_and_schedules_three_orders():
    """``benchmarks/group_order.py`` on the smoke config's Fig. 25 cut to 2 epochs: a line per group (its work and a
    positive time), then per worker count the makespans of the listed order, ``group_work``'s order and the measured
    times' order; none is below the longest group or above the groups' sum."""
    from featlearn.templates.sweeps import engine

    rows = _benchmark_lines("group_order.py", "--scale", "smoke", "--figures", "25", "--epochs", "2", "--workers", "2")
    groups = [r for r in rows if "arch" in r]
    (total,) = [r for r in rows if "workers" in r]
    expected = [g for _, st in figure_curves("25", {**_smoke_sweeps(), "epochs": 2})
                for g in engine.expand_groups({**st, "progress": False})]
    assert [(r["arch"], r["n"]) for r in groups] == [(g.arch, g.n) for g in expected]
    assert [r["work"] for r in groups] == pytest.approx([engine.group_work(g) for g in expected])
    assert all(r["seconds"] > 0 for r in groups) and total["workers"] == 2
    seconds = [r["seconds"] for r in groups]
    for key in ("makespan_listed_s", "makespan_by_work_s", "makespan_by_measured_s"):
        assert max(seconds) - 1e-3 <= total[key] <= sum(seconds) + 1e-3


def test_the_group_order_benchmark_refits_planted_weights():
    """``fit_weights`` recovers the weights of times planted as an exact sum of its terms (FLOPs' weight 1)."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "group_order.py"
    spec = importlib.util.spec_from_file_location("group_order", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    weights = {"step": 3e7, "flops": 1.0, "update": 400.0, "run_step": 0.0, "eval_flops": 2.0}
    rows = []
    for i in range(12):
        r = {"steps": 10 * (i % 4 + 1), "flops_per_step": 1e8 * (i + 1), "updates_per_step": 1e5 * (12 - i) ** 2,
             "runs": 1 + i % 3, "eval_flops": 5e8 * (i % 5 + 1)}
        r["seconds"] = 1e-10 * (r["steps"] * (weights["step"] + r["flops_per_step"] + 400.0 * r["updates_per_step"])
                                + 2.0 * r["eval_flops"])
        rows.append(r)
    fit = bench.fit_weights(rows)
    assert fit["weights_in_flops"] == pytest.approx(weights, rel=1e-6, abs=1e-3)
    assert fit["spearman"] > 0.99 and fit["median_relative_error"] < 1e-6


def _smoke_sweeps() -> dict:
    from featlearn.lm_bench import load_config

    return load_config("smoke")["templates"]["sweeps"]


def test_the_group_memory_benchmark_measures_a_peak_per_size_and_refuses_what_cannot_fit(tmp_path):
    """``benchmarks/group_memory.py`` on a small paper-scale Fig. 5 group (copy, d_emb 64, n 64) at 1 and 2 runs: a
    positive peak and the formula for each, written as JSON; grid 3c's 40 runs of n 262,144 (330 GiB by the formula)
    are refused before anything is built."""
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith("FEATLEARN_")}
    env["PYTHONPATH"] = str(root / "src")
    script, out = str(root / "benchmarks" / "group_memory.py"), tmp_path / "rows.json"
    done = subprocess.run([sys.executable, script, "--fig", "5", "--n", "64", "--d-emb", "64", "--runs", "1", "2",
                           "--threads", "1", "--out", str(out)], capture_output=True, text=True, env=env, cwd=root,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    rows = json.loads(out.read_text())
    assert [r["runs"] for r in rows] == [1, 2] and all(r["peak_gib"] > 0 and r["device"] == "cpu" for r in rows)
    assert rows[1]["formula_gib"] == pytest.approx(2 * rows[0]["formula_gib"])
    assert "one run:" in done.stdout
    refused = subprocess.run([sys.executable, script, "--fig", "3c", "--n", "262144", "--runs", "40"],
                             capture_output=True, text=True, env=env, cwd=root, timeout=300)
    assert refused.returncode != 0 and "40 runs need about 328" in refused.stderr and "measure fewer runs" in refused.stderr
