# SparkInfer: one venv, one entry point per job. `make run` serves; `make test` checks.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# The checkpoint: MODEL (make's name) or SPARKINFER_MODEL (the processes'), as README's Configuration table lists both;
# MODEL wins when both are set (SPARKINFER_MODEL=/path make run served models/tiny without a word).
MODEL ?= $(or $(SPARKINFER_MODEL),models/tiny)
export SPARKINFER_MODEL := $(MODEL)

.PHONY: run test test-unit test-e2e bench bench-serve bench-gpu proto model venv venv-dev clean help

help:
	@echo "make run        serve the model (MODEL=path, default: the embedded tiny model) on :8080"
	@echo "make test       run the CPU test suite (GPU tests skip without a GPU); test-unit, test-e2e: a part of it"
	@echo "make bench      scheduler + tiny-model throughput on CPU (seed workload)"
	@echo "make bench-serve  served tok/s, TTFT and ITL over HTTP: the whole stack, tiny model (bench/serve_http.py)"
	@echo "make bench-gpu  check and time every CUDA kernel (needs a GPU)"
	@echo "make venv-dev   .venv with the test clients too (openai, ollama): the README's Python examples run with it"
	@echo "make model      write the deterministic tiny checkpoint to models/tiny"
	@echo "make proto      generate the gRPC stubs into proto/gen"
	@echo "make clean      remove proto/gen, .pytest_cache and bench/out (keeps .venv and models/)"
	@echo "Python 3.10 or later as python3, or name it: make run PYTHON=python3.12"

$(VENV)/.runtime: requirements.txt
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null || { echo "SparkInfer needs \
	Python 3.10 or later; PYTHON=$(PYTHON) is $$($(PYTHON) --version 2>/dev/null || echo 'not found'). Name another: \
	make run PYTHON=python3.12" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	touch $@

$(VENV)/.dev: requirements-dev.txt requirements.txt $(VENV)/.runtime
	$(PY) -m pip install -q -r requirements-dev.txt
	touch $@

venv: $(VENV)/.runtime
venv-dev: $(VENV)/.dev

proto: $(VENV)/.runtime
	$(PY) -c "import proto; proto.generate(); print('stubs in proto/gen')"

models/tiny/config.json: $(VENV)/.runtime
	$(PY) -m worker.tiny --out models/tiny

model: models/tiny/config.json

run: $(VENV)/.runtime proto
	@if [ "$(MODEL)" = "models/tiny" ]; then $(MAKE) --no-print-directory model; fi
	$(PY) -m deploy.launch --model $(MODEL)

test: $(VENV)/.dev proto model
	$(PY) -m pytest tests

test-unit: $(VENV)/.dev proto model
	$(PY) -m pytest tests/unit

test-e2e: $(VENV)/.dev proto model
	$(PY) -m pytest tests/e2e

bench: $(VENV)/.dev proto model
	$(PY) -m bench.scheduler_bench

bench-serve: $(VENV)/.dev proto model
	$(PY) -m bench.serve_http --model models/tiny --concurrency 1,4 --input-len 64 --output-len 64

bench-gpu:
	bash bench/gpu_all.sh

clean:
	rm -rf proto/gen .pytest_cache bench/out
