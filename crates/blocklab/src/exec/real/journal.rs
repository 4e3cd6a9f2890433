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
    /// Units a record may hold at most: every member block once.
    max_units: u64,
}

/// A complete record found in the file: where it starts and its units.
/// Its places and bytes are read again in pieces when walked, so memory
/// does not follow a record's claimed size (a crafted, sparse journal).
#[derive(Debug, Clone, Copy)]
struct Found {
    at: u64,
    units: u64,
}

/// Places (and their units' bytes) read at once while walking a record.
const WALK_UNITS: u64 = 256;

impl Journal {
    /// Open the journal of an array whose members hold `member_blocks`
    /// blocks in all (a record never holds more units).
    pub fn open(dir: &Path, bs: usize, member_blocks: u64) -> io::Result<Journal> {
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
            max_units: member_blocks,
        })
    }

    /// Every complete record, in order (stops at the first torn one). The
    /// CRC is computed over pieces of the record, never the whole at once.
    fn found(&self, file: &File) -> io::Result<Vec<Found>> {
        let len = file.metadata()?.len();
        let bs = self.bs as u64;
        let mut out = Vec::new();
        let mut at = 0u64;
        let mut piece = vec![0u8; 1 << 20];
        loop {
            let mut head = [0u8; HEADER];
            if at + HEADER as u64 > len || file.read_exact_at(&mut head, at).is_err() {
                break;
            }
            if &head[..4] != MAGIC {
                break;
            }
            let units = u32::from_le_bytes(head[12..16].try_into().unwrap()) as u64;
            let crc = u32::from_le_bytes(head[16..20].try_into().unwrap());
            if units > self.max_units {
                // Read, it would cost as much as a terabyte-long file says.
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "record {}: field `units`: {units} units, more than the array's {} member blocks",
                        out.len(),
                        self.max_units
                    ),
                ));
            }
            let body_len = units * (12 + bs);
            if at + HEADER as u64 + body_len > len {
                break;
            }
            let mut h = crc32fast::Hasher::new();
            h.update(&head[4..16]);
            let mut done = 0u64;
            let mut readable = true;
            while done < body_len {
                let n = (body_len - done).min(piece.len() as u64) as usize;
                if file.read_exact_at(&mut piece[..n], at + HEADER as u64 + done).is_err() {
                    readable = false;
                    break;
                }
                h.update(&piece[..n]);
                done += n as u64;
            }
            if !readable || h.finalize() != crc {
                break;
            }
            out.push(Found { at, units });
            at += HEADER as u64 + body_len;
        }
        Ok(out)
    }

    /// Walk every complete record in order: `f(record, place, unit bytes)`
    /// for each unit; a read error becomes `io(e)`. Returns the records walked.
    pub fn walk<E>(
        &self,
        io: impl Fn(io::Error) -> E,
        mut f: impl FnMut(u64, Place, &[u8]) -> std::result::Result<(), E>,
    ) -> std::result::Result<u64, E> {
        let g = self.inner.lock().unwrap();
        let found = self.found(&g.file).map_err(&io)?;
        let bs = self.bs as u64;
        let mut places = vec![0u8; (WALK_UNITS * 12) as usize];
        let mut units = super::members::AlignedBuf::zeroed((WALK_UNITS * bs) as usize);
        for (r, rec) in found.iter().enumerate() {
            let data_at = rec.at + HEADER as u64 + rec.units * 12;
            let mut i = 0u64;
            while i < rec.units {
                let n = (rec.units - i).min(WALK_UNITS);
                g.file
                    .read_exact_at(&mut places[..(n * 12) as usize], rec.at + HEADER as u64 + i * 12)
                    .map_err(&io)?;
                g.file
                    .read_exact_at(&mut units[..(n * bs) as usize], data_at + i * bs)
                    .map_err(&io)?;
                for k in 0..n as usize {
                    let c = &places[k * 12..k * 12 + 12];
                    let place = Place {
                        disk: u32::from_le_bytes(c[..4].try_into().unwrap()),
                        block: u64::from_le_bytes(c[4..12].try_into().unwrap()),
                    };
                    f(r as u64, place, &units[k * self.bs..(k + 1) * self.bs])?;
                }
                i += n;
            }
        }
        Ok(found.len() as u64)
    }

    /// Check every record's places against the array before anything is
    /// replayed: a record's CRC holds whoever wrote it, and its disk and
    /// block become a member index and a file offset (a block past the
    /// member would grow the member file, up to terabytes of holes).
    pub fn check_places(&self, shown: &str, disks: u32, member_blocks: u64) -> crate::error::Result<()> {
        use crate::error::{Error, Location};
        self.walk(
            |e| Error::io(shown, e),
            |r, p, _| {
                let bad = |field: &str, m: String| Err(Error::parse(shown, Location::Record(r), field, m));
                if p.disk >= disks {
                    return bad("disk", format!("disk {}: the array has disks 0..{}", p.disk, disks - 1));
                }
                if p.block >= member_blocks {
                    return bad(
                        "block",
                        format!("member block {} is past the member's {member_blocks} blocks", p.block),
                    );
                }
                Ok(())
            },
        )
        .map(|_| ())
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

    /// Every unit walked: (record, place, bytes), and the record count.
    fn walked(j: &Journal) -> (u64, Vec<(u64, Place, Vec<u8>)>) {
        let mut units = Vec::new();
        let n = j
            .walk(
                |e| e,
                |r, p, u| {
                    units.push((r, p, u.to_vec()));
                    Ok(())
                },
            )
            .unwrap();
        (n, units)
    }

    #[test]
    fn a_record_claiming_more_units_than_the_array_has_blocks_is_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(dir.path(), 4096, 64).unwrap();
        // A header claiming 2^30 units (4.4 TB of body) over a sparse file
        // that long: refused from the header, nothing read or allocated.
        let units = 1u32 << 30;
        let mut head = Vec::from(&MAGIC[..]);
        head.extend_from_slice(&0u64.to_le_bytes());
        head.extend_from_slice(&units.to_le_bytes());
        head.extend_from_slice(&0u32.to_le_bytes());
        let file = OpenOptions::new().write(true).open(journal_path(dir.path())).unwrap();
        file.write_at(&head, 0).unwrap();
        file.set_len(HEADER as u64 + units as u64 * (12 + 4096)).unwrap();
        let e = j.check_places("journal", 4, 16).unwrap_err().to_string();
        assert!(e.starts_with("journal: record 0: field `units`"), "{e}");
    }

    #[test]
    fn records_read_back_in_order_and_a_torn_tail_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let bs = 512;
        let j = Journal::open(dir.path(), bs, 64).unwrap();
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
        let j = Journal::open(dir.path(), bs, 64).unwrap();
        let (n, units) = walked(&j);
        assert_eq!(n, 2);
        assert_eq!(
            units,
            vec![
                (0, Place { disk: 0, block: 7 }, a.clone()),
                (0, Place { disk: 3, block: 9 }, b.clone()),
                (1, Place { disk: 1, block: 1 }, b.clone()),
            ]
        );
        // A flipped byte in a record ends the replay there.
        let file = OpenOptions::new().write(true).open(journal_path(dir.path())).unwrap();
        file.write_at(&[0xff], (HEADER + 24 + 5) as u64).unwrap();
        assert_eq!(walked(&j).0, 0);
        j.reset(&Faults::none()).unwrap();
        assert!(j.is_empty() && walked(&j).0 == 0);
    }
}
