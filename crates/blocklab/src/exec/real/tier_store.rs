//! The SSD tier's cache device on real bytes: a file (`DIR/tier.img`) of
//! frames, frame f at byte `f × block size`, addressed by the frame the
//! tier's own map chose (the data-path hooks' `slot`).
//!
//! The store mirrors the tier's map (block → frame) from the hooks, so that
//! a partial write finds a block's newest contents and NBD's allocation
//! query sees what the tier holds. The mirror starts empty on every open:
//! the file's contents from an earlier run are never returned: the dirty
//! blocks a crash left are found in the journal (`tier_journal.rs`) and
//! written back to the array before the stack serves.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::inflight::Key;
use super::members::write_all_at;
use super::tier_journal::TierJournal;
use crate::error::{Error, Result};
use crate::exec::buf::AlignedBuf;
use crate::stack::spec::StackSpec;

/// The cache device file in an array directory made with `real create --stack`.
pub const TIER_FILE: &str = "tier.img";

pub fn tier_path(dir: &Path) -> PathBuf {
    dir.join(TIER_FILE)
}

/// Lay out the cache device of `frames` blocks of `bs` bytes (sparse, all
/// zero) and the journal of the array `uuid`.
pub fn create(dir: &Path, frames: u64, bs: u64, uuid: u128) -> Result<()> {
    let p = tier_path(dir);
    let shown = p.display().to_string();
    let f = File::create(&p).map_err(|e| Error::io(&shown, e))?;
    f.set_len(frames * bs).map_err(|e| Error::io(&shown, e))?;
    f.sync_all().map_err(|e| Error::io(&shown, e))?;
    super::tier_journal::create(dir, bs, frames, uuid)
}

/// The cache device file: frames read and written by the jobs of the
/// stack's decisions (`inflight.rs`), outside the stack's mutex.
pub struct TierFile {
    file: File,
    shown: String,
    bs: usize,
    frames: u64,
    /// Tests: every frame write from now on lands torn (its first half)
    /// and fails, as a cache device's write error leaves a frame.
    #[cfg(test)]
    pub fail_writes: std::sync::atomic::AtomicBool,
}

/// The tier's frames in a file, and which block each holds now.
pub struct TierStore {
    file: Arc<TierFile>,
    /// Block → frame, as the tier's hooks said.
    map: FxHashMap<u64, u64>,
    /// Whether the file is open with O_DIRECT (`--direct`, where allowed).
    pub direct: bool,
    /// The journal of dirty blocks (what a FLUSH commits).
    journal: Option<TierJournal>,
}

impl TierStore {
    /// Open the cache device of `dir` for a tier of `frames` blocks of `bs`
    /// bytes; O_DIRECT when `direct` and the file system allows it.
    pub fn open(dir: &Path, frames: u64, bs: usize, direct: bool) -> Result<TierStore> {
        let p = tier_path(dir);
        let shown = p.display().to_string();
        let open = |flags: i32| OpenOptions::new().read(true).write(true).custom_flags(flags).open(&p);
        let (file, direct) = match direct.then(|| open(libc::O_DIRECT)) {
            Some(Ok(f)) => (f, true),
            _ => (
                open(0).map_err(|e| {
                    Error::io(
                        &shown,
                        std::io::Error::new(
                            e.kind(),
                            format!(
                                "{e} (the stack's [tier] needs its cache device, laid out by `real create --stack`)"
                            ),
                        ),
                    )
                })?,
                false,
            ),
        };
        let len = file.metadata().map_err(|e| Error::io(&shown, e))?.len();
        let want = frames * bs as u64;
        if len != want {
            return Err(Error::config(format!(
                "{shown}: {len} bytes, but tier.size of the stack file makes {want} ({frames} frames of {bs} B)"
            )));
        }
        Ok(TierStore {
            file: Arc::new(TierFile {
                file,
                shown,
                bs,
                frames,
                #[cfg(test)]
                fail_writes: Default::default(),
            }),
            map: FxHashMap::default(),
            direct,
            journal: None,
        })
    }

    /// Journal the dirty blocks in `journal` from now on.
    pub fn set_journal(&mut self, journal: TierJournal) {
        self.journal = Some(journal);
    }

    /// Commit the tier's dirty blocks `dirty` to the journal (after the
    /// array was made durable); `lost` says which blocks and frames lost
    /// their last write (`inflight.rs`).
    ///
    /// Never from a lost write: a dirty block whose frame write failed
    /// holds torn or stale bytes there, so nothing is committed and the
    /// FLUSH fails, every time, until a write of the block lands or the
    /// block leaves the tier (its destage then fails: see below) (the last
    /// commit stays: after a restart the block reads as a completed FLUSH
    /// left it). A committed block whose destage failed keeps its record
    /// (no tombstone: the array holds older bytes than the journal).
    pub fn commit(&mut self, dirty: &[u64], lost: impl Fn(Key) -> bool) -> Result<()> {
        for &b in dirty {
            if let Some(f) = self.frame_of(b).filter(|&f| lost(Key::Frame(f))) {
                return Err(Error::io(
                    &self.file.shown,
                    format!(
                        "the write of the tier's dirty block {b} to frame {f} failed: its contents are lost, \
                         the tier's journal is not committed until the block is written again"
                    ),
                ));
            }
        }
        let Some(mut j) = self.journal.take() else {
            return Ok(());
        };
        let r = j.commit(
            dirty,
            |b| lost(Key::Array(b)),
            |b| {
                let f = self.frame_of(b).ok_or_else(|| {
                    Error::config(format!(
                        "internal: the tier's dirty block {b} is in no frame (a data-path bug)"
                    ))
                })?;
                self.file.read(f)
            },
        );
        self.journal = Some(j);
        r
    }

    /// The cache device file (for the jobs that read and write its frames).
    pub fn file(&self) -> &Arc<TierFile> {
        &self.file
    }

    /// The frame holding `block`, if any.
    pub fn frame_of(&self, block: u64) -> Option<u64> {
        self.map.get(&block).copied()
    }
}

impl TierFile {
    fn check(&self, frame: u64) -> Result<u64> {
        if frame >= self.frames {
            return Err(Error::config(format!(
                "internal: frame {frame} past the cache device's {} (a data-path bug)",
                self.frames
            )));
        }
        Ok(frame * self.bs as u64)
    }

    /// The contents of `frame`.
    pub fn read(&self, frame: u64) -> Result<Box<[u8]>> {
        let at = self.check(frame)?;
        let mut buf = AlignedBuf::zeroed(self.bs);
        self.file
            .read_exact_at(&mut buf, at)
            .map_err(|e| Error::io(&self.shown, e))?;
        Ok(buf[..].into())
    }

    /// Store `bytes` (one block) in `frame`.
    pub fn write(&self, frame: u64, bytes: &[u8]) -> Result<()> {
        let at = self.check(frame)?;
        let mut buf = AlignedBuf::scratch(self.bs);
        buf.copy_from_slice(bytes);
        #[cfg(test)]
        if self.fail_writes.load(std::sync::atomic::Ordering::SeqCst) {
            let _ = self.file.write_all_at(&bytes[..self.bs / 2], at);
            let e = std::io::Error::other("injected cache device write error");
            return Err(Error::io(&self.shown, e));
        }
        write_all_at(&self.file, &buf, at).map_err(|e| Error::io(&self.shown, e))
    }
}

impl TierStore {
    /// `block` is in `frame` with new contents.
    pub fn set(&mut self, block: u64, frame: u64) {
        self.map.insert(block, frame);
        if let Some(j) = &mut self.journal {
            j.written(block);
        }
    }

    pub fn unset(&mut self, block: u64) {
        self.map.remove(&block);
        if let Some(j) = &mut self.journal {
            j.dropped(block);
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn blocks(&self) -> impl Iterator<Item = u64> + '_ {
        self.map.keys().copied()
    }
}

/// Refuse the `[tier]` keys the real executor cannot honour yet: one error
/// naming the file and the key.
pub fn check_tier(spec: &StackSpec) -> Result<()> {
    let Some(t) = &spec.tier else { return Ok(()) };
    let o = &spec.origin;
    let refuse = |key: &str, why: &str| Err(o.err(key, format!("the real executor {why}")));
    let size = t.size.text();
    if t.size_is_share() || size.trim().eq_ignore_ascii_case("unlimited") {
        return refuse(
            "tier.size",
            "needs the cache device's size in blocks or bytes (a share needs a pass over a trace)",
        );
    }
    // Every partitioner runs: the tenants are the stack's (`[[tenant]]`,
    // one export each; without it one, the whole array).
    t.partitioner_kind().map_err(|e| o.err("tier.partitioner", e))?;
    Ok(())
}

/// The cache device's frames of the tier of `spec`, if it has one.
pub fn frames(spec: &StackSpec) -> Result<Option<u64>> {
    let Some(t) = &spec.tier else { return Ok(None) };
    t.blocks(spec.block_size(), None)
        .map(Some)
        .map_err(|e| spec.origin.err("tier.size", e))
}
