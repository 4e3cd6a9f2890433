# The two commands: `make demo` and `make test`. Both install what they need.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
SAMPLE := data/wsrch-small.trace
RUST_SRC := $(shell find crates -name '*.rs' -o -name Cargo.toml) Cargo.toml
PY_SRC := $(shell find python -name '*.py') pyproject.toml

.PHONY: install demo test test-rust test-python bench clean

install: .stamp-install

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# Release build of the engine and the Python package, editable so that the
# Python sources are used in place.
.stamp-install: $(BIN)/python $(RUST_SRC) $(PY_SRC)
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

demo: install
	$(BIN)/blocklab trace stats $(SAMPLE) --format mqsim
	$(BIN)/blocklab cache $(SAMPLE) --format mqsim --policy lru,fifo,clock,sieve,arc,lfu,s3fifo,opt --size 1%,5%,20%
	$(BIN)/blocklab mrc $(SAMPLE) --format mqsim --method exact --size 1%,5%,10%,20%,50%

test: install test-rust test-python

test-rust:
	cargo test --workspace --exclude blocklab-py

test-python: install
	$(BIN)/python -m pytest tests

bench: install
	$(BIN)/python benches/run.py

clean:
	rm -rf target $(VENV) .stamp-install
