#!/usr/bin/env bash
# The workflow itself on a GPU machine without network access, from an empty results folder, in one command:
#
#   (where pip works, once)  bash benchmarks/device/prepare_carry.sh   # .whl (Snakemake for Python 3.12), .devdata
#   (on the GPU machine, with the checkout and those two folders copied along):
#                   DAG_LIMIT=540 bash benchmarks/device/dag_session.sh [targets] [snakemake options]
#
# e.g. the default DAG with the GPU profile (jobs share the card up to its memory less 8 GB):
#   bash benchmarks/device/dag_session.sh
# or one figure per paper with the CUDA-graph switches on, to compare with a run without them:
#   bash benchmarks/device/dag_session.sh fig_templates_2c table_joma_1 --configfile benchmarks/device/cuda_graphs.yaml
#
# Snakemake runs under `timeout` (DAG_LIMIT seconds, default 540), offline, with .devdata as the data mirror (no
# IMDB or AG News there: their jobs are left out, as `enabled: auto` leaves out an absent dataset). Everything
# Snakemake wrote that a comparison needs comes back in ${OUT}/dag_session.tar.gz: its log, the run record, the claims
# tables, the scorecard, the benchmark files and the jobs' logs; figures too with DAG_FIGURES=1. A default-scale run
# that reached its scorecard is compared claim by claim with the committed CPU run's (results/verdicts_vs_cpu.md).
# Paper-scale evidence: DAG_EVIDENCE=1 bash benchmarks/device/dag_session.sh results/joma/evidence/table_joma_1.json
# --configfile config/paper.yaml also returns the results folder as dag_results.tar.gz (docs/gpu.md says what then).
set -uo pipefail

OUT_DIR="${OUT:-/tmp/dag_session}"
LIMIT="${DAG_LIMIT:-540}"
PROFILE="${DAG_PROFILE:-profiles/gpu}"
mkdir -p "$OUT_DIR"
START=$SECONDS

if [[ -d .whl ]]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || { echo "dag_session: the wheels in .whl did not install" >&2; exit 1; }
    export PYTHONPATH="/tmp/site:$PWD/src"
else
    export PYTHONPATH="$PWD/src"
fi
export PYTHONUNBUFFERED=1 FEATLEARN_OFFLINE=1 FEATLEARN_DATA_MIRROR="${DAG_MIRROR:-$PWD/.devdata}"
# the copy on a GPU machine has no .git: the run record takes the commit from COMMIT (full: git rev-parse HEAD)
if [[ -n ${COMMIT:-} ]]; then export FEATLEARN_COMMIT="$COMMIT"; fi

# the GPU memory the running jobs may declare together: the card's less 8 GB (or DAG_GPU_MEM_MB)
GPU_MEM="${DAG_GPU_MEM_MB:-}"
if [[ -z $GPU_MEM ]] && command -v nvidia-smi > /dev/null; then
    GPU_MEM=$(($(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1) - 8000))
fi
RESOURCES=()
if [[ -n $GPU_MEM ]]; then RESOURCES=(--resources "gpu_mem_mb=$GPU_MEM"); fi

echo "dag_session: $(date -u '+%Y-%m-%d %H:%M:%S') UTC, commit ${COMMIT:-unknown}, profile $PROFILE, limit ${LIMIT}s, ${RESOURCES[*]:-no GPU memory cap}"
timeout --kill-after=15 "$LIMIT" python3 -m snakemake --workflow-profile "$PROFILE" --cores all "${RESOURCES[@]}" "$@" \
    > "$OUT_DIR/snakemake.log" 2>&1
rc=$?
status=finished
if ((rc == 124 || rc == 137)); then status="stopped at the ${LIMIT}s limit"; elif ((rc != 0)); then status="failed (rc $rc)"; fi
progress=$(grep -E '[0-9]+ of [0-9]+ steps' "$OUT_DIR/snakemake.log" | tail -1)
echo "dag_session: snakemake $status after $((SECONDS - START))s; ${progress:-no progress line}"
grep -E "^Error in rule|Exiting because a job execution failed" "$OUT_DIR/snakemake.log" | head -20

# a default-scale run's verdicts against the committed CPU run's (benchmarks/device/default-cpu/README.md)
REFERENCE=benchmarks/device/default-cpu/scorecard.csv
if [[ -f results/scorecard.csv && -f $REFERENCE ]] && grep -q '"scale": "default"' results/run.json 2> /dev/null; then
    python3 benchmarks/scorecard_compare.py "$REFERENCE" results/scorecard.csv --reference-name "CPU (committed)" \
        --name "this run" --out results/verdicts_vs_cpu.md > /dev/null && head -1 results/verdicts_vs_cpu.md
fi

files=()
for f in results/verdicts_vs_cpu.md results/run.json results/scorecard.md results/scorecard.csv results/benchmarks.csv results/benchmarks results/logs; do
    [[ -e $f ]] && files+=("$f")
done
while IFS= read -r f; do files+=("$f"); done < <(find results -path '*/claims*' -type f 2>/dev/null)
if [[ ${DAG_FIGURES:-0} == 1 ]]; then
    while IFS= read -r f; do files+=("$f"); done < <(find results/figures -type f 2>/dev/null)
fi
cp "$OUT_DIR/snakemake.log" results/dag_session_snakemake.log 2> /dev/null || { mkdir -p results && cp "$OUT_DIR/snakemake.log" results/dag_session_snakemake.log; }
tar czf "$OUT_DIR/dag_session.tar.gz" results/dag_session_snakemake.log "${files[@]}"
# DAG_EVIDENCE=1: the whole results folder (less the prepared data and any kept checkpoints), for a paper-scale run's
# figures to be added here: tar xzf dag_results.tar.gz -C RUN; python -m featlearn evidence add --workdir RUN ...
if [[ ${DAG_EVIDENCE:-0} == 1 ]]; then
    tar czf "$OUT_DIR/dag_results.tar.gz" --exclude=results/data --exclude='*.resume' --exclude='*.pt' results
    size=$(stat -c %s "$OUT_DIR/dag_results.tar.gz")
    if ((size > 16 << 20)); then  # the device tool returns files of up to 16 MiB
        echo "dag_session: dag_results.tar.gz is $size bytes, over the 16 MiB a returned file may have" >&2
    fi
fi
rm -f "$OUT_DIR/snakemake.log"
ls -la "$OUT_DIR"
exit 0
