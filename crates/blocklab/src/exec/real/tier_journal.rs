//! The SSD tier's journal of dirty blocks (`DIR/tier.log`): what makes a
//! write-back tier on real bytes crash-consistent.
//!
//! A FLUSH commits the tier's dirty state: after the layers destaged what
//! a FLUSH destages and the array is durable, one append of records —
//! the *contents* of every block that became dirty (or was re-written)
//! since the last commit, a tombstone for every committed block that is no
//! longer dirty (its destage reached the array, durable now) — then a
//! commit record, then fsync. The journal carries contents, not only
//! (frame → block): a frame freed by an eviction is reused at once by the
//! tier's own allocator (the counted decisions), so a frame named by the
//! last commit may hold another block's bytes by the time of a crash.
//!
//! On open, the committed dirty blocks are written back to the array (and
//! the array flushed), then the journal starts afresh; the tier starts
//! empty, as the counted stack does. Records after the last valid commit
//! (a torn append, garbage, a crafted record whose checksum or sequence does
//! not match, a block past the array) end the replay: what they name is
//! lost for the cache, never returned as contents. When the journal has
//! grown past a bound set by the tier's size, a commit writes a fresh one
//! (the dirty blocks only) beside it and renames it over.
//!
//! Format: a 40-byte header (magic, block size, frames, the array's UUID,
//! checksum: a journal put in another array's directory, even of the same
//! geometry, is refused, never written back there), then records of a 24-byte head (kind, checksum, block, commit sequence) and,
//! for a dirty block, its contents.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use rustc_hash::{FxHashMap, FxHashSet};

use super::members::write_all_at;
use super::RealArray;
use crate::error::{Error, Result};

pub const JOURNAL_FILE: &str = "tier.log";
const MAGIC: &[u8; 8] = b"BLTIERJ1";
/// The header's length.
const HEADER: usize = 40;
/// A record head's length.
const HEAD: usize = 24;
const DIRTY: u8 = 1;
const CLEAN: u8 = 2;
const COMMIT: u8 = 3;

pub fn journal_path(dir: &Path) -> PathBuf {
    dir.join(JOURNAL_FILE)
}

fn header(bs: u32, frames: u64, uuid: u128) -> [u8; HEADER] {
    let mut h = [0u8; HEADER];
    h[..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&bs.to_le_bytes());
    h[12..20].copy_from_slice(&frames.to_le_bytes());
    h[20..36].copy_from_slice(&uuid.to_le_bytes());
    let c = crc32fast::hash(&h[..36]);
    h[36..].copy_from_slice(&c.to_le_bytes());
    h
}

fn record_sum(kind: u8, block: u64, seq: u64, data: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&[kind]);
    h.update(&block.to_le_bytes());
    h.update(&seq.to_le_bytes());
    h.update(data);
    h.finalize()
}

fn record(out: &mut Vec<u8>, kind: u8, block: u64, seq: u64, data: &[u8]) {
    out.push(kind);
    out.extend_from_slice(&[0u8; 3]);
    out.extend_from_slice(&record_sum(kind, block, seq, data).to_le_bytes());
    out.extend_from_slice(&block.to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(data);
}

/// Write a fresh journal (a header, then `body`) at `path`, durably.
fn write_fresh(path: &Path, bs: u32, frames: u64, uuid: u128, body: &[u8]) -> std::io::Result<File> {
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)?;
    f.write_all(&header(bs, frames, uuid))?;
    f.write_all(body)?;
    f.sync_all()?;
    Ok(f)
}

/// Replace the journal at `path` by a fresh one holding `body`: written
/// beside it, then renamed over it (a crash leaves one or the other).
fn replace_fresh(path: &Path, bs: u32, frames: u64, uuid: u128, body: &[u8]) -> std::io::Result<File> {
    let tmp = path.with_extension("log.new");
    let f = write_fresh(&tmp, bs, frames, uuid, body)?;
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        File::open(dir)?.sync_all()?;
    }
    Ok(f)
}

/// Lay out an empty journal of the array `uuid`.
pub fn create(dir: &Path, bs: u64, frames: u64, uuid: u128) -> Result<()> {
    let p = journal_path(dir);
    write_fresh(&p, bs as u32, frames, uuid, &[]).map_err(|e| Error::io(p.display().to_string(), e))?;
    Ok(())
}

/// What replaying a journal found: the committed dirty blocks and where
/// their contents are in the file.
#[derive(Debug, Default)]
pub struct Replay {
    pub dirty: FxHashMap<u64, u64>,
    pub commits: u64,
    /// Bytes after the last valid commit (a torn or bad tail), ignored.
    pub ignored_bytes: u64,
}

/// Replay the journal `f` of `len` bytes (blocks of `bs`, the array `uuid`
/// of `capacity` blocks).
fn replay(f: &File, len: u64, bs: usize, frames: u64, uuid: u128, capacity: u64, shown: &str) -> Result<Replay> {
    let mut h = [0u8; HEADER];
    if len < HEADER as u64 || f.read_exact_at(&mut h, 0).is_err() || h != header(bs as u32, frames, uuid) {
        return Err(Error::config(format!(
            "{shown}: not a journal of this tier ({frames} frames of {bs} B, array {}): refusing to guess which blocks it holds",
            super::identity::uuid_text(uuid)
        )));
    }
    let mut out = Replay::default();
    let mut pending: Vec<(u8, u64, u64)> = Vec::new();
    let mut at = HEADER as u64;
    let mut committed_end = at;
    let mut data = vec![0u8; bs];
    loop {
        let mut r = [0u8; HEAD];
        if at + HEAD as u64 > len || f.read_exact_at(&mut r, at).is_err() {
            break;
        }
        let kind = r[0];
        let sum = u32::from_le_bytes(r[4..8].try_into().unwrap());
        let block = u64::from_le_bytes(r[8..16].try_into().unwrap());
        let seq = u64::from_le_bytes(r[16..24].try_into().unwrap());
        let body = if kind == DIRTY { bs } else { 0 };
        if !matches!(kind, DIRTY | CLEAN | COMMIT) || seq != out.commits + 1 || at + (HEAD + body) as u64 > len {
            break;
        }
        if body > 0 && f.read_exact_at(&mut data, at + HEAD as u64).is_err() {
            break;
        }
        if record_sum(kind, block, seq, &data[..body]) != sum {
            break;
        }
        if kind != COMMIT && block >= capacity {
            break; // crafted: a block past the array
        }
        match kind {
            COMMIT => {
                for (k, b, off) in pending.drain(..) {
                    if k == DIRTY {
                        out.dirty.insert(b, off);
                    } else {
                        out.dirty.remove(&b);
                    }
                }
                out.commits += 1;
                committed_end = at + HEAD as u64;
            }
            k => pending.push((k, block, at + HEAD as u64)),
        }
        at += (HEAD + body) as u64;
    }
    out.ignored_bytes = len - committed_end;
    Ok(out)
}

/// Write back to `array` the committed dirty blocks of a journal in `dir`
/// that no tier of the stack file claims (the `[tier]` was removed after
/// create, or the stack file), whatever frames its header names, and leave
/// it empty: removing a tier cleans it first, as `lvconvert --uncache` and
/// bcache's detach do. Returns the blocks written back (0 without a journal).
pub fn recover_orphan(dir: &Path, array: &RealArray) -> Result<u64> {
    let p = journal_path(dir);
    let mut h = [0u8; HEADER];
    match File::open(&p) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(Error::io(p.display().to_string(), e)),
        // A short or foreign header is refused by the replay, naming the file.
        Ok(f) => drop(f.read_exact_at(&mut h, 0)),
    }
    // The tier's blocks are the array's; only its frames are read here.
    let frames = u64::from_le_bytes(h[12..20].try_into().unwrap());
    TierJournal::open_and_recover(dir, array.block_size(), frames, array).map(|(_, n)| n)
}

/// The journal of a tier being served.
pub struct TierJournal {
    dir: PathBuf,
    file: File,
    shown: String,
    bs: usize,
    frames: u64,
    uuid: u128,
    len: u64,
    seq: u64,
    /// Blocks dirty at the last commit.
    committed: FxHashSet<u64>,
    /// Blocks whose contents changed in the tier since the last commit.
    written: FxHashSet<u64>,
}

impl TierJournal {
    /// Open the journal of `dir`, write back to `array` the dirty blocks its
    /// commits name, and start it afresh. Returns it and the blocks written back.
    pub fn open_and_recover(dir: &Path, bs: usize, frames: u64, array: &RealArray) -> Result<(TierJournal, u64)> {
        let p = journal_path(dir);
        let shown = p.display().to_string();
        let io = |e| Error::io(&shown, e);
        let file = OpenOptions::new().read(true).write(true).open(&p).map_err(|e| {
            io(std::io::Error::new(
                e.kind(),
                format!("{e} (the stack's [tier] needs its journal, laid out by `real create --stack`)"),
            ))
        })?;
        let len = file.metadata().map_err(io)?.len();
        let capacity = array.size_bytes() / bs as u64;
        let r = replay(&file, len, bs, frames, array.uuid(), capacity, &shown)?;
        let mut blocks: Vec<(u64, u64)> = r.dirty.into_iter().collect();
        blocks.sort_unstable();
        let mut buf = vec![0u8; bs];
        let shown_array = array.dir().display().to_string();
        for &(b, off) in &blocks {
            file.read_exact_at(&mut buf, off).map_err(io)?;
            array
                .write(b * bs as u64, &buf, false)
                .map_err(|e| Error::config(format!("{shown_array}: writing back block {b} of {shown}: {e}")))?;
        }
        if !blocks.is_empty() {
            array
                .flush()
                .map_err(|e| Error::config(format!("{shown_array}: flush after the tier's write-back: {e}")))?;
        }
        let file = replace_fresh(&p, bs as u32, frames, array.uuid(), &[]).map_err(io)?;
        Ok((
            TierJournal {
                dir: dir.to_path_buf(),
                file,
                shown,
                bs,
                frames,
                uuid: array.uuid(),
                len: HEADER as u64,
                seq: 0,
                committed: FxHashSet::default(),
                written: FxHashSet::default(),
            },
            blocks.len() as u64,
        ))
    }

    /// The tier stored new contents of `block`.
    pub fn written(&mut self, block: u64) {
        self.written.insert(block);
    }

    /// The tier no longer holds `block`.
    pub fn dropped(&mut self, block: u64) {
        self.written.remove(&block);
    }

    /// When a commit writes a fresh journal instead of appending.
    fn bound(&self) -> u64 {
        2 * self.frames.saturating_mul((self.bs + HEAD) as u64) + (1 << 20)
    }

    /// Commit the tier's dirty blocks `dirty` (block, contents read by
    /// `read`); the array must be durable already (tombstones rely on it).
    /// A committed block no longer dirty whose destage failed
    /// (`destage_lost`) gets no tombstone: its record stays committed.
    pub fn commit(
        &mut self,
        dirty: &[u64],
        destage_lost: impl Fn(u64) -> bool,
        mut read: impl FnMut(u64) -> Result<Box<[u8]>>,
    ) -> Result<()> {
        let mut now: FxHashSet<u64> = dirty.iter().copied().collect();
        let mut gone: Vec<u64> = self.committed.difference(&now).copied().collect();
        gone.sort_unstable();
        let (kept, gone): (Vec<u64>, Vec<u64>) = gone.into_iter().partition(|&b| destage_lost(b));
        now.extend(&kept);
        // A fresh journal holds only the dirty blocks' records: not while
        // a kept record lives only in this one.
        let fresh = self.len > self.bound() && kept.is_empty();
        let seq = if fresh { 1 } else { self.seq + 1 };
        let mut body = Vec::new();
        for &b in dirty {
            if fresh || !self.committed.contains(&b) || self.written.contains(&b) {
                record(&mut body, DIRTY, b, seq, &read(b)?);
            }
        }
        if !fresh {
            for b in gone {
                record(&mut body, CLEAN, b, seq, &[]);
            }
        }
        if body.is_empty() && !fresh {
            self.written.clear();
            return Ok(());
        }
        record(&mut body, COMMIT, 0, seq, &[]);
        let io = |e| Error::io(&self.shown, e);
        if fresh {
            let f =
                replace_fresh(&journal_path(&self.dir), self.bs as u32, self.frames, self.uuid, &body).map_err(io)?;
            self.file = f;
            self.len = (HEADER + body.len()) as u64;
        } else {
            write_all_at(&self.file, &body, self.len).map_err(io)?;
            self.file.sync_data().map_err(io)?;
            self.len += body.len() as u64;
        }
        self.seq = seq;
        self.committed = now;
        self.written.clear();
        Ok(())
    }

    pub fn len_bytes(&self) -> u64 {
        self.len
    }
}
