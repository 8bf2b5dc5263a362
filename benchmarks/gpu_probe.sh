#!/usr/bin/env bash
# GPU probe: throughput of the project's models on one GPU, in about 6 minutes, from the repository root:
#
#   bash benchmarks/gpu_probe.sh                          # GPU mode (needs CUDA)
#   PROBE_DEVICE=cpu PROBE_QUICK=1 bash benchmarks/gpu_probe.sh   # the same steps on the CPU at tiny sizes
#
# Needs python3 with torch, transformers, pyyaml (no snakemake, no network). Steps, each under `timeout` and
# within an overall budget (PROBE_BUDGET seconds, default 330), so the whole run stays under ~6 minutes:
#   1. nvidia-smi and the torch build;
#   2. lm-bench at paper scale, every model, float32 then bfloat16 (bfloat16 only on CUDA);
#   3. templates-bench at the paper-scale sweep settings (config.yaml + paper.yaml: templates.sweeps and
#      templates.bench, composed as the templates registry's `templates_bench` job) at one n (PROBE_TEMPLATES_N,
#      default 1024);
#   4. scan-snap-bench, Syn-Medium's job shape (160 runs = 4 eta_Z x 4 ratios x 10 seeds, 100 iterations, float64)
#      on CUDA and on the CPU with PROBE_CPU_THREADS threads (default: the cores, at most 16);
#   5. a summary table of the JSON outputs.
# Everything is written under ${OUT:-/tmp/gpu_probe}: <step>.json, <step>.log, steps.tsv (status per step).
set -euo pipefail

export PYTHONPATH=src PYTHONUNBUFFERED=1
OUT_DIR="${OUT:-/tmp/gpu_probe}"
DEVICE="${PROBE_DEVICE:-cuda}"
QUICK="${PROBE_QUICK:-0}"
BUDGET="${PROBE_BUDGET:-330}"
TEMPLATES_N="${PROBE_TEMPLATES_N:-1024}"
CORES="$(nproc)"
CPU_THREADS="${PROBE_CPU_THREADS:-$((CORES < 16 ? CORES : 16))}"
mkdir -p "$OUT_DIR"
printf 'step\tstatus\tseconds\n' > "$OUT_DIR/steps.tsv"
START=$SECONDS

# run_step NAME LIMIT CMD...: run CMD under `timeout` (LIMIT seconds, or less if the budget is nearly spent),
# its output in NAME.log; record ok / timeout / failed in steps.tsv; never stop the script.
run_step() {
    local name=$1 limit=$2 left rc t0
    shift 2
    left=$((BUDGET - (SECONDS - START)))
    if ((left < limit)); then limit=$left; fi
    if ((limit < 10)); then
        echo "== $name: skipped (budget of ${BUDGET}s spent)"
        printf '%s\tskipped\t0\n' "$name" >> "$OUT_DIR/steps.tsv"
        return 0
    fi
    echo "== $name (limit ${limit}s): $*"
    t0=$SECONDS
    if timeout --kill-after=5 "$limit" "$@" > "$OUT_DIR/$name.log" 2>&1; then rc=0; else rc=$?; fi
    local status=ok
    if ((rc == 124 || rc == 137)); then status=timeout; elif ((rc != 0)); then status="failed(rc=$rc)"; fi
    printf '%s\t%s\t%s\n' "$name" "$status" "$((SECONDS - t0))" >> "$OUT_DIR/steps.tsv"
    echo "   $status after $((SECONDS - t0))s"
    if [[ $status != ok ]]; then tail -n 5 "$OUT_DIR/$name.log" | sed 's/^/   | /'; fi
}

if [[ $QUICK == 1 ]]; then
    SCALE=smoke
    LM_ARGS=(--steps 2 --warmup 1)
    SCAN_ARGS=(--num-last 1 --runs 8 --iterations 10 --sequential-runs 1)
else
    SCALE=paper
    LM_ARGS=(--steps 20 --warmup 5)
    SCAN_ARGS=(--num-last 1 10 --runs 160 --iterations 100 --sequential-runs 4)
fi
LM_THREADS=$([[ $DEVICE == cpu ]] && echo "$CPU_THREADS" || echo 4)

# 1. the machine
if command -v nvidia-smi > /dev/null; then
    run_step nvidia_smi 20 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
    nvidia-smi > "$OUT_DIR/nvidia_smi_full.log" 2>&1 || true
    cat "$OUT_DIR/nvidia_smi.log" || true
fi
run_step torch_env 30 python3 -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, \
'available', torch.cuda.is_available(), torch.cuda.get_device_name() if torch.cuda.is_available() else '', \
'transformers', transformers.__version__, 'cpus', torch.get_num_threads())"
cat "$OUT_DIR/torch_env.log" || true

# 2. language models at paper scale
run_step lm_float32 110 python3 -m featlearn lm-bench --scale "$SCALE" --device "$DEVICE" --dtype float32 "${LM_ARGS[@]}" \
    --threads "$LM_THREADS" --out "$OUT_DIR/lm_float32.json"
if [[ $DEVICE == cuda ]]; then
    run_step lm_bfloat16 80 python3 -m featlearn lm-bench --scale "$SCALE" --device cuda --dtype bfloat16 "${LM_ARGS[@]}" \
        --threads "$LM_THREADS" --out "$OUT_DIR/lm_bfloat16.json"
fi

# 3. the templates sweep engine at the paper-scale settings, one n
TEMPLATES_SETTINGS="$(SCALE=$SCALE DEVICE=$DEVICE QUICK=$QUICK TEMPLATES_N=$TEMPLATES_N python3 - << 'EOF'
import json
import os

from featlearn.lm_bench import load_config

# as src/featlearn/templates/registry.py composes the `templates_bench` job's settings
templates = load_config(os.environ["SCALE"])["templates"]
sweeps, bench = templates["sweeps"], templates["bench"]
settings = {"task": {"name": "aba_abb"}, "arch": "transformer", "model": sweeps["transformer"],
            **{k: sweeps[k] for k in ("batch", "eval_every", "n_val", "n_test")},
            **{k: v for k, v in bench.items() if k != "threads"}, "device": os.environ["DEVICE"]}
settings["n"] = [bench["n"][0]] if os.environ["QUICK"] == "1" else [int(os.environ["TEMPLATES_N"])]
print(json.dumps(settings))
EOF
)" || TEMPLATES_SETTINGS=""
echo "templates settings: ${TEMPLATES_SETTINGS:-(could not be read from the config)}"
if [[ -n $TEMPLATES_SETTINGS ]]; then
    run_step templates 100 python3 -m featlearn templates-bench --settings "$TEMPLATES_SETTINGS" --threads "$LM_THREADS" \
        --out "$OUT_DIR/templates.json"
fi

# 4. Scan and Snap's vectorised synthetic training, GPU against CPU
if [[ $DEVICE == cuda ]]; then
    run_step scan_snap_cuda 60 python3 -m featlearn scan-snap-bench "${SCAN_ARGS[@]}" --device cuda --threads 4 \
        --out "$OUT_DIR/scan_snap_cuda.json"
fi
run_step scan_snap_cpu 80 python3 -m featlearn scan-snap-bench "${SCAN_ARGS[@]}" --device cpu --threads "$CPU_THREADS" \
    --out "$OUT_DIR/scan_snap_cpu.json"

# 5. summary
OUT_DIR="$OUT_DIR" python3 - << 'EOF'
import json
import os
from pathlib import Path

out = Path(os.environ["OUT_DIR"])


def load(name):
    path = out / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else []


print("\n==== summary ====")
print((out / "steps.tsv").read_text().rstrip())

lm = {dtype: {(r["model"], r["label"]): r for r in load(f"lm_{dtype}")} for dtype in ("float32", "bfloat16")}
keys = list(dict.fromkeys([*lm["float32"], *lm["bfloat16"]]))
if keys:
    print(f"\nlm-bench ({next(iter(lm['float32'].values() or lm['bfloat16'].values()))['scale']} scale)")
    print(f"{'model':<15} {'setting':<22} {'params':>8} {'GFLOP/tok':>9} {'tok/s fp32':>11} {'MFU':>6} {'tok/s bf16':>11} {'MFU':>6} {'GiB':>5}")

    def cell(r):
        if r is None:
            return f"{'-':>11} {'-':>6}"
        if "error" in r:
            return f"{'OOM' if 'memory' in r['error'] else 'error':>11} {'-':>6}"
        return f"{r['tokens_per_s']:>11.0f} {r['mfu']:>6.1%}"

    for key in keys:
        a, b = lm["float32"].get(key), lm["bfloat16"].get(key)
        ref = next((r for r in (a, b) if r and "error" not in r), None)
        params = f"{ref['parameters'] / 1e6:>7.1f}M" if ref else f"{'-':>8}"
        gflop = f"{ref['flops_per_token'] / 1e9:>9.3f}" if ref else f"{'-':>9}"
        mems = [r["peak_memory_gib"] for r in (a, b) if r and r.get("peak_memory_gib") is not None]
        mem = f"{max(mems):>5.1f}" if mems else f"{'-':>5}"
        print(f"{key[0]:<15} {key[1]:<22} {params} {gflop} {cell(a)} {cell(b)} {mem}")
    for dtype, rows in lm.items():
        if rows:
            r = next(iter(rows.values()))
            print(f"matmul peak {dtype}: {r['peak_matmul_tflops']:.3g} TFLOP/s (n = {r['peak_matmul_size']}, {r['device']})")

for name in ("templates",):
    for r in load(name):
        print(f"\ntemplates-bench n={r['n']} R={r['runs']} epochs={r['epochs']} {r['device']} ({r['device_name']}): "
              f"engine ({r['engine_mode']}) {r['vectorised_model_steps_per_s']:.1f} model-steps/s "
              f"(vmap {r['vmap_model_steps_per_s']:.1f}, looped {r['looped_model_steps_per_s']:.1f}), "
              f"one at a time {r['sequential_model_steps_per_s']:.1f}, speedup x{r['speedup']:.1f}")

scan = [r for name in ("scan_snap_cuda", "scan_snap_cpu") for r in load(name)]
if scan:
    print(f"\nscan-snap-bench ({scan[0]['runs']} runs x {scan[0]['iterations']} iterations, {scan[0]['dtype']})")
    print(f"{'num_last':>8} {'device':<6} {'threads':>7} {'vectorised steps/s':>19} {'one-at-a-time':>14} {'speedup':>8}")
    for r in scan:
        print(f"{r['num_last']:>8} {r['device']:<6} {r['threads']:>7} {r['vectorised_model_steps_per_s']:>19.0f} "
              f"{r['sequential_model_steps_per_s']:>14.0f} {r['speedup']:>8.1f}")
    by = {(r["num_last"], r["device"]): r["vectorised_model_steps_per_s"] for r in scan}
    for n in dict.fromkeys(r["num_last"] for r in scan):
        if (n, "cuda") in by and (n, "cpu") in by:
            print(f"num_last {n}: GPU / CPU vectorised = x{by[n, 'cuda'] / by[n, 'cpu']:.1f}")
EOF
echo "total $((SECONDS - START))s; outputs in $OUT_DIR"

# 6. one archive in place of the files (PROBE_PACK=1): a caller that fetches only a few files gets them all
if [[ ${PROBE_PACK:-0} == 1 ]]; then
    tar czf /tmp/gpu_probe.tar.gz -C "$OUT_DIR" .
    find "$OUT_DIR" -mindepth 1 -delete
    mv /tmp/gpu_probe.tar.gz "$OUT_DIR/"
fi
