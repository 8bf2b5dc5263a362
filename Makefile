# Two commands for a newcomer (see README):
#   make run    set up .venv, then run the whole pipeline at the default scale
#   make test   set up .venv, then the quick checks (snakefmt, ruff, the Snakemake linter), then the tests
# and make smoke: the whole pipeline at the smoke scale.
# Extra Snakemake arguments: make run ARGS="--configfile config/smoke.yaml"

VENV ?= .venv
PYTHON ?= python3
ARGS ?=
# pytest workers of `make test` (pytest-xdist: `auto` is one per CPU; 0 runs the tests in this process, one at a time)
TEST_WORKERS ?= auto
# Exact versions the results were produced with (empty: the version ranges of pyproject.toml only).
CONSTRAINTS ?= envs/constraints.txt
# Rules run `python -m featlearn ...`: put the environment's python first on PATH.
export PATH := $(abspath $(VENV))/bin:$(PATH)

.PHONY: setup run smoke test test-floors lint report clean figures

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml $(CONSTRAINTS)
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -e '.[test]' $(if $(CONSTRAINTS),-c $(CONSTRAINTS))
	touch $@

run: setup
	snakemake --workflow-profile profiles/default --cores all $(ARGS)

smoke: setup
	snakemake --workflow-profile profiles/default --cores all $(ARGS) --configfile config/smoke.yaml

# Every figure, table and check target with its title, and whether this config and data can make it.
figures: setup
	python -m featlearn figures $(if $(ARGS),--configfile $(ARGS))

test: setup
	snakefmt --check Snakefile workflow/rules/
	ruff check src tests benchmarks
	snakemake --lint
	# every test but the SLURM ones on every core (a module's tests, and those of the shared smoke run, stay in one
	# worker: tests/conftest.py), the slowest groups first (conftest's SLOW_GROUPS: xdist's reorder by test count is
	# off); then the SLURM tests alone, whose cluster has one node and time limits of a minute
	pytest -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder -m "not slurm" $(ARGS)
	pytest -m slurm $(ARGS) || [ $$? -eq 5 ]  # 5: ARGS selected no SLURM test

# The lowest versions pyproject.toml allows (envs/floors.txt), in their own environment, against the unit tests.
test-floors:
	rm -rf .venv-floors
	$(PYTHON) -m venv .venv-floors
	.venv-floors/bin/python -m pip install -e '.[test]' -c envs/floors.txt
	.venv-floors/bin/python -m pytest -m "not workflow" -p no:cacheprovider $(ARGS)

report: setup
	snakemake --report results/report.html $(ARGS)

clean:
	rm -rf results/* .snakemake
