# recagents: every command a reader needs. `make reproduce` and `make test` install into
# .venv on first use; the install re-runs only when the pins in pyproject.toml change.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUNTIME_BUILD := recagents/llm/runtime_build.py
PINS := $(shell cat pyproject.toml $(RUNTIME_BUILD) | sha1sum | cut -c1-12)
STAMP := $(VENV)/.installed-$(PINS)
NOTEBOOKS := $(sort $(wildcard notebooks/[0-9][0-9]_*.ipynb))
BUILT := $(patsubst notebooks/%,build/%,$(NOTEBOOKS))
SMOKE := $(patsubst notebooks/%,build/smoke/%,$(NOTEBOOKS))
# Every notebook is rebuilt when any module or data file of the package changes.
PACKAGE := $(shell find recagents -name "*.py" -o -name "*.json")
# Saved splits, candidates and trained models live in the repository, not in $HOME.
export RECAGENTS_CACHE_DIR ?= $(CURDIR)/.cache
export PIP_DISABLE_PIP_VERSION_CHECK := 1
# llama-cpp-python and llama.cpp's llama-server build from source once per machine (about
# 15 minutes on two cores) with the portable flags of recagents/llm/runtime_build.py, into
# ~/.cache/recagents/wheels, never pip's cache.
export CMAKE_BUILD_PARALLEL_LEVEL ?= 2
# The embedded llama-server and torch take every core; under `make -jN` (N > 1) notebooks run
# side by side, so each notebook's server and torch get one thread unless
# RECAGENTS_LOCAL_N_THREADS / OMP_NUM_THREADS say otherwise: spinning threads on shared cores
# slow each other down many times over (MAKEFLAGS names -j only inside a recipe).
SHARE_CORES = case " $(MAKEFLAGS) " in *" -j1 "*) ;; *" -j"*) \
  export RECAGENTS_LOCAL_N_THREADS=$${RECAGENTS_LOCAL_N_THREADS:-1} \
  OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1};; esac;
export PYDEVD_DISABLE_FILE_VALIDATION := 1
# papermill's own command line, started without a 2.5 s grammar import (recagents/run_notebook.py).
PAPERMILL = $(BIN)/python -m recagents.run_notebook --cwd notebooks

# The published run is code + replies. `make reproduce` first reads the committed reply bundle
# into the reply cache: a request found there is answered from it, any other goes to the model
# and is cached. At the end it writes the bundle of every reply the run used beside the
# figures (left untouched when its replies are unchanged). FRESH=1 asks the model for every
# reply, into a cache file of its own (.cache/llm-fresh-PROFILE.sqlite; delete it to ask
# again); REPLAY=1 answers only from the bundle, with no model at all (a missing reply stops
# the run, named), as `make check-published` and CI do. The smoke profile works the same with
# replies/smoke.bundle and also writes its records to replies/smoke-records.json.
REPLY_MODE := $(if $(FRESH),fresh,$(if $(REPLAY),replay,bundle))
STEMS := $(patsubst notebooks/%.ipynb,%,$(NOTEBOOKS))
FRESH_CACHE = $(RECAGENTS_CACHE_DIR)/llm-fresh-$(1).sqlite
# The variables a notebook of profile $(1), whose bundle is replies/$(1).bundle, runs with.
REPLY_ENV = $(if $(FRESH),RECAGENTS_LLM_CACHE=$(call FRESH_CACHE,$(1)),$(if $(REPLAY),\
  RECAGENTS_REPLAY=$(CURDIR)/replies/$(1).bundle))
# build/[smoke/].replies holds the reply mode; it changes (and every notebook reruns) only
# when the mode does. Its recipe runs first in every make: it says where replies come from
# and, by default, imports the bundle into the cache.
define REPLY_SOURCE
	@mkdir -p $(@D)
	@case "$(REPLY_MODE)" in \
	  fresh) echo "FRESH=1: every reply is asked of the model into $(call FRESH_CACHE,$(1)); \
	    replies/$(1).bundle is not read";; \
	  replay) echo "REPLAY=1: every reply comes from replies/$(1).bundle, none from a model";; \
	  *) if [ -f replies/$(1).bundle ]; then \
	       echo "reading replies/$(1).bundle: a request it holds is answered from it, any \
	other goes to the model (FRESH=1 asks the model for all)"; \
	       $(BIN)/python -m recagents.llm bundle import replies/$(1).bundle || exit 1; \
	     else echo "no replies/$(1).bundle: every reply comes from the model"; fi;; \
	esac
	@echo "$(REPLY_MODE)" | cmp -s - $@ || echo "$(REPLY_MODE)" > $@
endef
# Writes replies/$(1).bundle from the replies the notebooks of profile $(1) used (their keys
# are logged in $(2)/keys/NN.log while they run).
define REPLY_EXPORT
	$(BIN)/python -m recagents.llm bundle export --out replies/$(1).bundle --keep-unchanged \
	  --profile $(1) $(if $(FRESH),--cache $(call FRESH_CACHE,$(1))) \
	  $(foreach stem,$(STEMS),--notebook $(stem) --keys $(2)/keys/$(stem).log)
endef

.PHONY: setup setup-server reproduce report smoke test test-fast lint strip clean help \
  check-published lab setup-browser FORCE
.DEFAULT_GOAL := help

help:  ## list the commands
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'
	@echo "reproduce and smoke read replies/PROFILE.bundle first; FRESH=1 asks the model for \
	every reply, REPLAY=1 takes every reply from the bundle (no model)"

setup: $(STAMP)  ## install the pinned environment into .venv (only when the pins change)

$(STAMP): pyproject.toml $(RUNTIME_BUILD)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip==24.3.1"
	$(BIN)/python $(RUNTIME_BUILD) install --server
	$(BIN)/python -m pip install --quiet -e .
	@rm -f $(VENV)/.installed-*
	@touch $@

# JupyterLab on notebooks/, its kernel the project's .venv (the server's own Python), so every
# notebook imports recagents and starts the embedded model on its first call. LAB_ARGS passes
# options through, e.g. `make lab LAB_ARGS="--no-browser --port 8890"`; as root (a container)
# it adds --allow-root, which JupyterLab otherwise asks for. LAB_DIR: the folder it opens.
LAB_ARGS ?=
LAB_DIR ?= notebooks
lab: $(STAMP)  ## open the notebooks in JupyterLab with the project's environment as the kernel
	$(BIN)/jupyter lab --notebook-dir=$(LAB_DIR) $(if $(filter 0,$(shell id -u)),--allow-root) \
	  $(LAB_ARGS)

# Headless Chromium and its driver from Debian's packages, for the browser test of the
# published pages (tests/integration/test_pages_browser.py); CI runs it before `make test`.
setup-browser:  ## install Debian's chromium and chromium-driver (root), for the pages' browser test
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then \
	  echo "chromium and chromedriver are installed"; \
	elif [ "$$(id -u)" = 0 ]; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    chromium chromium-driver >/dev/null && echo "installed chromium and chromium-driver"; \
	else echo "run as root, or: sudo apt-get install chromium chromium-driver" >&2; exit 1; fi

setup-server: $(STAMP)  ## (re)build llama.cpp's llama-server, the default runtime (setup does it)
	$(BIN)/python $(RUNTIME_BUILD) install --server

# `make -j2 reproduce` starts the longest notebooks first, so that the last to start is short.
# Cold durations under `make -j2` (2026-12-07, 53 min 34 s in all): 06 22.6, 01 22.6,
# 03 18.8, 02 16.6, 04 11.4, 05 7.0, 00 7.0 min; this order ran 06, 03, 04 on one core and
# 01, 02, 05, 00 on the other. A notebook not named here starts last; one that needs a model
# another is training waits for it and loads it, whatever the order.
LONGEST_FIRST := 06_cross_paper 01_agentcf 02_agent4rec 03_afl 05_rec4agentverse \
  04_interecagent 00_data_and_baselines
NAMED := $(foreach name,$(LONGEST_FIRST),$(filter build/$(name).ipynb,$(BUILT)))

reproduce: $(NAMED) $(filter-out $(NAMED),$(BUILT))  ## run every notebook (default profile): figures/, build/, REPRODUCTION.md, docs/, replies/
	$(MAKE) --no-print-directory report
	$(call REPLY_EXPORT,default,build)

report: $(STAMP)  ## REPRODUCTION.md and the HTML pages in docs/ from the notebooks executed in build/
	$(BIN)/python -m recagents.report reproduction --build build --profile default --out REPRODUCTION.md
	$(BIN)/python -m recagents.report html --build build --figures figures --out docs
	$(BIN)/python -m recagents.report modules --out MODULES.md

build/.replies: FORCE | $(STAMP)
	$(call REPLY_SOURCE,default)

build/smoke/.replies: FORCE | $(STAMP)
	$(call REPLY_SOURCE,smoke)

FORCE:

build/%.ipynb: notebooks/%.ipynb $(STAMP) $(PACKAGE) build/.replies
	@mkdir -p build/keys && : > build/keys/$*.log
	$(SHARE_CORES) RECAGENTS_KEYLOG=$(CURDIR)/build/keys/$*.log $(call REPLY_ENV,default) \
	  RECAGENTS_FIGURES_DIR=$(CURDIR)/figures $(PAPERMILL) -p PROFILE default $< $@

smoke: $(SMOKE)  ## run every notebook with the small CI profile into build/smoke/, replies/smoke*
	$(call REPLY_EXPORT,smoke,build/smoke)
	$(BIN)/python -m recagents.report records --build build/smoke --out replies/smoke-records.json

build/smoke/%.ipynb: notebooks/%.ipynb $(STAMP) $(PACKAGE) build/smoke/.replies
	@mkdir -p build/smoke/keys && : > build/smoke/keys/$*.log
	$(SHARE_CORES) RECAGENTS_KEYLOG=$(CURDIR)/build/smoke/keys/$*.log $(call REPLY_ENV,smoke) \
	  RECAGENTS_FIGURES_DIR=$(CURDIR)/build/smoke/figures $(PAPERMILL) -p PROFILE smoke $< $@

# CI's proof that the published files are what the code makes from the committed replies:
# every notebook reruns from replies/default.bundle alone, into a reply cache of its own (a
# reply the shared cache holds from another run, e.g. a test's, would bring that run's
# latency into the cost tables), and a file of figures/, docs/, REPRODUCTION.md or the bundle
# that comes out different fails, named with its notebook.
JOBS ?= 2
CHECK_CACHE := $(CURDIR)/build/published-replies.sqlite
check-published: $(STAMP)  ## rerun the published run from its bundle alone; fail naming any file that changes
	$(BIN)/python -m recagents.report fingerprint --out build/published-before.json
	rm -f $(BUILT) $(CHECK_CACHE) $(CHECK_CACHE)-wal $(CHECK_CACHE)-shm
	RECAGENTS_LLM_CACHE=$(CHECK_CACHE) $(MAKE) --no-print-directory -j$(JOBS) reproduce REPLAY=1 FRESH=
	$(BIN)/python -m recagents.report stale --before build/published-before.json

test: export RECAGENTS_FIGURES_DIR = $(CURDIR)/build/smoke/figures
test: $(STAMP)  ## every tier: lint, unit, integration, smoke notebooks from their replies, nbval, check-published
	$(MAKE) --no-print-directory lint
	$(BIN)/python -m pytest tests
	RECAGENTS_REPLAY=$(CURDIR)/replies/smoke.bundle $(BIN)/python -m pytest --nbval \
	  --nbval-sanitize-with tests/notebooks/nbval_sanitize.cfg -p no:cacheprovider build/smoke
	$(MAKE) --no-print-directory check-published

test-fast: $(STAMP)  ## the unit tier only: no model, no RecBole training (about 2 minutes)
	$(BIN)/python -m pytest tests/unit -m "not slow"

lint: $(STAMP)  ## ruff, the layering contracts (import-linter), the type checker (mypy); notebooks stripped
	$(BIN)/ruff check recagents tests $(wildcard bench) notebooks
	$(BIN)/ruff format --check recagents tests $(wildcard bench)
	$(BIN)/nbstripout --verify $(NOTEBOOKS)
	$(BIN)/lint-imports
	$(BIN)/mypy

strip: $(STAMP)  ## strip outputs from the committed notebooks
	$(BIN)/nbstripout $(NOTEBOOKS)

clean:  ## remove build products and caches (keeps .venv and figures/)
	rm -rf build .cache .pytest_cache
