# The two commands: `make demo` and `make test`. Both install what they need.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
SAMPLE := data/wsrch-small.trace
RUST_SRC := $(shell find crates -name '*.rs' -o -name Cargo.toml) Cargo.toml
PY_SRC := $(shell find python -name '*.py') pyproject.toml

.PHONY: install demo test test-rust test-python bench bench-sweeps clean e2fsprogs

install: .stamp-install

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# Release build of the engine and the Python package, editable so that the
# Python sources are used in place.
.stamp-install: $(BIN)/python $(RUST_SRC) $(PY_SRC)
	$(BIN)/pip install --quiet -e '.[dev,ray]'
	touch $@

# The main job on the shipped sample (a real WebSearch trace), then the same
# tools on a seeded synthetic Zipf trace, where caching has something to do.
DISK := examples/disks/ultrastar-73lzx.toml
demo: install
	@mkdir -p out
	$(BIN)/blocklab trace stats $(SAMPLE) --format mqsim
	$(BIN)/blocklab cache $(SAMPLE) --format mqsim --policy lru,arc,s3fifo,opt --size 1%,10%
	$(BIN)/blocklab disk run $(DISK) --trace $(SAMPLE) --format mqsim --raid 5 --disks 6
	$(BIN)/blocklab disk run $(DISK) --trace $(SAMPLE) --format mqsim --raid 5 --disks 6 --failed 0
	$(BIN)/blocklab trace synth out/zipf.csv --accesses 1000000 --universe 200000 --alpha 0.9 --seed 1
	$(BIN)/blocklab cache out/zipf.csv --format csv --policy lru,clock,sieve,arc,lirs,s3fifo,lfu,opt --size 1%,10%
	$(BIN)/blocklab mrc out/zipf.csv --format csv --method exact --size 1%,5%,10%,20%
	$(BIN)/blocklab rgr out/zipf.csv --format csv --raid 5 --disks 6 --failed 0 --reads-only \
		--policy lru,vdf-lru,lfu,vdf-lfu --size 1%,10%
	$(BIN)/blocklab run examples/stacks/vdf-rebuild.toml --trace out/zipf.csv --format csv
	$(BIN)/blocklab run examples/stacks/vdf-rebuild.toml --trace out/zipf.csv --format csv --set cache.0.policy=lfu
	$(BIN)/blocklab sweep examples/sweeps/vdf-small.toml --out out/vdf-small --jobs 2
	$(BIN)/blocklab report out/vdf-small --out out/vdf-small/report.html

test: install test-rust test-python

# The ext2 model is checked against real mke2fs/dumpe2fs/debugfs images.
E2FS_INSTALL := apt-get install -y --no-install-recommends e2fsprogs
e2fsprogs:
	@command -v mke2fs >/dev/null || test -x /usr/sbin/mke2fs || $(E2FS_INSTALL) || (apt-get update && $(E2FS_INSTALL))

test-rust: e2fsprogs
	cargo test --workspace --exclude blocklab-py

# The sweep report is checked in a real headless browser (Debian's chromium).
test-python: install
	command -v chromium >/dev/null || apt-get install -y --no-install-recommends chromium \
		|| (apt-get update && apt-get install -y --no-install-recommends chromium)
	$(BIN)/python -m pytest tests -q

# Speed, recorded in BENCHMARKS.md: the counted simulator against libCacheSim,
# every policy, memory, SHARDS accuracy, and the timed engine on a Cheetah 9LP.
bench: install
	$(BIN)/python benches/run.py

# Only the "Sweeps" section of BENCHMARKS.md (per-cell overhead, Ray, the VDF grid).
bench-sweeps: install
	$(BIN)/python benches/run.py --only sweeps

clean:
	rm -rf target $(VENV) .stamp-install
