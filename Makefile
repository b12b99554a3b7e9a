# The two commands of the README: `make book` and `make test`. Each sets up .venv on first use.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export JAX_NUM_CPU_DEVICES := 8
export JAX_PLATFORMS ?= cpu
export PYTHONHASHSEED := 0
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: book test lint test-matrix execute lab bench bench-planner bench-efficiency bench-serving bench-caps venv clean browser node screenshots device-check
# Workers for pytest and lanes for the device matrix: one per core, at least 1.
JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); echo $$(( n > 0 ? n : 1 )))

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is needed, found " + sys.version' 
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "Installing the toolchain into $(VENV) (about a minute; log in $(VENV)/install.log)..."
	@$(PY) -m pip install --no-cache-dir -r requirements.txt > $(VENV)/install.log 2>&1 || (tail -n 40 $(VENV)/install.log; exit 1)
	@$(PY) -m pip install --no-deps -e . >> $(VENV)/install.log 2>&1 || (tail -n 40 $(VENV)/install.log; exit 1)
	@touch $@

# System tools the book and its browser test need, installed with apt-get when missing (CI starts bare, as root):
# Node.js/npm to fetch the pinned MathJax and ipywidgets JS (package-lock.json), Debian's Chromium for the
# screenshots and tests/test_browser.py (Playwright drives it; it never downloads a browser of its own).
APT_GET := $(if $(filter 0,$(shell id -u)),apt-get,sudo apt-get)
CHROMIUM := /usr/bin/chromium

node:
	@command -v npm > /dev/null || { echo "Installing npm with apt-get..."; \
	  $(APT_GET) update -qq && DEBIAN_FRONTEND=noninteractive $(APT_GET) install -y -qq npm > /dev/null; }

browser:
	@test -x $(CHROMIUM) || { echo "Installing Chromium with apt-get (about 30 s)..."; \
	  $(APT_GET) update -qq && DEBIAN_FRONTEND=noninteractive $(APT_GET) install -y -qq chromium > /dev/null; }

# Vendor the JS (tools/vendor_js.py), write the status page, build the HTML from the committed outputs with
# warnings as errors (fails when _build/html/index.html is missing), then screenshot every page.
book: $(STAMP) node browser
	@$(PY) tools/build_book.py
	@$(PY) tools/browser.py
	@echo "Open _build/html/index.html (screenshots in _build/screenshots/)"

screenshots: $(STAMP) browser
	@$(PY) tools/browser.py

# Ruff, then pytest over tests/ on every core beside the chapters (tools/run_tests.py): every chapter compared
# under strict nbval once, pinned to one core and one thread on a 1-device runtime, and the chapters that build
# meshes executed on one CPU device (tools/device_matrix.py). Fails if either fails.
test: $(STAMP) node browser
	$(PY) tools/run_tests.py --jobs $(JOBS)

# ruff over the package, the tests and the tools: lint rules and the formatter (pyproject.toml [tool.ruff]).
LINTED := tpu_notes tests tools
lint: $(STAMP)
	$(PY) -m ruff check $(LINTED)
	$(PY) -m ruff format --check $(LINTED)

# The chapters alone, with the 2- and 4-device runs of the mesh chapters that `make test` leaves out (--full).
test-matrix: $(STAMP)
	$(PY) tools/device_matrix.py --full --lanes $(JOBS)

# On a machine with a TPU or GPU: measure it once (<= 10 min) into book/measured/<device>/ (tools/device_check.py).
device-check: $(STAMP)
	JAX_PLATFORMS= $(PY) tools/device_check.py

execute: $(STAMP)
	$(PY) tools/execute.py

lab: $(STAMP)
	@$(PY) -m pip install -q jupyterlab >> $(VENV)/install.log 2>&1
	$(VENV)/bin/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root,) notebooks/

bench: $(STAMP) bench-planner bench-efficiency bench-serving bench-caps
	$(PY) -m tpu_notes bench

bench-planner: $(STAMP)
	$(PY) benchmarks/planner.py

bench-serving: $(STAMP)
	$(PY) benchmarks/serving.py

bench-efficiency: $(STAMP)
	$(PY) benchmarks/efficiency.py

# The calls at their caps that the tests count instead of timing (benchmarks/caps.py).
bench-caps: $(STAMP)
	$(PY) benchmarks/caps.py

clean:
	rm -rf _build _vendor
