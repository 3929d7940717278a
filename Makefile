# The commands in the README. `make demo` and `make test` do all the set-up themselves.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.candor-installed
CORPUS := .candor/corpus/git-doc
VALIDATION_CORPUS := .candor/corpus/sqlite-doc
SHARED_EVAL ?= ../shared/eval

# llama.cpp must not be built with -march=native here: these CPUs advertise AMX
# and the VMs fault on it (SIGILL at the first inference). pip caches the wheel.
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON \
	-DGGML_F16C=ON -DGGML_BMI2=ON -DLLAVA_BUILD=OFF

.PHONY: install demo serve test lint typecheck unit corpus validation-corpus bench \
	eval eval-dev eval-validation clean dynamodb-local stress

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	CMAKE_BUILD_PARALLEL_LEVEL=2 CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" \
		$(BIN)/pip install --quiet llama-cpp-python==0.3.36
	$(BIN)/pip install --quiet -e '.[local,dev]'
	$(BIN)/candor models
	touch $@

demo: install
	$(BIN)/candor ingest docs
	$(BIN)/candor serve --host 127.0.0.1 --port 8000

serve: install
	$(BIN)/candor serve --host 127.0.0.1 --port 8000

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/cfn-lint infra/template.yaml

typecheck: install
	$(BIN)/mypy

# The dev corpus (Git's HTML manual, GPL-2) comes from Debian's git-doc package.
corpus: $(CORPUS)/git.html

$(CORPUS)/git.html:
	bash $(SHARED_EVAL)/fetch-git-doc.sh $(CORPUS)

# The validation corpus (SQLite's HTML manual, public domain) from Debian's
# sqlite3-doc package. It is measured, never tuned on: see ../shared/eval/README.md.
validation-corpus: $(VALIDATION_CORPUS)/cli.html

$(VALIDATION_CORPUS)/cli.html:
	bash $(SHARED_EVAL)/fetch-sqlite-doc.sh $(VALIDATION_CORPUS)

unit: install
	$(BIN)/pytest -m "not slow"

# DynamoDB Local (the jar in npm amplify-dynamodb-simulator) for the state store's
# contract and concurrency tests; the tests start and stop it on a free port.
dynamodb-local:
	bash scripts/dynamodb-local.sh install

test: install corpus validation-corpus dynamodb-local lint typecheck
	CANDOR_REQUIRE_DYNAMODB_LOCAL=1 CANDOR_TEST_CORPUS=$(CORPUS) \
		CANDOR_TEST_VALIDATION_CORPUS=$(VALIDATION_CORPUS) $(BIN)/pytest

# Concurrency proofs of the guards on DynamoDB Local and SQLite; ends with `STRESS {json}`.
stress: install dynamodb-local
	$(BIN)/python -m bench.stress

bench: install corpus
	$(BIN)/python bench/bench_embed.py $(CORPUS)
	$(BIN)/python bench/bench_query.py
	$(BIN)/python bench/bench_graph.py
	$(BIN)/python bench/bench_llm.py
	$(BIN)/python bench/bench_answer.py $(CORPUS)

# Retrieval per strategy and the full graph with the local models, on the dev set
# (eval-out/dev) and the validation set (eval-out/validation), then both side by
# side in eval-out/report.md. Each index (.candor/indexes/eval-<hash of the corpus>)
# is built once and reused.
eval: eval-dev eval-validation
	$(BIN)/candor compare eval-out/dev eval-out/validation --out eval-out/report.md

eval-dev: install corpus
	$(BIN)/candor eval --corpus $(CORPUS) --questions $(SHARED_EVAL)/git-doc-questions.jsonl \
		--out eval-out/dev

eval-validation: install validation-corpus
	$(BIN)/candor eval --corpus $(VALIDATION_CORPUS) \
		--questions $(SHARED_EVAL)/sqlite-doc-questions.jsonl --out eval-out/validation

clean:
	rm -rf $(VENV) .candor .mypy_cache .ruff_cache .pytest_cache
