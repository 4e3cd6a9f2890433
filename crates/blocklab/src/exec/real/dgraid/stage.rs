//! `dgraid.stage`: writes made before the file system's layout is known,
//! kept durable so that a FLUSH can acknowledge them.
//!
//! Inference cannot place a block before it has seen the superblock and
//! the descriptors, and mke2fs writes its tables and bitmaps first and
//! FLUSHes before it writes the primary superblock (e2fsprogs writes that
//! last, once everything else is on disk). Such writes wait in the
//! classifier's memory; this log keeps a copy of each, appended as it
//! arrives and `fdatasync`ed at a FLUSH, so the FLUSH is honest. Once the
//! layout is known the classifier places them like any write; a staged
//! block stays *unplaced* here (reads take it from this log) until a
//! placement of it, or a later write or free, succeeds. The first FLUSH
//! that finds none unplaced commits the map and then empties the log; one
//! that finds some (a member write failed part-way) places them again, and
//! fails (EIO) keeping the log if that fails too.
//!
//! **Bound to the map's epoch.** The header holds `base`, the map's epoch
//! (`map.rs`) when the log's first record was appended. Records are
//! appended only while the layout is unknown, when the map commits nothing,
//! so every record is newer than the map as of `base`, and a commit after
//! `base` that names a block (placed, freed, reused, lost) supersedes its
//! record. At open, against the map's epoch E, the epoch C it was last
//! compacted at, and the epoch each block was last named at since C:
//!
//! * `base >= E`: the map has committed nothing since: every record is
//!   replayed (a crash between the log's append and the map's commit);
//! * `base < C`: the map was compacted since `base`, and the array rewrites
//!   the log against the compacted map whenever it compacts: this log is a
//!   stale copy put back: nothing is replayed;
//! * otherwise a record is replayed unless a commit after `base` named its
//!   block.
//!
//! The log is then rewritten with the records replayed and `base = E`,
//! before the map is compacted (a crash in between leaves a log whose base
//! is the uncompacted map's epoch: all of it replays again).
//!
//! File: a header (magic, the array's UUID, the block size, base, CRC),
//! then fixed-size records `block u64, crc32 u32` (over block and data)`,
//! data` (one fs block). A torn last record (a crash mid-append) is cut off
//! at open; damage followed by a whole record or more is refused, naming
//! the record. The log is rewritten without superseded records (compacted)
//! at open and when it holds more than twice the records it needs.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use rustc_hash::{FxHashMap, FxHashSet};

use super::log_file;
use super::map::Loaded;
use crate::error::{Error, Location, Result};

pub const STAGE_FILE: &str = "dgraid.stage";
const MAGIC: &[u8; 8] = b"BLDGSTG2";
const HEADER: u64 = 8 + 16 + 8 + 8 + 4;
/// Superseded records tolerated before a compaction (beyond twice the
/// live ones).
const SLACK: u64 = 1024;

pub fn stage_path(dir: &Path) -> PathBuf {
    dir.join(STAGE_FILE)
}

fn header(uuid: u128, bs: u64, base: u64) -> Vec<u8> {
    let mut h = MAGIC.to_vec();
    h.extend(uuid.to_le_bytes());
    h.extend(bs.to_le_bytes());
    h.extend(base.to_le_bytes());
    let crc = crc32fast::hash(&h);
    h.extend(crc.to_le_bytes());
    h
}

fn record(block: u64, data: &[u8]) -> Vec<u8> {
    let mut r = Vec::with_capacity(12 + data.len());
    r.extend(block.to_le_bytes());
    let mut h = crc32fast::Hasher::new();
    h.update(&block.to_le_bytes());
    h.update(data);
    r.extend(h.finalize().to_le_bytes());
    r.extend(data);
    r
}

/// What a log on disk holds.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Staged {
    /// The map's epoch when its first record was appended.
    pub base: u64,
    /// Each block's newest contents, in the order their newest writes
    /// arrived.
    pub records: Vec<(u64, Vec<u8>)>,
}

impl Staged {
    /// The records the map `map` has not superseded (see the module
    /// comment), and how many it has.
    pub fn newer_than(self, map: &Loaded) -> (Vec<(u64, Vec<u8>)>, u64) {
        let n = self.records.len() as u64;
        let keep: Vec<_> = if self.base >= map.epoch {
            self.records
        } else if self.base < map.compacted_at {
            Vec::new()
        } else {
            self.records
                .into_iter()
                .filter(|(b, _)| map.touched.get(b).is_none_or(|&e| e <= self.base))
                .collect()
        };
        let skipped = n - keep.len() as u64;
        (keep, skipped)
    }
}

/// The open log.
pub struct StageLog {
    dir: PathBuf,
    file: File,
    uuid: u128,
    bs: u64,
    /// The map's epoch its records are newer than.
    base: u64,
    /// Records in the file.
    records: u64,
    /// Each staged block's newest record (its index in the file).
    newest: FxHashMap<u64, u64>,
    /// Staged blocks not placed yet: their newest contents are here.
    unplaced: FxHashSet<u64>,
    /// Appended since the last sync.
    dirty: bool,
}

impl StageLog {
    fn record_len(&self) -> u64 {
        12 + self.bs
    }

    /// The staged writes in the log of the array `uuid` in `dir` (none
    /// when there is no log). A torn last record is left out; a whole one
    /// naming a block at or past `fs_blocks` is refused (only a crafted
    /// file holds one: replayed, it would fail the placement of every write
    /// held with it).
    pub fn load(dir: &Path, uuid: u128, bs: u64, fs_blocks: u64) -> Result<Staged> {
        let path = stage_path(dir);
        if !path.exists() {
            return Ok(Staged::default());
        }
        Self::read_file(&path, uuid, bs, fs_blocks)
    }

    /// A new log holding `staged` (each block once, in that order, all
    /// unplaced), newer than the map as of epoch `base`; written whole,
    /// synced and renamed into place.
    pub fn create(dir: &Path, uuid: u128, bs: u64, base: u64, staged: &[(u64, Vec<u8>)]) -> Result<StageLog> {
        let mut buf = header(uuid, bs, base);
        let mut newest = FxHashMap::default();
        for (i, (b, d)) in staged.iter().enumerate() {
            buf.extend(record(*b, d));
            newest.insert(*b, i as u64);
        }
        let file = log_file::replace_whole(dir, STAGE_FILE, &buf)?;
        Ok(StageLog {
            dir: dir.to_path_buf(),
            file,
            uuid,
            bs,
            base,
            records: staged.len() as u64,
            unplaced: newest.keys().copied().collect(),
            newest,
            dirty: false,
        })
    }

    fn read_file(path: &Path, uuid: u128, bs: u64, fs_blocks: u64) -> Result<Staged> {
        let shown = path.display().to_string();
        let f = File::open(path).map_err(|e| Error::io(&shown, e))?;
        let len = f.metadata().map_err(|e| Error::io(&shown, e))?.len();
        // The base is read from the header, then the whole header checked.
        let mut at_base = [0u8; 8];
        let base = match f.read_exact_at(&mut at_base, 32) {
            Ok(()) => u64::from_le_bytes(at_base),
            Err(_) => 0,
        };
        log_file::check_header(
            &f,
            &shown,
            len,
            &header(uuid, bs, base),
            "not the staging log of this array (magic, UUID, block size or CRC differ)",
        )?;
        let rl = 12 + bs;
        let mut out: Vec<Option<(u64, Vec<u8>)>> = Vec::new();
        let mut at_of: FxHashMap<u64, usize> = FxHashMap::default();
        let mut buf = vec![0u8; rl as usize];
        let mut at = HEADER;
        let mut n = 0u64;
        while at + rl <= len {
            n += 1;
            f.read_exact_at(&mut buf, at).map_err(|e| Error::io(&shown, e))?;
            let block = u64::from_le_bytes(buf[..8].try_into().expect("8 bytes"));
            let crc = u32::from_le_bytes(buf[8..12].try_into().expect("4 bytes"));
            if record(block, &buf[12..])[8..12] != crc.to_le_bytes() {
                if len - at >= 2 * rl {
                    return Err(Error::parse(
                        &shown,
                        Location::Record(n),
                        "record",
                        format!("checksum mismatch, with {} bytes after it", len - at - rl),
                    ));
                }
                // A crash mid-append: the torn last record is cut off.
                break;
            }
            if block >= fs_blocks {
                return Err(Error::parse(
                    &shown,
                    Location::Record(n),
                    "block",
                    format!("block {block} is past the file system's {fs_blocks} blocks"),
                ));
            }
            if let Some(i) = at_of.insert(block, out.len()) {
                out[i] = None;
            }
            out.push(Some((block, buf[12..].to_vec())));
            at += rl;
        }
        Ok(Staged {
            base,
            records: out.into_iter().flatten().collect(),
        })
    }

    /// Whether any write is staged.
    pub fn is_empty(&self) -> bool {
        self.newest.is_empty()
    }

    /// Blocks staged (distinct).
    pub fn blocks(&self) -> usize {
        self.newest.len()
    }

    /// The map's epoch the records are newer than.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// Whether `block` is staged and not placed yet (its newest contents
    /// are in this log).
    pub fn is_unplaced(&self, block: u64) -> bool {
        self.unplaced.contains(&block)
    }

    /// Staged blocks not placed yet, in the order of their newest records.
    pub fn unplaced(&self) -> Vec<u64> {
        let mut v: Vec<(u64, u64)> = self.unplaced.iter().map(|b| (self.newest[b], *b)).collect();
        v.sort_unstable();
        v.into_iter().map(|(_, b)| b).collect()
    }

    /// `block` was placed (stored, freed or written again since): its
    /// record is kept until the map that says so is durable.
    pub fn placed(&mut self, block: u64) {
        self.unplaced.remove(&block);
    }

    /// The newest staged contents of `block` (one that is staged).
    pub fn read(&self, block: u64) -> std::io::Result<Vec<u8>> {
        let i = self.newest[&block];
        let mut buf = vec![0u8; self.record_len() as usize];
        self.file.read_exact_at(&mut buf, HEADER + i * self.record_len())?;
        buf.drain(..12);
        Ok(buf)
    }

    /// Append whole blocks from fs block `first` (not yet durable: see
    /// [`StageLog::sync`]); the map is at `epoch`, which becomes the log's
    /// base when this is its first record.
    pub fn append(&mut self, first: u64, data: &[u8], epoch: u64) -> std::io::Result<()> {
        if self.records == 0 && self.base != epoch {
            *self = Self::create(&self.dir, self.uuid, self.bs, epoch, &[])
                .map_err(|e| std::io::Error::other(e.to_string()))?;
        }
        let bs = self.bs as usize;
        let mut buf = Vec::with_capacity(data.len() / bs * (12 + bs));
        for (i, d) in data.chunks(bs).enumerate() {
            buf.extend(record(first + i as u64, d));
            self.newest.insert(first + i as u64, self.records + i as u64);
            self.unplaced.insert(first + i as u64);
        }
        self.file
            .write_all_at(&buf, HEADER + self.records * self.record_len())?;
        self.records += (data.len() / bs) as u64;
        self.dirty = true;
        if self.records > 2 * self.newest.len() as u64 + SLACK {
            self.compact()?;
        }
        Ok(())
    }

    /// Rewrite the log with each block's newest record only.
    fn compact(&mut self) -> std::io::Result<()> {
        let mut order: Vec<(u64, u64)> = self.newest.iter().map(|(&b, &i)| (i, b)).collect();
        order.sort_unstable();
        let mut staged = Vec::with_capacity(order.len());
        let mut buf = vec![0u8; self.record_len() as usize];
        for (i, b) in order {
            self.file.read_exact_at(&mut buf, HEADER + i * self.record_len())?;
            staged.push((b, buf[12..].to_vec()));
        }
        self.rewrite(self.base, &staged)
    }

    /// Replace the log by one holding `staged` newer than `base`, keeping
    /// which blocks are placed.
    fn rewrite(&mut self, base: u64, staged: &[(u64, Vec<u8>)]) -> std::io::Result<()> {
        let unplaced = std::mem::take(&mut self.unplaced);
        *self = Self::create(&self.dir, self.uuid, self.bs, base, staged)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        self.unplaced.retain(|b| unplaced.contains(b));
        Ok(())
    }

    /// The log bound to epoch `epoch` of a map being compacted (records
    /// appended only while the map commits nothing are newer than it too).
    pub fn rebase(&mut self, epoch: u64) -> std::io::Result<()> {
        if self.base == epoch {
            return Ok(());
        }
        let mut order: Vec<(u64, u64)> = self.newest.iter().map(|(&b, &i)| (i, b)).collect();
        order.sort_unstable();
        let staged = order
            .into_iter()
            .map(|(_, b)| self.read(b).map(|d| (b, d)))
            .collect::<std::io::Result<Vec<_>>>()?;
        self.rewrite(epoch, &staged)
    }

    /// Make what was appended durable (a FLUSH before the layout is known).
    pub fn sync(&mut self) -> std::io::Result<()> {
        if self.dirty {
            self.file.sync_data()?;
            self.dirty = false;
        }
        Ok(())
    }

    /// Empty the log (the staged writes are in the map, durable as of
    /// epoch `epoch`, which becomes the base).
    pub fn clear(&mut self, epoch: u64) -> std::io::Result<()> {
        if self.records == 0 {
            return Ok(());
        }
        debug_assert!(self.unplaced.is_empty(), "cleared with blocks unplaced");
        self.rewrite(epoch, &[])
    }
}

#[cfg(test)]
mod tests {
    use std::fs::{self, OpenOptions};

    use super::*;

    const BS: u64 = 1024;
    const FS: u64 = 1 << 20;

    fn block(v: u8) -> Vec<u8> {
        vec![v; BS as usize]
    }

    #[test]
    fn staged_blocks_come_back_newest_last_and_a_cleared_log_holds_none() {
        let t = tempfile::tempdir().unwrap();
        assert!(StageLog::load(t.path(), 7, BS, FS).unwrap().records.is_empty());
        let mut log = StageLog::create(t.path(), 7, BS, 0, &[]).unwrap();
        assert!(log.is_empty());
        log.append(3, &[block(1), block(2)].concat(), 0).unwrap();
        log.append(9, &block(3), 0).unwrap();
        log.append(3, &block(4), 0).unwrap(); // block 3 again: it moves to the end
        log.sync().unwrap();
        drop(log);
        let got = StageLog::load(t.path(), 7, BS, FS).unwrap().records;
        assert_eq!(got, vec![(4, block(2)), (9, block(3)), (3, block(4))]);
        let mut log = StageLog::create(t.path(), 7, BS, 0, &got).unwrap();
        assert_eq!(log.blocks(), 3);
        assert_eq!(
            fs::metadata(stage_path(t.path())).unwrap().len(),
            HEADER + 3 * (12 + BS),
            "rewritten without the superseded record"
        );
        assert_eq!(StageLog::load(t.path(), 7, BS, FS).unwrap().records, got);
        assert_eq!(log.unplaced(), vec![4, 9, 3], "none placed yet, in the log's order");
        assert!(log.read(9).unwrap() == block(3));
        for b in [4, 9, 3] {
            log.placed(b);
        }
        log.clear(0).unwrap();
        drop(log);
        assert!(StageLog::load(t.path(), 7, BS, FS).unwrap().records.is_empty());
        // Another array's log, or another block size: refused.
        for (uuid, bs) in [(8, BS), (7, 4096)] {
            let e = StageLog::load(t.path(), uuid, bs, FS).err().unwrap().to_string();
            assert!(e.contains("dgraid.stage") && e.contains("header"), "{e}");
        }
    }

    #[test]
    fn every_cut_of_the_last_record_loses_it_alone_and_damage_before_the_end_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let p = stage_path(t.path());
        let rl = 12 + BS;
        for cut in 1..=rl {
            let mut log = StageLog::create(t.path(), 7, BS, 0, &[]).unwrap();
            for b in 0..3 {
                log.append(b, &block(b as u8 + 1), 0).unwrap();
            }
            drop(log);
            let full = fs::metadata(&p).unwrap().len();
            OpenOptions::new()
                .write(true)
                .open(&p)
                .unwrap()
                .set_len(full - cut)
                .unwrap();
            let got = StageLog::load(t.path(), 7, BS, FS).unwrap().records;
            assert_eq!(got, vec![(0, block(1)), (1, block(2))], "cut {cut}");
        }
        // A flipped byte in the last record: cut off too; in the first of
        // three: refused, naming the record.
        let mut log = StageLog::create(t.path(), 7, BS, 0, &[]).unwrap();
        for b in 0..3 {
            log.append(b, &block(9), 0).unwrap();
        }
        drop(log);
        let f = OpenOptions::new().write(true).open(&p).unwrap();
        f.write_all_at(&[0], HEADER + 2 * rl + 40).unwrap();
        assert_eq!(StageLog::load(t.path(), 7, BS, FS).unwrap().records.len(), 2);
        let f = OpenOptions::new().write(true).open(&p).unwrap();
        f.write_all_at(&[0], HEADER + 40).unwrap();
        let e = StageLog::load(t.path(), 7, BS, FS).err().unwrap().to_string();
        assert!(e.contains("dgraid.stage") && e.contains("record 1"), "{e}");
    }

    /// A crafted record, its CRC right, naming a block past the file
    /// system: refused at open, naming the record and the field (replayed,
    /// its placement failed and took every write held with it: 18 of 20
    /// flushed blocks of an mke2fs read back wrong).
    #[test]
    fn a_record_naming_a_block_past_the_file_system_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let mut log = StageLog::create(t.path(), 7, BS, 0, &[]).unwrap();
        log.append(40, &block(1), 0).unwrap();
        log.append(FS, &block(2), 0).unwrap();
        log.append(41, &block(3), 0).unwrap();
        drop(log);
        let e = StageLog::load(t.path(), 7, BS, FS).err().unwrap().to_string();
        assert!(
            e.contains("dgraid.stage") && e.contains("record 2") && e.contains("block"),
            "{e}"
        );
        assert_eq!(StageLog::load(t.path(), 7, BS, FS + 1).unwrap().records.len(), 3);
    }

    /// Which records a map leaves valid (hand-worked): a log of blocks
    /// 1, 2, 3 newer than epoch 5, against maps at various epochs.
    #[test]
    fn records_are_replayed_unless_a_later_commit_named_their_block_and_none_from_before_a_compaction() {
        let staged = Staged {
            base: 5,
            records: vec![(1, block(1)), (2, block(2)), (3, block(3))],
        };
        let map = |epoch, compacted_at, touched: &[(u64, u64)]| Loaded {
            epoch,
            compacted_at,
            touched: touched.iter().copied().collect(),
            ..Loaded::default()
        };
        let blocks = |m: Loaded| {
            let (keep, skipped) = staged.clone().newer_than(&m);
            (keep.into_iter().map(|(b, _)| b).collect::<Vec<_>>(), skipped)
        };
        // The map committed nothing since the log began: all of it (block 2
        // named at 5 is older than the log's record of it).
        assert_eq!(blocks(map(5, 2, &[(2, 5)])), (vec![1, 2, 3], 0));
        // Commits 6 and 7 named blocks 2 and 3 (placed, freed, reused):
        // only block 1 is still newer than the map.
        assert_eq!(blocks(map(7, 2, &[(2, 6), (3, 7), (9, 7)])), (vec![1], 2));
        // Compacted at 6, after the log began: a stale copy, nothing.
        assert_eq!(blocks(map(6, 6, &[])), (vec![], 3));
        // The map older than the log (put back from before): all of it.
        assert_eq!(blocks(map(3, 3, &[])), (vec![1, 2, 3], 0));
    }

    /// The base is the map's epoch at the first record, kept through a
    /// compaction, reset by a clear and moved by a rebase (which keeps the
    /// records and which of them are placed); a crafted base is refused by
    /// the header's CRC.
    #[test]
    fn the_base_is_the_maps_epoch_at_the_first_record() {
        let t = tempfile::tempdir().unwrap();
        let mut log = StageLog::create(t.path(), 7, BS, 2, &[]).unwrap();
        log.append(1, &block(1), 4).unwrap();
        log.append(2, &block(2), 9).unwrap();
        assert_eq!(log.base(), 4, "set by the first record");
        log.placed(1);
        log.rebase(6).unwrap();
        assert_eq!((log.base(), log.unplaced()), (6, vec![2]));
        let got = StageLog::load(t.path(), 7, BS, FS).unwrap();
        assert_eq!((got.base, got.records), (6, vec![(1, block(1)), (2, block(2))]));
        log.placed(2);
        log.clear(8).unwrap();
        assert_eq!(
            StageLog::load(t.path(), 7, BS, FS).unwrap(),
            Staged {
                base: 8,
                records: vec![]
            }
        );
        drop(log);
        let p = stage_path(t.path());
        let f = OpenOptions::new().write(true).open(&p).unwrap();
        f.write_all_at(&3u64.to_le_bytes(), 32).unwrap();
        let e = StageLog::load(t.path(), 7, BS, FS).err().unwrap().to_string();
        assert!(e.contains("dgraid.stage") && e.contains("header"), "{e}");
    }

    #[test]
    fn a_log_of_many_rewrites_is_compacted_and_keeps_the_newest() {
        let t = tempfile::tempdir().unwrap();
        let mut log = StageLog::create(t.path(), 7, BS, 0, &[]).unwrap();
        for v in 0..3000u64 {
            log.append(v % 5, &block((v % 251) as u8), 0).unwrap();
        }
        log.sync().unwrap();
        assert!(log.records <= 2 * 5 + SLACK + 1, "{} records", log.records);
        drop(log);
        let got = StageLog::load(t.path(), 7, BS, FS).unwrap().records;
        let want: Vec<_> = (2995..3000u64).map(|v| (v % 5, block((v % 251) as u8))).collect();
        assert_eq!(got, want);
    }
}
