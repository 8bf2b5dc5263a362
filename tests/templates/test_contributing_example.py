"""docs/CONTRIBUTING.md's worked example, followed to the letter: a new templates sweep figure is its record in
sweeps/grids.py, its grid in config/config.yaml and its caption (no schema edit: the schema takes each grid from
its record); the DAG then has its training job, its figure rule and its place in the `templates` target
(issue 36)."""

from __future__ import annotations

import re

from wfutil import copy_workflow, snakemake

RECORD = '''
_RECORDS += (
    SweepFigure("99", f"Fig. 99: batch size vs n again, {T5_TITLE}",
                lambda values: [curve({"vanilla": f"batch {b}"}, value=b, batch=b) for b in values], "batch"),
)
SWEEP_FIGURES = {r.id: r for r in _RECORDS}
GRIDS = {r.id: r for r in _RECORDS if r.runs_from is None}
'''


def _add_the_example(work):
    grids = work / "src/featlearn/templates/sweeps/grids.py"
    text = grids.read_text()
    at = text.index("SWEEP_FIGURES: dict[str, SweepFigure]")
    # the record, placed after the other records (the test appends to the tuple rather than editing it)
    rest = text[at:].split("\n\n\n", 1)
    grids.write_text(text[:at] + rest[0] + "\n" + RECORD + "\n\n" + (rest[1] if len(rest) > 1 else ""))
    config = work / "config/config.yaml"
    config.write_text(re.sub(r"(\n    fig16: [^\n]*)", r"\1\n    fig99: {n: [8, 32], lrs: [1.0e-3], batch: [8, 64]}",
                             config.read_text(), count=1))
    (work / "workflow/report/templates_fig99.rst").write_text("Templates, Fig. 99: the worked example.\n")


def test_a_sweep_figure_is_a_record_a_grid_and_a_caption(tmp_path):
    work = copy_workflow(tmp_path / "wf")
    _add_the_example(work)
    env = {"FEATLEARN_OFFLINE": "1", "FEATLEARN_DATA_MIRROR": str(tmp_path / "no-mirror")}
    out = snakemake(work, "fig_templates_99", "--cores", "2", "-n", "--quiet", "rules", env=env)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert re.search(r"^templates_sweep\s+1\s*$", out.stdout, re.M) and re.search(r"^fig_templates_99\s+1\s*$", out.stdout, re.M)
    whole = snakemake(work, "--cores", "2", "-n", "templates", env=env)
    assert whole.returncode == 0 and "results/figures/templates/fig99.png" in whole.stdout
    # the schema requires the new grid's section: a config without it stops, naming it
    config = work / "config/config.yaml"
    config.write_text(config.read_text().replace("\n    fig99: {n: [8, 32], lrs: [1.0e-3], batch: [8, 64]}", ""))
    missing = snakemake(work, "--cores", "2", "-n", "templates", env=env)
    assert missing.returncode != 0 and "'fig99' is a required property" in missing.stdout + missing.stderr
