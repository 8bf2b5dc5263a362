#!/usr/bin/env bash
# Prepare, where pip has network access, what a GPU machine without it needs to run the workflow itself
# (benchmarks/device/dag_session.sh):
#   .whl/     Python 3.12 wheels of Snakemake, jsonschema and lemminflect with the dependencies the card's image
#             lacks (an image with PyTorch, pandas, seaborn, pyyaml, requests, jinja2 ...: ON_CARD below; the image
#             is assumed to hold them), built with a local python3.12 (PYTHON312) and pip's network access;
#   .devdata/ the data mirror (FEATLEARN_DATA_MIRROR) without IMDB, for a copy limited to
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

rm -rf .devdata && mkdir .devdata
for d in "$MIRROR"/*/; do
    name=$(basename "$d")
    [[ $name == imdb ]] && continue
    cp -r "$d" .devdata/
done
cp "$MIRROR"/MANIFEST.tsv .devdata/ 2>/dev/null || true
du -sh .whl .devdata
echo "tracked files: $(git ls-files -z | du -cb --files0-from=- | tail -1 | cut -f1) bytes; the limit is 64 MiB in all"
