//! The degraded-write journal: closes the RAID-5/6 write hole.
//!
//! A write-intent bitmap lets a restart recompute the parity of the rows
//! that were being written, from their data. That needs every unit of the
//! row: on a row with a failed member the lost unit exists only as the
//! parity, so a crash between the data and the parity write would make the
//! lost unit unrecoverable (MD refuses to start such an array). Writes to
//! such rows therefore go to this journal first: one record holds every unit
//! the write will put in place; it is synced before the first in-place
//! write, and replayed (idempotently, in order) when the array opens.
//!
//! Record: magic `BLJ1`, sequence (u64), units (u32), CRC-32 (u32) of the
//! rest, then per unit (disk u32, member block u64), then the units' bytes.
//! A torn last record fails its CRC and is ignored: its in-place writes never
//! started. The journal is emptied (a checkpoint) once the members are
//! synced: on flush, on close, on every change of the failed set, and
//! before a write that is not journaled touches a journaled row (otherwise
//! a replay would put the older journaled units back over it).
//!
//! Cost: one extra write of the data and parity and one sync per write to a
//! degraded row; healthy rows are not journaled.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::members::{write_all_at, Faults};

const MAGIC: &[u8; 4] = b"BLJ1";
const HEADER: usize = 4 + 8 + 4 + 4;

pub fn journal_path(dir: &Path) -> PathBuf {
    dir.join("journal")
}

/// One unit of a record: where it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    pub disk: u32,
    pub block: u64,
}

struct Inner {
    file: File,
    tail: u64,
    seq: u64,
    /// Member rows with a record since the last checkpoint.
    rows: HashSet<u64>,
}

pub struct Journal {
    inner: Mutex<Inner>,
    bs: usize,
}

/// A record read back: the units and their bytes.
pub struct Record {
    pub places: Vec<Place>,
    pub data: Vec<u8>,
}

impl Journal {
    pub fn open(dir: &Path, bs: usize) -> io::Result<Journal> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(journal_path(dir))?;
        Ok(Journal {
            inner: Mutex::new(Inner {
                file,
                tail: 0,
                seq: 0,
                rows: HashSet::new(),
            }),
            bs,
        })
    }

    /// Every complete record, in order (stops at the first torn one).
    pub fn records(&self) -> io::Result<Vec<Record>> {
        let g = self.inner.lock().unwrap();
        let len = g.file.metadata()?.len();
        let mut out = Vec::new();
        let mut at = 0u64;
        loop {
            let mut head = [0u8; HEADER];
            if at + HEADER as u64 > len || g.file.read_exact_at(&mut head, at).is_err() {
                break;
            }
            if &head[..4] != MAGIC {
                break;
            }
            let units = u32::from_le_bytes(head[12..16].try_into().unwrap()) as usize;
            let crc = u32::from_le_bytes(head[16..20].try_into().unwrap());
            let body_len = units * 12 + units * self.bs;
            if at + (HEADER + body_len) as u64 > len {
                break;
            }
            let mut body = vec![0u8; body_len];
            if g.file.read_exact_at(&mut body, at + HEADER as u64).is_err() {
                break;
            }
            let mut h = crc32fast::Hasher::new();
            h.update(&head[4..16]);
            h.update(&body);
            if h.finalize() != crc {
                break;
            }
            let places = body[..units * 12]
                .chunks_exact(12)
                .map(|c| Place {
                    disk: u32::from_le_bytes(c[..4].try_into().unwrap()),
                    block: u64::from_le_bytes(c[4..12].try_into().unwrap()),
                })
                .collect();
            out.push(Record {
                places,
                data: body[units * 12..].to_vec(),
            });
            at += (HEADER + body_len) as u64;
        }
        Ok(out)
    }

    /// Check every record's places against the array before anything is
    /// replayed: a record's CRC holds whoever wrote it, and its disk and
    /// block become a member index and a file offset (a block past the
    /// member would grow the member file, up to terabytes of holes).
    pub fn check_places(&self, shown: &str, disks: u32, member_blocks: u64) -> crate::error::Result<()> {
        let recs = self.records().map_err(|e| crate::error::Error::io(shown, e))?;
        for (i, rec) in recs.iter().enumerate() {
            let bad = |field: &str, m: String| {
                Err(crate::error::Error::parse(
                    shown,
                    crate::error::Location::Record(i as u64),
                    field,
                    m,
                ))
            };
            for p in &rec.places {
                if p.disk >= disks {
                    return bad("disk", format!("disk {}: the array has disks 0..{}", p.disk, disks - 1));
                }
                if p.block >= member_blocks {
                    return bad(
                        "block",
                        format!("member block {} is past the member's {member_blocks} blocks", p.block),
                    );
                }
            }
        }
        Ok(())
    }

    /// Append a record and make it durable. `rows` are the member rows it
    /// covers (remembered until the next checkpoint).
    pub fn append(&self, places: &[Place], units: &[&[u8]], rows: &[u64], faults: &Faults) -> io::Result<()> {
        let mut g = self.inner.lock().unwrap();
        let mut buf = Vec::with_capacity(HEADER + places.len() * (12 + self.bs));
        buf.extend_from_slice(MAGIC);
        buf.extend_from_slice(&g.seq.to_le_bytes());
        buf.extend_from_slice(&(places.len() as u32).to_le_bytes());
        buf.extend_from_slice(&[0u8; 4]);
        for p in places {
            buf.extend_from_slice(&p.disk.to_le_bytes());
            buf.extend_from_slice(&p.block.to_le_bytes());
        }
        for u in units {
            buf.extend_from_slice(u);
        }
        let mut h = crc32fast::Hasher::new();
        h.update(&buf[4..16]);
        h.update(&buf[HEADER..]);
        let crc = h.finalize();
        buf[16..20].copy_from_slice(&crc.to_le_bytes());
        let limit = faults.admit(places.len())?;
        let tail = g.tail;
        match limit {
            None => write_all_at(&g.file, &buf, tail)?,
            Some(k) => {
                // A torn record: some bytes land, the CRC fails on replay.
                let cut = (HEADER + k * 12).min(buf.len());
                write_all_at(&g.file, &buf[..cut], tail)?;
                return Err(super::members::crashed_error());
            }
        }
        g.file.sync_data()?;
        g.tail += buf.len() as u64;
        g.seq += 1;
        g.rows.extend(rows.iter().copied());
        Ok(())
    }

    /// Whether any of `rows` has a record since the last checkpoint.
    pub fn covers_any(&self, rows: &[u64]) -> bool {
        let g = self.inner.lock().unwrap();
        !g.rows.is_empty() && rows.iter().any(|r| g.rows.contains(r))
    }

    pub fn is_empty(&self) -> bool {
        self.inner.lock().unwrap().tail == 0
    }

    /// Forget every record (the members must be synced first).
    pub fn reset(&self, faults: &Faults) -> io::Result<()> {
        let mut g = self.inner.lock().unwrap();
        if g.tail == 0 && g.file.metadata()?.len() == 0 {
            return Ok(());
        }
        if faults.admit(1)?.is_some() {
            return Err(super::members::crashed_error());
        }
        g.file.set_len(0)?;
        g.file.sync_all()?;
        g.tail = 0;
        g.rows.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_back_in_order_and_a_torn_tail_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let bs = 512;
        let j = Journal::open(dir.path(), bs).unwrap();
        let f = Faults::none();
        let a = vec![1u8; bs];
        let b = vec![2u8; bs];
        j.append(
            &[Place { disk: 0, block: 7 }, Place { disk: 3, block: 9 }],
            &[&a, &b],
            &[3],
            &f,
        )
        .unwrap();
        j.append(&[Place { disk: 1, block: 1 }], &[&b], &[0], &f).unwrap();
        assert!(j.covers_any(&[5, 3]) && !j.covers_any(&[5]));
        // The third record is torn by a crash: only a prefix lands.
        f.crash_after(1, 0);
        assert!(j.append(&[Place { disk: 2, block: 2 }], &[&a], &[1], &f).is_err());
        let j = Journal::open(dir.path(), bs).unwrap();
        let recs = j.records().unwrap();
        assert_eq!(recs.len(), 2);
        assert_eq!(
            recs[0].places,
            vec![Place { disk: 0, block: 7 }, Place { disk: 3, block: 9 }]
        );
        assert_eq!(&recs[0].data[..bs], &a[..]);
        assert_eq!(&recs[0].data[bs..], &b[..]);
        assert_eq!(recs[1].places, vec![Place { disk: 1, block: 1 }]);
        // A flipped byte in a record ends the replay there.
        let file = OpenOptions::new().write(true).open(journal_path(dir.path())).unwrap();
        file.write_at(&[0xff], (HEADER + 24 + 5) as u64).unwrap();
        assert_eq!(j.records().unwrap().len(), 0);
        j.reset(&Faults::none()).unwrap();
        assert!(j.is_empty() && j.records().unwrap().is_empty());
    }
}
