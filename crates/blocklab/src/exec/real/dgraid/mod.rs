//! D-GRAID on member files with real bytes (Sivathanu et al., FAST'04),
//! served over NBD as the image of one ext2 file system of `fs_size`.
//!
//! The array sees only block writes. A [`Classifier`] (the seam in
//! `dgraid::classify`) turns them into actions — the layout, store a block
//! for an owner, retag a stored block, free one — and this module carries
//! them out with the placement layer (`dgraid::layer::Dgraid`, the one the
//! simulators run): every copy a store names is written, a retag moves the
//! stored bytes, a free releases the copies. Reads take the classifier's
//! deferred contents, else a copy on a readable member; a block with no
//! readable copy fails (EIO), a block never written reads zeroes.
//!
//! * `state.rs`: `dgraid.json` (configuration, failed / recovering members,
//!   the generation written into each member's identity block);
//! * `map.rs`: `dgraid.map`, the block map, kept across restarts and crashes;
//! * `log_file.rs`: the header check and whole-file rewrite both logs use;
//! * `stage.rs`: `dgraid.stage`, writes made before the layout is known,
//!   durable at a FLUSH until the map holds them, bound to the map's epoch;
//! * `by_address.rs`: the stand-in classifier (tags by address);
//! * `tags.rs`: the classifier told the answer (a `block,owner,kind` file);
//! * `rebuild.rs`: live-block recovery of a replaced member;
//! * `ops.rs`: create, status, fail, replace and serving, as `real` runs them.
//!
//! Requests are served one at a time under one mutex (as a stack is).

mod by_address;
mod log_file;
pub mod map;
pub mod ops;
pub mod rebuild;
pub mod stage;
pub mod state;
pub mod tags;

#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use rustc_hash::FxHashMap;

use self::map::{Loaded, MapLog, Record};
use self::stage::StageLog;
use self::state::DgState;
use super::identity::{self, Identity};
use super::members::{crashed_error, member_path, Faults};
use super::{take_lock, Recovery, ReqError};
use crate::dgraid::classify::{Action, Classifier};
use crate::dgraid::infer::{InferConfig, Inferrer};
use crate::dgraid::layer::Copy;
use crate::dgraid::{Dgraid, DgraidConfig};
use crate::error::{Error, Result};
use crate::fsmodel::kind::{BlockKind, Tag};
use crate::fsmodel::Geometry;
use crate::nbd::{Export, ExportError};

pub use by_address::ByAddress;
pub use state::is_dgraid_dir;

/// Records gathered before a commit is forced (bounds memory, and the
/// copies the layer holds back, between the client's FLUSHes).
const COMMIT_EVERY: usize = 4096;

/// The member image's length for members of `disk_blocks` blocks.
fn disk_bytes(st: &DgState) -> u64 {
    st.disk_blocks * st.block_size
}

/// What the array has done since open.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, PartialEq)]
#[serde(default)]
pub struct DgCounts {
    pub stores: u64,
    pub retags: u64,
    pub frees: u64,
    /// Copies written (all stores and moves).
    pub copy_writes: u64,
    /// Copies skipped because their member has failed.
    pub copies_on_failed: u64,
    /// Reads that found no readable copy (EIO).
    pub unreadable_reads: u64,
    pub commits: u64,
    /// Layouts announced again (the same: ignored; another one while blocks
    /// are mapped: refused, counted).
    pub geometry_conflicts: u64,
    /// Writes made while the layout was unknown (held by the classifier).
    pub writes_before_layout: u64,
    /// Blocks appended to the staging log (`dgraid.stage`): the writes
    /// held before the layout, kept durable for a FLUSH.
    pub staged_blocks: u64,
    /// Staged blocks written again through the classifier at open (the
    /// log's records the map has not superseded).
    pub stage_replayed: u64,
    /// Records of the log found at open that the map had superseded (a
    /// commit since the log began named their block), or all of a log
    /// older than the map's last compaction: not replayed.
    pub stage_skipped: u64,
    /// Staged blocks placed again at a FLUSH because an earlier placement
    /// of them failed (a member write error).
    pub stage_retried: u64,
    /// Blocks shown to the classifier at open so that it learns the file
    /// system again (inference keeps its knowledge in memory).
    pub relearned_blocks: u64,
}

pub(super) struct Inner {
    pub(super) st: DgState,
    /// Member files; None for a failed member.
    pub(super) members: Vec<Option<File>>,
    pub(super) layer: Option<Dgraid>,
    pub(super) cfg: DgraidConfig,
    pub(super) geometry: Option<Geometry>,
    /// Tag of each mapped block (what the map records).
    pub(super) tags: FxHashMap<u64, Tag>,
    /// Blocks whose contents are gone (no copy survived).
    pub(super) lost: BTreeSet<u64>,
    pub(super) classifier: Box<dyn Classifier>,
    log: MapLog,
    pending: Vec<Record>,
    /// Writes held before the layout is known, durable at a FLUSH.
    stage: StageLog,
    /// The write stream as the export sees it (`real serve
    /// --record-writes`), in `dgraid infer --order stream:LOG`'s format.
    recorder: Option<std::io::BufWriter<File>>,
    pub(super) counts: DgCounts,
    /// Member write errors injected (tests); none planned otherwise.
    pub(super) faults: Arc<Faults>,
}

/// A D-GRAID array open on its member files.
pub struct RealDgraid {
    dir: PathBuf,
    _lock: File,
    pub(super) inner: Mutex<Inner>,
    bs: u64,
    size: u64,
    uuid: u128,
    /// What opening found and did.
    pub recovery: Recovery,
}

fn rerr(e: Error) -> ReqError {
    ReqError::Io(e.to_string())
}

fn ioerr(what: &str) -> impl Fn(std::io::Error) -> ReqError + '_ {
    move |e| ReqError::Io(format!("{what}: {e}"))
}

/// The classifier named by the state (the `tags` file read from `dir`).
fn classifier_of(dir: &Path, st: &DgState) -> Result<Box<dyn Classifier>> {
    let geo = default_geometry(st)?;
    match st.classifier.as_str() {
        "infer" => Ok(Box::new(Inferrer::new(InferConfig {
            block_size: st.block_size,
            deferred_max: st.deferred_max as usize,
        })?)),
        "tags" => Ok(Box::new(tags::Tags::load(&dir.join(tags::TAGS_FILE), geo)?)),
        _ => Ok(Box::new(ByAddress::new(geo))),
    }
}

/// mke2fs's layout of the export (the stand-in's and the tags file's).
pub fn default_geometry(st: &DgState) -> Result<Geometry> {
    Geometry::mke2fs(&crate::fsmodel::geometry::MkfsParams::new(
        st.fs_blocks * st.block_size,
        st.block_size,
    ))
}

impl RealDgraid {
    /// Open the array in `dir`: assemble the members by identity (swapped
    /// files put back, foreign or doubled ones refused, stale or missing
    /// ones left out as failed), read the block map, and after a crash make
    /// every block's copies agree.
    pub fn open(dir: &Path) -> Result<RealDgraid> {
        let lock = take_lock(dir)?;
        let mut st = DgState::load(dir)?;
        let shown = dir.display().to_string();
        let uuid = identity::parse_uuid(&st.uuid).expect("validated");
        let n = st.disks;
        let mut recovery = Recovery::default();
        let present: Vec<u32> = (0..n).filter(|d| !st.failed.contains(d)).collect();
        let asm = identity::assemble(
            dir,
            uuid,
            n,
            st.generation,
            &present,
            &st.failed,
            disk_bytes(&st),
            st.block_size,
            false,
        )?;
        recovery.reassembled = asm.moved;
        for d in present {
            if !member_path(dir, d).exists() {
                recovery.missing_members.push(d);
            } else if asm.stale.contains(&d) {
                recovery.stale_members.push(d);
            } else {
                continue;
            }
            st.failed.push(d);
            st.recovering.retain(|&r| r != d);
        }
        st.failed.sort_unstable();
        let was_clean = st.clean;
        let mut members = Vec::with_capacity(n as usize);
        for d in 0..n {
            members.push(if st.failed.contains(&d) {
                None
            } else {
                let p = member_path(dir, d);
                Some(
                    std::fs::OpenOptions::new()
                        .read(true)
                        .write(true)
                        .open(&p)
                        .map_err(|e| Error::io(p.display().to_string(), e))?,
                )
            });
        }
        let loaded = MapLog::load(dir, uuid)?;
        // After a crash the map's records are what recovery replays; after
        // a clean close they are only the map, read back.
        if !was_clean {
            recovery.journal_records = loaded.records;
        }
        let cfg = st.config()?;
        let classifier = classifier_of(dir, &st)?;
        let bs = st.block_size;
        // Staged writes a commit since the log began has superseded are
        // left out (`stage.rs`); the rest are written again below, after
        // the classifier has relearnt what is stored. The log is rewritten
        // against the map's epoch before the map is compacted at it.
        let (staged, stage_skipped) = StageLog::load(dir, uuid, bs, st.fs_blocks)?.newer_than(&loaded);
        let stage = StageLog::create(dir, uuid, bs, loaded.epoch, &staged)?;
        let log = MapLog::write_new(dir, uuid, loaded.epoch, &loaded.records())?;
        let size = st.fs_blocks * bs;
        let mut inner = Inner {
            st,
            members,
            layer: None,
            cfg,
            geometry: None,
            tags: FxHashMap::default(),
            lost: BTreeSet::new(),
            classifier,
            log,
            pending: Vec::new(),
            stage,
            recorder: None,
            counts: DgCounts {
                stage_skipped,
                ..DgCounts::default()
            },
            faults: Arc::new(Faults::none()),
        };
        inner
            .restore(loaded)
            .map_err(|e| Error::config(format!("{shown}/{}: {e}", map::MAP_FILE)))?;
        if !was_clean {
            recovery.resync.repaired = inner.resync().map_err(|e| Error::io(&shown, e))?;
            recovery.dirty_regions = 1;
        }
        if inner.st.classifier == "infer" {
            inner.relearn().map_err(|e| Error::io(&shown, e.to_string()))?;
        }
        inner
            .replay_stage(staged)
            .map_err(|e| Error::io(&shown, e.to_string()))?;
        inner.st.clean = false;
        inner.bump(dir).map_err(|e| Error::io(&shown, e))?;
        Ok(RealDgraid {
            dir: dir.to_path_buf(),
            _lock: lock,
            inner: Mutex::new(inner),
            bs,
            size,
            uuid,
            recovery,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn block_size(&self) -> u64 {
        self.bs
    }

    pub fn size_bytes(&self) -> u64 {
        self.size
    }

    pub fn uuid(&self) -> u128 {
        self.uuid
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Record every write and flush the export is asked for from now on
    /// into `path` (created afresh): per write `W`, u64 offset, u32 length
    /// (little-endian) and the bytes, per flush `F` — the stream
    /// `blocklab dgraid infer --order stream:LOG` replays. Zeroes and TRIM
    /// are recorded as the writes of zeroes the array makes of them.
    pub fn record_writes(&self, path: &Path) -> Result<()> {
        let f = File::create(path).map_err(|e| Error::io(path.display().to_string(), e))?;
        self.lock().recorder = Some(std::io::BufWriter::with_capacity(1 << 20, f));
        Ok(())
    }

    /// Close cleanly: deferred blocks placed, the map committed and
    /// compacted, the members marked clean.
    pub fn close(self) -> Result<()> {
        let shown = self.dir.display().to_string();
        let mut g = self.lock();
        g.flush().map_err(|e| Error::io(&shown, e))?;
        let loaded = g.snapshot();
        // The log bound to the epoch the map is compacted at, first.
        let epoch = g.log.epoch();
        g.stage.rebase(epoch).map_err(|e| Error::io(&shown, e))?;
        g.log = MapLog::write_new(&self.dir, self.uuid, epoch, &loaded.records())?;
        g.st.clean = true;
        g.bump(&self.dir).map_err(|e| Error::io(&shown, e))?;
        Ok(())
    }

    fn check_range(&self, offset: u64, len: u64) -> std::result::Result<(), ReqError> {
        if offset.checked_add(len).is_none_or(|e| e > self.size) {
            return Err(ReqError::OutOfRange(format!(
                "[{offset}, +{len}) is beyond the export ({} bytes)",
                self.size
            )));
        }
        Ok(())
    }

    pub fn read(&self, offset: u64, buf: &mut [u8]) -> std::result::Result<(), ReqError> {
        self.check_range(offset, buf.len() as u64)?;
        let bs = self.bs;
        let mut g = self.lock();
        let mut block = vec![0u8; bs as usize];
        let mut done = 0usize;
        while done < buf.len() {
            let at = offset + done as u64;
            let b = at / bs;
            let within = (at % bs) as usize;
            let n = (bs as usize - within).min(buf.len() - done);
            g.read_block(b, &mut block)?;
            buf[done..done + n].copy_from_slice(&block[within..within + n]);
            done += n;
        }
        Ok(())
    }

    pub fn write(&self, offset: u64, data: &[u8], fua: bool) -> std::result::Result<(), ReqError> {
        self.check_range(offset, data.len() as u64)?;
        if data.is_empty() {
            return Ok(());
        }
        let bs = self.bs;
        let first = offset / bs;
        let last = (offset + data.len() as u64 - 1) / bs;
        let mut g = self.lock();
        if let Some(r) = g.recorder.as_mut() {
            use std::io::Write;
            let mut h = vec![b'W'];
            h.extend(offset.to_le_bytes());
            h.extend((data.len() as u32).to_le_bytes());
            r.write_all(&h)
                .and_then(|_| r.write_all(data))
                .map_err(ioerr("--record-writes"))?;
        }
        // Whole blocks: a partial head or tail merges with the block's
        // newest contents.
        let mut whole = vec![0u8; ((last - first + 1) * bs) as usize];
        let head = (offset % bs) as usize;
        if head != 0 {
            g.read_block(first, &mut whole[..bs as usize])?;
        }
        let end = head + data.len();
        if !end.is_multiple_of(bs as usize) && (last > first || head == 0) {
            let at = ((last - first) * bs) as usize;
            g.read_block(last, &mut whole[at..at + bs as usize])?;
        }
        whole[head..end].copy_from_slice(data);
        let actions = g.classifier.write(first, &whole);
        if let Some(e) = g.classifier.refused() {
            return Err(ReqError::Io(format!("the classifier gave up on this file system: {e}")));
        }
        g.carry_out(actions)?;
        if g.layer.is_none() {
            g.counts.writes_before_layout += 1;
        }
        if !g.classifier.layout_known() {
            // Held by the classifier until it knows the layout: a copy in
            // the staging log, synced at the next FLUSH.
            g.counts.staged_blocks += last - first + 1;
            let epoch = g.log.epoch();
            g.stage.append(first, &whole, epoch).map_err(ioerr("staging log"))?;
        }
        if fua || g.pending.len() >= COMMIT_EVERY {
            if fua { g.flush() } else { g.commit() }.map_err(ioerr("commit"))?;
        }
        Ok(())
    }

    /// Zeroes (and TRIM): a whole block that already reads as zeroes by
    /// holding nothing (never written or freed, nothing deferred) is left
    /// as it is, so that discarding a fresh export (mke2fs does) stores
    /// nothing; the rest is written as zeroes.
    pub fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> std::result::Result<(), ReqError> {
        self.check_range(offset, len)?;
        let bs = self.bs;
        let zeros = vec![0u8; bs as usize];
        let mut at = offset;
        let end = offset + len;
        while at < end {
            let n = (bs - at % bs).min(end - at);
            let b = at / bs;
            let empty = n == bs && {
                let g = self.lock();
                g.classifier.deferred(b).is_none() && !g.stage.is_unplaced(b) && matches!(g.readable_copy(b), Ok(None))
            };
            if !empty {
                self.write(at, &zeros[..n as usize], false)?;
            }
            at += n;
        }
        if fua {
            self.flush()?;
        }
        Ok(())
    }

    /// The classifier's deferred blocks placed, the members synced, then
    /// the map's changes made durable.
    pub fn flush(&self) -> std::result::Result<(), ReqError> {
        self.lock().flush().map_err(ioerr("flush"))
    }

    /// What the array has done since open.
    pub fn counts(&self) -> DgCounts {
        self.lock().counts.clone()
    }

    /// The copies of fs block `block` (none: unmapped).
    pub fn copies(&self, block: u64) -> Vec<Copy> {
        self.lock().layer.as_ref().map(|l| l.copies(block)).unwrap_or_default()
    }

    /// Whether a read of `block` can be served (deferred, unmapped, or a
    /// copy on a readable member).
    pub fn readable(&self, block: u64) -> bool {
        let g = self.lock();
        g.readable_copy(block).is_ok()
    }
}

impl Inner {
    /// Build the layer and its map from what the log left.
    fn restore(&mut self, loaded: Loaded) -> Result<()> {
        if let Some(geo) = loaded.geometry {
            self.set_geometry(geo)?;
        } else if !loaded.mapped.is_empty() {
            return Err(Error::config("blocks are mapped but no layout was recorded"));
        }
        let mut blocks: Vec<_> = loaded.mapped.into_iter().collect();
        blocks.sort_unstable_by_key(|x| x.0);
        for (b, (tag, copies)) in blocks {
            let layer = self.layer.as_mut().expect("a layout was recorded");
            layer.restore(b, &tag, &copies)?;
            self.tags.insert(b, tag);
        }
        self.lost = loaded.lost;
        Ok(())
    }

    /// The map as it stands (what a compacted log holds).
    fn snapshot(&self) -> Loaded {
        let mut l = Loaded {
            geometry: self.geometry.clone(),
            lost: self.lost.clone(),
            ..Loaded::default()
        };
        if let Some(layer) = &self.layer {
            for (&b, &tag) in &self.tags {
                l.mapped.insert(b, (tag, layer.copies(b)));
            }
        }
        l
    }

    fn set_geometry(&mut self, geo: Geometry) -> Result<()> {
        if geo.block_size != self.st.block_size {
            return Err(Error::config(format!(
                "the file system's blocks are {} B, the array's {} B (make it with -b {})",
                geo.block_size, self.st.block_size, self.st.block_size
            )));
        }
        if geo.blocks > self.st.fs_blocks {
            return Err(Error::config(format!(
                "the file system has {} blocks, the export {}",
                geo.blocks, self.st.fs_blocks
            )));
        }
        let mut layer = Dgraid::new(self.cfg.clone(), &geo)?;
        layer.hold_frees();
        self.layer = Some(layer);
        self.geometry = Some(geo);
        Ok(())
    }

    /// Write the generation into every live member's identity block (then
    /// the state file), as MD's superblock events.
    fn bump(&mut self, dir: &Path) -> std::io::Result<()> {
        self.st.generation += 1;
        let uuid = identity::parse_uuid(&self.st.uuid).expect("validated");
        let at = identity::image_id_offset(disk_bytes(&self.st));
        for (d, m) in self.members.iter().enumerate() {
            if let Some(f) = m {
                let id = Identity {
                    uuid,
                    role: d as u32,
                    events: self.st.generation,
                };
                identity::write(f, at, &id, identity::Kind::Image)?;
                f.sync_data()?;
            }
        }
        self.st.save(dir)
    }

    /// A copy of `block` on a readable member; Ok(None): nothing stored
    /// (reads as zeroes); Err: lost.
    fn readable_copy(&self, block: u64) -> std::result::Result<Option<Copy>, ReqError> {
        if self.lost.contains(&block) {
            return Err(ReqError::Unreadable(format!("block {block}: its contents were lost")));
        }
        let Some(layer) = &self.layer else { return Ok(None) };
        let copies = layer.copies(block);
        if copies.is_empty() {
            return Ok(None);
        }
        let bad = self.st.unreadable_mask();
        copies
            .into_iter()
            .find(|c| bad >> c.disk & 1 == 0 && self.members[c.disk as usize].is_some())
            .map(Some)
            .ok_or_else(|| ReqError::Unreadable(format!("block {block}: every copy is on a failed member")))
    }

    /// The newest contents of fs block `block` into `out` (one block).
    pub(super) fn read_block(&mut self, block: u64, out: &mut [u8]) -> std::result::Result<(), ReqError> {
        if let Some(d) = self.classifier.deferred(block) {
            out.copy_from_slice(d);
            return Ok(());
        }
        if self.stage.is_unplaced(block) {
            // Staged, its placement not done (or failed part-way): the
            // log has its newest contents, whatever its copies hold.
            out.copy_from_slice(&self.stage.read(block).map_err(ioerr("staging log"))?);
            return Ok(());
        }
        match self.readable_copy(block) {
            Ok(None) => {
                out.fill(0);
                Ok(())
            }
            Ok(Some(c)) => self.read_copy(c, out),
            Err(e) => {
                self.counts.unreadable_reads += 1;
                Err(e)
            }
        }
    }

    pub(super) fn read_copy(&self, c: Copy, out: &mut [u8]) -> std::result::Result<(), ReqError> {
        let f = self.members[c.disk as usize]
            .as_ref()
            .ok_or_else(|| ReqError::Unreadable(format!("disk {} has failed", c.disk)))?;
        f.read_exact_at(out, c.block * self.st.block_size)
            .map_err(|e| ReqError::Io(format!("disk {} block {}: {e}", c.disk, c.block)))
    }

    /// Write `data` to every copy on a live member; whether any was written.
    fn write_copies(&mut self, copies: &[Copy], data: &[u8]) -> std::result::Result<bool, ReqError> {
        let mut any = false;
        for c in copies {
            match &self.members[c.disk as usize] {
                Some(f) => {
                    let at = c.block * self.st.block_size;
                    // The fault hook (tests) fails the write after a
                    // prefix of its sectors.
                    match self.faults.admit(data.len() / 512) {
                        Ok(None) => f.write_all_at(data, at),
                        Ok(Some(k)) => f.write_all_at(&data[..k * 512], at).and(Err(crashed_error())),
                        Err(e) => Err(e),
                    }
                    .map_err(|e| ReqError::Io(format!("disk {} block {}: {e}", c.disk, c.block)))?;
                    self.counts.copy_writes += 1;
                    any = true;
                }
                None => self.counts.copies_on_failed += 1,
            }
        }
        Ok(any)
    }

    fn layer(&mut self) -> std::result::Result<&mut Dgraid, ReqError> {
        self.layer
            .as_mut()
            .ok_or_else(|| ReqError::Io("the classifier placed a block before announcing the layout".into()))
    }

    /// The layer's placement of a write of `block` as `tag`. Members full
    /// while copies are held for the map (moves since the last commit):
    /// commit, which frees them, and try again.
    fn place(&mut self, block: u64, tag: &Tag) -> std::result::Result<Vec<Copy>, ReqError> {
        match self.layer()?.write(block, tag) {
            Ok(c) => Ok(c),
            Err(_) if self.layer()?.held() > 0 => {
                self.commit().map_err(ioerr("commit"))?;
                self.layer()?.write(block, tag).map_err(rerr)
            }
            Err(e) => Err(rerr(e)),
        }
    }

    /// Carry out a classifier's actions.
    fn carry_out(&mut self, actions: Vec<Action>) -> std::result::Result<(), ReqError> {
        for a in actions {
            match a {
                Action::Geometry(geo) => {
                    if self.geometry.as_ref() == Some(&geo) {
                        continue;
                    }
                    if !self.tags.is_empty() {
                        self.counts.geometry_conflicts += 1;
                        continue;
                    }
                    self.set_geometry(geo.clone()).map_err(rerr)?;
                    self.pending.push(Record::Geometry(geo));
                }
                Action::Store { block, tag, data } => {
                    self.counts.stores += 1;
                    self.store(block, tag, &data)?;
                }
                Action::Retag { block, tag } if self.stage.is_unplaced(block) => {
                    // Its placement failed part-way: its copies may hold
                    // anything, the log has its contents. Stored afresh.
                    self.counts.retags += 1;
                    let data = self.stage.read(block).map_err(ioerr("staging log"))?;
                    self.store(block, tag, &data)?;
                }
                Action::Retag { block, tag } => {
                    self.counts.retags += 1;
                    let old = self.layer()?.copies(block);
                    if old.is_empty() {
                        continue;
                    }
                    let mut data = vec![0u8; self.st.block_size as usize];
                    let have = match self.readable_copy(block) {
                        Ok(Some(c)) => self.read_copy(c, &mut data).is_ok(),
                        _ => false,
                    };
                    let new = self.place(block, &tag)?;
                    if new != old && have {
                        if let Err(e) = self.write_copies(&new, &data) {
                            self.write_failed(block, tag, new);
                            return Err(e);
                        }
                    }
                    self.tags.insert(block, tag);
                    self.pending.push(Record::Map {
                        block,
                        tag,
                        copies: new,
                    });
                    if !have && !self.lost.contains(&block) {
                        self.lost.insert(block);
                        self.pending.push(Record::Lost { block });
                    }
                }
                Action::Free { block } => {
                    self.counts.frees += 1;
                    if let Some(l) = self.layer.as_mut() {
                        l.free(block);
                    }
                    self.tags.remove(&block);
                    self.lost.remove(&block);
                    self.stage.placed(block);
                    self.pending.push(Record::Unmap { block });
                }
            }
        }
        Ok(())
    }

    /// Store `data` as `block`'s contents at the copies `tag` places it on.
    /// Only once every copy is written is the block's staged record (if
    /// any) no longer what reads take.
    fn store(&mut self, block: u64, tag: Tag, data: &[u8]) -> std::result::Result<(), ReqError> {
        let copies = self.place(block, &tag)?;
        let stored = match self.write_copies(&copies, data) {
            Ok(stored) => stored,
            Err(e) => {
                self.write_failed(block, tag, copies);
                return Err(e);
            }
        };
        self.tags.insert(block, tag);
        self.pending.push(Record::Map { block, tag, copies });
        self.stage.placed(block);
        if stored {
            self.lost.remove(&block);
        } else {
            // Every copy's member has failed: the bytes are gone, and
            // reads say so.
            self.lost.insert(block);
            self.pending.push(Record::Lost { block });
        }
        Ok(())
    }

    /// A write of `block`'s copies failed part-way: they may hold part of
    /// the new bytes, and after a remap the old copies are released at the
    /// next commit. Unless the staging log has the block's contents (reads
    /// and a replay take them from there), the block is recorded lost at
    /// its new copies: reads fail, never return other bytes, until it is
    /// written again.
    fn write_failed(&mut self, block: u64, tag: Tag, copies: Vec<Copy>) {
        if self.stage.is_unplaced(block) {
            return;
        }
        self.tags.insert(block, tag);
        self.lost.insert(block);
        self.pending.push(Record::Map { block, tag, copies });
        self.pending.push(Record::Lost { block });
    }

    /// Map records not yet committed.
    pub(super) fn pending_records(&self) -> usize {
        self.pending.len()
    }

    /// Members synced, then the map's pending changes appended and synced,
    /// then the copies they released freed for reuse.
    pub(super) fn commit(&mut self) -> std::io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        for f in self.members.iter().flatten() {
            f.sync_data()?;
        }
        let pending = std::mem::take(&mut self.pending);
        self.log.commit(&pending)?;
        if let Some(l) = self.layer.as_mut() {
            l.release_held();
        }
        self.counts.commits += 1;
        Ok(())
    }

    /// The classifier's deferred blocks placed, then a commit. Writes the
    /// classifier holds before it knows the file system's layout cannot be
    /// placed: they are durable in the staging log instead, which is
    /// emptied at the first flush after the layout is known that finds
    /// every staged block placed (the map then holds them). Staged blocks
    /// whose placement failed are placed again here; if that fails too the
    /// flush fails and the log keeps them.
    pub(super) fn flush(&mut self) -> std::io::Result<()> {
        if let Some(r) = self.recorder.as_mut() {
            use std::io::Write;
            r.write_all(b"F").and_then(|_| r.flush())?;
        }
        let to_io = |e: ReqError| std::io::Error::other(e.to_string());
        let actions = self.classifier.flush();
        self.carry_out(actions).map_err(to_io)?;
        if self.classifier.layout_known() {
            self.place_unplaced().map_err(to_io)?;
        }
        self.commit()?;
        for f in self.members.iter().flatten() {
            f.sync_data()?;
        }
        if !self.classifier.layout_known() {
            return self.stage.sync();
        }
        let left = self.stage.unplaced().len();
        if left > 0 {
            return Err(std::io::Error::other(format!(
                "{left} staged blocks are not placed yet: the staging log keeps them"
            )));
        }
        self.stage.clear(self.log.epoch())
    }

    /// Staged blocks the classifier no longer holds and no placement
    /// stored (a member write failed part-way through placing them):
    /// written again through the classifier from the log, in its order.
    fn place_unplaced(&mut self) -> std::result::Result<(), ReqError> {
        let left: Vec<u64> = self
            .stage
            .unplaced()
            .into_iter()
            .filter(|&b| self.classifier.deferred(b).is_none())
            .collect();
        if left.is_empty() {
            return Ok(());
        }
        for b in left {
            let data = self.stage.read(b).map_err(ioerr("staging log"))?;
            let actions = self.classifier.write(b, &data);
            if self.classifier.refused().is_some() {
                break;
            }
            self.counts.stage_retried += 1;
            self.carry_out(actions)?;
        }
        let actions = self.classifier.flush();
        self.carry_out(actions)
    }

    /// At open: the staged writes the map does not hold, written again
    /// through the classifier in their order (held again if the layout is
    /// still unknown; the log already has them). Once the layout is known
    /// a flush stores them durably and empties the log.
    fn replay_stage(&mut self, staged: Vec<(u64, Vec<u8>)>) -> std::result::Result<(), ReqError> {
        if staged.is_empty() {
            return Ok(());
        }
        for (b, data) in staged {
            let actions = self.classifier.write(b, &data);
            if self.classifier.refused().is_some() {
                break;
            }
            self.counts.stage_replayed += 1;
            self.carry_out(actions)?;
        }
        if self.classifier.layout_known() {
            self.flush().map_err(ioerr("flush"))?;
        }
        Ok(())
    }

    /// Show inference what it learnt before the restart: the stored
    /// superblock and descriptors (the layout), inode tables (owners) and
    /// directory and indirect blocks (parents, deeper pointers), in that
    /// order, carrying out what it answers (the same placement: blocks stay
    /// where they are; a changed owner moves them as any retag does).
    /// Blocks with no readable copy are skipped.
    fn relearn(&mut self) -> std::result::Result<(), ReqError> {
        let Some(geo) = self.geometry.clone() else {
            return Ok(());
        };
        let bs = self.st.block_size;
        let sb = 1024 / bs;
        let mut order: Vec<u64> = vec![sb];
        if let Some(d) = geo.groups.first().and_then(|g| g.descriptors) {
            order.extend(d[0]..=d[1]);
        }
        for (ext, kind) in geo.static_extents() {
            if kind == crate::fsmodel::StaticKind::InodeTable {
                order.extend(ext[0]..=ext[1]);
            }
        }
        let mut rest: Vec<u64> = self
            .tags
            .iter()
            .filter(|(_, t)| matches!(t.kind, BlockKind::Directory | BlockKind::Indirect))
            .map(|(&b, _)| b)
            .collect();
        rest.sort_unstable();
        order.extend(rest);
        let mut buf = vec![0u8; bs as usize];
        for b in order {
            // A staged block is shown with its newest contents, after this.
            if !self.tags.contains_key(&b) || self.stage.is_unplaced(b) || self.readable_copy(b).is_err() {
                continue;
            }
            self.read_block(b, &mut buf)?;
            let actions = self.classifier.write(b, &buf);
            self.counts.relearned_blocks += 1;
            self.carry_out(actions)?;
        }
        self.commit().map_err(|e| ReqError::Io(e.to_string()))
    }

    /// After a crash: every mapped block's readable copies made equal to
    /// its first (a write torn between copies then reads the same, old or
    /// new, from whichever survives a later failure). Returns blocks
    /// rewritten.
    fn resync(&mut self) -> std::io::Result<u64> {
        let Some(layer) = &self.layer else { return Ok(0) };
        let bs = self.st.block_size as usize;
        let bad = self.st.unreadable_mask();
        let mut blocks: Vec<u64> = self.tags.keys().copied().collect();
        blocks.sort_unstable();
        let (mut a, mut b) = (vec![0u8; bs], vec![0u8; bs]);
        let mut fixed = 0;
        for blk in blocks {
            let copies: Vec<Copy> = layer
                .copies(blk)
                .into_iter()
                .filter(|c| bad >> c.disk & 1 == 0 && self.members[c.disk as usize].is_some())
                .collect();
            let Some((first, rest)) = copies.split_first() else {
                continue;
            };
            if rest.is_empty() {
                continue;
            }
            let f0 = self.members[first.disk as usize].as_ref().expect("filtered");
            f0.read_exact_at(&mut a, first.block * bs as u64)?;
            for c in rest {
                let f = self.members[c.disk as usize].as_ref().expect("filtered");
                f.read_exact_at(&mut b, c.block * bs as u64)?;
                if a != b {
                    f.write_all_at(&a, c.block * bs as u64)?;
                    fixed += 1;
                }
            }
        }
        for f in self.members.iter().flatten() {
            f.sync_data()?;
        }
        Ok(fixed)
    }
}

impl Export for RealDgraid {
    fn size(&self) -> u64 {
        self.size
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> std::result::Result<(), ExportError> {
        RealDgraid::read(self, offset, buf).map_err(super::control::to_export)
    }
    fn write(&self, offset: u64, data: &[u8], fua: bool) -> std::result::Result<(), ExportError> {
        RealDgraid::write(self, offset, data, fua).map_err(super::control::to_export)
    }
    fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> std::result::Result<(), ExportError> {
        RealDgraid::write_zeroes(self, offset, len, fua).map_err(super::control::to_export)
    }
    fn flush(&self) -> std::result::Result<(), ExportError> {
        RealDgraid::flush(self).map_err(super::control::to_export)
    }
    fn description(&self) -> String {
        let g = self.lock();
        format!(
            "blocklab {} of {} (D-GRAID, {} metadata copies; {})",
            g.st.level,
            g.st.disks,
            g.st.meta_copies,
            self.dir.display()
        )
    }
}
