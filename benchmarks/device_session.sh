#!/usr/bin/env bash
# GPU checks of the CUDA-graph switches and the cost estimate in one command of about 9 minutes, for a GPU machine
# with little time on it, from the repository root, with python3 holding torch, pandas, pyyaml and pytest (no snakemake: the estimate
# and the tests below do not need it; no data: the estimate sizes absent datasets by their documented sizes):
#
#   COMMIT=$(git rev-parse --short HEAD) bash benchmarks/device_session.sh
#   SESSION_CACHE=benchmarks/device/h200-2026-11-28/probes.json ...   # start from an earlier run's probes (on
#   another card, or under another torch, its records scaled stand in for probes not measured: --scale-from)
#
# Steps, each under `timeout` and within SESSION_BUDGET seconds (default 470; the reports get 100 s more) in all, a later step getting what
# the earlier ones left:
#   1. the machine: nvidia-smi, the torch build;
#   2. the CUDA-only tests: captured steps equal the eager ones, a resumed captured run equals an uninterrupted one;
#   3. the templates sweep step with CUDA graphs off and on, steady state (benchmarks/sweep_step.py), and the
#      last-query attention's vmap path (benchmarks/vmap_last_query.py);
#   4. the paper estimate, every job a time (probes at most --max-probes-per-job per job, the rest interpolated;
#      breadth first within --probe-budget, so that the step ends by itself and writes its report);
#   5. the paper-scale T5 engine group (Fig. 22's type, 64 runs at n = 8192) with CUDA graphs, against one run
#      at a time;
#   5b. the CUDA peaks of the paper config's largest templates groups against the run memory formula
#      (benchmarks/group_memory.py);
#   6. the default estimate with the switches off, then on (benchmarks/device/cuda_graphs.yaml), 30 timed steps
#      per probe;
#   6b. on a card that scaled another GPU's records (--scale-from), the check of that scaling on the probes both
#      have (benchmarks/estimate_transfer.py);
#   7. the estimate reports again from the probe cache (--no-probe), so a step cut short still leaves its tables.
# Everything lands in ${OUT:-/tmp/device_session}/device_session.tar.gz, refreshed after every step, so a run
# stopped from outside still returns what it finished.
set -uo pipefail

export PYTHONPATH=src PYTHONUNBUFFERED=1 FEATLEARN_OFFLINE=1
unset FEATLEARN_DATA_MIRROR
OUT_DIR="${OUT:-/tmp/device_session}"
WORK=/tmp/device_session_work
BUDGET="${SESSION_BUDGET:-470}"
DEVICE="${SESSION_DEVICE:-cuda}"
mkdir -p "$OUT_DIR" "$WORK"
printf 'step\tstatus\tseconds\n' > "$WORK/steps.tsv"
echo "commit ${COMMIT:-unknown}, started $(date -u '+%Y-%m-%d %H:%M:%S') UTC, budget ${BUDGET}s" | tee "$WORK/session.txt"
START=$SECONDS
CACHE="$WORK/probes.json"
# SESSION_CACHE: a probe cache of an earlier run to start from (its probes of the same GPU and torch are reused)
if [[ -n ${SESSION_CACHE:-} ]]; then cp "$SESSION_CACHE" "$CACHE"; fi

pack() { tar czf "$OUT_DIR/device_session.tar.gz.part" -C "$WORK" . && mv "$OUT_DIR/device_session.tar.gz.part" "$OUT_DIR/device_session.tar.gz"; }

# run_step NAME LIMIT CMD...: CMD under `timeout` (LIMIT seconds, or what the budget has left), output in NAME.log
run_step() {
    local name=$1 limit=$2 left rc t0 status
    shift 2
    left=$((BUDGET - (SECONDS - START)))
    if ((left < limit)); then limit=$left; fi
    if ((limit < 15)); then
        printf '%s\tskipped\t0\n' "$name" >> "$WORK/steps.tsv"
        echo "== $name: skipped (budget spent)"
        return 0
    fi
    echo "== $name (limit ${limit}s)"
    t0=$SECONDS
    if timeout --kill-after=5 "$limit" "$@" > "$WORK/$name.log" 2>&1; then rc=0; else rc=$?; fi
    status=ok
    if ((rc == 124 || rc == 137)); then status=timeout; elif ((rc != 0)); then status="failed(rc=$rc)"; fi
    printf '%s\t%s\t%s\n' "$name" "$status" "$((SECONDS - t0))" >> "$WORK/steps.tsv"
    echo "   $status after $((SECONDS - t0))s"
    tail -n 4 "$WORK/$name.log" | sed 's/^/   | /'
    pack
}

# on a GPU, the GPU the started-from cache holds (the committed H200's) stands in for the probes this card has not
# measured, its records scaled by the ratio of this card's times to its, measured first on a few probes of each kind
# (--scale-from; nothing changes on that GPU under the same torch): on a card the cache has not seen, every job a
# time after the calibration, not after some 200 probes
SCALE=()
if [[ $DEVICE == cuda* && -s $CACHE ]]; then
    FROM=$(python3 -c 'import collections, json, sys
devices = collections.Counter(json.loads(k).get("device", "") for k in json.load(open(sys.argv[1])))
print(next((d for d, _ in devices.most_common() if d and not d.endswith(" threads")), ""))' "$CACHE")
    if [[ -n $FROM ]]; then
        SCALE=(--scale-from "$FROM")
    fi
fi

# the estimate: its probes cached in one file, its report as --out names it
ESTIMATE=(python3 -m featlearn estimate --device "$DEVICE" --assume-online --cache "$CACHE" --results "$WORK/results"
    --resources-out '' ${SCALE[@]+"${SCALE[@]}"})

# 1. the machine
run_step machine 30 bash -c "nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c \
'import torch; print(\"torch\", torch.__version__, \"cuda\", torch.version.cuda, torch.cuda.is_available() and torch.cuda.get_device_name())'"

# 2. the CUDA-only tests (the switches' captured steps, resumes)
run_step cuda_tests 130 python3 -m pytest -q -rs -p no:cacheprovider tests/test_cudagraphs.py tests/templates/test_templates.py \
    tests/scan_snap/test_scan_snap.py tests/joma/test_joma_hierarchy.py tests/features/test_features_cuda_graphs.py \
    tests/lm/test_lm_cuda_graphs.py tests/features/test_char_cuda_graphs.py -k "cuda_graphs or graphed or captured or per_sample_weights"

# 3. the default sweep step, graphs off and on
run_step sweep_step 60 python3 benchmarks/sweep_step.py --device "$DEVICE" --groups 3 --out "$WORK/sweep_step.json"

# 3b. the last-query attention under vmap: strided slice against a contiguous copy (featlearn.templates.models)
run_step vmap_last_query 40 python3 benchmarks/vmap_last_query.py --device "$DEVICE" --widths 64 1024 4096

# 4. the paper estimate: every job a time
PAPER=(--configfile config/paper.yaml --max-probes-per-job 2)
# (probing for the step's time less 50 s: the cost models, the start-up probe and a probe in flight when the budget
# runs out fit in those; 150 s of the 200 unless the earlier steps left less)
STEP=$((BUDGET - (SECONDS - START))); ((STEP > 200)) && STEP=200
run_step estimate_paper 200 "${ESTIMATE[@]}" --out "$WORK/estimate_paper.md" "${PAPER[@]}" \
    --probe-budget $((STEP > 65 ? STEP - 50 : 15))

# 5. the paper-scale T5 engine group with graphs
T5='{"task": {"name": "aba_abb"}, "arch": "transformer", "batch": 1024, "eval_every": 1, "n_val": 100, "n_test": 100,
"sequential_runs": 1, "device": "'"$DEVICE"'", "cuda_graphs": true, "model": {"d_emb": 128, "depth": 2, "heads": 16,
"d_head": 64, "d_mlp": 256}, "n": [8192], "runs": 64, "epochs": 3}'
run_step t5_engine_graphs 50 python3 -m featlearn templates-bench --settings "$T5" --threads 4 --out "$WORK/t5_engine_graphs.json"

# 5b. the CUDA peaks of the paper config's largest templates groups against the run memory formula (its
# max_group_gb: grid 3c's groups of n 262,144 hold 4 runs; Fig. 5 at d_emb 4096 holds 20)
run_step group_memory_3c 35 python3 benchmarks/group_memory.py --device "$DEVICE" --fig 3c --n 262144 --runs 4 \
    --out "$WORK/group_memory_3c.json"
run_step group_memory_5 25 python3 benchmarks/group_memory.py --device "$DEVICE" --fig 5 --n 2048 --d-emb 4096 --runs 20 \
    --out "$WORK/group_memory_5.json"

# 6. the default estimate, switches off then on (the probes cached apart)
GRAPHS=(--configfile benchmarks/device/cuda_graphs.yaml)
run_step estimate_default 80 "${ESTIMATE[@]}" --out "$WORK/estimate_default.md" --probe-steps 30
run_step estimate_default_graphs 80 "${ESTIMATE[@]}" --out "$WORK/estimate_default_graphs.md" --probe-steps 30 "${GRAPHS[@]}"

# 6b. with --scale-from: how well the other GPU's records, scaled, stood in for this card's, checked on the probes that
# both have and the calibration did not use (benchmarks/estimate_transfer.py: from the cache, nothing measured)
if ((${#SCALE[@]})); then
    CARD='from featlearn.devices import device_label; print(device_label("cuda"))'
    run_step scale_check 20 bash -c 'python3 benchmarks/estimate_transfer.py --cache "$1" --scale-from "$2" \
        --device "$(python3 -c "$3")" --json "$4"' _ "$CACHE" "${SCALE[1]}" "$CARD" "$WORK/scale_check.json"
fi

# 7. the reports from the cache, whatever was cut short
BUDGET=$((SECONDS - START + 100))  # the reports get 100 s whatever is left
run_step report_paper 40 "${ESTIMATE[@]}" --out "$WORK/estimate_paper.md" "${PAPER[@]}" --no-probe
run_step report_default 30 "${ESTIMATE[@]}" --out "$WORK/estimate_default.md" --probe-steps 30 --no-probe
run_step report_default_graphs 30 "${ESTIMATE[@]}" --out "$WORK/estimate_default_graphs.md" --probe-steps 30 "${GRAPHS[@]}" --no-probe
cat "$WORK/steps.tsv"
echo "total $((SECONDS - START))s"
pack
