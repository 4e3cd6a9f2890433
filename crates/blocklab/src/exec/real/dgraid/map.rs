//! `dgraid.map`: the block map of a D-GRAID array on member files — which
//! fs block lives at which copies (disk, member block), with the owner and
//! kind it was placed for — as an append-only log that survives a restart
//! and a `kill -9`.
//!
//! Records are appended at commits (a FLUSH, a full batch, a close), after
//! the data they name is on the members; the placement layer holds every
//! copy it releases until the record releasing it is durable
//! (`Dgraid::hold_frees`), so the map on disk never names a copy that
//! holds another block's bytes: a crash leaves each block at its old or its
//! new copies, both holding what the map says.
//!
//! File: a header (magic, the array's UUID, CRC), then records `len u32,
//! type u8, payload, crc32 u32` (CRC over type and payload). A torn last
//! record (a crash mid-append) is cut off at open; damage followed by more
//! than one record's worth of bytes is refused. The log is rewritten whole
//! (compacted) at open and at a clean close.
//!
//! **Epochs.** Each commit ends with an `Epoch(n)` record, n counting
//! commits; a compacted log holds the map's records then the epoch it was
//! compacted at. Reading the log gives the map's epoch, the epoch it was
//! last compacted at, and, for every block a record names since then, the
//! epoch of the commit that named it last (records after the last marker —
//! a commit cut short by a crash — count as the next epoch). The staging
//! log (`stage.rs`) is bound to an epoch, and this is what tells which of
//! its records the map has superseded.

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap;

use super::log_file;
use crate::dgraid::layer::Copy;
use crate::error::{Error, Location, Result};
use crate::fsmodel::kind::{BlockKind, Tag, KINDS};
use crate::fsmodel::Geometry;

pub const MAP_FILE: &str = "dgraid.map";
const MAGIC: &[u8; 8] = b"BLDGMAP1";
const HEADER: u64 = 8 + 16 + 4;
/// No record is longer (a geometry of many groups is the longest).
const MAX_RECORD: u32 = 16 << 20;

pub fn map_path(dir: &Path) -> PathBuf {
    dir.join(MAP_FILE)
}

/// One change of the map.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    /// The file system's layout (the placement layer is built from it).
    Geometry(Geometry),
    /// `block` holds `tag` and lives at `copies`.
    Map { block: u64, tag: Tag, copies: Vec<Copy> },
    /// `block` is free (never written, or freed): reads as zeroes.
    Unmap { block: u64 },
    /// `block`'s contents are gone (no copy survived): reads fail until it
    /// is written again.
    Lost { block: u64 },
    /// The end of commit number n (or, after a compaction's records, the
    /// epoch it was compacted at).
    Epoch(u64),
}

fn kind_code(k: BlockKind) -> u8 {
    KINDS.iter().position(|(x, _)| *x == k).expect("every kind is listed") as u8
}

impl Record {
    fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        match self {
            Record::Geometry(g) => {
                b.push(1);
                b.extend(serde_json::to_vec(g).expect("a geometry serializes"));
            }
            Record::Map { block, tag, copies } => {
                b.push(2);
                b.extend(block.to_le_bytes());
                b.extend(tag.owner.to_le_bytes());
                b.push(kind_code(tag.kind));
                b.extend(tag.parent.to_le_bytes());
                b.push(copies.len() as u8);
                for c in copies {
                    b.extend(c.disk.to_le_bytes());
                    b.extend(c.block.to_le_bytes());
                }
            }
            Record::Unmap { block } => {
                b.push(3);
                b.extend(block.to_le_bytes());
            }
            Record::Lost { block } => {
                b.push(4);
                b.extend(block.to_le_bytes());
            }
            Record::Epoch(n) => {
                b.push(5);
                b.extend(n.to_le_bytes());
            }
        }
        b
    }

    fn decode(b: &[u8]) -> std::result::Result<Record, String> {
        let u64_at = |i: usize| -> std::result::Result<u64, String> {
            b.get(i..i + 8)
                .map(|s| u64::from_le_bytes(s.try_into().expect("8 bytes")))
                .ok_or_else(|| "record cut short".to_string())
        };
        match b.first() {
            Some(1) => serde_json::from_slice(&b[1..])
                .map(Record::Geometry)
                .map_err(|e| format!("geometry: {e}")),
            Some(2) => {
                let block = u64_at(1)?;
                let owner = u64_at(9)?;
                let kind = *b.get(17).ok_or("record cut short")?;
                let kind = KINDS.get(kind as usize).ok_or(format!("kind {kind} unknown"))?.0;
                let parent = u64_at(18)?;
                let n = *b.get(26).ok_or("record cut short")? as usize;
                if b.len() != 27 + n * 12 {
                    return Err(format!("{} bytes for {n} copies", b.len()));
                }
                let copies = (0..n)
                    .map(|i| {
                        let at = 27 + i * 12;
                        Copy {
                            disk: u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes")),
                            block: u64::from_le_bytes(b[at + 4..at + 12].try_into().expect("8 bytes")),
                        }
                    })
                    .collect();
                Ok(Record::Map {
                    block,
                    tag: Tag::of(owner, kind, parent),
                    copies,
                })
            }
            Some(3) => Ok(Record::Unmap { block: u64_at(1)? }),
            Some(4) => Ok(Record::Lost { block: u64_at(1)? }),
            Some(5) => Ok(Record::Epoch(u64_at(1)?)),
            Some(t) => Err(format!("unknown record type {t}")),
            None => Err("empty record".into()),
        }
    }
}

fn frame(r: &Record) -> Vec<u8> {
    let body = r.encode();
    let mut out = Vec::with_capacity(body.len() + 8);
    out.extend((body.len() as u32).to_le_bytes());
    out.extend(&body);
    out.extend(crc32fast::hash(&body).to_le_bytes());
    out
}

fn header(uuid: u128) -> Vec<u8> {
    let mut h = MAGIC.to_vec();
    h.extend(uuid.to_le_bytes());
    let crc = crc32fast::hash(&h);
    h.extend(crc.to_le_bytes());
    h
}

/// The map as the log leaves it: the last of each block's records.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Loaded {
    pub geometry: Option<Geometry>,
    pub mapped: FxHashMap<u64, (Tag, Vec<Copy>)>,
    pub lost: BTreeSet<u64>,
    /// The last commit's epoch (one more when a commit was cut short).
    pub epoch: u64,
    /// The epoch the log was last compacted at (0 for a log without
    /// epochs).
    pub compacted_at: u64,
    /// Blocks named by a record since the compaction: the epoch of the
    /// last commit that named each.
    pub touched: FxHashMap<u64, u64>,
    /// Records read (epoch markers not counted).
    pub records: u64,
    /// Bytes of a torn last record cut off.
    pub torn_bytes: u64,
}

impl Loaded {
    fn apply(&mut self, r: Record) {
        match r {
            Record::Geometry(g) => self.geometry = Some(g),
            Record::Map { block, tag, copies } => {
                self.lost.remove(&block);
                self.mapped.insert(block, (tag, copies));
            }
            Record::Unmap { block } => {
                self.lost.remove(&block);
                self.mapped.remove(&block);
            }
            Record::Lost { block } => {
                self.lost.insert(block);
            }
            Record::Epoch(_) => {}
        }
    }

    /// The records that rebuild this map, blocks ascending.
    pub fn records(&self) -> Vec<Record> {
        let mut out: Vec<Record> = self.geometry.iter().cloned().map(Record::Geometry).collect();
        let mut blocks: Vec<&u64> = self.mapped.keys().collect();
        blocks.sort_unstable();
        for b in blocks {
            let (tag, copies) = &self.mapped[b];
            out.push(Record::Map {
                block: *b,
                tag: *tag,
                copies: copies.clone(),
            });
        }
        out.extend(self.lost.iter().map(|&block| Record::Lost { block }));
        out
    }
}

/// The block a map record names.
fn block_of(r: &Record) -> Option<u64> {
    match r {
        Record::Map { block, .. } | Record::Unmap { block } | Record::Lost { block } => Some(*block),
        Record::Geometry(_) | Record::Epoch(_) => None,
    }
}

/// The open log.
pub struct MapLog {
    file: File,
    path: PathBuf,
    end: u64,
    /// The last durable commit's epoch.
    epoch: u64,
}

impl MapLog {
    /// A new log holding `records` compacted at `epoch`, written whole and
    /// renamed into place.
    pub fn write_new(dir: &Path, uuid: u128, epoch: u64, records: &[Record]) -> Result<MapLog> {
        let mut buf = header(uuid);
        for r in records {
            buf.extend(frame(r));
        }
        buf.extend(frame(&Record::Epoch(epoch)));
        let file = log_file::replace_whole(dir, MAP_FILE, &buf)?;
        Ok(MapLog {
            file,
            path: map_path(dir),
            end: buf.len() as u64,
            epoch,
        })
    }

    /// The last durable commit's epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Read the log of the array `uuid` in `dir` (cutting off a torn last
    /// record).
    pub fn load(dir: &Path, uuid: u128) -> Result<Loaded> {
        let path = map_path(dir);
        let shown = path.display().to_string();
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io(&shown, e))?;
        let len = f.metadata().map_err(|e| Error::io(&shown, e))?.len();
        log_file::check_header(
            &f,
            &shown,
            len,
            &header(uuid),
            "not the block map of this array (magic, UUID or CRC differ)",
        )?;
        let mut out = Loaded::default();
        // Blocks named since the last epoch marker; whether one was seen.
        let mut batch: Vec<u64> = Vec::new();
        let mut marked = false;
        let mut at = HEADER;
        let mut n = 0u64;
        while at < len {
            n += 1;
            let bad = |m: String| Error::parse(&shown, Location::Record(n), "record", m);
            let torn = |why: String| -> Result<()> {
                // A crash mid-append leaves at most one partial record.
                if len - at <= MAX_RECORD as u64 + 8 {
                    Ok(())
                } else {
                    Err(bad(format!("{why}, with {} bytes after it", len - at)))
                }
            };
            let mut lb = [0u8; 4];
            if f.read_exact_at(&mut lb, at).is_err() {
                torn("cut short".into())?;
                break;
            }
            let rl = u32::from_le_bytes(lb);
            if rl == 0 || rl > MAX_RECORD || at + 8 + rl as u64 > len {
                torn(format!("length {rl}"))?;
                break;
            }
            let mut body = vec![0u8; rl as usize + 4];
            f.read_exact_at(&mut body, at + 4).map_err(|e| Error::io(&shown, e))?;
            let crc = u32::from_le_bytes(body[rl as usize..].try_into().expect("4 bytes"));
            body.truncate(rl as usize);
            if crc32fast::hash(&body) != crc {
                torn("checksum mismatch".into())?;
                break;
            }
            let r = Record::decode(&body).map_err(bad)?;
            match r {
                Record::Epoch(e) if !marked => {
                    // The compaction's records are all as of its epoch.
                    (out.compacted_at, out.epoch, marked) = (e, e, true);
                    batch.clear();
                }
                Record::Epoch(e) => {
                    out.epoch = e;
                    out.touched.extend(batch.drain(..).map(|b| (b, e)));
                }
                _ => {
                    batch.extend(block_of(&r));
                    out.records += 1;
                }
            }
            out.apply(r);
            at += 8 + rl as u64;
        }
        if marked && !batch.is_empty() {
            // A commit cut short: what it wrote counts as the next epoch.
            out.epoch += 1;
            let e = out.epoch;
            out.touched.extend(batch.drain(..).map(|b| (b, e)));
        }
        if at < len {
            out.torn_bytes = len - at;
            f.set_len(at).map_err(|e| Error::io(&shown, e))?;
        }
        Ok(out)
    }

    /// Append `records` as the next epoch's commit and make them durable.
    pub fn commit(&mut self, records: &[Record]) -> std::io::Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let mut buf = Vec::new();
        for r in records {
            buf.extend(frame(r));
        }
        buf.extend(frame(&Record::Epoch(self.epoch + 1)));
        self.file.write_all_at(&buf, self.end)?;
        self.file.sync_data()?;
        self.end += buf.len() as u64;
        self.epoch += 1;
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    fn sample() -> Vec<Record> {
        let geo = Geometry::mke2fs(&crate::fsmodel::geometry::MkfsParams::new(16 << 20, 4096)).unwrap();
        vec![
            Record::Geometry(geo),
            Record::Map {
                block: 5,
                tag: Tag::of(12, BlockKind::Data, 2),
                copies: vec![Copy { disk: 0, block: 7 }, Copy { disk: 1, block: 7 }],
            },
            Record::Map {
                block: 6,
                tag: Tag::shared(BlockKind::InodeTable),
                copies: vec![Copy { disk: 3, block: 1 }],
            },
            Record::Lost { block: 6 },
            Record::Unmap { block: 5 },
            Record::Map {
                block: 9,
                tag: Tag::of(13, BlockKind::Directory, 2),
                copies: vec![Copy { disk: 2, block: 0 }],
            },
        ]
    }

    #[test]
    fn a_log_round_trips_and_the_last_record_of_a_block_wins() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = MapLog::write_new(dir.path(), 7, 0, &sample()[..2]).unwrap();
        log.commit(&sample()[2..]).unwrap();
        let l = MapLog::load(dir.path(), 7).unwrap();
        assert_eq!(l.records, 6);
        assert!(l.geometry.is_some());
        assert_eq!(l.mapped.len(), 2, "block 5 unmapped, 6 and 9 mapped");
        assert!(!l.mapped.contains_key(&5));
        assert_eq!(l.lost.iter().copied().collect::<Vec<_>>(), vec![6]);
        // Compacted, it says the same.
        MapLog::write_new(dir.path(), 7, l.epoch, &l.records()).unwrap();
        let c = MapLog::load(dir.path(), 7).unwrap();
        assert_eq!((c.geometry, c.mapped, c.lost), (l.geometry, l.mapped, l.lost));
    }

    /// Compacted at epoch 3, then two commits: the map is at epoch 5, and
    /// each block the commits named carries the epoch of the last one that
    /// did (the compaction's blocks none); whole records of a commit cut
    /// before its marker count as epoch 6.
    #[test]
    fn each_commit_is_an_epoch_and_the_blocks_it_names_carry_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = MapLog::write_new(dir.path(), 7, 3, &sample()[..3]).unwrap();
        assert_eq!(log.epoch(), 3);
        log.commit(&sample()[3..5]).unwrap(); // Lost 6, Unmap 5
        log.commit(&sample()[5..]).unwrap(); // Map 9
        log.commit(&[]).unwrap(); // nothing: no epoch
        assert_eq!(log.epoch(), 5);
        let l = MapLog::load(dir.path(), 7).unwrap();
        assert_eq!((l.epoch, l.compacted_at), (5, 3));
        let touched: BTreeSet<(u64, u64)> = l.touched.iter().map(|(&b, &e)| (b, e)).collect();
        assert_eq!(touched, [(5, 4), (6, 4), (9, 5)].into_iter().collect());
        // A commit cut short after its records, before its marker.
        let end = fs::metadata(map_path(dir.path())).unwrap().len();
        let f = OpenOptions::new().write(true).open(map_path(dir.path())).unwrap();
        f.write_all_at(&frame(&Record::Unmap { block: 9 }), end).unwrap();
        let l = MapLog::load(dir.path(), 7).unwrap();
        assert_eq!((l.epoch, l.touched[&9], l.touched[&5]), (6, 6, 4));
        // Compacted again: one epoch, no block named since.
        MapLog::write_new(dir.path(), 7, l.epoch, &l.records()).unwrap();
        let c = MapLog::load(dir.path(), 7).unwrap();
        assert_eq!((c.epoch, c.compacted_at, c.touched.len()), (6, 6, 0));
    }

    #[test]
    fn a_torn_last_record_is_cut_off_and_another_arrays_map_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = MapLog::write_new(dir.path(), 7, 0, &sample()[..1]).unwrap();
        log.commit(&sample()[1..]).unwrap();
        drop(log);
        let p = map_path(dir.path());
        let whole = fs::read(&p).unwrap();
        let full = whole.len() as u64;
        // Every cut inside the last record (the commit's marker) loses that
        // record only: its records count as the next epoch all the same.
        let last = frame(&Record::Epoch(1)).len() as u64;
        for cut in 1..last {
            fs::write(&p, &whole).unwrap();
            OpenOptions::new()
                .write(true)
                .open(&p)
                .unwrap()
                .set_len(full - cut)
                .unwrap();
            let l = MapLog::load(dir.path(), 7).unwrap();
            assert_eq!((l.records, l.epoch), (6, 1), "cut {cut}");
            assert_eq!(l.torn_bytes, last - cut);
            assert_eq!(fs::metadata(&p).unwrap().len(), full - last, "the torn tail is cut off");
        }
        let e = MapLog::load(dir.path(), 8).unwrap_err().to_string();
        assert!(e.contains("dgraid.map") && e.contains("header"), "{e}");
    }
}
