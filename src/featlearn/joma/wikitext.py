"""WikiText experiments of JoMA (Fig. 6: attention entropy per layer over training for 1/2/5/10 layers at
Adam lr 1e-4; Fig. 8: 5 layers across learning rates), on the shared transformer LM of ``featlearn.lm``.

Recipe (the PyTorch word-language-model tutorial, as the authors' public code uses it; facts only):
d_model 200, d_ff 200, 1 head, dropout 0.2, post-LN, causal mask, untied decoder, batch 20 streams,
bptt 35, Adam with a constant learning rate, gradient clipping 0.5. Entropy of layer l:
-sum_j a_ij log(a_ij + 1e-8), mean over the 35 causal query rows and the validation windows; the
uniform causal bound is mean_{i=1..35} ln i = 2.632. The same log carries the stable rank of each
layer's feed-forward up-projection (JoMA Fig. 7's measure, here on the pipeline's own checkpoints).
"""

from __future__ import annotations

from featlearn.io import write_csv
from featlearn.lm.train import train_from_files

OPTIMIZER = "adam"  # at a constant learning rate (module docstring)


def run(settings: dict, inputs: dict, outputs: dict, ctx) -> None:
    """Train one (dataset, layers, learning rate, seed) model on the prepared ``train``, ``valid`` and
    ``vocab`` inputs, resuming from ``ctx.work_dir``, and write its long log (output ``log``) with the
    run's settings as columns."""
    settings = dict(settings)
    dataset = settings.pop("dataset")
    tag = f" {dataset} {settings['n_layer']}L lr{settings['lr']:g} seed{settings['seed']}"
    out = train_from_files({**settings, "optimizer": OPTIMIZER}, inputs["train"], inputs["valid"], inputs["vocab"], ctx.work_dir,
                           ctx.device, tag=tag)
    log = out["log"]
    log.insert(0, "seed", settings["seed"])
    log.insert(0, "lr", settings["lr"])
    log.insert(0, "n_layer", settings["n_layer"])
    log.insert(0, "dataset", dataset)
    write_csv(log, outputs["log"])
