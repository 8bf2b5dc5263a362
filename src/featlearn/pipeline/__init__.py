"""The pipeline machinery: what turns the papers' registries into a DAG and its results, above the base modules
(data, I/O, devices, training loops, models) and below the papers.

Registry records (``registry``) and the DAG they make (``dag``, ``workflow``: config, datasets, checkpoints),
the compute and figure commands (``compute``, ``figure``), claims and the scorecard (``claims``, ``scorecard``),
the run's own pages (``runrecord``, ``pages``, ``markdown_html``, ``targets``), resources (``sizing``), the cost
estimate's core (``estimate``: each paper's cost models sit in its own ``cost`` module, named by its jobs), code
hashes (``imports``), the job server and its client (``jobserver``, ``jobclient``) and the command line
(``cli``). Standard library only at import time, so that Snakemake builds the DAG without torch.
"""
