"""WikiText experiments of Scan and Snap (Fig. 7: attention maps over training; Fig. 10: attention
entropy against one unified learning rate), on the shared transformer LM of ``featlearn.lm``.

Fig. 7 recipe (authors' public code, facts only): d_model 200, d_ff 200, 1 head, causal mask, batch 20,
bptt 35, SGD without momentum, lr 10 for the feed-forward weights and 5 for the rest, gradient
clipping 0.5, constant learning rate; 1 layer with dropout 0.3, [D] 3 layers with dropout 0.2 and lr 5.
"""

from __future__ import annotations

import json
import sys

from featlearn.io import load_tensor
from featlearn.lm.train import LMRun, train_lm, write_table


def run_variant(settings: dict, train_pt: str, valid_pt: str, vocab_json: str, out_log: str, out_maps: str, work_dir: str, device: str) -> None:
    with open(vocab_json, encoding="utf-8") as fh:
        vocab = len(json.load(fh))
    run = LMRun(**settings)
    print(f"[scan_snap] WikiText LM {settings}", file=sys.stderr, flush=True)
    out = train_lm(run, load_tensor(train_pt), load_tensor(valid_pt), vocab, work_dir, device=device, tag=f" {settings.get('n_layer')}L lr{settings.get('lr')}")
    write_table(out["log"], out_log)
    write_table(out["maps"], out_maps)
