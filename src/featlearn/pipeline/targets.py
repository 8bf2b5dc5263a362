"""The figure, table and check targets of the DAG: what each is, and why one cannot run here.

A figure whose data or checkpoints are missing has no rule in the run (its registry leaves it out and says why
in ``skipped``). :func:`unavailable` finds those figures by building every paper's registry a second time as if
every dataset and checkpoint were there, so that ``snakemake fig_joma_7`` can stop with one line saying why and
what to do instead of "No rule to produce". :func:`listing` is ``python -m featlearn figures`` (``make figures``):
every target with its title and whether this run can make it. Standard library only.
"""

from __future__ import annotations

import copy
import importlib
import os
import re
from pathlib import Path

from featlearn import PAPERS

# What to do when a figure cannot run, by what it lacks (the skip reasons name a dataset or a checkpoint)
DATA_HINT = "give the data a mirror (FEATLEARN_DATA_MIRROR) or allow the network; docs/data.md"
CHECKPOINT_HINT = "put the checkpoints in the Hugging Face cache (the command above) or allow the network"
SWITCHED_OFF_HINT = "switch the dataset on in the config (data.datasets)"


def _everything_available(config: dict) -> dict:
    """The config with every pretrained checkpoint list switched on (a registry then lists their figures)."""
    full = copy.deepcopy(config)
    full["joma"]["pretrained"]["enabled"] = True
    full["templates"]["gpt2"]["pretrained"]["enabled"] = True
    return full


def registries(config: dict, paths, dataset_on) -> dict:
    """Every paper's registry under ``config`` (the paper's own ``registry`` function)."""
    return {p: importlib.import_module(f"featlearn.{p}.registry").registry(config, paths, dataset_on) for p in PAPERS}


def possible_figures(config: dict, paths) -> dict:
    """rule -> Figure record of every figure, table and check the papers have, whatever is missing here."""
    regs = registries(_everything_available(config), paths, lambda name: True)
    return {f.rule: f for reg in regs.values() for f in reg.figures}


def _label_pattern(label: str) -> re.Pattern:
    """Skip keys that name figure ``label`` (``Fig. 7``): ``joma Fig. 7``, ``templates Figs. 7, 24``,
    ``scan_snap Fig. 10 (wikitext103)``."""
    word, _, number = label.partition(" ")
    return re.compile(rf"\b{re.escape(word.rstrip('.'))}s?\.?\s+(?:[\w.]+,\s*)*{re.escape(number)}\b")


def _hint(reason: str) -> str:
    if "hf download" in reason or "checkpoint" in reason:
        return CHECKPOINT_HINT
    if "set in config" in reason or "switched off" in reason:
        return SWITCHED_OFF_HINT
    return DATA_HINT


def why_missing(fig, skipped: dict[str, str]) -> str:
    """One line: why figure record ``fig`` has no rule in this run, and what to do."""
    pattern = _label_pattern(fig.label)
    own = [f"{what}: {why}" for what, why in skipped.items() if what.startswith(f"{fig.paper} ") and pattern.search(what)]
    if not own:  # left out with a dataset: the dataset lines that name the paper
        own = [f"{what}: {why}" for what, why in skipped.items() if what.startswith("dataset ") and fig.paper in why]
    reason = "; ".join(own) or "its inputs are not available in this run (see the skip lines above)"
    return f"{fig.rule} ({fig.paper} {fig.label}) cannot run here: {reason}. To run it: {_hint(reason)}."


def unavailable(config: dict, paths, present: set[str], skipped: dict[str, str]) -> dict[str, tuple]:
    """rule -> (its Figure record, one line saying why), for every figure rule the papers have that this run
    leaves out."""
    return {rule: (fig, why_missing(fig, skipped)) for rule, fig in possible_figures(config, paths).items()
            if rule not in present and config["papers"][fig.paper]}


def unchecked_claims(fig, why: str, listed: dict) -> dict[str, tuple[str, str, str]]:
    """The claims of figure ``fig``, which this run cannot make, as unchecked rows: claim id (a declared pattern
    such as ``fig7_top_rebound_*`` stands for its claims) -> (figure, statement, why). Claims the paper's registry
    already lists as unchecked (``listed``) are left to it."""
    from fnmatch import fnmatchcase

    reason = why.split(" cannot run here: ", 1)[-1]
    return {cid: (fig.label, f"the claims {cid} of {fig.label}" if "*" in cid or "[" in cid else f"claim {cid} of {fig.label}",
                  reason)
            for cid in fig.claim_ids if not any(fnmatchcase(done, cid) or done == cid for done in listed)}


def cannot_run(why: str):
    """Input function of the rule of a figure this run cannot make: Snakemake calls it only when the figure is
    asked for, and then stops building the DAG with ``why``."""

    def inputs(wildcards):
        from snakemake.exceptions import WorkflowError

        raise WorkflowError(why)

    return inputs


def _title(fig, report_dir: Path) -> str:
    """The first sentence of the figure's report caption, after its "Paper, Fig. n:" heading."""
    path = report_dir / fig.caption
    text = " ".join(path.read_text().split()) if path.is_file() else ""
    head, sep, rest = text.partition(": ")
    body = rest if sep and len(head) < 60 else text
    first = re.split(r"(?<=[a-z0-9)])\.\s(?=[A-Z])", body, maxsplit=1)[0].rstrip(".")
    return first[:100] + ("..." if len(first) > 100 else "")


def listing(configfiles: list[str], results: str = "results", report_dir: str = "workflow/report") -> str:
    """Markdown table of every figure, table and check target: rule, paper, label, title, and this run's status."""
    import featlearn.pipeline.workflow as wf
    from featlearn.pipeline.registry import Paths, report_order

    config = wf.merged_config(configfiles)
    paths = Paths(results)
    status = wf.dataset_status(config, f"{results}/data/raw")
    prepared_on = wf.prepared_enabled(status)

    def dataset_on(name: str) -> bool:
        return prepared_on[name] if name in prepared_on else status[name].enabled

    allowed = wf.HUB_CONTACT["allowed"]
    wf.HUB_CONTACT["allowed"] = False  # as a dry run: cached checkpoints only, no contact with the hub
    try:
        regs = registries(config, paths, dataset_on)
    finally:
        wf.HUB_CONTACT["allowed"] = allowed
    present = {f.rule for reg in regs.values() for f in reg.figures}
    skipped = {what: f"{s.reason}; figures of the papers that need it are skipped"
               for what, s in ((f"dataset {n}", st) for n, st in status.items()) if not s.enabled}
    for reg in regs.values():
        skipped.update(reg.skipped)
    missing = {rule: why for rule, (_, why) in unavailable(config, paths, present, skipped).items()}
    figures = sorted(possible_figures(config, paths).values(), key=lambda f: (PAPERS.index(f.paper), report_order(f.kind, f.id)))
    lines = ["| target | paper | what | title | this run |", "|---|---|---|---|---|"]
    for fig in figures:
        if not config["papers"][fig.paper]:
            state = "paper switched off"
        else:
            state = "ready" if fig.rule in present else "cannot run: " + missing[fig.rule].split(" cannot run here: ", 1)[1]
        title = _title(fig, Path(report_dir)).replace("|", "\\|")
        lines.append(f"| `{fig.rule}` | {fig.paper} | {fig.label} | {title} | {state.replace('|', '/')} |")
    ready = sum(1 for f in figures if f.rule in present)
    return "\n".join(lines) + f"\n\n{ready} of {len(figures)} targets can run with this config and data.\n"


def register(sub) -> None:
    p = sub.add_parser("figures", help="list every figure, table and check target, and whether this run can make it")
    p.add_argument("--configfile", nargs="*", default=[], help="overlays on config/config.yaml (as snakemake's)")
    p.add_argument("--results", default="results")
    p.set_defaults(func=lambda a: print(listing([os.fspath(c) for c in a.configfile], a.results), end=""))
