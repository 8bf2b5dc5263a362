"""WikiText experiments of Scan and Snap (Fig. 7: attention maps over training; Fig. 10: attention
entropy against one unified learning rate), on the shared transformer LM of ``featlearn.lm``.

Fig. 7 recipe (authors' public code, facts only): d_model 200, d_ff 200, 1 head, causal mask, batch 20,
bptt 35, SGD without momentum, lr 10 for the feed-forward weights and 5 for the rest, gradient
clipping 0.5, constant learning rate; 1 layer with dropout 0.3, [D] 3 layers with dropout 0.2 and lr 5.
"""

from __future__ import annotations

from featlearn.io import write_csv
from featlearn.lm.train import train_from_files

OPTIMIZER = "sgd"  # without momentum, at a constant learning rate (module docstring)


def run_variant(settings: dict, inputs: dict, outputs: dict, ctx) -> None:
    out = train_from_files({**settings, "optimizer": OPTIMIZER}, inputs["train"], inputs["valid"], inputs["vocab"], ctx.work_dir,
                           ctx.device, tag=f" {settings.get('n_layer')}L lr{settings.get('lr')}")
    write_csv(out["log"], outputs["log"])
    write_csv(out["maps"], outputs["maps"])
