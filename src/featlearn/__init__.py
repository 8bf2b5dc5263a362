"""featlearn: reproduce four papers on how neural networks learn features during training.

Base modules sit at the top level (data layer, atomic I/O, devices, training loop, plotting, the shared
language model); the pipeline machinery in ``featlearn.pipeline`` (registry records, DAG, compute and figure
commands, claims, scorecard, pages); each paper has its own subpackage (``features``, ``scan_snap``, ``joma``,
``templates``). Snakemake rules call the command-line entry point ``python -m featlearn <command> ...``.
"""

__version__ = "0.1.0"

PAPERS = ("features", "scan_snap", "joma", "templates")
