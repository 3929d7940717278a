# The commands in the README. `make demo` and `make test` do all the set-up themselves.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.candor-installed
CORPUS := .candor/corpus/git-doc
TEST_PDF := .candor/test-pdf/debian-reference.en.pdf
VALIDATION_CORPUS := .candor/corpus/sqlite-doc
# The suite's three more manuals of other kinds (data/eval/suite/README.md): Sphinx
# HTML, man pages as plain text, one PDF. Measured, never tuned on.
FLASK_CORPUS := .candor/corpus/flask-doc
MANPAGES_CORPUS := .candor/corpus/manpages
DEBREF_CORPUS := .candor/corpus/debian-reference
SUITE := data/eval/suite
# The evaluation sets and their corpus recipes, copied from the workplace's shared
# folder (../shared/eval) so that a clone anywhere can fetch its corpora and run its
# tests; tests/unit/test_eval_sets.py fails when the two copies part.
EVAL_SETS := data/eval

# llama.cpp is built for this machine's CPU, but not with -march=native: these CPUs
# advertise AMX and the VMs fault on it (SIGILL at the first inference). AVX-512 and
# its VNNI dot products are used where the CPU lists them: on these machines the
# model reads a prompt 1.46x faster with them than with AVX2 alone.
LLAMA_VERSION := 0.3.36
CPU_FLAGS := $(shell grep -m1 '^flags' /proc/cpuinfo 2>/dev/null)
AVX512 := $(if $(filter-out $(CPU_FLAGS),avx512f avx512cd avx512vl avx512dq avx512bw),OFF,ON)
avx512_extra = $(if $(and $(filter ON,$(AVX512)),$(filter $(1),$(CPU_FLAGS))),ON,OFF)
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON \
	-DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=$(AVX512) \
	-DGGML_AVX512_VBMI=$(call avx512_extra,avx512vbmi) \
	-DGGML_AVX512_VNNI=$(call avx512_extra,avx512_vnni) \
	-DGGML_AVX512_BF16=$(call avx512_extra,avx512_bf16) -DLLAVA_BUILD=OFF
# The built wheel is kept per set of flags (pip's own cache would hand back a wheel
# built with other flags), outside the clone so that a new clone reuses it.
LLAMA_WHEELS := $(HOME)/.cache/candor/wheels/llama-cpp-python-$(LLAMA_VERSION)-$(shell \
	echo '$(LLAMA_CMAKE_ARGS)' | sha256sum | cut -c1-12)

.PHONY: install demo serve test lint typecheck unit corpus validation-corpus test-pdf bench \
	eval eval-dev eval-validation eval-generated generated-questions clean dynamodb-local stress \
	suite-corpora eval-suite eval-budgets suite-generated-questions \
	sam build validate invoke browser-deps

# The AWS SAM CLI lives in a virtualenv of its own (its pins clash with the project's).
# `sam build` needs python3.12, the Lambda runtime's, on PATH: pyenv's if there is one.
SAM_VERSION := 1.170.0
SAM_VENV := .candor/sam-venv
SAM := $(SAM_VENV)/bin/sam
PYTHON312 ?= $(or $(lastword $(sort $(wildcard $(HOME)/.pyenv/versions/3.12.*/bin/python3.12))),$(shell command -v python3.12))
SAM_ENV := SAM_CLI_TELEMETRY=0 PATH="$(dir $(PYTHON312)):$$PATH"

install: $(STAMP)

# The layer's exact pins constrain every install, so that the tests run the very
# versions `sam build` ships to Lambda (pyproject.toml only states ranges).
CONSTRAINTS := layers/candor/requirements.txt

$(STAMP): pyproject.toml $(CONSTRAINTS)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	@if ! ls $(LLAMA_WHEELS)/*.whl >/dev/null 2>&1; then \
		echo "building llama-cpp-python $(LLAMA_VERSION) for this CPU (about 5 min on 2 cores)"; \
		rm -rf $(LLAMA_WHEELS).tmp && \
		CMAKE_BUILD_PARALLEL_LEVEL=2 CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip wheel --quiet \
			--no-deps --no-cache-dir -w $(LLAMA_WHEELS).tmp llama-cpp-python==$(LLAMA_VERSION) && \
		mv $(LLAMA_WHEELS).tmp $(LLAMA_WHEELS); \
	fi
	$(BIN)/pip install --quiet $(LLAMA_WHEELS)/*.whl
	$(BIN)/pip install --quiet -c $(CONSTRAINTS) -e '.[local,dev]'
	$(BIN)/candor models
	touch $@

demo: install
	$(BIN)/candor ingest docs
	@echo "candor demo: open http://127.0.0.1:8000/ in a browser and ask the widget (bottom right)"
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
	bash $(EVAL_SETS)/fetch-git-doc.sh $(CORPUS)

# A real PDF for the PDF loader's test: the Debian Reference, from Debian's
# debian-reference-en package (GPL-2+).
test-pdf: $(TEST_PDF)

$(TEST_PDF):
	bash scripts/fetch-test-pdf.sh $(dir $(TEST_PDF))

# The validation corpus (SQLite's HTML manual, public domain) from Debian's
# sqlite3-doc package. It is measured, never tuned on: see data/eval/README.md.
validation-corpus: $(VALIDATION_CORPUS)/cli.html

$(VALIDATION_CORPUS)/cli.html:
	bash $(EVAL_SETS)/fetch-sqlite-doc.sh $(VALIDATION_CORPUS)

suite-corpora: $(FLASK_CORPUS)/config.html $(MANPAGES_CORPUS)/tcp.7.txt \
	$(DEBREF_CORPUS)/debian-reference.en.pdf

$(FLASK_CORPUS)/config.html:
	bash $(EVAL_SETS)/fetch-flask-doc.sh $(FLASK_CORPUS)

$(MANPAGES_CORPUS)/tcp.7.txt:
	bash $(EVAL_SETS)/fetch-manpages.sh $(MANPAGES_CORPUS)

$(DEBREF_CORPUS)/debian-reference.en.pdf:
	bash $(EVAL_SETS)/fetch-debian-reference.sh $(DEBREF_CORPUS)

unit: install
	$(BIN)/pytest -m "not slow"

# DynamoDB Local (the jar in npm amplify-dynamodb-simulator) for the state store's
# contract and concurrency tests; the tests start and stop it on a free port.
dynamodb-local:
	bash scripts/dynamodb-local.sh install

# The widget's browser tests: Debian's chromium (apt-get) and axe-core (npm, into
# .candor/axe-core), each installed when missing. Never `playwright install`.
browser-deps:
	bash scripts/browser-deps.sh

test: install corpus validation-corpus suite-corpora test-pdf dynamodb-local browser-deps lint \
		typecheck build
	CANDOR_REQUIRE_DYNAMODB_LOCAL=1 CANDOR_REQUIRE_LOCAL_MODELS=1 CANDOR_REQUIRE_BROWSER=1 \
		CANDOR_REQUIRE_NETWORK_NAMESPACE=1 \
		CANDOR_TEST_CORPUS=$(CORPUS) CANDOR_TEST_PDF=$(TEST_PDF) \
		CANDOR_TEST_VALIDATION_CORPUS=$(VALIDATION_CORPUS) \
		CANDOR_TEST_FLASK_CORPUS=$(FLASK_CORPUS) CANDOR_TEST_MANPAGES_CORPUS=$(MANPAGES_CORPUS) \
		CANDOR_TEST_DEBIAN_REFERENCE_CORPUS=$(DEBREF_CORPUS) $(BIN)/pytest

sam: $(SAM)

$(SAM):
	@test -n "$(PYTHON312)" || { echo "make: sam build needs python3.12 on PATH (pyenv install 3.12)"; exit 1; }
	$(PYTHON312) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/pip install --quiet --disable-pip-version-check aws-sam-cli==$(SAM_VERSION)

# The template as SAM and cfn-lint read it (about 5 s).
validate: sam
	cd infra && $(SAM_ENV) ../$(SAM) validate --lint

# The Lambda artifacts in infra/.aws-sam/build (about 75 s, pip downloads included):
# the layer (layers/candor/Makefile) and
# the three functions. No Docker: python3.12 builds them. Then `cd infra && sam deploy`.
build: sam validate
	cd infra && $(SAM_ENV) ../$(SAM) build

# One Lambda invocation on this machine, no Docker: the real handler with the event and
# a Lambda context, on the embedded default (what `candor serve` uses). For example:
#   make invoke FN=ask EVENT=events/ask.json
#   make invoke FN=ingest EVENT=events/s3-put.json
#   make invoke FN=handoff EVENT=events/handoff-sqs.json
#   make invoke FN=sync EVENT=events/sync-schedule.json   (the fixture site, moto S3 and SQS)
invoke: install
	@test -n "$(FN)" -a -n "$(EVENT)" || { echo "usage: make invoke FN=ask|feedback|ingest|handoff|sync|gaps EVENT=events/NAME.json"; exit 2; }
	$(BIN)/python -m scripts.invoke $(FN) $(EVENT)

# Concurrency proofs of the guards on DynamoDB Local and SQLite, then a sustained mixed run
# through the app (bench/stress_mixed.py); each ends with `STRESS {json}`.
stress: install dynamodb-local
	$(BIN)/python -m bench.stress
	$(BIN)/python -m bench.stress_mixed

bench: install corpus
	$(BIN)/python bench/bench_embed.py $(CORPUS)
	$(BIN)/python bench/bench_query.py
	$(BIN)/python bench/bench_graph.py
	$(BIN)/python bench/bench_llm.py
	$(BIN)/python bench/bench_answer.py $(CORPUS)
	$(BIN)/python bench/bench_stream.py $(CORPUS)
	$(BIN)/python bench/bench_first_question.py
	$(BIN)/python -m bench.bench_cold_import
	$(BIN)/python bench/bench_sync.py $(CORPUS)

# Retrieval per strategy and the full graph with the local models, on the dev set
# (eval-out/dev) and the validation set (eval-out/validation), then both side by
# side in eval-out/report.md (with candor against its references paired per question;
# `candor compare --before OLD/dev OLD/validation --after NEW/dev NEW/validation`
# pairs two releases). Each index (.candor/indexes/eval-<hash of the corpus>)
# is built once and reused. Each run's traces stay in its state.sqlite3, and its
# insights.md is the owner's report on them.
eval: eval-dev eval-validation eval-suite eval-generated eval-budgets
	$(BIN)/candor compare eval-out/dev eval-out/validation eval-out/flask-doc \
		eval-out/manpages eval-out/debian-reference eval-out/dev-generated \
		eval-out/validation-generated --out eval-out/report.md

# The suite's three other manuals through the whole graph, as eval-dev and
# eval-validation (data/eval/suite: 22 answerable and 4 unanswerable questions each).
SUITE_SETS := flask-doc:$(FLASK_CORPUS) manpages:$(MANPAGES_CORPUS) \
	debian-reference:$(DEBREF_CORPUS)

eval-suite: install suite-corpora
	for set in $(SUITE_SETS); do \
		name=$${set%%:*}; corpus=$${set#*:}; \
		$(BIN)/candor eval --corpus $$corpus --questions $(SUITE)/$$name-questions.jsonl \
			--out eval-out/$$name || exit 1; \
	done

# Answer context at each budget on every hand-written set (retrieval and packing
# only, no chat model): the sweep docs/quality.md "Context budgets" reports.
BUDGETS := 1800,3600,6000,9000

eval-budgets: install corpus validation-corpus suite-corpora
	for set in git-doc:$(CORPUS):$(EVAL_SETS) sqlite-doc:$(VALIDATION_CORPUS):$(EVAL_SETS) \
			flask-doc:$(FLASK_CORPUS):$(SUITE) manpages:$(MANPAGES_CORPUS):$(SUITE) \
			debian-reference:$(DEBREF_CORPUS):$(SUITE); do \
		IFS=: read name corpus folder <<< "$$set"; \
		$(BIN)/candor eval --retrieval-only --strategies hybrid --context-chars $(BUDGETS) \
			--corpus $$corpus --questions $$folder/$$name-questions.jsonl \
			--out eval-out/budgets-$$name || exit 1; \
	done

eval-dev: install corpus
	$(BIN)/candor eval --corpus $(CORPUS) --questions $(EVAL_SETS)/git-doc-questions.jsonl \
		$(EVAL_SETS)/git-doc-catalogue.jsonl --out eval-out/dev
	CANDOR_DATA_DIR=eval-out/dev $(BIN)/candor insights --days 2 > eval-out/dev/insights.md

eval-validation: install validation-corpus
	$(BIN)/candor eval --corpus $(VALIDATION_CORPUS) \
		--questions $(EVAL_SETS)/sqlite-doc-questions.jsonl \
		$(EVAL_SETS)/sqlite-doc-catalogue.jsonl --out eval-out/validation
	CANDOR_DATA_DIR=eval-out/validation $(BIN)/candor insights --days 2 \
		> eval-out/validation/insights.md

# Retrieval on the questions the local model wrote from each manual (GENERATED, made by
# `make generated-questions`): 150 a set, enough to tell hybrid from plain. Only
# retrieval: a generated question is answerable by construction. Never tuned on.
GENERATED := data/eval/generated
GENERATE_N := 150
GENERATE_SEED := 0

eval-generated: install corpus validation-corpus
	$(BIN)/candor eval --retrieval-only --corpus $(CORPUS) \
		--questions $(GENERATED)/git-doc-questions.jsonl --out eval-out/dev-generated
	$(BIN)/candor eval --retrieval-only --corpus $(VALIDATION_CORPUS) \
		--questions $(GENERATED)/sqlite-doc-questions.jsonl --out eval-out/validation-generated

# Writes the question sets again with the local model (about 40 minutes a set on two
# cores); the same model, seed and code write the same questions.
generated-questions: install corpus validation-corpus
	for set in git-doc:$(CORPUS) sqlite-doc:$(VALIDATION_CORPUS); do \
		name=$${set%%:*}; corpus=$${set#*:}; \
		$(BIN)/candor eval --generate $(GENERATE_N) --seed $(GENERATE_SEED) --retrieval-only \
			--corpus $$corpus --out eval-out/$$name-generate || exit 1; \
		cp eval-out/$$name-generate/generated-questions.jsonl $(GENERATED)/$$name-questions.jsonl; \
		cp eval-out/$$name-generate/generated-questions.json $(GENERATED)/$$name-questions.json; \
	done

# The same for the suite's three other manuals (the PDF's questions expect pages).
suite-generated-questions: install suite-corpora
	for set in $(SUITE_SETS); do \
		name=$${set%%:*}; corpus=$${set#*:}; \
		$(BIN)/candor eval --generate $(GENERATE_N) --seed $(GENERATE_SEED) --retrieval-only \
			--corpus $$corpus --out eval-out/$$name-generate || exit 1; \
		cp eval-out/$$name-generate/generated-questions.jsonl $(GENERATED)/$$name-questions.jsonl; \
		cp eval-out/$$name-generate/generated-questions.json $(GENERATED)/$$name-questions.json; \
	done

clean:
	rm -rf $(VENV) .candor .mypy_cache .ruff_cache .pytest_cache infra/.aws-sam
