//! The I/O a stack's decisions produce, run outside the stack's mutex.
//!
//! A request's decision (under the mutex, in arrival order: a counted run's)
//! names block contents and the member I/O that moves them; it does not wait
//! for that I/O. Each piece of I/O is a [`Job`] recorded when the decision
//! makes it, and run afterwards by the request's own thread, outside the
//! mutex. Three things keep the bytes those of the one-at-a-time run:
//!
//! * **Contents on the way.** A store, a request's frame or a staged
//!   destage holds a [`Content`]: the bytes, or a cell that the job reading
//!   them fills. A hit on a block whose fill is still in flight takes the
//!   cell, and its reply waits for it.
//! * **A table of what is in flight** ([`InFlight`]): for every array block
//!   and every tier frame, the last job recorded on it. A new job on that
//!   block or frame waits for it first, so the I/O of one block (or frame)
//!   happens in decision order: a miss that follows a destage reads the
//!   destaged bytes, a frame is read out before it is reused.
//! * **FLUSH drains the table**: it waits, holding the mutex, until every job
//!   recorded before it is done, then destages and flushes.
//!
//! * **A write that failed is not forgotten.** The blocks (or frames) of
//!   an array or tier write that failed are *lost* until a later write of
//!   them lands: a read ordered after it gets EIO, not the bytes from before
//!   it (a destage of an evicted block failed: its newest bytes are nowhere).
//!   The next FLUSH reports the failure (EIO), once, as `fsync` would.
//!   The tier's journal is never committed from a lost key (`tier_store.rs`):
//!   a dirty block whose frame is lost fails every FLUSH until it is written
//!   again; a block whose destage was lost keeps its committed record.
//!
//! Jobs never wait for a job recorded after them, and a thread runs its jobs
//! in the order they were recorded, so the oldest unfinished job can always
//! run: no deadlock. A job that fails (or is dropped) still completes: its
//! cells get the error, its successors go on.

use std::sync::{Arc, Condvar, Mutex};

use rustc_hash::{FxHashMap, FxHashSet};

use super::blocks::Block;
use super::tier_store::TierFile;
use super::{RealArray, ReqError};

/// A value set once, waited for by any number of threads.
pub struct Cell<T> {
    value: Mutex<Option<T>>,
    set: Condvar,
}

impl<T: Clone> Cell<T> {
    pub fn new() -> Arc<Self> {
        Arc::new(Cell {
            value: Mutex::new(None),
            set: Condvar::new(),
        })
    }

    /// Set the value, unless it is set already.
    fn set(&self, v: T) {
        let mut g = self.value.lock().unwrap_or_else(|e| e.into_inner());
        if g.is_none() {
            *g = Some(v);
            self.set.notify_all();
        }
    }

    /// The value, if set.
    fn peek(&self) -> Option<T> {
        self.value.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The value, once set.
    pub fn wait(&self) -> T {
        let mut g = self.value.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(v) = &*g {
                return v.clone();
            }
            g = self.set.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// A block's contents once a job brought them (or why it could not).
pub type OnTheWay = Arc<Cell<Result<Block, ReqError>>>;

/// The contents of a block as a store or a frame holds them.
#[derive(Clone)]
pub enum Content {
    Ready(Block),
    Coming(OnTheWay),
}

impl Content {
    /// The bytes (waiting for them if they are on the way).
    pub fn wait(&self) -> Result<Block, ReqError> {
        match self {
            Content::Ready(b) => Ok(b.clone()),
            Content::Coming(c) => c.wait(),
        }
    }

    /// Bytes that arrived become the bytes themselves (a store's block:
    /// later hits on it then share them without looking at the cell).
    pub fn settle(&mut self) {
        if let Content::Coming(c) = self {
            if let Some(Ok(b)) = c.peek() {
                *self = Content::Ready(b);
            }
        }
    }
}

/// What a job's I/O is ordered on: a block of the array or a frame of the
/// tier's cache device.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Key {
    Array(u64),
    Frame(u64),
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Key::Array(b) => write!(f, "array block {b}"),
            Key::Frame(n) => write!(f, "tier frame {n}"),
        }
    }
}

/// The keys a job touches: `n` consecutive ones from `first`.
#[derive(Clone, Copy)]
struct Keys {
    first: Key,
    n: u64,
}

impl Keys {
    fn iter(self) -> impl Iterator<Item = Key> {
        (0..self.n).map(move |i| match self.first {
            Key::Array(b) => Key::Array(b + i),
            Key::Frame(f) => Key::Frame(f + i),
        })
    }
}

type Done = Cell<()>;

#[derive(Default)]
struct Table {
    /// The last job recorded on each key, until it is done.
    last: FxHashMap<Key, Arc<Done>>,
    /// Jobs recorded and not done.
    running: usize,
    /// Keys whose last write failed (their newest contents are nowhere).
    lost: FxHashSet<Key>,
    /// The first write that failed since the last FLUSH reported one.
    failed_write: Option<String>,
}

/// The table of I/O in flight (see the module comment).
#[derive(Default)]
pub struct InFlight {
    table: Mutex<Table>,
    idle: Condvar,
}

impl InFlight {
    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A job on `keys` is recorded (under the stack's mutex): the jobs it
    /// must follow; it is the last on each key now.
    fn order(&self, keys: Option<Keys>, done: &Arc<Done>) -> Vec<Arc<Done>> {
        let mut t = self.lock();
        t.running += 1;
        let mut after: Vec<Arc<Done>> = Vec::new();
        for k in keys.into_iter().flat_map(Keys::iter) {
            if let Some(p) = t.last.insert(k, done.clone()) {
                if !after.last().is_some_and(|l| Arc::ptr_eq(l, &p)) {
                    after.push(p);
                }
            }
        }
        after
    }

    /// A job is done: keys it is still the last on are free again.
    fn finished(&self, keys: Option<Keys>, done: &Arc<Done>) {
        let mut t = self.lock();
        for k in keys.into_iter().flat_map(Keys::iter) {
            if t.last.get(&k).is_some_and(|d| Arc::ptr_eq(d, done)) {
                t.last.remove(&k);
            }
        }
        t.running -= 1;
        if t.running == 0 {
            self.idle.notify_all();
        }
    }

    /// A job ran: a write that failed loses its keys (and is remembered for
    /// the next FLUSH), one that landed makes them readable again.
    fn ran(&self, work: &Work, r: &Result<(), ReqError>) {
        if !matches!(work, Work::ArrayWrite { .. } | Work::TierWrite { .. }) {
            return;
        }
        let mut t = self.lock();
        for k in work.keys().into_iter().flat_map(Keys::iter) {
            match r {
                Ok(()) => t.lost.remove(&k),
                Err(_) => t.lost.insert(k),
            };
        }
        if let Err(e) = r {
            t.failed_write.get_or_insert_with(|| e.to_string());
        }
    }

    /// The first key of `keys` whose last write failed.
    fn lost_in(&self, keys: Option<Keys>) -> Option<Key> {
        let t = self.lock();
        keys.into_iter().flat_map(Keys::iter).find(|k| t.lost.contains(k))
    }

    /// Whether the last write of `key` failed (its newest contents are
    /// nowhere): a FLUSH must not commit the tier's journal from it.
    pub fn is_lost(&self, key: Key) -> bool {
        self.lock().lost.contains(&key)
    }

    /// The write that failed since the last FLUSH reported one (a FLUSH:
    /// reported once).
    pub fn take_failed_write(&self) -> Option<String> {
        self.lock().failed_write.take()
    }

    /// Wait until every job recorded so far is done (a FLUSH).
    pub fn drain(&self) {
        let mut t = self.lock();
        while t.running > 0 {
            t = self.idle.wait(t).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Jobs recorded and not done (tests).
    pub fn running(&self) -> usize {
        self.lock().running
    }
}

/// The I/O of a job.
pub enum Work {
    /// Blocks `first..first + into.len()` of the array, each into its cell
    /// (None: the frame takes a staged copy instead, read all the same).
    /// `ahead`: a read ahead of a request, which no request waits for: an
    /// error goes to its cells only (a later hit on them gets it).
    ArrayRead {
        array: Arc<RealArray>,
        first: u64,
        into: Vec<Option<OnTheWay>>,
        ahead: bool,
    },
    /// `from` to blocks `first..` of the array.
    ArrayWrite {
        array: Arc<RealArray>,
        first: u64,
        from: Vec<Content>,
    },
    /// A frame of the tier's cache device into a cell.
    TierRead {
        file: Arc<TierFile>,
        frame: u64,
        into: OnTheWay,
    },
    /// A block's contents into a frame of the tier's cache device.
    TierWrite {
        file: Arc<TierFile>,
        frame: u64,
        from: Content,
    },
    /// A write of part of a block: its newest contents with `patch` (None:
    /// zeroes) over bytes `at..at + len`.
    Merge {
        from: Content,
        at: usize,
        len: usize,
        patch: Option<Box<[u8]>>,
        into: OnTheWay,
    },
}

impl Work {
    fn keys(&self) -> Option<Keys> {
        let (first, n) = match self {
            Work::ArrayRead { first, into, .. } => (Key::Array(*first), into.len() as u64),
            Work::ArrayWrite { first, from, .. } => (Key::Array(*first), from.len() as u64),
            Work::TierRead { frame, .. } | Work::TierWrite { frame, .. } => (Key::Frame(*frame), 1),
            Work::Merge { .. } => return None,
        };
        Some(Keys { first, n })
    }

    /// The cells this job fills.
    fn outputs(&self) -> Vec<&OnTheWay> {
        match self {
            Work::ArrayRead { into, .. } => into.iter().flatten().collect(),
            Work::TierRead { into, .. } | Work::Merge { into, .. } => vec![into],
            Work::ArrayWrite { .. } | Work::TierWrite { .. } => Vec::new(),
        }
    }

    fn run(&self) -> Result<(), ReqError> {
        let shown = |a: &RealArray, e: ReqError| match e {
            ReqError::Io(m) => ReqError::Io(format!("{}: {m}", a.dir().display())),
            other => other,
        };
        match self {
            Work::ArrayRead {
                array,
                first,
                into,
                ahead,
            } => {
                let bs = array.block_size();
                let mut buf = vec![0u8; into.len() * bs];
                let r = array.read(first * bs as u64, &mut buf).map_err(|e| shown(array, e));
                for (i, c) in into.iter().enumerate() {
                    if let Some(c) = c {
                        c.set(r.clone().map(|_| Block::from(&buf[i * bs..(i + 1) * bs])));
                    }
                }
                if *ahead {
                    return Ok(());
                }
                r
            }
            Work::ArrayWrite { array, first, from } => {
                let bs = array.block_size();
                let mut buf = Vec::with_capacity(from.len() * bs);
                for c in from {
                    buf.extend_from_slice(&c.wait()?);
                }
                array.write(first * bs as u64, &buf, false).map_err(|e| shown(array, e))
            }
            Work::TierRead { file, frame, into } => {
                let r = file
                    .read(*frame)
                    .map(Block::from)
                    .map_err(|e| ReqError::Io(e.to_string()));
                into.set(r.clone());
                r.map(|_| ())
            }
            Work::TierWrite { file, frame, from } => {
                let c = from.wait()?;
                file.write(*frame, &c).map_err(|e| ReqError::Io(e.to_string()))
            }
            Work::Merge {
                from,
                at,
                len,
                patch,
                into,
            } => {
                let r = from.wait().map(|old| {
                    let mut c = Box::<[u8]>::from(&old[..]);
                    match patch {
                        Some(p) => c[*at..at + len].copy_from_slice(p),
                        None => c[*at..at + len].fill(0),
                    }
                    Block::from(c)
                });
                into.set(r.clone());
                r.map(|_| ())
            }
        }
    }
}

/// One piece of I/O a decision made, with the jobs it must follow.
pub struct Job {
    work: Work,
    after: Vec<Arc<Done>>,
    done: Arc<Done>,
    table: Arc<InFlight>,
}

impl Job {
    /// Record `work` in `table` (under the stack's mutex, when the decision
    /// makes it).
    pub fn record(table: &Arc<InFlight>, work: Work) -> Job {
        let done = Cell::new();
        let after = table.order(work.keys(), &done);
        Job {
            work,
            after,
            done,
            table: table.clone(),
        }
    }

    /// Wait for the jobs before it on its keys, then do the I/O.
    pub fn run(self) -> Result<(), ReqError> {
        for p in &self.after {
            p.wait();
        }
        if matches!(self.work, Work::ArrayRead { .. } | Work::TierRead { .. }) {
            if let Some(k) = self.table.lost_in(self.work.keys()) {
                // Dropped here: its cells get this error.
                let e = ReqError::Io(format!("{k}: its last write failed, its newest contents are lost"));
                for c in self.work.outputs() {
                    c.set(Err(e.clone()));
                }
                return Err(e);
            }
        }
        let r = self.work.run();
        self.table.ran(&self.work, &r);
        r
        // Dropped here: done.
    }
}

impl Drop for Job {
    /// Done, whatever happened: cells not filled get an error (never
    /// zeroes), and the jobs after it go on.
    fn drop(&mut self) {
        for c in self.work.outputs() {
            c.set(Err(ReqError::Io("internal: I/O dropped before it ran".into())));
        }
        self.done.set(());
        self.table.finished(self.work.keys(), &self.done);
    }
}

/// Run a request's jobs in order (every one, even after an error); the first error.
pub fn run_all(jobs: Vec<Job>) -> Result<(), ReqError> {
    let mut first = Ok(());
    for j in jobs {
        if let Err(e) = j.run() {
            if first.is_ok() {
                first = Err(e);
            }
        }
    }
    first
}
