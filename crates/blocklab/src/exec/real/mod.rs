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
//! see `journal.rs`) and, while served, `serve.json` (how to reach the server).
//! The process that has the array open holds an flock on the directory.
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

mod admin;
mod alloc;
pub mod bitmap;
pub mod blocks;
pub mod control;
pub mod dgraid;
mod gather;
pub mod identity;
pub mod inflight;
pub mod integrity;
mod io;
pub mod journal;
pub mod members;
pub mod payload;
pub mod rebuild;
pub mod replay;
pub mod runner;
pub mod scrub;
pub mod stack;
pub mod stack_replay;
pub mod state;
pub mod tier_journal;
pub mod tier_store;
pub mod trim;
mod uring;
mod wall_clock;

#[cfg(test)]
mod identity_tests;
#[cfg(test)]
mod stack_attack_tests;
#[cfg(test)]
mod stack_conc_tests;
#[cfg(test)]
mod stack_prefetch_tests;
#[cfg(test)]
mod stack_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod trim_attack_tests;

use std::collections::{BTreeSet, VecDeque};
use std::fs::{self, File, OpenOptions};
use std::ops::Range;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use serde::Serialize;

use self::bitmap::Bitmap;
use self::gather::Gather;
use self::journal::Journal;
use self::members::{Faults, Member};
use self::runner::{Env, Fault};
use self::scrub::{scrub_row, Mode, ScrubReport};
use self::state::{hex_to_bits, BadRange, State};
use crate::array::{Array, ArrayConfig, IoPlan, RebuiltMap};
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
    /// Start even when a member is missing (or stale) while the bitmap has
    /// dirty regions (MD's `start_dirty_degraded`): the lost units of those
    /// rows are listed unreadable instead of reconstructed.
    pub start_dirty_degraded: bool,
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
    /// Members whose events were older than the state file's (a stale copy
    /// put back), left out: now failed.
    #[serde(default)]
    pub stale_members: Vec<u32>,
    /// Member files found under another member's name, put back.
    #[serde(default)]
    pub reassembled: Vec<String>,
    /// Started dirty and degraded (`start_dirty_degraded`): member rows
    /// `[start, end)` whose lost units are now unreadable.
    #[serde(default)]
    pub dirty_degraded_rows: Vec<(u64, u64)>,
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
    /// The recovery offset (rows below it are rebuilt on the spares).
    pub recovered_rows: u64,
    /// Rows rebuilt on the spares, below the offset and beyond it (out of
    /// order: PRO, DOR, steps completed out of order).
    #[serde(default)]
    pub rebuilt_rows: u64,
    pub member_rows: u64,
    pub tolerated_failures: u32,
    /// `healthy`, `degraded`, `recovering` or `failed` (beyond redundancy).
    pub health: String,
    pub dirty_regions: u64,
    pub bad_blocks: u64,
    /// Member rows `[start, end)` with units on the bad-block list (reads
    /// of what cannot be produced there fail).
    #[serde(default)]
    pub unreadable_rows: Vec<(u64, u64)>,
    pub direct: bool,
    /// A D-GRAID array's own figures (`exec/real/dgraid`): its placement,
    /// classifier, map and what it did; absent for RAID arrays.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dgraid: Option<serde_json::Value>,
}

/// Counters since open.
#[derive(Debug, Default)]
pub struct Stats {
    pub reads: AtomicU64,
    pub writes: AtomicU64,
    pub read_errors: AtomicU64,
    pub heals: AtomicU64,
}

/// Member rows locked by a request. Each lock counts the exclusive holds
/// it has seen end (its epoch): bytes read under a shared hold are still
/// current later if the epoch has not moved (DOR's reads, kept until the
/// row's spare write).
struct RowLocks {
    locks: Vec<RwLock<()>>,
    epochs: Vec<AtomicU64>,
}

enum RowGuard<'a> {
    #[allow(dead_code)]
    R(RwLockReadGuard<'a, ()>),
    #[allow(dead_code)]
    W(RwLockWriteGuard<'a, ()>, &'a AtomicU64),
}

impl Drop for RowGuard<'_> {
    fn drop(&mut self) {
        // Still held here: the epoch moves before anyone else can lock.
        if let RowGuard::W(_, epoch) = self {
            epoch.fetch_add(1, Ordering::SeqCst);
        }
    }
}

const ROW_LOCKS: usize = 1024;

impl RowLocks {
    fn new() -> Self {
        RowLocks {
            locks: (0..ROW_LOCKS).map(|_| RwLock::new(())).collect(),
            epochs: (0..ROW_LOCKS).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// The epoch of `row`'s lock (read it while holding the row).
    fn epoch(&self, row: u64) -> u64 {
        self.epochs[(row % ROW_LOCKS as u64) as usize].load(Ordering::SeqCst)
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
                    RowGuard::W(l.write().unwrap_or_else(|e| e.into_inner()), &self.epochs[i])
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
    recovering: Vec<bool>,
}

/// Rows whose spares a rebuild step has written but the array does not yet
/// count as rebuilt (the rebuild publishes them in a moment). A user write
/// planned before that moment would leave the spare out: it waits, then
/// plans again.
#[derive(Default)]
struct Pending {
    rows: Mutex<BTreeSet<u64>>,
    count: AtomicUsize,
    published: Condvar,
}

impl Pending {
    fn add(&self, rows: &[u64]) {
        let mut set = self.rows.lock().unwrap();
        set.extend(rows.iter().copied());
        self.count.store(set.len(), Ordering::SeqCst);
    }

    fn remove(&self, rows: &[u64]) {
        let mut set = self.rows.lock().unwrap();
        for r in rows {
            set.remove(r);
        }
        self.count.store(set.len(), Ordering::SeqCst);
        self.published.notify_all();
    }

    fn clear(&self) {
        self.rows.lock().unwrap().clear();
        self.count.store(0, Ordering::SeqCst);
        self.published.notify_all();
    }

    /// Whether any of `rows` is pending (the common case, none, lock-free).
    fn any(&self, rows: &[u64]) -> bool {
        self.count.load(Ordering::SeqCst) > 0 && {
            let set = self.rows.lock().unwrap();
            rows.iter().any(|r| set.contains(r))
        }
    }

    /// Wait until none of `rows` is pending.
    fn wait(&self, rows: &[u64]) {
        let mut set = self.rows.lock().unwrap();
        while rows.iter().any(|r| set.contains(r)) {
            set = self
                .published
                .wait_timeout(set, Duration::from_millis(20))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// One user request, as the rebuild's access monitor sees it (PRO's
/// popularity, MD's per-member activity).
struct UserEvent {
    blocks: Range<u64>,
    plan: IoPlan,
    at_ns: u64,
}

/// User requests seen while spares are recovering (from `replace` on, as
/// the timed executor shows an order every request from the failure on),
/// until the rebuild takes them.
#[derive(Default)]
struct Monitor {
    on: AtomicBool,
    events: Mutex<VecDeque<UserEvent>>,
}

/// Events kept at most until the rebuild takes them (the oldest go first).
const MONITOR_MAX: usize = 1 << 16;

/// How long a stripe part of a sequential write waits for the neighbouring
/// request to complete its stripe (MD keeps such stripes until its queue is
/// unplugged): long enough for a request already in flight on another worker.
const GATHER_WAIT: Duration = Duration::from_millis(2);

/// An open array.
pub struct RealArray {
    dir: PathBuf,
    cfg: ArrayConfig,
    checksums: bool,
    bs: usize,
    capacity_blocks: u64,
    member_rows: u64,
    direct: bool,
    live: RwLock<Live>,
    /// The rebuilt rows recorded in the state file (a subset of the
    /// array's own map): writes to rows with a failed member outside it are
    /// journaled.
    durable: Mutex<RebuiltMap>,
    /// Bumped when the failed or recovering members change (a rebuild in
    /// progress starts over from the map).
    membership: AtomicU64,
    /// Bumped whenever the array model changes (failed, recovering,
    /// rebuilt rows): what a stack in front keeps in step with.
    array_version: AtomicU64,
    pending: Pending,
    monitor: Monitor,
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
    /// Partial-stripe parts of large writes waiting for their neighbours
    /// (RAID-4/5/6 only; `gather.rs`).
    gather: Option<Gather>,
    /// How long a sequential writer's stripe part waits to be completed.
    gather_wait: Duration,
    /// User requests in flight and when the last one started (ns since
    /// open): the rebuild's idle test.
    inflight: AtomicU64,
    last_user_ns: AtomicU64,
    epoch: Instant,
    /// What opening had to recover.
    pub recovery: Recovery,
    /// The array's UUID (in every member's identity block).
    uuid: u128,
    _lock: File,
}

/// Build the array model of a state.
fn array_of(st: &State) -> Result<Array> {
    let mut a = Array::new(st.config)?;
    for &d in &st.failed {
        a.fail(d)?;
    }
    if !st.recovering.is_empty() {
        a.start_recovery(&st.recovering)?;
        a.restore_rebuilt(st.recovered_rows, &st.rebuilt_runs);
    }
    Ok(a)
}

/// Open the array's directory itself (the lock's object): a directory
/// cannot be deleted and recreated under a live holder the way a lock file
/// can, and there is no file left behind to block anyone after a crash.
/// Rust opens with O_CLOEXEC, so a child that execs drops the descriptor.
fn open_dir_for_lock(dir: &Path) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY)
        .open(dir)
        .map_err(|e| Error::io(dir.display().to_string(), e))
}

/// Take the array's lock (flock on its directory, held by this open file
/// description until it is closed), or say who holds it.
fn take_lock(dir: &Path) -> Result<File> {
    let f = open_dir_for_lock(dir)?;
    // Between a fork and its exec a child shares our descriptor (O_CLOEXEC
    // closes it only at the exec), so a lock released a moment ago may still
    // be held for a few milliseconds by such a child: wait that long. A lock
    // still held after a second belongs to a live process.
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        match f.try_lock() {
            Ok(()) => return Ok(f),
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => {
                return Err(Error::config(format!(
                    "{}: the array is open in another process (a server? see {})",
                    dir.display(),
                    dir.join(control::SERVE_FILE).display()
                )))
            }
        }
    }
}

/// Whether another process (or another open here) holds the array open.
pub fn is_open_elsewhere(dir: &Path) -> bool {
    match open_dir_for_lock(dir) {
        Ok(f) => f.try_lock_shared().is_err(),
        Err(_) => false,
    }
}

impl RealArray {
    /// Make a new array of member files in `dir` (created if missing).
    pub fn create(dir: &Path, cfg: ArrayConfig, checksums: bool) -> Result<Status> {
        cfg.validate()?;
        state::check_sizes(&cfg).map_err(|(_, m)| Error::config(m))?;
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
        let uuid = identity::new_uuid();
        for d in 0..cfg.disks {
            let id = identity::Identity {
                uuid,
                role: d,
                events: 0,
            };
            Member::create(dir, cfg.disk_bytes, checksums, cfg.block_size, &id).map_err(|e| Error::io(&shown, e))?;
        }
        File::create(journal::journal_path(dir)).map_err(|e| Error::io(&shown, e))?;
        let bm_rows = bitmap::region_rows(rows, cfg.chunk_bytes);
        let st = State {
            format: state::FORMAT,
            uuid: identity::uuid_text(uuid),
            config: cfg,
            checksums,
            failed: vec![],
            recovering: vec![],
            recovered_rows: 0,
            rebuilt_runs: vec![],
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
        let uuid = identity::parse_uuid(&st.uuid).ok_or_else(|| {
            Error::parse(
                state::state_path(dir).display().to_string(),
                crate::error::Location::Whole,
                "uuid",
                "not 32 hex digits",
            )
        })?;
        // Assemble by identity: files back under their roles' names,
        // foreign ones refused, stale members found.
        let mut recovery = Recovery::default();
        let present: Vec<u32> = (0..cfg.disks)
            .filter(|d| !st.failed.contains(d) || st.recovering.contains(d))
            .collect();
        let failed_slots: Vec<u32> = (0..cfg.disks).filter(|d| !present.contains(d)).collect();
        let asm = identity::assemble(
            dir,
            uuid,
            cfg.disks,
            st.generation,
            &present,
            &failed_slots,
            cfg.disk_bytes,
            cfg.block_size,
            st.checksums,
        )?;
        recovery.reassembled = asm.moved;
        // Members whose image is gone are failed (MD starts degraded);
        // stale ones too (MD kicks a non-fresh member).
        for &d in &present {
            if asm.stale.contains(&d) {
                recovery.stale_members.push(d);
            } else if !members::member_path(dir, d).exists() {
                recovery.missing_members.push(d);
            }
        }
        let lost: Vec<u32> = recovery
            .missing_members
            .iter()
            .chain(&recovery.stale_members)
            .copied()
            .collect();
        for &d in &lost {
            if !st.failed.contains(&d) {
                st.failed.push(d);
            }
        }
        st.failed.sort_unstable();
        st.recovering.retain(|d| !lost.contains(d));
        if !lost.is_empty() && st.recovering.is_empty() {
            st.recovered_rows = 0;
            st.rebuilt_runs.clear();
        }
        let array = array_of(&st)?;
        let durable = array.rebuilt_map().clone();
        let mut direct = false;
        let mut mem: Vec<Option<Member>> = Vec::new();
        let mut recovering = vec![false; cfg.disks as usize];
        for &d in &st.recovering {
            recovering[d as usize] = true;
        }
        for d in 0..cfg.disks {
            let usable = !array.is_failed(d) || recovering[d as usize];
            if usable {
                let shown_member = members::member_path(dir, d).display().to_string();
                let had_sums = members::sums_path(dir, d).exists();
                let m = Member::open(dir, d, st.checksums, opts.direct).map_err(|e| Error::io(&shown_member, e))?;
                if st.checksums && !had_sums {
                    let id = identity::Identity {
                        uuid,
                        role: d,
                        events: st.generation,
                    };
                    m.write_sums_identity(&id, cfg.disk_bytes, cfg.block_size)
                        .map_err(|e| Error::io(&shown_member, e))?;
                }
                direct |= m.direct;
                mem.push(Some(m));
            } else {
                mem.push(None);
            }
        }
        let bm_bits = hex_to_bits(&st.bitmap, member_rows.div_ceil(st.bitmap_rows).max(1) as usize)?;
        let bitmap = Bitmap::new(st.bitmap_rows, member_rows, bm_bits);
        // Dirty degraded (MD's raid5_run): a member lost now while rows are
        // dirty leaves their parity untrustworthy for reconstructing it.
        let (doubtful, data_lost) = dirty_degraded_units(&array, &bitmap, member_rows, &lost);
        if !doubtful.is_empty() {
            if data_lost && !opts.start_dirty_degraded {
                return Err(Error::config(format!(
                    "{shown}: dirty degraded array: member(s) {lost:?} {} while {} bitmap region(s) are dirty \
                     (a crash during writes), so the parity of those rows cannot rebuild them; put the member \
                     back, or start with --start-dirty-degraded (their lost units then read as errors)",
                    if recovery.stale_members.is_empty() {
                        "missing"
                    } else {
                        "missing or stale"
                    },
                    bitmap.dirty().len()
                )));
            }
            recovery.dirty_degraded_rows = row_runs(doubtful.iter().map(|r| r.block / array.chunk_blocks()));
            st.bad_blocks.extend(doubtful);
            rebuild::merge_ranges(&mut st.bad_blocks);
        }
        let member_blocks = cfg.disk_bytes / bs as u64;
        let journal = Journal::open(dir, bs, cfg.disks as u64 * member_blocks).map_err(|e| Error::io(&shown, e))?;
        let journal_shown = journal::journal_path(dir).display().to_string();
        journal.check_places(&journal_shown, cfg.disks, member_blocks)?;
        let gather = (array.level().has_parity() && array.data_disks_per_stripe() > 1)
            .then(|| Gather::new(array.chunk_blocks() * array.data_disks_per_stripe() as u64, bs));
        let mut ra = RealArray {
            dir: dir.to_path_buf(),
            cfg,
            checksums: st.checksums,
            bs,
            capacity_blocks,
            member_rows,
            direct,
            live: RwLock::new(Live {
                array,
                members: mem,
                recovering,
            }),
            durable: Mutex::new(durable),
            membership: AtomicU64::new(0),
            array_version: AtomicU64::new(0),
            pending: Pending::default(),
            monitor: Monitor {
                on: AtomicBool::new(!st.recovering.is_empty()),
                ..Default::default()
            },
            rows: RowLocks::new(),
            bitmap: Mutex::new(bitmap),
            bad: Mutex::new(st.bad_blocks.clone()),
            truncation: Mutex::new(()),
            journal,
            gate: RwLock::new(()),
            generation: AtomicU64::new(st.generation),
            faults,
            stats: Stats::default(),
            gather,
            gather_wait: GATHER_WAIT,
            inflight: AtomicU64::new(0),
            last_user_ns: AtomicU64::new(0),
            epoch: Instant::now(),
            recovery,
            uuid,
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
        let records = self.journal.walk(io_err, |_, p, unit| {
            match live.members.get(p.disk as usize).and_then(|m| m.as_ref()) {
                Some(m) => m.write_blocks(p.block, unit, self.bs, &self.faults).map_err(io_err),
                None => Ok(()),
            }
        })?;
        let dirty = self.bitmap.lock().unwrap().dirty();
        let rows_per = self.bitmap.lock().unwrap().rows;
        let mut rep = ScrubReport::default();
        let doubtful = &self.recovery.dirty_degraded_rows;
        let lost_now: Vec<u32> = self
            .recovery
            .missing_members
            .iter()
            .chain(&self.recovery.stale_members)
            .copied()
            .collect();
        for &r in &dirty {
            for row in (r as u64 * rows_per)..((r as u64 + 1) * rows_per).min(self.member_rows) {
                // Started dirty and degraded: the row's parity is listed
                // unreadable, so nothing is recomputed; but its data units are
                // settled as resync settles them (a unit written at the crash
                // may hold new data with its old checksum, or the reverse).
                if doubtful.iter().any(|&(s, e)| (s..e).contains(&row)) {
                    self.settle_data_sums(&live, row)?;
                    continue;
                }
                // The same where the row's only parity was lost at this
                // open (RAID-4/5's parity member, or both of RAID-6's):
                // no parity can rebuild a torn unit, and no journal wrote
                // it (the crash came while the row was whole).
                let parity = live.array.stripe_map(row).parity();
                if parity.iter().all(|&p| live.array.is_failed(p)) && parity.iter().any(|p| lost_now.contains(p)) {
                    self.settle_data_sums(&live, row)?;
                }
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
        let needs_save =
            bm.any_dirty() || !self.recovery.missing_members.is_empty() || !self.recovery.stale_members.is_empty();
        bm.clear_all();
        if needs_save {
            self.persist(&live, &bm)?;
        }
        Ok((records, dirty.len() as u64, rep))
    }

    /// Trust the data of `row`'s surviving data units, as resync does:
    /// rewrite the checksum of every block whose checksum does not match.
    /// (The row's parity is doubtful and listed; it is left alone.)
    fn settle_data_sums(&self, live: &Live, row: u64) -> std::result::Result<(), ReqError> {
        if !self.checksums {
            return Ok(());
        }
        let cb = live.array.chunk_blocks();
        let parity = live.array.stripe_map(row).parity();
        let block = row * cb;
        let mut buf = crate::exec::buf::AlignedBuf::scratch(cb as usize * self.bs);
        for (d, m) in live.members.iter().enumerate() {
            let Some(m) = m else { continue };
            if parity.contains(&(d as u32)) || live.array.is_failed(d as u32) {
                continue;
            }
            let mut states = m.read_blocks(block, &mut buf, self.bs);
            m.check_sums(block, &buf, self.bs, &mut states);
            for (i, st) in states.iter().enumerate() {
                if *st == members::BlockState::BadSum {
                    let data = &buf[i * self.bs..(i + 1) * self.bs];
                    m.write_sums(block + i as u64, data, self.bs, &self.faults)
                        .map_err(io_err)?;
                }
            }
        }
        Ok(())
    }

    fn env<'a>(&'a self, live: &'a Live, bad: &'a [BadRange]) -> Env<'a> {
        Env {
            array: &live.array,
            members: &live.members,
            bs: self.bs,
            bad,
            checksums: self.checksums,
            parallel: self.inflight.load(Ordering::Relaxed) <= 1,
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The array's UUID (in every member's identity block).
    pub fn uuid(&self) -> u128 {
        self.uuid
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

    /// Whether the member images are open with O_DIRECT.
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    pub fn member_rows(&self) -> u64 {
        self.member_rows
    }

    /// How many times the array model changed since open (see [`Self::array_model`]).
    pub fn array_version(&self) -> u64 {
        self.array_version.load(Ordering::SeqCst)
    }

    /// The array model now (failed and recovering members, rebuilt rows)
    /// and its version: what fault-aware caches in front must see.
    pub fn array_model(&self) -> (u64, Array) {
        let live = self.live.read().unwrap();
        (self.array_version.load(Ordering::SeqCst), live.array.clone())
    }

    fn array_changed(&self) {
        self.array_version.fetch_add(1, Ordering::SeqCst);
    }

    /// The state file's contents for the current state.
    fn state_of(&self, live: &Live, bm: &Bitmap) -> State {
        let a = &live.array;
        let (recovered_rows, rebuilt_runs) = if a.recovering().is_empty() {
            (0, vec![])
        } else {
            let d = self.durable.lock().unwrap();
            (d.prefix(), d.runs())
        };
        State {
            format: state::FORMAT,
            uuid: identity::uuid_text(self.uuid),
            config: self.cfg,
            checksums: self.checksums,
            failed: a.failed().to_vec(),
            recovering: a.recovering(),
            recovered_rows,
            rebuilt_runs,
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
        // The members first: a crash in between leaves them one generation
        // ahead (accepted), never behind (stale).
        for (d, m) in live.members.iter().enumerate() {
            if let Some(m) = m {
                m.write_identity(&self.identity_of(d as u32, st.generation), self.cfg.disk_bytes)
                    .map_err(io_err)?;
            }
        }
        st.save(&self.dir).map_err(io_err)
    }

    /// Member `role`'s identity at generation `events`.
    fn identity_of(&self, role: u32, events: u64) -> identity::Identity {
        identity::Identity {
            uuid: self.uuid,
            role,
            events,
        }
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

    /// Whether writes to any of member rows `rows` must be journaled: a
    /// member is failed there according to the state on disk.
    fn durably_degraded(&self, live: &Live, rows: &[u64]) -> bool {
        let a = &live.array;
        if a.failed().is_empty() {
            return false;
        }
        let durable = self.durable.lock().unwrap();
        rows.iter().any(|&row| {
            a.failed()
                .iter()
                .any(|&d| !(live.recovering[d as usize] && durable.is_rebuilt(row)))
        })
    }
}

/// Dirty degraded: the parity units to list unreadable so that nothing is
/// reconstructed from them, and whether a lost unit holds data (then MD
/// refuses to start). Nothing when nothing was lost now or the level has no
/// parity (a mirror's copy is what it is). Rows where the lost members hold
/// only parity (RAID-4's parity disk, MD's `dirty_parity_disks`) lose no
/// data, but their surviving parity is doubtful too (a resync cannot run on
/// a degraded row): it is listed, which does not refuse the start.
fn dirty_degraded_units(array: &Array, bitmap: &Bitmap, member_rows: u64, lost: &[u32]) -> (Vec<BadRange>, bool) {
    let mut out = Vec::new();
    let mut data_lost = false;
    if lost.is_empty() || !array.level().has_parity() {
        return (out, false);
    }
    let cb = array.chunk_blocks();
    for region in bitmap.dirty() {
        let rows = (region as u64 * bitmap.rows)..((region as u64 + 1) * bitmap.rows).min(member_rows);
        for row in rows {
            let parity = array.stripe_map(row).parity();
            data_lost |= !lost.iter().all(|d| parity.contains(d));
            for p in parity {
                if !array.is_failed(p) {
                    out.push(BadRange {
                        disk: p,
                        block: row * cb,
                        blocks: cb,
                    });
                }
            }
        }
    }
    (out, data_lost)
}

/// Runs `[start, end)` of the ascending-or-not `rows`.
fn row_runs(rows: impl Iterator<Item = u64>) -> Vec<(u64, u64)> {
    let set: BTreeSet<u64> = rows.collect();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for r in set {
        match out.last_mut() {
            Some((_, e)) if *e == r => *e = r + 1,
            _ => out.push((r, r + 1)),
        }
    }
    out
}
