"""What the classification rules schedule (read by Snakemake when it builds the DAG; stdlib only).

One training job per (dataset, model, optimiser) trains every activation x sigma_v x seed it needs at once;
each figure reads the tables of a few jobs. The job table names, for each job, the figures that read it.
"""

from __future__ import annotations

DATASETS = ("sst", "sstwsub", "imdb", "ag_news")
ALL_ACTIVATIONS = "all"  # the configured activations (Table 3)
BOTH = "both"  # every configured sigma_v; "first": setting I only

# job -> (dataset, model, optimiser, activations, sigma_v, probes)
JOBS: dict[str, tuple[str, str, str, str, str, str]] = {
    "sst_mlp": ("sst", "mlp", "adagrad", ALL_ACTIVATIONS, BOTH, "tokens"),  # Figs. 2, 10; Tables 3, 5
    "sst_cnn": ("sst", "cnn", "adagrad", "relu", BOTH, "tokens"),  # Fig. 2b,e; Table 5
    "sst_sa": ("sst", "sa", "adagrad", "relu", BOTH, "tokens"),  # Fig. 2c,f; Table 5
    "sst_sa_mlp": ("sst", "sa_mlp", "adagrad", "relu", BOTH, "tokens"),  # Fig. 2i
    "sst_mlp_adam": ("sst", "mlp", "adam", "relu", BOTH, "tokens"),  # Fig. 11
    "sst_mv": ("sst", "mv", "adagrad", "relu", "first", "none"),  # Table 5; claim 5
    "sst_lrnn": ("sst", "lrnn", "adagrad", "relu", "first", "none"),  # Table 5
    "sstwsub_mv": ("sstwsub", "mv", "adagrad", "relu", "first", "bigrams"),  # Figs. 3, 6c
    "sstwsub_sa": ("sstwsub", "sa", "adagrad", "relu", "first", "negation"),  # Figs. 6, 9
    "sstwsub_cnn": ("sstwsub", "cnn", "adagrad", "relu", "first", "negation"),  # Fig. 8
    "sstwsub_tr": ("sstwsub", "tr", "adagrad", "relu", "first", "negation"),  # Fig. 8
    "sstwsub_mlp": ("sstwsub", "mlp", "adagrad", "relu", "first", "none"),  # Table 5
    "sstwsub_lrnn": ("sstwsub", "lrnn", "adagrad", "relu", "first", "none"),  # Table 5
    "imdb_mlp": ("imdb", "mlp", "adagrad", ALL_ACTIVATIONS, BOTH, "tokens"),  # Fig. 13a,c; Tables 3, 5
    "imdb_cnn": ("imdb", "cnn", "adagrad", "relu", "first", "tokens"),  # Fig. 13b; Table 5
    "imdb_sa": ("imdb", "sa", "adagrad", "relu", "first", "tokens"),  # claim 2; Table 5
    "imdb_mv": ("imdb", "mv", "adagrad", "relu", "first", "none"),  # Table 5
    "imdb_lrnn": ("imdb", "lrnn", "adagrad", "relu", "first", "none"),  # Table 5
    "ag_news_sa": ("ag_news", "sa", "adagrad", "relu", "first", "tokens"),  # Fig. 4; Table 5
    "ag_news_mlp": ("ag_news", "mlp", "adagrad", ALL_ACTIVATIONS, BOTH, "none"),  # Tables 3, 5
    "ag_news_cnn": ("ag_news", "cnn", "adagrad", "relu", "first", "none"),  # Table 5
    "ag_news_mv": ("ag_news", "mv", "adagrad", "relu", "first", "none"),  # Table 5
    "ag_news_lrnn": ("ag_news", "lrnn", "adagrad", "relu", "first", "none"),  # Table 5
    "synthetic_lrnn": ("synthetic", "lrnn", "adagrad", "relu", "first", "positions"),  # Fig. 12
}

# figure -> (datasets it needs, training jobs it reads)
FIGURES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "2": (("sst",), ("sst_mlp", "sst_cnn", "sst_sa", "sst_sa_mlp")),
    "10": (("sst",), ("sst_mlp",)),
    "11": (("sst",), ("sst_mlp_adam",)),
    "3": (("sst", "sstwsub"), ("sstwsub_mv", "sst_mv")),
    "6": (("sstwsub",), ("sstwsub_sa", "sstwsub_mv")),
    "8": (("sstwsub",), ("sstwsub_cnn", "sstwsub_tr")),
    "9": (("sstwsub",), ("sstwsub_sa",)),
    "12": ((), ("synthetic_lrnn",)),
    "13": (("imdb",), ("imdb_mlp", "imdb_cnn", "imdb_sa")),
    "4": (("ag_news",), ("ag_news_sa",)),
}
TABLES = ("scores", "metrics", "summary")
# What is lost when a dataset is off (the start-up message).
USES = {
    "sst": "Figs. 2, 3, 10, 11; Table 6 row SST; claims 1-4, 10",
    "sstwsub": "Figs. 3, 6, 8, 9; Table 6 rows SSTwsub; claims 5, 7",
    "imdb": "Fig. 13; Table 6 row IMDB; IMDB columns of Tables 3, 5",
    "ag_news": "Fig. 4 (claim 6); Table 6 row Agnews; Agnews columns of Tables 3, 5",
}


def job_table(ft_dir: str, job: str, table: str = "summary") -> str:
    return f"{ft_dir}/train/{job}/{table}.csv"


def job_settings(cls: dict, job: str, seed: int, device: str) -> dict:
    """The JSON settings of one training job (see :func:`featlearn.features.experiments.train_job`)."""
    if job not in JOBS:
        raise ValueError(f"unknown training job {job!r}; expected one of {sorted(JOBS)}")
    dataset, kind, optimizer, acts, sigma_v, probe = JOBS[job]
    ds = cls["datasets"][dataset]
    train = dict(cls["train"])
    train.update(kind=kind, optimizer=optimizer, epochs=cls["adam_epochs"] if optimizer == "adam" else ds["epochs"],
                 lr=cls["adam_lr"] if optimizer == "adam" else ds["lr"], max_len=ds["max_len"], device=device,
                 threads=cls["threads"])
    return {
        "dataset": dataset,
        "activations": list(cls["activations"]) if acts == ALL_ACTIVATIONS else [acts],
        "sigma_v": list(cls["sigma_v"]) if sigma_v == BOTH else list(cls["sigma_v"][:1]),
        "seeds": [seed + i for i in range(ds["seeds"])],
        "probe": probe,
        "ks": cls["synthetic"]["ks"],
        "max_train": ds["max_train"],
        "max_eval": ds["max_eval"],
        "subsample_seed": seed,
        "synthetic": cls["synthetic"],
        "settings": train,
    }


def job_inputs(job: str, prepared_dir: str, ft_dir: str) -> list[str]:
    """A job's prepared splits, vocabulary and extraction table (none for the synthetic data)."""
    dataset = JOBS[job][0]
    if dataset == "synthetic":
        return []
    files = [f"{prepared_dir}/{dataset}/{f}" for f in ("train.tsv", "dev.tsv", "test.tsv", "vocab.json")]
    return files + [f"{ft_dir}/extracted/{dataset}.csv"]


def figure_inputs(n: str, ft_dir: str) -> list[str]:
    """The tables figure ``n`` reads: its jobs' tables, the extracted units of its datasets, and (Fig. 2)
    the theory flow."""
    _, jobs = FIGURES[n]
    tables = [job_table(ft_dir, j, t) for j in jobs for t in TABLES]
    datasets = sorted({JOBS[j][0] for j in jobs} - {"synthetic"})
    tables += [f"{ft_dir}/extracted/{d}.csv" for d in datasets]
    if n == "2":
        tables += [f"{ft_dir}/theory/curves.csv", f"{ft_dir}/theory/scores.csv"]
    return tables


def table_inputs(table: str, ft_dir: str, datasets_on: list[str]) -> list[str]:
    """Summaries read by Table 3 (the MLP jobs on SST, IMDB, AG News) or Table 5 (MLP, CNN, SA, MV, L-RNN on
    every dataset) for the datasets on."""
    models = ("mlp",) if table == "3" else ("mlp", "cnn", "sa", "mv", "lrnn")
    datasets = [d for d in DATASETS if d in datasets_on and not (table == "3" and d == "sstwsub")]
    return [job_table(ft_dir, f"{d}_{m}") for d in datasets for m in models if f"{d}_{m}" in JOBS]
