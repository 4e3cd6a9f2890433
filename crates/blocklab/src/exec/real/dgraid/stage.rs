//! `dgraid.stage`: writes made before the file system's layout is known,
//! kept durable so that a FLUSH can acknowledge them.
//!
//! Inference cannot place a block before it has seen the superblock and
//! the descriptors, and mke2fs writes its tables and bitmaps first and
//! FLUSHes before it writes the primary superblock (e2fsprogs writes that
//! last, once everything else is on disk). Such writes wait in the
//! classifier's memory; this log keeps a copy of each, appended as it
//! arrives and `fdatasync`ed at a FLUSH, so the FLUSH is honest. Once the
//! layout is known the classifier places them like any write, and the
//! next FLUSH, whose commit makes the map durable, empties the log. At open
//! the records of blocks the map does not hold are written again through
//! the classifier (a block the map holds was stored from this log or
//! written later: the map's copy is as new or newer).
//!
//! File: a header (magic, the array's UUID, the block size, CRC), then
//! fixed-size records `block u64, crc32 u32` (over block and data)`, data`
//! (one fs block). A torn last record (a crash mid-append) is cut off at
//! open; damage followed by a whole record or more is refused, naming the
//! record. The log is rewritten without superseded records (compacted) at
//! open and when it holds more than twice the records it needs.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap;

use super::log_file;
use crate::error::{Error, Location, Result};

pub const STAGE_FILE: &str = "dgraid.stage";
const MAGIC: &[u8; 8] = b"BLDGSTG1";
const HEADER: u64 = 8 + 16 + 8 + 4;
/// Superseded records tolerated before a compaction (beyond twice the
/// live ones).
const SLACK: u64 = 1024;

pub fn stage_path(dir: &Path) -> PathBuf {
    dir.join(STAGE_FILE)
}

fn header(uuid: u128, bs: u64) -> Vec<u8> {
    let mut h = MAGIC.to_vec();
    h.extend(uuid.to_le_bytes());
    h.extend(bs.to_le_bytes());
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

/// The open log.
pub struct StageLog {
    dir: PathBuf,
    file: File,
    uuid: u128,
    bs: u64,
    /// Records in the file.
    records: u64,
    /// Each staged block's newest record (its index in the file).
    newest: FxHashMap<u64, u64>,
    /// Appended since the last sync.
    dirty: bool,
}

impl StageLog {
    fn record_len(&self) -> u64 {
        12 + self.bs
    }

    /// The staged writes in the log of the array `uuid` in `dir` (none
    /// when there is no log): each block's newest contents, in the order
    /// their newest writes arrived. A torn last record is left out; a
    /// whole one naming a block at or past `fs_blocks` is refused (only a
    /// crafted file holds one: replayed, it would fail the placement of
    /// every write held with it).
    pub fn load(dir: &Path, uuid: u128, bs: u64, fs_blocks: u64) -> Result<Vec<(u64, Vec<u8>)>> {
        let path = stage_path(dir);
        if !path.exists() {
            return Ok(Vec::new());
        }
        Self::read(&path, uuid, bs, fs_blocks)
    }

    /// A new log holding `staged` (each block once, in that order),
    /// written whole, synced and renamed into place.
    pub fn create(dir: &Path, uuid: u128, bs: u64, staged: &[(u64, Vec<u8>)]) -> Result<StageLog> {
        let mut buf = header(uuid, bs);
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
            records: staged.len() as u64,
            newest,
            dirty: false,
        })
    }

    fn read(path: &Path, uuid: u128, bs: u64, fs_blocks: u64) -> Result<Vec<(u64, Vec<u8>)>> {
        let shown = path.display().to_string();
        let f = File::open(path).map_err(|e| Error::io(&shown, e))?;
        let len = f.metadata().map_err(|e| Error::io(&shown, e))?.len();
        log_file::check_header(
            &f,
            &shown,
            len,
            &header(uuid, bs),
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
        Ok(out.into_iter().flatten().collect())
    }

    /// Whether any write is staged.
    pub fn is_empty(&self) -> bool {
        self.newest.is_empty()
    }

    /// Blocks staged (distinct).
    pub fn blocks(&self) -> usize {
        self.newest.len()
    }

    /// Append whole blocks from fs block `first` (not yet durable: see
    /// [`StageLog::sync`]).
    pub fn append(&mut self, first: u64, data: &[u8]) -> std::io::Result<()> {
        let bs = self.bs as usize;
        let mut buf = Vec::with_capacity(data.len() / bs * (12 + bs));
        for (i, d) in data.chunks(bs).enumerate() {
            buf.extend(record(first + i as u64, d));
            self.newest.insert(first + i as u64, self.records + i as u64);
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
        *self =
            Self::create(&self.dir, self.uuid, self.bs, &staged).map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok(())
    }

    /// Make what was appended durable (a FLUSH before the layout is known).
    pub fn sync(&mut self) -> std::io::Result<()> {
        if self.dirty {
            self.file.sync_data()?;
            self.dirty = false;
        }
        Ok(())
    }

    /// Empty the log (the staged writes are in the map, durable).
    pub fn clear(&mut self) -> std::io::Result<()> {
        if self.records == 0 {
            return Ok(());
        }
        self.file.set_len(HEADER)?;
        self.file.sync_all()?;
        self.records = 0;
        self.newest.clear();
        self.dirty = false;
        Ok(())
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
        assert!(StageLog::load(t.path(), 7, BS, FS).unwrap().is_empty());
        let mut log = StageLog::create(t.path(), 7, BS, &[]).unwrap();
        assert!(log.is_empty());
        log.append(3, &[block(1), block(2)].concat()).unwrap();
        log.append(9, &block(3)).unwrap();
        log.append(3, &block(4)).unwrap(); // block 3 again: it moves to the end
        log.sync().unwrap();
        drop(log);
        let got = StageLog::load(t.path(), 7, BS, FS).unwrap();
        assert_eq!(got, vec![(4, block(2)), (9, block(3)), (3, block(4))]);
        let mut log = StageLog::create(t.path(), 7, BS, &got).unwrap();
        assert_eq!(log.blocks(), 3);
        assert_eq!(
            fs::metadata(stage_path(t.path())).unwrap().len(),
            HEADER + 3 * (12 + BS),
            "rewritten without the superseded record"
        );
        assert_eq!(StageLog::load(t.path(), 7, BS, FS).unwrap(), got);
        log.clear().unwrap();
        drop(log);
        assert!(StageLog::load(t.path(), 7, BS, FS).unwrap().is_empty());
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
            let mut log = StageLog::create(t.path(), 7, BS, &[]).unwrap();
            for b in 0..3 {
                log.append(b, &block(b as u8 + 1)).unwrap();
            }
            drop(log);
            let full = fs::metadata(&p).unwrap().len();
            OpenOptions::new()
                .write(true)
                .open(&p)
                .unwrap()
                .set_len(full - cut)
                .unwrap();
            let got = StageLog::load(t.path(), 7, BS, FS).unwrap();
            assert_eq!(got, vec![(0, block(1)), (1, block(2))], "cut {cut}");
        }
        // A flipped byte in the last record: cut off too; in the first of
        // three: refused, naming the record.
        let mut log = StageLog::create(t.path(), 7, BS, &[]).unwrap();
        for b in 0..3 {
            log.append(b, &block(9)).unwrap();
        }
        drop(log);
        let f = OpenOptions::new().write(true).open(&p).unwrap();
        f.write_all_at(&[0], HEADER + 2 * rl + 40).unwrap();
        assert_eq!(StageLog::load(t.path(), 7, BS, FS).unwrap().len(), 2);
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
        let mut log = StageLog::create(t.path(), 7, BS, &[]).unwrap();
        log.append(40, &block(1)).unwrap();
        log.append(FS, &block(2)).unwrap();
        log.append(41, &block(3)).unwrap();
        drop(log);
        let e = StageLog::load(t.path(), 7, BS, FS).err().unwrap().to_string();
        assert!(
            e.contains("dgraid.stage") && e.contains("record 2") && e.contains("block"),
            "{e}"
        );
        assert_eq!(StageLog::load(t.path(), 7, BS, FS + 1).unwrap().len(), 3);
    }

    #[test]
    fn a_log_of_many_rewrites_is_compacted_and_keeps_the_newest() {
        let t = tempfile::tempdir().unwrap();
        let mut log = StageLog::create(t.path(), 7, BS, &[]).unwrap();
        for v in 0..3000u64 {
            log.append(v % 5, &block((v % 251) as u8)).unwrap();
        }
        log.sync().unwrap();
        assert!(log.records <= 2 * 5 + SLACK + 1, "{} records", log.records);
        drop(log);
        let got = StageLog::load(t.path(), 7, BS, FS).unwrap();
        let want: Vec<_> = (2995..3000u64).map(|v| (v % 5, block((v % 251) as u8))).collect();
        assert_eq!(got, want);
    }
}
