//! The real executor: an MD array on member files, with real bytes.
//!
//! Every read, write, rebuild step and scrub runs the array's own plans
//! (`Array::plan_read`, `plan_write`, `plan_rebuild_row`, `plan_scrub_row`)
//! — the plans the counted and timed executors run — through the plan
//! runner (`runner.rs`), which does the member I/O and the XOR / P+Q with
//! the array's GF(2^8) code.
//!
//! A directory holds one array: `array.json` (the state, see `state.rs`),
//! `disk-I.img` (member images; member block b at byte b × block size),
//! `disk-I.sum` (checksums, with `--checksums`), `journal` (degraded writes,
//! see `journal.rs`), `lock` (held by the process that has the array open)
//! and, while served, `serve.json` (how to reach the server).
//!
//! Concurrency: requests hold the state lock shared (so the failed set does
//! not change under them) and lock the member rows (chunk rows) their plans
//! touch, shared for reads and exclusive for writes, so a read never
//! reconstructs from a half-written row. Failing or replacing a member takes
//! the state lock exclusively.
//!
//! Crash consistency: a write-intent bitmap for healthy rows (`bitmap.rs`),
//! the journal for rows with a failed member (`journal.rs`); opening an
//! array replays the journal and resyncs the dirty regions before anything
//! else.

pub mod bitmap;
pub mod control;
pub mod integrity;
pub mod journal;
pub mod members;
pub mod rebuild;
pub mod replay;
pub mod runner;
pub mod scrub;
pub mod state;

#[cfg(test)]
mod tests;

use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Instant;

use serde::Serialize;

use self::bitmap::Bitmap;
use self::journal::{Journal, Place};
use self::members::{AlignedBuf, Faults, Member};
use self::runner::{do_reads, plan_rows, read_out, unreadable, write_buffers, Env, Fault, UserData};
use self::scrub::{scrub_row, Fixes, Mode, ScrubReport};
use self::state::{hex_to_bits, BadRange, State};
use crate::array::{Array, ArrayConfig, DiskOp, IoPlan};
use crate::error::{Error, Result};

/// Why a request failed (mapped to NBD errors by the server).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReqError {
    /// Past the end of the array.
    OutOfRange(String),
    /// The data cannot be produced correctly: an error, never wrong bytes.
    Unreadable(String),
    /// A member could not be written or synced.
    Io(String),
}

impl std::fmt::Display for ReqError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReqError::OutOfRange(m) | ReqError::Unreadable(m) | ReqError::Io(m) => f.write_str(m),
        }
    }
}

impl From<Fault> for ReqError {
    fn from(f: Fault) -> Self {
        match f {
            Fault::Io(m) => ReqError::Io(m),
            other => ReqError::Unreadable(other.to_string()),
        }
    }
}

fn io_err(e: std::io::Error) -> ReqError {
    ReqError::Io(e.to_string())
}

/// How to open an array.
#[derive(Clone, Default)]
pub struct OpenConfig {
    /// O_DIRECT on the member images when the file system allows it.
    pub direct: bool,
    /// Crash injection (integrity suite); None: no faults.
    pub faults: Option<Arc<Faults>>,
}

/// What opening the array had to do after an unclean shutdown.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize, PartialEq)]
pub struct Recovery {
    /// Journal records replayed (writes to degraded rows).
    pub journal_records: u64,
    /// Bitmap regions resynced.
    pub dirty_regions: u64,
    pub resync: ScrubReport,
    /// Members whose image was missing, now failed.
    pub missing_members: Vec<u32>,
}

/// The array's state, for `real status`.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct Status {
    pub level: String,
    pub disks: u32,
    pub layout: String,
    pub chunk_bytes: u64,
    pub block_size: u64,
    pub disk_bytes: u64,
    pub size_bytes: u64,
    pub checksums: bool,
    pub failed: Vec<u32>,
    pub recovering: Vec<u32>,
    pub recovered_rows: u64,
    pub member_rows: u64,
    pub tolerated_failures: u32,
    /// `healthy`, `degraded`, `recovering` or `failed` (beyond redundancy).
    pub health: String,
    pub dirty_regions: u64,
    pub bad_blocks: u64,
    pub direct: bool,
}

/// Counters since open.
#[derive(Debug, Default)]
pub struct Stats {
    pub reads: AtomicU64,
    pub writes: AtomicU64,
    pub read_errors: AtomicU64,
    pub heals: AtomicU64,
}

/// Member rows locked by a request.
struct RowLocks {
    locks: Vec<RwLock<()>>,
}

enum RowGuard<'a> {
    #[allow(dead_code)]
    R(RwLockReadGuard<'a, ()>),
    #[allow(dead_code)]
    W(RwLockWriteGuard<'a, ()>),
}

const ROW_LOCKS: usize = 1024;

impl RowLocks {
    fn new() -> Self {
        RowLocks {
            locks: (0..ROW_LOCKS).map(|_| RwLock::new(())).collect(),
        }
    }

    /// Lock `rows` (in one global order, so that two requests never wait for each other in a cycle).
    fn lock(&self, rows: &[u64], write: bool) -> Vec<RowGuard<'_>> {
        let mut idx: Vec<usize> = rows.iter().map(|&r| (r % ROW_LOCKS as u64) as usize).collect();
        idx.sort_unstable();
        idx.dedup();
        idx.into_iter()
            .map(|i| {
                let l = &self.locks[i];
                if write {
                    RowGuard::W(l.write().unwrap_or_else(|e| e.into_inner()))
                } else {
                    RowGuard::R(l.read().unwrap_or_else(|e| e.into_inner()))
                }
            })
            .collect()
    }
}

/// What changes while the array is open.
struct Live {
    array: Array,
    members: Vec<Option<Member>>,
    /// Recovery offset recorded in the state file (≤ the array's own).
    durable_rows: u64,
    recovering: Vec<bool>,
}

/// An open array.
pub struct RealArray {
    dir: PathBuf,
    cfg: ArrayConfig,
    checksums: bool,
    bs: usize,
    zero_crc: u32,
    capacity_blocks: u64,
    member_rows: u64,
    direct: bool,
    live: RwLock<Live>,
    rows: RowLocks,
    bitmap: Mutex<Bitmap>,
    bad: Mutex<Vec<BadRange>>,
    /// Serializes the handling of truncated members.
    truncation: Mutex<()>,
    journal: Journal,
    /// Journaled writes hold it shared; a journal checkpoint exclusively.
    gate: RwLock<()>,
    generation: AtomicU64,
    pub faults: Arc<Faults>,
    pub stats: Stats,
    /// User requests in flight and when the last one started (ns since
    /// open): the rebuild's idle test.
    inflight: AtomicU64,
    last_user_ns: AtomicU64,
    epoch: Instant,
    /// What opening had to recover.
    pub recovery: Recovery,
    _lock: File,
}

fn lock_path(dir: &Path) -> PathBuf {
    dir.join("lock")
}

/// Build the array model of a state.
fn array_of(st: &State) -> Result<Array> {
    let mut a = Array::new(st.config)?;
    for &d in &st.failed {
        a.fail(d)?;
    }
    if !st.recovering.is_empty() {
        a.start_recovery(&st.recovering)?;
        a.set_recovered_rows(st.recovered_rows);
    }
    Ok(a)
}

/// Take the directory's lock, or say who holds it.
fn take_lock(dir: &Path) -> Result<File> {
    let path = lock_path(dir);
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| Error::io(path.display().to_string(), e))?;
    match f.try_lock() {
        Ok(()) => Ok(f),
        Err(_) => Err(Error::config(format!(
            "{}: the array is open in another process (a server? see {})",
            dir.display(),
            dir.join(control::SERVE_FILE).display()
        ))),
    }
}

/// Whether another process holds the array open.
pub fn is_open_elsewhere(dir: &Path) -> bool {
    match File::open(lock_path(dir)) {
        Ok(f) => f.try_lock_shared().is_err(),
        Err(_) => false,
    }
}

impl RealArray {
    /// Make a new array of member files in `dir` (created if missing).
    pub fn create(dir: &Path, cfg: ArrayConfig, checksums: bool) -> Result<Status> {
        cfg.validate()?;
        if cfg.disk_bytes == 0 {
            return Err(Error::config("a real array needs the member size (--disk-size)"));
        }
        let probe = Array::new(cfg)?;
        let rows = probe.member_rows().unwrap_or(0);
        if rows == 0 || probe.capacity_blocks().unwrap_or(0) == 0 {
            return Err(Error::config(format!(
                "member size {} B holds no whole chunk of {} B",
                cfg.disk_bytes, cfg.chunk_bytes
            )));
        }
        let shown = dir.display().to_string();
        fs::create_dir_all(dir).map_err(|e| Error::io(&shown, e))?;
        if state::state_path(dir).exists() {
            return Err(Error::config(format!("{shown}: already holds an array (array.json)")));
        }
        let _lock = take_lock(dir)?;
        for d in 0..cfg.disks {
            Member::create(dir, d, cfg.disk_bytes, checksums).map_err(|e| Error::io(&shown, e))?;
        }
        File::create(journal::journal_path(dir)).map_err(|e| Error::io(&shown, e))?;
        let bm_rows = bitmap::region_rows(rows, cfg.chunk_bytes);
        let st = State {
            format: state::FORMAT,
            config: cfg,
            checksums,
            failed: vec![],
            recovering: vec![],
            recovered_rows: 0,
            bitmap_rows: bm_rows,
            bitmap: String::new(),
            bad_blocks: vec![],
            generation: 0,
        };
        st.save(dir).map_err(|e| Error::io(&shown, e))?;
        drop(_lock);
        Ok(RealArray::open(dir, OpenConfig::default())?.status())
    }

    /// Open the array in `dir`, recovering from an unclean shutdown first.
    pub fn open(dir: &Path, opts: OpenConfig) -> Result<RealArray> {
        let shown = dir.display().to_string();
        let lock = take_lock(dir)?;
        let mut st = State::load(dir)?;
        let faults = opts.faults.clone().unwrap_or_else(|| Arc::new(Faults::none()));
        let cfg = st.config;
        let bs = cfg.block_size as usize;
        let probe = Array::new(cfg)?;
        let member_rows = probe.member_rows().unwrap_or(0);
        let capacity_blocks = probe.capacity_blocks().unwrap_or(0);
        // Members whose image is gone are failed (MD starts degraded).
        let mut recovery = Recovery::default();
        for d in 0..cfg.disks {
            if !st.failed.contains(&d) && !members::member_path(dir, d).exists() {
                st.failed.push(d);
                recovery.missing_members.push(d);
            }
        }
        st.failed.sort_unstable();
        st.recovering.retain(|d| !recovery.missing_members.contains(d));
        if !recovery.missing_members.is_empty() && st.recovering.is_empty() {
            st.recovered_rows = 0;
        }
        let array = array_of(&st)?;
        let mut direct = false;
        let mut mem: Vec<Option<Member>> = Vec::new();
        let mut recovering = vec![false; cfg.disks as usize];
        for &d in &st.recovering {
            recovering[d as usize] = true;
        }
        for d in 0..cfg.disks {
            let usable = !array.is_failed(d) || recovering[d as usize];
            if usable {
                let m = Member::open(dir, d, st.checksums, opts.direct)
                    .map_err(|e| Error::io(members::member_path(dir, d).display().to_string(), e))?;
                direct |= m.direct;
                mem.push(Some(m));
            } else {
                mem.push(None);
            }
        }
        let bm_bits = hex_to_bits(&st.bitmap, member_rows.div_ceil(st.bitmap_rows).max(1) as usize)?;
        let bitmap = Bitmap::new(st.bitmap_rows, member_rows, bm_bits);
        let journal = Journal::open(dir, bs).map_err(|e| Error::io(&shown, e))?;
        let mut ra = RealArray {
            dir: dir.to_path_buf(),
            cfg,
            checksums: st.checksums,
            bs,
            zero_crc: members::zero_crc(bs),
            capacity_blocks,
            member_rows,
            direct,
            live: RwLock::new(Live {
                array,
                members: mem,
                durable_rows: st.recovered_rows,
                recovering,
            }),
            rows: RowLocks::new(),
            bitmap: Mutex::new(bitmap),
            bad: Mutex::new(st.bad_blocks.clone()),
            truncation: Mutex::new(()),
            journal,
            gate: RwLock::new(()),
            generation: AtomicU64::new(st.generation),
            faults,
            stats: Stats::default(),
            inflight: AtomicU64::new(0),
            last_user_ns: AtomicU64::new(0),
            epoch: Instant::now(),
            recovery,
            _lock: lock,
        };
        let (records, regions, resync) = ra
            .recover()
            .map_err(|e| Error::io(&shown, format!("recovery after an unclean shutdown failed: {e}")))?;
        ra.recovery.journal_records = records;
        ra.recovery.dirty_regions = regions;
        ra.recovery.resync = resync;
        Ok(ra)
    }

    /// Replay the journal, resync the dirty regions, then start clean.
    /// Returns the journal records replayed, the regions resynced and what the resync found.
    fn recover(&self) -> std::result::Result<(u64, u64, ScrubReport), ReqError> {
        let live = self.live.read().unwrap();
        self.absorb_truncation(&live)?;
        let records = self.journal.records().map_err(io_err)?;
        for rec in &records {
            for (i, p) in rec.places.iter().enumerate() {
                if let Some(m) = live.members.get(p.disk as usize).and_then(|m| m.as_ref()) {
                    m.write_blocks(
                        p.block,
                        &rec.data[i * self.bs..(i + 1) * self.bs],
                        self.bs,
                        self.zero_crc,
                        &self.faults,
                    )
                    .map_err(io_err)?;
                }
            }
        }
        let dirty = self.bitmap.lock().unwrap().dirty();
        let rows_per = self.bitmap.lock().unwrap().rows;
        let mut rep = ScrubReport::default();
        for &r in &dirty {
            for row in (r as u64 * rows_per)..((r as u64 + 1) * rows_per).min(self.member_rows) {
                let (one, fixes) = {
                    let bad = self.bad.lock().unwrap().clone();
                    let env = self.env(&live, &bad);
                    scrub_row(&env, row, Mode::Resync)
                };
                rep.add(&one);
                self.apply_fixes(&live, &fixes)?;
            }
        }
        self.sync_members(&live)?;
        self.journal.reset(&self.faults).map_err(io_err)?;
        let mut bm = self.bitmap.lock().unwrap();
        let needs_save = bm.any_dirty() || !self.recovery.missing_members.is_empty();
        bm.clear_all();
        if needs_save {
            self.persist(&live, &bm)?;
        }
        Ok((records.len() as u64, dirty.len() as u64, rep))
    }

    fn env<'a>(&'a self, live: &'a Live, bad: &'a [BadRange]) -> Env<'a> {
        Env {
            array: &live.array,
            members: &live.members,
            bs: self.bs,
            zero_crc: self.zero_crc,
            bad,
            checksums: self.checksums,
            parallel: self.inflight.load(Ordering::Relaxed) <= 1,
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn config(&self) -> &ArrayConfig {
        &self.cfg
    }

    pub fn block_size(&self) -> usize {
        self.bs
    }

    /// The array's size in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.capacity_blocks * self.bs as u64
    }

    pub fn member_rows(&self) -> u64 {
        self.member_rows
    }

    /// The state file's contents for the current state.
    fn state_of(&self, live: &Live, bm: &Bitmap) -> State {
        let a = &live.array;
        State {
            format: state::FORMAT,
            config: self.cfg,
            checksums: self.checksums,
            failed: a.failed().to_vec(),
            recovering: a.recovering(),
            recovered_rows: if a.recovering().is_empty() {
                0
            } else {
                live.durable_rows
            },
            bitmap_rows: bm.rows,
            bitmap: state::bits_to_hex(&bm.on_disk),
            bad_blocks: self.bad.lock().unwrap().clone(),
            generation: self.generation.fetch_add(1, Ordering::SeqCst) + 1,
        }
    }

    /// Write the state file (a crash point of the fault hook).
    fn persist(&self, live: &Live, bm: &Bitmap) -> std::result::Result<(), ReqError> {
        let st = self.state_of(live, bm);
        if self.faults.admit(1).map_err(io_err)?.is_some() {
            return Err(io_err(members::crashed_error()));
        }
        st.save(&self.dir).map_err(io_err)
    }

    fn sync_members(&self, live: &Live) -> std::result::Result<(), ReqError> {
        for m in live.members.iter().flatten() {
            m.sync().map_err(io_err)?;
        }
        Ok(())
    }

    /// Sync the members, then empty the journal.
    fn checkpoint_journal(&self, live: &Live) -> std::result::Result<(), ReqError> {
        let _g = self.gate.write().unwrap_or_else(|e| e.into_inner());
        if self.journal.is_empty() {
            return Ok(());
        }
        self.sync_members(live)?;
        self.journal.reset(&self.faults).map_err(io_err)
    }

    /// Whether writes to member row `row` must be journaled: a member is
    /// failed there according to the state on disk.
    fn durably_degraded(&self, live: &Live, row: u64) -> bool {
        let a = &live.array;
        a.failed()
            .iter()
            .any(|&d| !(live.recovering[d as usize] && row < live.durable_rows))
    }

    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    fn user_start(&self) {
        self.inflight.fetch_add(1, Ordering::SeqCst);
        self.last_user_ns.store(self.now_ns().max(1), Ordering::SeqCst);
    }

    fn user_end(&self) {
        self.inflight.fetch_sub(1, Ordering::SeqCst);
    }

    /// Whether users are quiet: nothing in flight, nothing started for 500 ms.
    pub fn idle(&self) -> bool {
        let last = self.last_user_ns.load(Ordering::SeqCst);
        self.inflight.load(Ordering::SeqCst) == 0 && (last == 0 || self.now_ns() >= last + 500_000_000)
    }

    fn check_range(&self, offset: u64, len: u64) -> std::result::Result<(u64, u64), ReqError> {
        let end = offset
            .checked_add(len)
            .ok_or_else(|| ReqError::OutOfRange("offset overflows".into()))?;
        if end > self.size_bytes() {
            return Err(ReqError::OutOfRange(format!(
                "bytes {offset}..{end} are past the end of the array ({} bytes)",
                self.size_bytes()
            )));
        }
        let bs = self.bs as u64;
        let first = offset / bs;
        Ok((first, end.div_ceil(bs) - first))
    }

    /// Rows a heal of `heal` rows needs locked.
    fn heal_lock_rows(&self, live: &Live, heal: &[u64]) -> Vec<u64> {
        let cb = live.array.chunk_blocks();
        let mut rows: Vec<u64> = heal.to_vec();
        for &r in heal {
            rows.extend(plan_rows(&live.array.plan_scrub_row(r), cb));
        }
        rows.sort_unstable();
        rows.dedup();
        rows
    }

    /// A member image shorter than the member (truncated behind our back):
    /// its missing tail goes on the bad-block list and the image is grown
    /// back, before anything is written past its end. Otherwise a later
    /// write past the end would leave a hole that reads as zeroes, which
    /// without checksums is indistinguishable from data.
    fn absorb_truncation(&self, live: &Live) -> std::result::Result<(), ReqError> {
        // The common case (no member short) without taking the lock.
        let mut short = false;
        for m in live.members.iter().flatten() {
            short |= m.image_len().map_err(io_err)? < self.cfg.disk_bytes;
        }
        if !short {
            return Ok(());
        }
        let _g = self.truncation.lock().unwrap();
        let bs = self.bs as u64;
        let mut found = Vec::new();
        for (d, m) in live.members.iter().enumerate() {
            let Some(m) = m else { continue };
            let len = m.image_len().map_err(io_err)?;
            if len < self.cfg.disk_bytes {
                let first = len / bs;
                found.push(BadRange {
                    disk: d as u32,
                    block: first,
                    blocks: self.cfg.disk_bytes / bs - first,
                });
                m.extend(self.cfg.disk_bytes).map_err(io_err)?;
            }
        }
        if found.is_empty() {
            return Ok(());
        }
        {
            let mut bad = self.bad.lock().unwrap();
            bad.extend(found);
            rebuild::merge_ranges(&mut bad);
        }
        let bm = self.bitmap.lock().unwrap();
        self.persist(live, &bm)
    }

    /// Scrub-and-repair member rows whose units were found bad.
    fn heal(&self, live: &Live, heal: &[u64]) -> std::result::Result<(), ReqError> {
        self.stats.heals.fetch_add(1, Ordering::Relaxed);
        self.absorb_truncation(live)?;
        for &r in heal {
            let (_, fixes) = {
                let bad = self.bad.lock().unwrap().clone();
                scrub_row(&self.env(live, &bad), r, Mode::Repair)
            };
            self.apply_fixes(live, &fixes)?;
        }
        Ok(())
    }

    fn apply_fixes(&self, live: &Live, fixes: &Fixes) -> std::result::Result<(), ReqError> {
        // Checksums first: a unit rewritten below gets its own checksum,
        // which must not be overwritten by the old data's.
        for (d, b, data) in &fixes.sums {
            let m = live.members[*d as usize].as_ref().expect("scrubbed members are open");
            m.write_sums(*b, data, self.bs, self.zero_crc, &self.faults)
                .map_err(io_err)?;
        }
        for (d, b, data) in &fixes.units {
            let mut buf = AlignedBuf::zeroed(self.bs);
            buf.copy_from_slice(data);
            let m = live.members[*d as usize].as_ref().expect("scrubbed members are open");
            m.write_blocks(*b, &buf, self.bs, self.zero_crc, &self.faults)
                .map_err(io_err)?;
        }
        if !fixes.units.is_empty() {
            self.unlist(live, fixes.units.iter().map(|(d, b, _)| (*d, *b)))?;
        }
        Ok(())
    }

    /// Remove written places from the bad-block list.
    fn unlist(&self, live: &Live, places: impl Iterator<Item = (u32, u64)>) -> std::result::Result<(), ReqError> {
        let mut bad = self.bad.lock().unwrap();
        if bad.is_empty() {
            return Ok(());
        }
        let before = bad.len();
        let mut changed = false;
        for (d, b) in places {
            let mut next = Vec::with_capacity(bad.len() + 1);
            for r in bad.iter() {
                if r.disk == d && b >= r.block && b < r.block + r.blocks {
                    changed = true;
                    if b > r.block {
                        next.push(BadRange {
                            blocks: b - r.block,
                            ..*r
                        });
                    }
                    if b + 1 < r.block + r.blocks {
                        next.push(BadRange {
                            disk: d,
                            block: b + 1,
                            blocks: r.block + r.blocks - b - 1,
                        });
                    }
                } else {
                    next.push(*r);
                }
            }
            *bad = next;
        }
        if changed || bad.len() != before {
            drop(bad);
            let bm = self.bitmap.lock().unwrap();
            self.persist(live, &bm)?;
        }
        Ok(())
    }

    /// Run a read plan into `out` (blocks `first..first+n`), healing bad
    /// units once. Row locks must be held by the caller.
    fn run_read(
        &self,
        live: &Live,
        plan: &IoPlan,
        first: u64,
        n: u64,
        out: &mut [u8],
    ) -> std::result::Result<(), Fault> {
        let un = unreadable(plan);
        if !un.is_empty() {
            return Err(Fault::Unreadable(un));
        }
        let bad = self.bad.lock().unwrap().clone();
        let env = self.env(live, &bad);
        if runner::read_direct(&env, plan, first, n, out).is_some() {
            return Ok(());
        }
        let reads = do_reads(&env, plan);
        read_out(&env, &reads, first, n, out)
    }

    /// Read `buf.len()` bytes at `offset`.
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> std::result::Result<(), ReqError> {
        let (first, n) = self.check_range(offset, buf.len() as u64)?;
        if buf.is_empty() {
            return Ok(());
        }
        self.user_start();
        let r = self.read_blocks_into(offset, first, n, buf);
        self.user_end();
        self.stats.reads.fetch_add(1, Ordering::Relaxed);
        if r.is_err() {
            self.stats.read_errors.fetch_add(1, Ordering::Relaxed);
        }
        r
    }

    fn read_blocks_into(&self, offset: u64, first: u64, n: u64, buf: &mut [u8]) -> std::result::Result<(), ReqError> {
        let bs = self.bs as u64;
        let aligned = offset.is_multiple_of(bs) && (buf.len() as u64).is_multiple_of(bs);
        let mut tmp = if aligned {
            Vec::new()
        } else {
            vec![0u8; (n * bs) as usize]
        };
        let live = self.live.read().unwrap();
        let plan = live.array.plan_read(first, n);
        let rows = plan_rows(&plan, live.array.chunk_blocks());
        let out: &mut [u8] = if aligned { buf } else { &mut tmp };
        let res = {
            let _g = self.rows.lock(&rows, false);
            self.run_read(&live, &plan, first, n, out)
        };
        let res = match res {
            Err(Fault::Heal(heal)) => {
                let all: Vec<u64> = rows.iter().copied().chain(self.heal_lock_rows(&live, &heal)).collect();
                let _g = self.rows.lock(&all, true);
                self.heal(&live, &heal)?;
                self.run_read(&live, &plan, first, n, out)
            }
            r => r,
        };
        res.map_err(ReqError::from)?;
        if !aligned {
            let skip = (offset - first * bs) as usize;
            let len = buf.len();
            buf.copy_from_slice(&tmp[skip..skip + len]);
        }
        Ok(())
    }

    /// Write `data` at `offset`; with `fua`, durable before returning.
    pub fn write(&self, offset: u64, data: &[u8], fua: bool) -> std::result::Result<(), ReqError> {
        self.write_inner(offset, data.len() as u64, Some(data), fua)
    }

    /// Write `len` zero bytes at `offset` (NBD WRITE_ZEROES and TRIM).
    pub fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> std::result::Result<(), ReqError> {
        // In pieces, so that a whole-device trim does not lock every row at once.
        let piece = (self.cfg.chunk_bytes * self.cfg.disks as u64).max(1 << 20);
        let mut at = offset;
        let end = offset
            .checked_add(len)
            .ok_or_else(|| ReqError::OutOfRange("offset overflows".into()))?;
        self.check_range(offset, len)?;
        while at < end {
            let n = (end - at).min(piece - at % piece);
            self.write_inner(at, n, None, fua)?;
            at += n;
        }
        Ok(())
    }

    fn write_inner(&self, offset: u64, len: u64, data: Option<&[u8]>, fua: bool) -> std::result::Result<(), ReqError> {
        let (first, n) = self.check_range(offset, len)?;
        if len == 0 {
            return Ok(());
        }
        self.user_start();
        let r = self.write_blocks(offset, len, first, n, data, fua);
        self.user_end();
        self.stats.writes.fetch_add(1, Ordering::Relaxed);
        r
    }

    fn write_blocks(
        &self,
        offset: u64,
        len: u64,
        first: u64,
        n: u64,
        data: Option<&[u8]>,
        fua: bool,
    ) -> std::result::Result<(), ReqError> {
        let bs = self.bs as u64;
        let live = self.live.read().unwrap();
        let cb = live.array.chunk_blocks();
        let plan = live.array.plan_write(first, n);
        let head_partial = !offset.is_multiple_of(bs) || (len < bs && !(offset + len).is_multiple_of(bs));
        let tail_partial = !(offset + len).is_multiple_of(bs);
        // Partial first/last blocks are read, merged and written whole.
        let mut edge_plans: Vec<(u64, IoPlan)> = Vec::new();
        if head_partial {
            edge_plans.push((first, live.array.plan_read(first, 1)));
        }
        if tail_partial && (n > 1 || !head_partial) {
            edge_plans.push((first + n - 1, live.array.plan_read(first + n - 1, 1)));
        }
        let mut rows = plan_rows(&plan, cb);
        for (_, p) in &edge_plans {
            rows.extend(plan_rows(p, cb));
        }
        rows.sort_unstable();
        rows.dedup();
        let mut merged: Option<Vec<u8>> = None;
        let mut guards = self.rows.lock(&rows, true);
        let mut healed = false;
        loop {
            let attempt = (|| -> std::result::Result<Vec<(DiskOp, AlignedBuf)>, Fault> {
                let un = unreadable(&plan);
                if !un.is_empty() {
                    return Err(Fault::Unreadable(un));
                }
                if !edge_plans.is_empty() && merged.is_none() {
                    let mut full = vec![0u8; (n * bs) as usize];
                    for (b, p) in &edge_plans {
                        let i = ((b - first) * bs) as usize;
                        self.run_read(&live, p, *b, 1, &mut full[i..i + bs as usize])?;
                    }
                    let skip = (offset - first * bs) as usize;
                    match data {
                        Some(d) => full[skip..skip + len as usize].copy_from_slice(d),
                        None => full[skip..skip + len as usize].fill(0),
                    }
                    merged = Some(full);
                }
                let bad = self.bad.lock().unwrap().clone();
                let env = self.env(&live, &bad);
                let reads = do_reads(&env, &plan);
                let src = match &merged {
                    Some(m) => Some(m.as_slice()),
                    None => data,
                };
                let user = UserData::new(first, n, src, self.bs);
                write_buffers(&env, &plan, &reads, &user)
            })();
            match attempt {
                Ok(bufs) => {
                    let r = self.commit_writes(&live, &bufs, fua);
                    drop(guards);
                    return r;
                }
                Err(Fault::Heal(heal)) if !healed => {
                    healed = true;
                    drop(guards);
                    let all: Vec<u64> = rows.iter().copied().chain(self.heal_lock_rows(&live, &heal)).collect();
                    guards = self.rows.lock(&all, true);
                    self.heal(&live, &heal)?;
                }
                Err(f) => return Err(f.into()),
            }
        }
    }

    /// Put computed writes in place: bitmap, journal when degraded, the
    /// member writes, FUA.
    fn commit_writes(
        &self,
        live: &Live,
        bufs: &[(DiskOp, AlignedBuf)],
        fua: bool,
    ) -> std::result::Result<(), ReqError> {
        if bufs.is_empty() {
            return Ok(());
        }
        let cb = live.array.chunk_blocks();
        let mut wrows: Vec<u64> = Vec::new();
        for (op, _) in bufs {
            wrows.extend(op.block / cb..=(op.block + op.nblocks as u64 - 1) / cb);
        }
        wrows.sort_unstable();
        wrows.dedup();
        let regions = {
            let mut bm = self.bitmap.lock().unwrap();
            let regions = bm.regions_of(&wrows);
            if bm.begin(&regions) {
                if let Err(e) = self.persist(live, &bm) {
                    bm.end(&regions);
                    return Err(e);
                }
            }
            regions
        };
        let res = self
            .absorb_truncation(live)
            .and_then(|_| self.journal_and_write(live, bufs, &wrows, fua));
        self.bitmap.lock().unwrap().end(&regions);
        res?;
        if !self.bad.lock().unwrap().is_empty() {
            self.unlist(
                live,
                bufs.iter()
                    .flat_map(|(op, _)| (0..op.nblocks as u64).map(move |i| (op.disk, op.block + i))),
            )?;
        }
        Ok(())
    }

    fn journal_and_write(
        &self,
        live: &Live,
        bufs: &[(DiskOp, AlignedBuf)],
        wrows: &[u64],
        fua: bool,
    ) -> std::result::Result<(), ReqError> {
        let parity = live.array.level().has_parity();
        let journaled = parity && wrows.iter().any(|&r| self.durably_degraded(live, r));
        if !journaled && self.journal.covers_any(wrows) {
            self.checkpoint_journal(live)?;
        }
        let _gate = journaled.then(|| self.gate.read().unwrap_or_else(|e| e.into_inner()));
        if journaled {
            let mut places = Vec::new();
            let mut units: Vec<&[u8]> = Vec::new();
            for (op, buf) in bufs {
                for i in 0..op.nblocks as usize {
                    places.push(Place {
                        disk: op.disk,
                        block: op.block + i as u64,
                    });
                    units.push(&buf[i * self.bs..(i + 1) * self.bs]);
                }
            }
            self.journal
                .append(&places, &units, wrows, &self.faults)
                .map_err(io_err)?;
        }
        let write_one = |op: &DiskOp, buf: &AlignedBuf| -> std::result::Result<(), ReqError> {
            let m = live.members[op.disk as usize]
                .as_ref()
                .ok_or_else(|| ReqError::Io(format!("member {} is not open", op.disk)))?;
            m.write_blocks(op.block, buf, self.bs, self.zero_crc, &self.faults)
                .map_err(io_err)
        };
        let bytes: usize = bufs.iter().map(|(_, b)| b.len()).sum();
        if bufs.len() > 1 && bytes >= 256 * 1024 && self.inflight.load(Ordering::Relaxed) <= 1 {
            std::thread::scope(|s| {
                let hs: Vec<_> = bufs
                    .iter()
                    .map(|(op, buf)| s.spawn(move || write_one(op, buf)))
                    .collect();
                hs.into_iter()
                    .map(|h| h.join().expect("a member write does not panic"))
                    .collect::<std::result::Result<Vec<()>, ReqError>>()
            })?;
        } else {
            for (op, buf) in bufs {
                write_one(op, buf)?;
            }
        }
        if fua {
            let mut disks: Vec<u32> = bufs.iter().map(|(op, _)| op.disk).collect();
            disks.sort_unstable();
            disks.dedup();
            for d in disks {
                if let Some(m) = &live.members[d as usize] {
                    m.sync().map_err(io_err)?;
                }
            }
        }
        Ok(())
    }

    /// Make every completed write durable; clear idle bitmap regions.
    pub fn flush(&self) -> std::result::Result<(), ReqError> {
        let live = self.live.read().unwrap();
        let mark = self.bitmap.lock().unwrap().mark();
        self.sync_members(&live)?;
        self.checkpoint_journal(&live)?;
        let mut bm = self.bitmap.lock().unwrap();
        if bm.clear_idle(&mark) {
            self.persist(&live, &bm)?;
        }
        Ok(())
    }

    /// Whether any bitmap region is dirty (the server flushes then).
    pub fn bitmap_dirty(&self) -> bool {
        self.bitmap.lock().unwrap().any_dirty()
    }

    /// Close cleanly: everything durable, bitmap clean, journal empty.
    pub fn close(self) -> Result<()> {
        let shown = self.dir.display().to_string();
        self.flush().map_err(|e| Error::io(&shown, e))?;
        Ok(())
    }

    pub fn status(&self) -> Status {
        let live = self.live.read().unwrap();
        let a = &live.array;
        let bm = self.bitmap.lock().unwrap();
        let failed = a.failed().to_vec();
        let recovering = a.recovering();
        let beyond = failed.len() as u32 > a.tolerated_failures();
        let health = if beyond {
            "failed"
        } else if !recovering.is_empty() {
            "recovering"
        } else if !failed.is_empty() {
            "degraded"
        } else {
            "healthy"
        };
        Status {
            level: self.cfg.level.name().to_string(),
            disks: self.cfg.disks,
            layout: self.cfg.layout_name(),
            chunk_bytes: self.cfg.chunk_bytes,
            block_size: self.cfg.block_size,
            disk_bytes: self.cfg.disk_bytes,
            size_bytes: self.size_bytes(),
            checksums: self.checksums,
            failed,
            recovering,
            recovered_rows: a.recovered_rows(),
            member_rows: self.member_rows,
            tolerated_failures: a.tolerated_failures(),
            health: health.into(),
            dirty_regions: bm.dirty().len() as u64,
            bad_blocks: self.bad.lock().unwrap().iter().map(|r| r.blocks).sum(),
            direct: self.direct,
        }
    }

    /// Mark member `disk` failed (MD's `--fail`); the array keeps serving
    /// in degraded mode (or returns errors past its redundancy).
    pub fn fail(&self, disk: u32) -> Result<Status> {
        let shown = self.dir.display().to_string();
        {
            let mut live = self.live.write().unwrap();
            if disk >= self.cfg.disks {
                return Err(Error::config(format!(
                    "cannot fail disk {disk}: the array has disks 0..{}",
                    self.cfg.disks - 1
                )));
            }
            // Members are in sync before the failed set changes (no write
            // can be in flight: we hold the state exclusively).
            self.sync_members(&live).map_err(|e| Error::io(&shown, e))?;
            self.checkpoint_journal(&live).map_err(|e| Error::io(&shown, e))?;
            let was_recovering = live.recovering[disk as usize];
            live.array.fail(disk)?;
            if was_recovering {
                // A failing spare stops being recovered; the others go on.
                let others: Vec<u32> = live.array.recovering().into_iter().filter(|&d| d != disk).collect();
                let rows = live.array.recovered_rows();
                let mut a = Array::new(self.cfg)?;
                for &d in live.array.failed() {
                    a.fail(d)?;
                }
                if !others.is_empty() {
                    a.start_recovery(&others)?;
                    a.set_recovered_rows(rows);
                }
                live.array = a;
                live.recovering[disk as usize] = false;
            }
            live.members[disk as usize] = None;
            let bm = self.bitmap.lock().unwrap();
            self.persist(&live, &bm).map_err(|e| Error::io(&shown, e))?;
        }
        Ok(self.status())
    }

    /// Put a fresh, empty spare in place of failed member `disk` and start
    /// recovering it (MD's `--add` of a spare); `rebuild` fills it.
    pub fn replace(&self, disk: u32) -> Result<Status> {
        let shown = self.dir.display().to_string();
        {
            let mut live = self.live.write().unwrap();
            if disk >= self.cfg.disks {
                return Err(Error::config(format!(
                    "cannot replace disk {disk}: the array has disks 0..{}",
                    self.cfg.disks - 1
                )));
            }
            if !live.array.is_failed(disk) {
                return Err(Error::config(format!(
                    "disk {disk} is not failed: fail it first (`blocklab real fail`)"
                )));
            }
            let mut targets = live.array.recovering();
            if !targets.contains(&disk) {
                targets.push(disk);
            }
            // Check first that the data can be rebuilt at all.
            let mut probe = live.array.clone();
            probe.start_recovery(&targets)?;
            self.sync_members(&live).map_err(|e| Error::io(&shown, e))?;
            self.checkpoint_journal(&live).map_err(|e| Error::io(&shown, e))?;
            live.members[disk as usize] = None;
            Member::create(&self.dir, disk, self.cfg.disk_bytes, self.checksums).map_err(|e| Error::io(&shown, e))?;
            let m = Member::open(&self.dir, disk, self.checksums, self.direct).map_err(|e| Error::io(&shown, e))?;
            live.members[disk as usize] = Some(m);
            live.array = probe;
            live.durable_rows = 0;
            for &d in &targets {
                live.recovering[d as usize] = true;
            }
            self.bad.lock().unwrap().retain(|r| r.disk != disk);
            let bm = self.bitmap.lock().unwrap();
            self.persist(&live, &bm).map_err(|e| Error::io(&shown, e))?;
        }
        Ok(self.status())
    }

    /// MD's check (`repair` false) or repair of every stripe.
    pub fn check(&self, repair: bool) -> Result<ScrubReport> {
        let shown = self.dir.display().to_string();
        let mode = if repair { Mode::Repair } else { Mode::Check };
        let mut total = ScrubReport::default();
        {
            let live = self.live.read().unwrap();
            self.absorb_truncation(&live).map_err(|e| Error::io(&shown, e))?;
        }
        for row in 0..self.member_rows {
            let live = self.live.read().unwrap();
            let rows = plan_rows(&live.array.plan_scrub_row(row), live.array.chunk_blocks());
            let _g = self.rows.lock(&rows, repair);
            let (rep, fixes) = {
                let bad = self.bad.lock().unwrap().clone();
                scrub_row(&self.env(&live, &bad), row, mode)
            };
            total.add(&rep);
            if repair {
                self.apply_fixes(&live, &fixes).map_err(|e| Error::io(&shown, e))?;
            }
        }
        if repair {
            let live = self.live.read().unwrap();
            self.sync_members(&live).map_err(|e| Error::io(&shown, e))?;
        }
        Ok(total)
    }
}
