#!/usr/bin/env bash
# Paper-scale templates sweep groups on one GPU, a few epochs each, to extrapolate the paper grids' time
# (model-steps per second of one engine group at the grid's largest n). About 4 minutes:
#   bash benchmarks/gpu_sweep_probe.sh          (needs CUDA; writes sweep_<name>.json under ${OUT:-/tmp/gpu_probe})
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
OUT_DIR="${OUT:-/tmp/gpu_probe}"
mkdir -p "$OUT_DIR"
# the sweeps' protocol (config templates.sweeps): batch 1024, evaluation every epoch on 100 validation and 100 test samples
T='"arch": "transformer", "batch": 1024, "eval_every": 1, "n_val": 100, "n_test": 100, "sequential_runs": 1, "device": "cuda"'
PAPER='"d_emb": 128, "depth": 2, "heads": 16, "d_head": 64, "d_mlp": 256'
# name | settings: Fig. 22/8-type T5 group at n = 8192 (2 variants x 5 seeds x lrs: 64 runs), Fig. 3c's model at
# n = 16384 (2 variants x 5 seeds), Fig. 5's largest copy model (d_emb 4096) at n = 2048
probe() {
    local name=$1 settings=$2 limit=$3
    echo "== $name"
    timeout "$limit" python3 -m featlearn templates-bench --settings "$settings" --threads 4 --out "$OUT_DIR/sweep_$name.json" \
        > "$OUT_DIR/sweep_$name.log" 2>&1 || echo "   rc=$?"
    tail -n 3 "$OUT_DIR/sweep_$name.log"
}
probe t5_n8192 "{\"task\": {\"name\": \"aba_abb\"}, $T, \"model\": {$PAPER}, \"n\": [8192], \"runs\": 64, \"epochs\": 2}" 80
probe fig3c_n16384 "{\"task\": {\"name\": \"program_next_token\"}, $T, \"model\": {\"d_emb\": 512, \"depth\": 4, \"heads\": 16, \"d_head\": 64, \"d_mlp\": 256}, \"n\": [16384], \"runs\": 10, \"epochs\": 1}" 80
probe fig5_d4096 "{\"task\": {\"name\": \"copy\"}, $T, \"model\": {\"d_emb\": 4096, \"depth\": 2, \"heads\": 16, \"d_head\": 64, \"d_mlp\": 256}, \"n\": [2048], \"runs\": 10, \"epochs\": 1}" 70
python3 - "$OUT_DIR" << 'PY'
import json, sys
from pathlib import Path
for p in sorted(Path(sys.argv[1]).glob("sweep_*.json")):
    for r in json.loads(p.read_text()):
        print(f"{p.stem}: n={r['n']} R={r['runs']} steps/epoch={r['steps_per_epoch']} engine ({r['engine_mode']}) "
              f"{r['vectorised_model_steps_per_s']:.1f} model-steps/s, one at a time {r['sequential_model_steps_per_s']:.1f}, "
              f"x{r['speedup']:.1f}")
PY
