# The README's two commands. Each sets up whatever is missing, then acts;
# with nothing changed, the set-up skips the installs.
#
#   make test PAGE=docs/bert/self-attention.md   runs one page, its figures and its tests

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
LINTED := snippets tools tests hooks.py docs/labs
# the drift check's venv (make test-latest): the same install, but today's releases of these
LATEST := .venv-latest
LATEST_PACKAGES := transformers tokenizers peft trl sentence-transformers gguf huggingface-hub

.PHONY: serve test test-reader test-proofs test-latest setup chromium chapter format

serve: setup
	$(BIN)/mkdocs serve --dev-addr 127.0.0.1:8000

# both list the slowest tests at the end, where the minutes go. One page: its three
# configurations and its tests fit two workers (a third costs more to start than it saves)
ifdef PAGE
test: setup chromium
	$(BIN)/pytest tests --page $(PAGE) --numprocesses 2 --durations=10
else
test: setup chromium
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)
	$(BIN)/pytest --durations=20
endif

# the built site as readers run it: each notebook in a fresh virtual environment, under
# the two numeric configurations `make test` does not run (tools/numerics.py), and what a
# reader pastes (tests/test_site_reader.py); CI runs it after `make test`
test-reader: setup
	$(BIN)/pytest tests/test_site_reader.py --reader --numprocesses 0

# the parity tests again under those two configurations: the proof table (docs/proofs.md)
# gives the largest difference over all three (CI leaves it out, for time)
test-proofs: setup
	$(BIN)/python -m tools.numerics compatible-1-thread $(BIN)/pytest -m proof
	$(BIN)/python -m tools.numerics avx2-2-threads $(BIN)/pytest -m proof

# drift: every page under today's releases of LATEST_PACKAGES, as readers install them, not
# our pins; a table of what changed (artifacts/latest.md), never a failure. The releases are
# looked up on each run; what they need moves only if it must (uv keeps what is installed), and
# torch stays the CPU 2.13.0. CI runs it weekly (.github/workflows/latest.yml)
test-latest: setup $(LATEST)/.installed
	printf '%s\n' $(LATEST_PACKAGES) > $(LATEST)/overrides.txt
	$(LATEST)/bin/uv pip install --quiet --python $(LATEST)/bin/python --compile-bytecode \
	  --override $(LATEST)/overrides.txt $(LATEST_PACKAGES:%=--upgrade-package %) \
	  torch==2.13.0 --editable .
	$(LATEST)/bin/python -m tools.latest

# the browser checks drive Debian's Chromium, or the one $CHROMIUM names
chromium:
	@test -x "$$CHROMIUM" || command -v chromium >/dev/null || { \
	  sudo=""; [ "$$(id -u)" -eq 0 ] || sudo="sudo"; \
	  $$sudo apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq chromium >/dev/null; }

# places the models and data sets in the Hugging Face cache ($HF_HOME, else
# ~/.cache/huggingface), draws the figures whose code or inputs changed, and writes
# the live pages' model files (docs/live/models/) when they are missing or changed
setup: $(INSTALLED)
	$(BIN)/python -m snippets.hub
	$(BIN)/python -m snippets.figures
	$(BIN)/python -m tools.live

# torch first, on its own, so that pip takes the local CPU wheel and never the CUDA build
# (uv does not look where the wheel lies); then uv installs the rest, pinned by the same
# constraints, in a fraction of pip's time; compiled to bytecode at install, as pip does,
# not by whichever process imports a module first. The drift check's venv gets the same install
$(INSTALLED) $(LATEST)/.installed: %/.installed: pyproject.toml constraints.txt
	test -x $*/bin/python || $(PYTHON) -m venv $*
	$*/bin/pip install --quiet --constraint constraints.txt torch==2.13.0 uv
	$*/bin/uv pip install --quiet --python $*/bin/python --compile-bytecode \
	  --constraint constraints.txt --editable .
	touch $@

# ruff's layout for the code: the Python files, and the pages' python blocks (tools/formatting.py)
format: $(INSTALLED)
	$(BIN)/ruff format $(LINTED)
	$(BIN)/python -m tools.formatting

# a new chapter: its page, module, figures and failing test stub, and its nav line
chapter: setup
	$(BIN)/python -m tools.scaffold "$(PAGE)" "$(TITLE)" $(if $(MODULE),--module $(MODULE)) \
	  $(if $(PART),--part "$(PART)")
