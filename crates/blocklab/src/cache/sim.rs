//! The counted cache simulator: many (policy, size) cells in one streaming
//! pass over a trace.
//!
//! A reader thread fills chunks of [`CHUNK`] accesses (reused buffers); each
//! chunk is then fed to every cell ([`Policy::access_all`]: one dynamic call
//! per chunk), the cells running in parallel on rayon's pool (cells are
//! independent, so the result does not depend on the scheduling). While the
//! cells eat one chunk the reader fills the next. An uncompressed
//! oracleGeneral file at its own 4 KiB block size is read by memory map, its
//! keys taken straight from the records ([`MappedKeys`]); every other trace
//! goes through the generic readers.
//!
//! Offline policies (`opt`) need each access's `next_use`. Only when one is
//! requested, a first pass materialises the key sequence and a reverse pass
//! turns it, in place, into next-use indices: 8 bytes per access (plus one map
//! entry per unique block). The simulation pass then re-reads the trace and
//! zips it with that vector. A format that carries next-use itself (the
//! oracleGeneral `next_access` field) can skip that pass by feeding
//! [`simulate_accesses`] directly with `Access::next_use` filled in.

use super::index::{BlockIndex, PREFETCH_AHEAD};
use super::{sizes, Access, Policy, NEVER};
use crate::error::{Error, Result};
use crate::trace::blocks::{BlockOptions, BlockStream};
use crate::trace::input::compression_ext;
use crate::trace::oracle::{MappedKeys, ORACLE_BLOCK};
use crate::trace::order::TimeOrder;
use crate::trace::{self, sniff, TraceOptions};
use rayon::prelude::*;
use rustc_hash::FxHashSet;
use std::path::Path;

/// Accesses per chunk handed from the reader to the cells.
pub const CHUNK: usize = 1 << 16;

/// Policies that need `Access::next_use` (future knowledge).
pub const OFFLINE_POLICIES: &[&str] = &["opt"];

pub fn is_offline(policy: &str) -> bool {
    OFFLINE_POLICIES.contains(&policy)
}

/// One simulated cache: a policy at a size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    pub policy: String,
    pub cache_blocks: u64,
}

/// The outcome of one cell.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CellResult {
    pub policy: String,
    pub cache_blocks: u64,
    pub accesses: u64,
    pub hits: u64,
    pub misses: u64,
    /// misses / accesses; `None` (JSON null) for an empty trace.
    pub miss_ratio: Option<f64>,
    /// Wall time spent feeding this cell (for throughput reports; not deterministic).
    pub seconds: f64,
}

/// Everything a run reports.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SimReport {
    pub cells: Vec<CellResult>,
    /// Malformed records skipped (`skip_bad`).
    pub skipped: u64,
    /// The footprint a `%` size was taken of (distinct blocks of the access
    /// stream), when a size asked for it, and which accesses it counts.
    pub unique_blocks: Option<u64>,
    pub footprint_of: String,
}

/// Every (policy, size) pair, policy-major, in the order given.
pub fn cells(policies: &[String], sizes: &[u64]) -> Vec<Cell> {
    policies
        .iter()
        .flat_map(|p| {
            sizes.iter().map(move |&s| Cell {
                policy: p.clone(),
                cache_blocks: s,
            })
        })
        .collect()
}

/// Split and check a comma-separated policy list (unknown names list the valid ones).
/// The fault-aware policies (`vdf-lru`, `vdf-arc`, ...) are accepted too: over
/// a single device that never fails each behaves as its base policy.
pub fn parse_policies(list: &str) -> Result<Vec<String>> {
    parse_policy_list(list, &super::fault::all_policies())
}

/// A policy of the simulator by name: plain, or fault-aware over a device
/// that never fails.
fn build_any(name: &str, capacity: usize) -> Result<Box<dyn Policy>> {
    super::fault::build_fault_aware(name, capacity, std::sync::Arc::new(super::fault::NoFaults))
}

/// Split a comma-separated policy list and check every name against `valid`
/// (the fault-aware commands accept more names than [`build`]).
pub fn parse_policy_list(list: &str, valid: &[&str]) -> Result<Vec<String>> {
    let names: Vec<String> = list
        .split(',')
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .collect();
    if names.is_empty() {
        return Err(Error::config("no cache policy given"));
    }
    if let Some(bad) = names.iter().find(|n| !valid.contains(&n.as_str())) {
        return Err(Error::unknown("policy", bad, valid));
    }
    Ok(names)
}

struct CellState {
    policy: Box<dyn Policy>,
    accesses: u64,
    hits: u64,
    seconds: f64,
}

impl CellState {
    #[inline(never)]
    fn run(&mut self, chunk: &[Access]) {
        let start = std::time::Instant::now();
        self.hits += self.policy.access_all(chunk);
        self.accesses += chunk.len() as u64;
        self.seconds += start.elapsed().as_secs_f64();
    }
}

/// Simulate every cell over `source` (accesses with `next_use` filled when an
/// offline policy is among the cells). `progress` is called after every chunk
/// with the number of accesses processed so far; an error it returns stops
/// the run. Returns the results (in the order of `cells`) and the source.
pub fn simulate_accesses<I>(
    source: I,
    cells: &[Cell],
    progress: &mut dyn FnMut(u64) -> Result<()>,
) -> Result<(Vec<CellResult>, I)>
where
    I: Iterator<Item = Result<Access>> + Send,
{
    let mut states: Vec<CellState> = cells
        .iter()
        .map(|c| {
            let cap = usize::try_from(c.cache_blocks).map_err(|_| Error::config("cache size too large"))?;
            Ok(CellState {
                policy: build_any(&c.policy, cap)?,
                accesses: 0,
                hits: 0,
                seconds: 0.0,
            })
        })
        .collect::<Result<_>>()?;

    use std::sync::mpsc::{channel, sync_channel};
    let source = std::thread::scope(|scope| -> Result<I> {
        let (full_tx, full_rx) = sync_channel::<Result<Vec<Access>>>(2);
        let (empty_tx, empty_rx) = channel::<Vec<Access>>();
        for _ in 0..3 {
            empty_tx.send(Vec::with_capacity(CHUNK)).expect("receiver alive");
        }
        let reader = scope.spawn(move || {
            let mut src = source;
            // Stops at the end of input, on an error, or when the consumer hangs up.
            while let Ok(mut buf) = empty_rx.recv() {
                buf.clear();
                let mut err = None;
                while buf.len() < CHUNK {
                    match src.next() {
                        None => break,
                        Some(Ok(a)) => buf.push(a),
                        Some(Err(e)) => {
                            err = Some(e);
                            break;
                        }
                    }
                }
                let end = buf.len() < CHUNK;
                if !buf.is_empty() && full_tx.send(Ok(buf)).is_err() {
                    break;
                }
                if let Some(e) = err {
                    let _ = full_tx.send(Err(e));
                    break;
                }
                if end {
                    break;
                }
            }
            src
        });
        let mut done = 0u64;
        let mut outcome = Ok(());
        for msg in full_rx.iter() {
            let buf = match msg {
                Ok(b) => b,
                Err(e) => {
                    outcome = Err(e);
                    break;
                }
            };
            if states.len() == 1 {
                states[0].run(&buf);
            } else {
                states.par_iter_mut().for_each(|s| s.run(&buf));
            }
            done += buf.len() as u64;
            let _ = empty_tx.send(buf);
            if let Err(e) = progress(done) {
                outcome = Err(e);
                break;
            }
        }
        drop(full_rx);
        drop(empty_tx);
        let src = reader
            .join()
            .map_err(|_| Error::config("trace reader thread panicked"))?;
        outcome.map(|_| src)
    })?;

    let results = cells
        .iter()
        .zip(states)
        .map(|(c, s)| CellResult {
            policy: c.policy.clone(),
            cache_blocks: c.cache_blocks,
            accesses: s.accesses,
            hits: s.hits,
            misses: s.accesses - s.hits,
            miss_ratio: (s.accesses > 0).then(|| (s.accesses - s.hits) as f64 / s.accesses as f64),
            seconds: s.seconds,
        })
        .collect();
    Ok((results, source))
}

/// Turn a key sequence into next-use indices, in place, by one reverse pass:
/// `keys[i]` becomes the index of the next access to the same key, or NEVER.
pub fn next_uses_in_place(keys: &mut [u64]) {
    // The keys ahead are known: prefetch their index entries (as the
    // policies' `access_all` does).
    let mut last: BlockIndex<u64> = BlockIndex::with_capacity(1 << 16);
    for i in (0..keys.len()).rev() {
        if let Some(&ahead) = i.checked_sub(PREFETCH_AHEAD).and_then(|j| keys.get(j)) {
            last.prefetch(ahead);
        }
        let k = keys[i];
        keys[i] = last.replace(k, i as u64).unwrap_or(NEVER);
    }
}

/// Next-use index of every access of a block stream (8 bytes per access).
pub fn next_uses(stream: BlockStream) -> Result<Vec<u64>> {
    next_uses_of_keys(stream.map(|a| a.map(|a| a.key)))
}

/// Next-use index of every key of a key sequence (8 bytes per access).
pub fn next_uses_of_keys(keys: impl Iterator<Item = Result<u64>>) -> Result<Vec<u64>> {
    let mut keys: Vec<u64> = keys.collect::<Result<_>>()?;
    next_uses_in_place(&mut keys);
    Ok(keys)
}

/// Distinct cache keys of a block stream (a counting pre-pass).
pub fn count_unique(stream: BlockStream) -> Result<u64> {
    count_unique_keys(stream.map(|a| a.map(|a| a.key)))
}

/// Distinct keys of a key sequence.
pub fn count_unique_keys(keys: impl Iterator<Item = Result<u64>>) -> Result<u64> {
    let mut seen: FxHashSet<u64> = FxHashSet::default();
    for k in keys {
        seen.insert(k?);
    }
    Ok(seen.len() as u64)
}

/// Block accesses of a trace as cache [`Access`]es, with `next_use` from a
/// precomputed vector when given.
pub struct Accesses {
    keys: Keys,
    next_use: Option<std::vec::IntoIter<u64>>,
}

/// Where the accesses come from: any trace through the generic readers, or
/// an oracleGeneral file's keys straight from a memory map. (One per run:
/// its size does not matter, an indirection on every access would.)
#[allow(clippy::large_enum_variant)]
pub(crate) enum Keys {
    Stream(BlockStream),
    Oracle(MappedKeys),
}

impl Accesses {
    fn with_keys(keys: Keys, next_use: Option<Vec<u64>>) -> Self {
        Accesses {
            keys,
            next_use: next_use.map(Vec::into_iter),
        }
    }

    pub fn skipped(&self) -> u64 {
        self.keys.skipped()
    }
}

impl Keys {
    /// The keys of `path` for one pass: by memory map when the file allows
    /// ([`mapped_oracle`]), else through the generic readers.
    pub(crate) fn open(path: &Path, trace: &TraceOptions, blocks: BlockOptions) -> Result<Keys> {
        Ok(match mapped_oracle(path, trace, blocks)? {
            Some(keys) => Keys::Oracle(keys),
            None => Keys::Stream(open_blocks(path, trace, blocks)?),
        })
    }

    /// The keys alone.
    pub(crate) fn keys(&mut self) -> impl Iterator<Item = Result<u64>> + '_ {
        self.map(|k| k.map(|(key, _)| key))
    }

    /// Malformed records skipped so far (`--skip-bad`).
    pub(crate) fn skipped(&self) -> u64 {
        match self {
            Keys::Stream(s) => s.skipped(),
            Keys::Oracle(_) => 0,
        }
    }
}

impl Iterator for Keys {
    /// A block's key and whether the access writes.
    type Item = Result<(u64, bool)>;
    #[inline]
    fn next(&mut self) -> Option<Result<(u64, bool)>> {
        Some(match self {
            Keys::Oracle(keys) => Ok((keys.next()?, false)),
            Keys::Stream(stream) => stream.next()?.map(|a| (a.key, a.op.is_write())),
        })
    }
}

impl Iterator for Accesses {
    type Item = Result<Access>;
    #[inline]
    fn next(&mut self) -> Option<Result<Access>> {
        let (block, write) = match self.keys.next()? {
            Ok(k) => k,
            Err(e) => return Some(Err(e)),
        };
        let next_use = match &mut self.next_use {
            None => NEVER,
            Some(it) => match it.next() {
                Some(n) => n,
                None => {
                    return Some(Err(Error::config(
                        "trace changed between passes (more accesses than before)",
                    )))
                }
            },
        };
        Some(Ok(Access { block, next_use, write }))
    }
}

/// The memory-mapped keys of `path` when the generic readers would give
/// exactly them: an uncompressed oracleGeneral file (named or sniffed) of
/// whole records, read at its own 4 KiB block size in file order. Anything
/// else (or an unreadable file, whose error the generic reader reports) is
/// `None`.
fn mapped_oracle(path: &Path, trace: &TraceOptions, blocks: BlockOptions) -> Result<Option<MappedKeys>> {
    let format = trace.format.as_str();
    if blocks.block_size != ORACLE_BLOCK
        || trace.order != TimeOrder::Any
        || !(format == "oracle" || format == "auto")
        || compression_ext(&path.to_string_lossy()).is_some()
        || !path.is_file()
    {
        return Ok(None);
    }
    if format == "auto" && !matches!(sniff::sniff(path), Ok("oracle")) {
        return Ok(None);
    }
    MappedKeys::open(path)
}

/// What to simulate.
#[derive(Debug, Clone)]
pub struct SimConfig {
    pub trace: TraceOptions,
    pub blocks: BlockOptions,
    /// Comma-separated policy names.
    pub policies: String,
    /// Comma-separated sizes (see [`sizes`]).
    pub sizes: String,
}

/// Open the block stream of a trace (each pass reopens it).
pub fn open_blocks(path: &Path, trace: &TraceOptions, blocks: BlockOptions) -> Result<BlockStream> {
    BlockStream::new(trace::open(path, trace)?, blocks)
}

/// Simulate a trace file: parse policies and sizes (a `%` size costs a
/// counting pre-pass; an offline policy a next-use pre-pass), then run every
/// cell in one pass.
pub fn simulate_trace(path: &Path, cfg: &SimConfig, progress: &mut dyn FnMut(u64) -> Result<()>) -> Result<SimReport> {
    cfg.blocks.validate()?;
    let policies = parse_policies(&cfg.policies)?;
    // Syntax errors first, before any pass over the trace.
    sizes::parse_specs(&cfg.sizes)?;
    // A pipe is read once: no pre-pass can come before the simulation's.
    if trace::is_stream(path) {
        let file = path.display();
        if sizes::needs_unique(&cfg.sizes) {
            return Err(Error::config(format!(
                "{file}: a pipe can be read only once, and a `%` size needs a counting pass before the simulation: give sizes in blocks or bytes, or a file"
            )));
        }
        if let Some(p) = policies.iter().find(|p| is_offline(p)) {
            return Err(Error::config(format!(
                "{file}: a pipe can be read only once, and policy `{p}` needs a pass for next uses before the simulation: give a file"
            )));
        }
    }
    // The keys alone, for the pre-passes.
    let keys = || Keys::open(path, &cfg.trace, cfg.blocks);
    let unique = if sizes::needs_unique(&cfg.sizes) {
        Some(count_unique_keys(keys()?.keys())?)
    } else {
        None
    };
    let sizes = sizes::parse_sizes(&cfg.sizes, cfg.blocks.block_size, unique)?;
    let cells = cells(&policies, &sizes);
    let next_use = if policies.iter().any(|p| is_offline(p)) {
        Some(next_uses_of_keys(keys()?.keys())?)
    } else {
        None
    };
    let source = Accesses::with_keys(keys()?, next_use);
    let (cells, source) = simulate_accesses(source, &cells, progress)?;
    Ok(SimReport {
        cells,
        skipped: source.skipped(),
        unique_blocks: unique,
        footprint_of: sizes::footprint_of(cfg.blocks.reads_only).to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::build;
    use proptest::prelude::*;

    fn acc(keys: &[u64]) -> Vec<Access> {
        let mut nu: Vec<u64> = keys.to_vec();
        next_uses_in_place(&mut nu);
        keys.iter()
            .zip(nu)
            .map(|(&k, n)| Access {
                block: k,
                next_use: n,
                write: k % 3 == 0,
            })
            .collect()
    }

    fn alone(policy: &str, cap: u64, accesses: &[Access]) -> u64 {
        let mut p = build(policy, cap as usize).unwrap();
        accesses.iter().map(|a| p.access(a) as u64).sum()
    }

    #[test]
    fn next_uses_by_hand() {
        let mut k = vec![5, 7, 5, 5, 9, 7];
        next_uses_in_place(&mut k);
        assert_eq!(k, vec![2, 5, 3, NEVER, NEVER, NEVER]);
    }

    #[test]
    fn lru_by_hand() {
        // cap 2: a b a c b a -> miss miss hit miss(evict b) miss(evict a) miss
        let keys = [1, 2, 1, 3, 2, 1];
        let cells = vec![
            Cell {
                policy: "lru".into(),
                cache_blocks: 2,
            },
            Cell {
                policy: "lru".into(),
                cache_blocks: 3,
            },
        ];
        let (r, _) = simulate_accesses(acc(&keys).into_iter().map(Ok), &cells, &mut |_| Ok(())).unwrap();
        assert_eq!((r[0].hits, r[0].misses), (1, 5));
        assert_eq!((r[1].hits, r[1].misses), (3, 3));
        assert_eq!(r[1].miss_ratio, Some(0.5));
    }

    #[test]
    fn errors_stop_the_run_and_progress_counts_chunks() {
        let good = (0..(CHUNK as u64 * 2 + 5)).map(|i| Ok(Access::read(i % 100)));
        let cells = vec![Cell {
            policy: "lru".into(),
            cache_blocks: 10,
        }];
        let mut seen = vec![];
        let (r, _) = simulate_accesses(good, &cells, &mut |n| {
            seen.push(n);
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, vec![CHUNK as u64, 2 * CHUNK as u64, 2 * CHUNK as u64 + 5]);
        assert_eq!(r[0].accesses, 2 * CHUNK as u64 + 5);
        let bad = (0..10u64).map(|i| {
            if i == 7 {
                Err(Error::config("boom"))
            } else {
                Ok(Access::read(i))
            }
        });
        let e = simulate_accesses(bad, &cells, &mut |_| Ok(())).unwrap_err();
        assert!(e.to_string().contains("boom"));
        let stop = (0..(CHUNK as u64 * 5)).map(|i| Ok(Access::read(i)));
        let e = simulate_accesses(stop, &cells, &mut |_| Err(Error::config("interrupted"))).unwrap_err();
        assert!(e.to_string().contains("interrupted"));
    }

    #[test]
    fn unknown_policy_lists_valid_names() {
        let e = parse_policies("lru,nope").unwrap_err().to_string();
        assert!(e.contains("`nope`") && e.contains("lru"), "{e}");
        assert!(parse_policies(" , ").is_err());
    }

    fn tmp(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("blocklab-sim-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("t.csv")
    }

    /// A trace through a pipe is read once, as it comes: the cells equal the
    /// file's. What needs a pass before the simulation (a `%` size, `opt`, a
    /// format to sniff) is refused, naming the pipe, before anything is read.
    #[test]
    fn a_pipe_is_simulated_in_one_pass_and_pre_passes_are_refused() {
        let keys = crate::trace::synth::zipf_keys(20_000, 900, 0.9, 5).unwrap();
        let path = tmp("pipe");
        crate::trace::synth::write_native_csv(&path, &keys, 4096).unwrap();
        let fifo = path.with_file_name("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let cfg = |policies: &str, sizes: &str, format: &str| SimConfig {
            trace: TraceOptions {
                format: format.into(),
                ..Default::default()
            },
            blocks: BlockOptions::default(),
            policies: policies.into(),
            sizes: sizes.into(),
        };
        let want = simulate_trace(&path, &cfg("lru,arc", "50,400KiB", "csv"), &mut |_| Ok(())).unwrap();
        // Writes the trace into the pipe when a reader opens it, at most `times`
        // times (a new writer could meet the last reader before it closes), until told to stop.
        let feed = |times: usize| {
            let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let (src, dst, stop) = (path.clone(), fifo.clone(), done.clone());
            let feeder = std::thread::spawn(move || {
                use std::os::unix::fs::OpenOptionsExt;
                let mut fed = 0;
                while fed < times && !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    // Non-blocking: fails (ENXIO) while no reader has the pipe open.
                    match std::fs::OpenOptions::new()
                        .write(true)
                        .custom_flags(libc::O_NONBLOCK)
                        .open(&dst)
                    {
                        Ok(mut w) => {
                            use std::os::fd::AsRawFd;
                            unsafe { libc::fcntl(w.as_raw_fd(), libc::F_SETFL, 0) };
                            let _ = std::io::copy(&mut std::fs::File::open(&src).unwrap(), &mut w);
                            fed += 1;
                        }
                        Err(_) => std::thread::sleep(std::time::Duration::from_millis(1)),
                    }
                }
            });
            move || {
                done.store(true, std::sync::atomic::Ordering::SeqCst);
                feeder.join().unwrap();
            }
        };
        let stop = feed(1);
        let got = simulate_trace(&fifo, &cfg("lru,arc", "50,400KiB", "csv"), &mut |_| Ok(())).unwrap();
        stop();
        let figures = |r: &SimReport| -> Vec<_> {
            r.cells
                .iter()
                .map(|c| (c.policy.clone(), c.cache_blocks, c.accesses, c.hits))
                .collect()
        };
        assert_eq!(figures(&got), figures(&want));
        assert_eq!(want.cells[0].accesses, 20_000);
        // Each of these must stop, naming the pipe, before reading it (the
        // feeder gives the pipe's contents to every reader, so that a reader
        // that went ahead would not block, but return figures or another error).
        for (policies, sizes, format, says) in [
            ("lru", "5%", "csv", "a `%` size needs a counting pass"),
            ("lru,opt", "50", "csv", "policy `opt` needs a pass for next uses"),
            ("lru", "50", "auto", "its format cannot be detected"),
        ] {
            let stop = feed(usize::MAX);
            let r = simulate_trace(&fifo, &cfg(policies, sizes, format), &mut |_| Ok(()));
            stop();
            let m = r.map(|r| format!("{:?}", r.cells)).unwrap_err().to_string();
            assert!(m.contains(fifo.to_str().unwrap()) && m.contains(says), "{m}");
        }
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    /// The whole file path: sizes in every unit, a `%` pre-pass, writes kept
    /// or dropped, against each cell run alone on the key sequence.
    #[test]
    fn simulate_trace_on_a_csv_file() {
        let keys = crate::trace::synth::zipf_keys(5000, 400, 0.8, 11).unwrap();
        let path = tmp("csv");
        crate::trace::synth::write_native_csv(&path, &keys, 4096).unwrap();
        let cfg = SimConfig {
            trace: TraceOptions {
                format: "csv".into(),
                ..Default::default()
            },
            blocks: BlockOptions::default(),
            policies: super::super::POLICIES.join(","),
            sizes: "10,400KiB,25%".into(),
        };
        // The fault-aware names run too: on one device each is its base policy.
        let vdf = SimConfig {
            policies: "vdf-arc,arc,vdf-lru,lru".into(),
            ..cfg.clone()
        };
        let r = simulate_trace(&path, &vdf, &mut |_| Ok(())).unwrap();
        for pair in r.cells.chunks(6) {
            let (v, b) = pair.split_at(3);
            for (x, y) in v.iter().zip(b) {
                assert_eq!(
                    (x.cache_blocks, x.hits),
                    (y.cache_blocks, y.hits),
                    "{} vs {}",
                    x.policy,
                    y.policy
                );
            }
        }
        let mut calls = 0;
        let rep = simulate_trace(&path, &cfg, &mut |_| {
            calls += 1;
            Ok(())
        })
        .unwrap();
        assert!(calls >= 1);
        let unique = {
            let mut u = keys.clone();
            u.sort();
            u.dedup();
            u.len() as u64
        };
        let accesses = acc(&keys);
        let want_sizes = [10, 100, unique / 4];
        assert_eq!(rep.cells.len(), super::super::POLICIES.len() * 3);
        for (i, c) in rep.cells.iter().enumerate() {
            assert_eq!(c.cache_blocks, want_sizes[i % 3]);
            assert_eq!(c.accesses, 5000);
            assert_eq!(c.hits, alone(&c.policy, c.cache_blocks, &accesses));
        }
        // --reads-only drops the writes (keys divisible by 4).
        let ro = SimConfig {
            blocks: BlockOptions {
                block_size: 4096,
                reads_only: true,
            },
            policies: "lru".into(),
            sizes: "10".into(),
            ..cfg.clone()
        };
        let rep = simulate_trace(&path, &ro, &mut |_| Ok(())).unwrap();
        let reads: Vec<u64> = keys.iter().copied().filter(|k| k % 4 != 0).collect();
        assert_eq!(rep.cells[0].accesses, reads.len() as u64);
        assert_eq!(rep.cells[0].hits, alone("lru", 10, &acc(&reads)));
        // Bad sizes are reported before any pass; an impossible one names itself.
        let bad = SimConfig {
            sizes: "10,1KiB".into(),
            ..cfg.clone()
        };
        let e = simulate_trace(&path, &bad, &mut |_| Ok(())).unwrap_err().to_string();
        assert!(e.contains("`1KiB`"), "{e}");
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    /// An oracleGeneral file is read by memory map exactly when the generic
    /// reader would give the same keys, and the results are the same.
    #[test]
    fn oracle_files_by_memory_map_give_the_generic_readers_results() {
        let keys = crate::trace::synth::zipf_keys(20_000, 900, 0.9, 5).unwrap();
        let path = tmp("oracle").with_file_name("t.oracleGeneral");
        let mut buf = Vec::new();
        for (i, &k) in keys.iter().enumerate() {
            crate::trace::oracle::write_record(&mut buf, i as u32, k | (2 << 40), 4096, -1).unwrap();
        }
        std::fs::write(&path, &buf).unwrap();
        let fast = SimConfig {
            trace: TraceOptions {
                format: "oracle".into(),
                ..Default::default()
            },
            blocks: BlockOptions::default(),
            policies: "lru,arc,opt".into(),
            sizes: "50,10%".into(),
        };
        let sniffed = SimConfig {
            trace: TraceOptions::default(),
            ..fast.clone()
        };
        // Times must not go back: the generic reader checks them, so it reads.
        let generic = SimConfig {
            trace: TraceOptions {
                order: TimeOrder::Strict,
                ..fast.trace.clone()
            },
            ..fast.clone()
        };
        assert!(mapped_oracle(&path, &fast.trace, fast.blocks).unwrap().is_some());
        assert!(mapped_oracle(&path, &sniffed.trace, sniffed.blocks).unwrap().is_some());
        assert!(mapped_oracle(&path, &generic.trace, generic.blocks).unwrap().is_none());
        let other_blocks = SimConfig {
            blocks: BlockOptions {
                block_size: 8192,
                reads_only: false,
            },
            ..fast.clone()
        };
        assert!(mapped_oracle(&path, &other_blocks.trace, other_blocks.blocks)
            .unwrap()
            .is_none());
        let run = |cfg: &SimConfig| simulate_trace(&path, cfg, &mut |_| Ok(())).unwrap();
        let (a, b, c) = (run(&fast), run(&sniffed), run(&generic));
        let hits = |r: &SimReport| r.cells.iter().map(|c| (c.cache_blocks, c.hits)).collect::<Vec<_>>();
        assert_eq!(hits(&a), hits(&c));
        assert_eq!(hits(&b), hits(&c));
        assert_eq!((a.unique_blocks, a.skipped), (c.unique_blocks, 0));
        // And they are each policy's own, run alone on the keys.
        let tenant_keys: Vec<u64> = keys.iter().map(|k| k | (2 << 40)).collect();
        for cell in &a.cells {
            assert_eq!(
                cell.hits,
                alone(&cell.policy, cell.cache_blocks, &acc(&tenant_keys)),
                "{cell:?}"
            );
        }
        // A truncated last record: the generic reader reports it, as before.
        std::fs::write(&path, &buf[..buf.len() - 5]).unwrap();
        assert!(mapped_oracle(&path, &fast.trace, fast.blocks).unwrap().is_none());
        let e = simulate_trace(&path, &fast, &mut |_| Ok(())).unwrap_err().to_string();
        assert!(e.contains("truncated record: 19 of 24 bytes"), "{e}");
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// One pass over many cells gives what each cell gives alone.
        #[test]
        fn multi_cell_equals_each_alone(keys in prop::collection::vec(0u64..60, 0..3000), sizes in prop::collection::vec(1u64..80, 1..6)) {
            let accesses = acc(&keys);
            let policies: Vec<String> = super::super::POLICIES.iter().map(|s| s.to_string()).collect();
            let cells = cells(&policies, &sizes);
            let (r, _) = simulate_accesses(accesses.clone().into_iter().map(Ok), &cells, &mut |_| Ok(())).unwrap();
            for (c, res) in cells.iter().zip(&r) {
                prop_assert_eq!(res.accesses, keys.len() as u64);
                prop_assert_eq!(res.hits, alone(&c.policy, c.cache_blocks, &accesses));
                prop_assert_eq!(res.hits + res.misses, res.accesses);
            }
        }
    }
}
