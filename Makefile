# The two commands: `make demo` and `make test`. Both install what they need.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
SAMPLE := data/wsrch-small.trace
RUST_SRC := $(shell find crates -name '*.rs' -o -name Cargo.toml) Cargo.toml
PY_SRC := $(shell find python -name '*.py') pyproject.toml

.PHONY: install demo test test-rust test-python test-real-matrix tools bench-tools integrity bench bench-sweeps clean

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
# tools on a seeded synthetic Zipf trace, where caching has something to do;
# last, a question answered in one report (out/demo/report.html, its first
# figure): on a RAID-5 rebuilding a failed disk, what do the host cache's size
# and victim-disk-first caching do to the surviving disks' work (RGR), the
# response time and the rebuild time? (docs/sweeps.md; about 3 minutes here.)
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
	$(BIN)/blocklab trace synth out/zipf-300k.csv --accesses 300000 --universe 60000 --alpha 0.9 --seed 1
	$(BIN)/blocklab sweep examples/sweeps/demo-vdf-zipf.toml --out out/demo --jobs 2
	$(BIN)/blocklab report out/demo --format svg,pdf

test: install tools test-rust test-python

# The real tools the tests drive, installed once, only when missing: fio's nbd
# engine, qemu-img / qemu-io, nbdinfo / nbdcopy / nbdfuse (the real executor's
# NBD server; libnbd-bin has all three on Debian bookworm), mke2fs / dumpe2fs /
# debugfs / e2fsck (the ext2 model is checked against real images; ext4 on a
# served array is checked with e2fsck),
# chromium (the sweep report is checked in a real headless browser).
APT_GET := apt-get install -y --no-install-recommends
tools:
	@command -v fio >/dev/null || $(APT_GET) fio || (apt-get update && $(APT_GET) fio)
	@command -v qemu-img >/dev/null || $(APT_GET) qemu-utils || (apt-get update && $(APT_GET) qemu-utils)
	@command -v nbdinfo >/dev/null || $(APT_GET) libnbd-bin || (apt-get update && $(APT_GET) libnbd-bin)
	@command -v mke2fs >/dev/null || test -x /usr/sbin/mke2fs || $(APT_GET) e2fsprogs || (apt-get update && $(APT_GET) e2fsprogs)
	@command -v chromium >/dev/null || $(APT_GET) chromium || (apt-get update && $(APT_GET) chromium)

# The integrity suite of the real executor (docs/real.md): seeded rounds of
# write, fault, recover, verify every byte. `make integrity ROUNDS=500` for a cut.
ROUNDS ?= 10000
integrity: install
	@mkdir -p out
	$(BIN)/blocklab real integrity --rounds $(ROUNDS) --seed 1 --out out/integrity.json

# The library's tests once more as shipped (release profile: the CLI and the
# bindings are built that way, and rustc 1.95 miscompiled a bitmap counter
# there that the debug build got right).
test-rust: tools
	cargo test --workspace --exclude blocklab-py
	cargo test --release -p blocklab --lib

test-python: install tools
	$(BIN)/python -m pytest tests -q

# The real-tool tests of a served stack, with fio's verify job through every
# host cache mode and every SSD tier write policy in every array state, not
# only the cut `make test` runs (about five minutes).
test-real-matrix: install tools
	BLOCKLAB_FULL_MATRIX=1 $(BIN)/python -m pytest tests/test_real_fio.py tests/test_real_fs.py tests/test_real_crash.py tests/test_real_tier.py -q -k "stack or tier"

# Speed, recorded in BENCHMARKS.md: start-up, the counted simulator against
# libCacheSim's cachesim (built here from its source: benches/peers.py), every
# policy, memory, SHARDS accuracy, the timed engine on a Cheetah 9LP against
# DiskSim 4.0 (also built here from its source), the stack, the NBD server
# (against the raw files, and against nbdkit and qemu-nbd: `nbd-peer`, which
# installs nbdkit when missing), a host cache's hits on real bytes, sweeps (and
# on two Ray nodes of this machine), memory flat in trace length (200M piped
# accesses), DiskSim's runvalid table and overload; sections measured by hand
# are kept. `python benches/run.py counted` (or startup, timed, stack, real,
# nbd-peer, real-stack, sweeps, sweeps-cluster, stream-rss, runvalid, overload)
# re-runs one part.
bench: install bench-tools
	$(BIN)/python benches/run.py

# What building libCacheSim and DiskSim (32-bit C with a bison/flex parser)
# needs, installed once, only when missing.
bench-tools:
	@command -v cmake >/dev/null || $(APT_GET) cmake || (apt-get update && $(APT_GET) cmake)
	@pkg-config --exists glib-2.0 2>/dev/null || $(APT_GET) pkg-config libglib2.0-dev || (apt-get update && $(APT_GET) pkg-config libglib2.0-dev)
	@test -f /usr/include/zstd.h || $(APT_GET) libzstd-dev || (apt-get update && $(APT_GET) libzstd-dev)
	@command -v bison >/dev/null || $(APT_GET) bison || (apt-get update && $(APT_GET) bison)
	@command -v flex >/dev/null || $(APT_GET) flex || (apt-get update && $(APT_GET) flex)
	@test -f /usr/include/x86_64-linux-gnu/gnu/stubs-32.h || $(APT_GET) gcc-multilib || (apt-get update && $(APT_GET) gcc-multilib)

clean:
	rm -rf target $(VENV) .stamp-install

# Only one section of BENCHMARKS.md: `sweeps` (per-cell overhead, Ray, the VDF grid).
bench-sweeps: install
	$(BIN)/python benches/run.py sweeps
