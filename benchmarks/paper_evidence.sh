#!/usr/bin/env bash
# Run whole figures at the papers' own settings and copy each one the run wrote into evidence/paper/<paper>/<rule>/
# (src/featlearn/pipeline/evidence.py), ready to commit.
#
#   bash benchmarks/paper_evidence.sh fig_joma_4 table_joma_1        # the figures to run (rule names)
#   RUN_DIR=/scratch/paper bash benchmarks/paper_evidence.sh ...       # where the run's results/ go
#   SNAKEMAKE_ARGS="--workflow-profile profiles/gpu" bash benchmarks/paper_evidence.sh ...   # on a GPU
#   EXTRA_CONFIG=$PWD/cores.yaml bash benchmarks/paper_evidence.sh fig_templates_25   # a config merged over paper.yaml
#       (an absolute path; e.g. templates: {sweeps: {threads: 2}}: a sweep job trains 2 groups at once on a CPU)
#
# The run happens in a clone of this checkout's HEAD (RUN_DIR, default ../featlearn-paper-run), so its results/ never
# mix with a default-scale run's and its record names a commit; it is resumed when RUN_DIR already holds that clone.
# A run killed half-way (hours of paper-scale training) resumes its trainings from what they kept (checkpoints, a
# sweep's finished groups) only under the same code: KEEP_COMMIT=1 leaves the clone at its own commit instead of
# moving it to HEAD, so that the run goes on where it stopped and its record names the commit it ran.
#
#   KEEP_COMMIT=1 RUN_DIR=/scratch/paper25 bash benchmarks/paper_evidence.sh fig_templates_25   # go on with a run
# Figures the run could not finish are reported and left out; the rest are added even when some failed.
set -uo pipefail

if [ "$#" -eq 0 ]; then
    echo "usage: bash benchmarks/paper_evidence.sh <figure rule> [<figure rule> ...]" >&2
    exit 2
fi
REPO=$(git rev-parse --show-toplevel)
cd "$REPO" || exit 1
RUN_DIR=${RUN_DIR:-$REPO/../featlearn-paper-run}
PAPERS="features scan_snap joma templates"

if [ ! -d "$RUN_DIR/.git" ]; then
    git clone -q "$REPO" "$RUN_DIR" || exit 1
fi
if [ "${KEEP_COMMIT:-0}" = 1 ]; then
    echo "paper-scale run at the clone's own commit $(git -C "$RUN_DIR" rev-parse --short HEAD) (KEEP_COMMIT=1)"
else
    git -C "$RUN_DIR" fetch -q "$REPO" HEAD && git -C "$RUN_DIR" checkout -q --detach FETCH_HEAD || exit 1
fi

paper_of() {  # fig_scan_snap_4 -> scan_snap
    local rule=$1 p
    for p in $PAPERS; do
        case "$rule" in fig_"$p"_* | table_"$p"_* | check_"$p"_*) echo "$p"; return 0 ;; esac
    done
    return 1
}
for rule in "$@"; do
    paper_of "$rule" > /dev/null || { echo "not a figure rule: $rule (fig_<paper>_<n>, table_..., check_...)" >&2; exit 2; }
done

targets=$(for rule in "$@"; do echo "results/$(paper_of "$rule")/evidence/$rule.json"; done)
start=$(date +%s)
# each target runs its figure and prepares what evidence add copies (rule figure_evidence); the targets come first,
# so that an option of SNAKEMAKE_ARGS taking several values (--prioritize, --config) cannot take them as its own
# shellcheck disable=SC2086  # SNAKEMAKE_ARGS and targets are lists of arguments
(cd "$RUN_DIR" && snakemake $targets --cores all --keep-going ${SNAKEMAKE_ARGS:-} --configfile config/paper.yaml ${EXTRA_CONFIG:-})
status=$?
echo "paper-scale run: $(( $(date +%s) - start )) s, snakemake exit status $status"

added=0
for rule in "$@"; do
    if python -m featlearn evidence add --paper "$(paper_of "$rule")" --figure "$rule" --workdir "$RUN_DIR"; then
        added=$((added + 1))
    fi
done
echo "evidence: $added of $# figures added under evidence/paper/ (git add evidence README.md to commit them)"
[ "$added" -gt 0 ]
