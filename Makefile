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

.PHONY: book test lint test-matrix execute lab bench bench-planner bench-efficiency bench-serving bench-caps venv clean browser node screenshots measure device-check
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

# System tools. Node.js/npm fetches the pinned MathJax and ipywidgets JS (package-lock.json); it is installed with
# apt-get when missing (CI starts bare, as root). Chromium is optional for `make book`: the HTML builds without it.
# The screenshots and tests/test_browser.py drive Debian's Chromium with Playwright (never a browser of its own);
# `browser` installs it with apt-get where that is possible (apt-get present, and root or password-less sudo), and
# elsewhere says in one line what is skipped. On CI (Debian, root) it is installed, and the browser test runs.
APT_GET := $(if $(filter 0,$(shell id -u)),apt-get,sudo apt-get)
CHROMIUM ?= /usr/bin/chromium

node:
	@command -v npm > /dev/null || { echo "Installing npm with apt-get..."; \
	  $(APT_GET) update -qq && DEBIAN_FRONTEND=noninteractive $(APT_GET) install -y -qq npm > /dev/null; }

browser:
	@{ test -x $(CHROMIUM) || command -v chromium > /dev/null; } && exit 0; \
	if command -v apt-get > /dev/null && { [ "$$(id -u)" = 0 ] || sudo -n true 2> /dev/null; }; then \
	  echo "Installing Chromium with apt-get (about 30 s)..."; \
	  { $(APT_GET) update -qq && DEBIAN_FRONTEND=noninteractive $(APT_GET) install -y -qq chromium > /dev/null; } \
	    || echo "Chromium could not be installed: the screenshots and the browser test will be skipped"; \
	else \
	  echo "No Chromium at $(CHROMIUM) (and no apt-get as root to install it): the screenshots and the browser" \
	    "test (tests/test_browser.py) are skipped; the HTML book is built all the same"; \
	fi

# Vendor the JS (tools/vendor_js.py), write the status page, build the HTML from the committed outputs with
# warnings as errors (fails when _build/html/index.html is missing), then screenshot every page where Chromium is
# (`make screenshots`; skipped with a line saying so where it is not).
book: $(STAMP) node
	@$(PY) tools/build_book.py
	@$(MAKE) --no-print-directory screenshots
	@echo "Open _build/html/index.html"

# Every page's top and full length into _build/screenshots/, with progress ("screenshot 12/91 ...").
screenshots: $(STAMP) browser
	@$(PY) tools/browser.py

# The reading measurements of the chapter pages (heights, wrapped outputs and table rows, sideways scrolling at
# 1280 and 390 px; tools/browser.py --measure) into _build/page_lengths.json.
measure: $(STAMP) browser
	@$(PY) tools/browser.py --measure _build/page_lengths.json

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
