"""featlearn: reproduce four papers on how neural networks learn features during training.

Shared machinery lives in this package (data layer, atomic I/O, claims, scorecard); each paper has
its own subpackage (``features``, ``scan_snap``, ``joma``, ``templates``). Snakemake rules call the
command-line entry point ``python -m featlearn <command> ...``.
"""

__version__ = "0.1.0"

PAPERS = ("features", "scan_snap", "joma", "templates")
