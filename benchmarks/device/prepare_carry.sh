#!/usr/bin/env bash
# Prepare, where pip has network access, what a GPU machine without it needs to run the workflow itself
# (benchmarks/device/dag_session.sh):
#   .whl/     Python 3.12 wheels of Snakemake, jsonschema and lemminflect with the dependencies the card's image
#             lacks (an image with PyTorch, pandas, seaborn, pyyaml, requests, jinja2 ...: ON_CARD below; the image
#             is assumed to hold them), built with a local python3.12 (PYTHON312) and pip's network access;
#   .devdata/ the data mirror (FEATLEARN_DATA_MIRROR) without IMDB and AG News, for a copy limited to
#             64 MiB with the checkout (IMDB's archive alone is 28 MB).
# Both folders are git-ignored (.git/info/exclude); copy them with the checkout.
#
#   bash benchmarks/device/prepare_carry.sh
set -euo pipefail

PY312="${PYTHON312:-python3.12}"
MIRROR="${FEATLEARN_DATA_MIRROR:?set FEATLEARN_DATA_MIRROR to the data mirror folder}"
# the packages the card's image already has: their wheels are dropped (the image's own versions are used)
ON_CARD="numpy pyyaml psutil markupsafe jinja2 requests urllib3 idna certifi charset_normalizer packaging attrs
typing_extensions wrapt tabulate"

exclude=.git/info/exclude
mkdir -p "$(dirname "$exclude")"
for path in /.whl/ /.devdata/; do grep -qxF "$path" "$exclude" 2>/dev/null || echo "$path" >> "$exclude"; done

rm -rf .whl && mkdir .whl
# versions as this project's constraints pin them where they do
"$PY312" -m pip wheel -q -w .whl "snakemake==$(grep -i '^snakemake==' envs/constraints.txt | cut -d= -f3)" \
    "lemminflect==$(grep -i '^lemminflect==' envs/constraints.txt | cut -d= -f3)" \
    "jsonschema==$(grep -i '^jsonschema==' envs/constraints.txt | cut -d= -f3)"
for name in $ON_CARD; do rm -f .whl/"$name"-*.whl; done
# PuLP (16 MB, CBC binaries for every platform) is what Snakemake's ILP scheduler needs, and profiles/gpu schedules
# greedily: Snakemake imports it only for the ILP one. Without it the copy fits the 64 MiB with room to spare.
rm -f .whl/pulp-*.whl

rm -rf .devdata && mkdir .devdata
for d in "$MIRROR"/*/; do
    name=$(basename "$d")
    # IMDB's archive alone is 28 MB; AG News has its test split only here, so its jobs are left out anyway
    [[ $name == imdb || $name == ag_news ]] && continue
    cp -r "$d" .devdata/
done
cp "$MIRROR"/MANIFEST.tsv .devdata/ 2>/dev/null || true
du -sh .whl .devdata
tracked=$(git ls-files -z | du -cb --files0-from=- | tail -1 | cut -f1)
carried=$(du -cb .whl .devdata | tail -1 | cut -f1)
echo "tracked files $tracked bytes + .whl and .devdata $carried bytes = $((tracked + carried)) bytes; the limit is $((64 << 20))"
if ((tracked + carried > (64 << 20))); then
    echo "prepare_carry: over the 64 MiB a device call carries" >&2
    exit 1
fi
