"""Diagnostic (features, issue 18 item 4): is the ReLU bias of the trained SST MLP the NTK flow's, or the
optimiser's? Trains the SST MLP-ReLU at sigma_v 0.1 and 0.001 (one seed, the default-scale epochs) with the
pipeline's trainer and a chosen optimiser, and prints the bias index beta of the extracted tokens' scores and
the training loss every few epochs. Compare with the linear NTK flow's beta (the `features_theory` job's log).

    python benchmarks/flow_bias_optimizer.py adagrad 3.16e-3 20
    python benchmarks/flow_bias_optimizer.py sgd 10 20

Needs the prepared SST split and its extraction table under results/ (`snakemake -- results/features/extracted/sst.csv`).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pandas as pd

from featlearn.features.experiments import build_probes, load_splits
from featlearn.features.theory import bias_index
from featlearn.features.train import Run, Settings, encode, train


def main(optimizer: str, lr: float, epochs: int, prepared: str = "results/data/prepared/sst",
         extracted: str = "results/features/extracted/sst.csv") -> None:
    inputs = {s: f"{prepared}/{s}.tsv" for s in ("train", "dev", "test")} | {"vocab": f"{prepared}/vocab.json"}
    rows, vocab = load_splits({"dataset": "sst", "max_train": 0, "max_eval": 0, "max_len": 0, "subsample_seed": 2021}, inputs)
    index = {w: i for i, w in enumerate(vocab)}
    enc = {s: encode(r, index, 0) for s, r in rows.items()}
    ext = pd.read_csv(extracted, keep_default_na=False, na_values=[""])
    from featlearn.pipeline.workflow import scale_config

    shared = scale_config("default", Path(__file__).resolve().parents[1] / "config")["features"]["cls"]["train"]
    settings = Settings(**{**shared, "kind": "mlp", "epochs": epochs, "lr": lr, "optimizer": optimizer, "threads": 1})
    t0 = time.perf_counter()
    res = train(settings, [Run(1, "relu", 0.1), Run(1, "relu", 0.001)], enc, len(vocab), build_probes("tokens", ext, index, []),
                progress=False)
    polarity = ext[ext["kind"] == "token"].set_index("unit")["polarity"]
    scores, m = res.scores[res.scores["probe"] == "token"], res.metrics
    for sv in (0.1, 0.001):
        cells = []
        for epoch in sorted(scores["epoch"].unique())[1:]:
            s = scores[(scores["sigma_v"] == sv) & (scores["epoch"] == epoch)]
            loss = m[(m["sigma_v"] == sv) & (m["epoch"] == epoch) & (m["split"] == "train") & (m["metric"] == "loss")]["value"]
            cells.append(f"epoch {epoch}: beta {bias_index(s['score'].to_numpy(), polarity.reindex(s['unit']).to_numpy()):+.3f} "
                         f"loss {float(loss.iloc[0]):.3f}")
        print(f"{optimizer} lr {lr:g} sigma_v {sv:g}: " + "; ".join(cells[2::3] + cells[-1:]))
    print(f"{time.perf_counter() - t0:.0f}s")


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]), int(sys.argv[3]))
