//! libCacheSim oracleGeneral binary traces: packed little-endian 24-byte
//! records `u32 time, u64 obj_id, u32 obj_size, i64 next_access_vtime`.
//!
//! Each record is one access to one block, `obj_id`. Requests are in bytes,
//! so a record becomes a request of one [`ORACLE_BLOCK`]-byte block:
//! `tenant = obj_id >> 40`, `offset = (obj_id mod 2^40) * 4096`,
//! `len = 4096`, op read (the format has no op), time in seconds. With the
//! default `--block-size 4096` the cache key of the access (see
//! [`super::blocks::block_key`]) is then exactly `obj_id`, so a counted cache
//! sees the very sequence libCacheSim sees; other block sizes split or merge
//! these 4 KiB blocks. `obj_size` and `next_access_vtime` are not used
//! (next-use distances are recomputed by the consumers that need them).
//!
//! The writer ([`write_record`]) produces the same layout; `next_access_vtime`
//! follows libCacheSim's convention: the 1-based index of the next access to
//! the same object, or -1 if there is none.
//!
//! [`MappedKeys`] is the counted simulator's fast path over an uncompressed
//! file: the cache keys read straight out of a memory map, no request built.

use super::blocks::BLOCK_BITS;
use super::{BinaryFormat, Op, ParseCtx, Request};
use crate::error::{Error, Result};
use std::io::Write;
use std::path::Path;

/// Bytes per record.
pub const RECORD: usize = 24;
/// Bytes of the block each record accesses.
pub const ORACLE_BLOCK: u64 = 4096;

#[derive(Default)]
pub struct Oracle;

/// The request standing for an access to `obj_id` at `time`.
#[inline]
pub fn request_of(time: u32, obj_id: u64) -> Request {
    let block = obj_id & ((1u64 << BLOCK_BITS) - 1);
    Request {
        time: time as f64,
        op: Op::Read,
        offset: block * ORACLE_BLOCK,
        len: ORACLE_BLOCK,
        tenant: (obj_id >> BLOCK_BITS) as u32,
        fs: Default::default(),
    }
}

impl BinaryFormat for Oracle {
    fn record_size(&self) -> usize {
        RECORD
    }

    fn parse_record(&mut self, rec: &[u8], _index: u64, _ctx: &ParseCtx) -> Result<Option<Request>> {
        let time = u32::from_le_bytes(rec[0..4].try_into().unwrap());
        let obj_id = u64::from_le_bytes(rec[4..12].try_into().unwrap());
        Ok(Some(request_of(time, obj_id)))
    }
}

/// Write one oracleGeneral record.
#[inline]
pub fn write_record(
    w: &mut impl Write,
    time: u32,
    obj_id: u64,
    obj_size: u32,
    next_access: i64,
) -> std::io::Result<()> {
    let mut rec = [0u8; RECORD];
    rec[0..4].copy_from_slice(&time.to_le_bytes());
    rec[4..12].copy_from_slice(&obj_id.to_le_bytes());
    rec[12..16].copy_from_slice(&obj_size.to_le_bytes());
    rec[16..24].copy_from_slice(&next_access.to_le_bytes());
    w.write_all(&rec)
}

/// The cache keys of an uncompressed oracleGeneral file at the default block
/// size ([`ORACLE_BLOCK`]), where a record's key is its `obj_id` (see the
/// module notes), read from a memory map: no copy through a read buffer and
/// no [`Request`] per record.
///
/// Only whole files of whole records are mapped ([`MappedKeys::open`] says
/// `None` otherwise, and the generic reader then reports what is wrong, as
/// it always has). A file truncated by another process while mapped would
/// fault; traces are not written while they are simulated.
///
/// Memory stays flat in trace length: every [`RELEASE`] bytes read, the pages
/// behind are dropped from the process (they stay in the page cache), so the
/// resident map is at most two such windows, not the file.
pub struct MappedKeys {
    map: memmap2::Mmap,
    pos: usize,
    /// Bytes before this are released; the next release is due at `released + RELEASE`.
    released: usize,
}

/// Bytes of the map read between two releases of what is behind (a whole
/// number of pages on every platform).
pub const RELEASE: usize = 4 << 20;

impl MappedKeys {
    /// Map `path` if it is a regular, non-empty file of whole records.
    pub fn open(path: &Path) -> Result<Option<Self>> {
        let name = || path.display().to_string();
        let file = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(_) => return Ok(None),
        };
        let meta = file.metadata().map_err(|e| Error::io(name(), e))?;
        if !meta.is_file() || meta.len() == 0 || meta.len() % RECORD as u64 != 0 {
            return Ok(None);
        }
        // SAFETY: the map is only read, and only while this value lives; see
        // the type's note on files truncated under it.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(name(), e))?;
        let _ = map.advise(memmap2::Advice::Sequential);
        Ok(Some(MappedKeys {
            map,
            pos: 0,
            released: 0,
        }))
    }

    /// Drop the pages of `[released, released + RELEASE)` from the process.
    #[cold]
    fn release(&mut self) {
        // SAFETY: MADV_DONTNEED on a private read-only file mapping: a later
        // read of these pages would fetch them from the file again, and none
        // is made (keys are copied out, the position only moves forward).
        let _ = unsafe {
            self.map
                .unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, self.released, RELEASE)
        };
        self.released += RELEASE;
    }

    /// Bytes of the map released so far.
    pub fn released(&self) -> usize {
        self.released
    }
}

impl Iterator for MappedKeys {
    type Item = u64;
    #[inline]
    fn next(&mut self) -> Option<u64> {
        let rec = self.map.get(self.pos..self.pos + RECORD)?;
        let key = u64::from_le_bytes(rec[4..12].try_into().unwrap());
        self.pos += RECORD;
        if self.pos >= self.released + 2 * RELEASE {
            self.release();
        }
        Some(key)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = (self.map.len() - self.pos) / RECORD;
        (n, Some(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::blocks::BlockStream;
    use crate::trace::{self, TraceOptions};

    fn file(name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("blocklab-oracle-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("t.oracleGeneral");
        std::fs::write(&p, bytes).unwrap();
        p
    }

    /// The mapped keys are the keys the generic reader gives, tenants included.
    #[test]
    fn mapped_keys_are_the_block_streams_keys() {
        let ids = [1u64, 7, 1, (3 << 40) | 5, u64::MAX >> 1, 0, 7];
        let mut buf = Vec::new();
        for (i, &id) in ids.iter().enumerate() {
            write_record(&mut buf, i as u32, id, 4096, -1).unwrap();
        }
        let p = file("keys", &buf);
        let opts = TraceOptions {
            format: "oracle".into(),
            ..Default::default()
        };
        let generic: Vec<u64> = BlockStream::new(trace::open(&p, &opts).unwrap(), Default::default())
            .unwrap()
            .map(|a| a.unwrap().key)
            .collect();
        let mapped: Vec<u64> = MappedKeys::open(&p).unwrap().unwrap().collect();
        assert_eq!(mapped, ids);
        assert_eq!(mapped, generic);
        std::fs::remove_dir_all(p.parent().unwrap()).unwrap();
    }

    /// The pages read are released a window behind: the keys are unchanged.
    #[test]
    fn keys_survive_the_releases_behind_the_reader() {
        let n = (3 * RELEASE / RECORD + 77) as u64;
        let mut buf = Vec::with_capacity(n as usize * RECORD);
        for i in 0..n {
            write_record(&mut buf, 0, i * 31, 4096, -1).unwrap();
        }
        let p = file("release", &buf);
        let mut keys = MappedKeys::open(&p).unwrap().unwrap();
        for i in 0..n {
            assert_eq!(keys.next(), Some(i * 31), "record {i}");
        }
        assert_eq!(keys.next(), None);
        assert_eq!(keys.released(), 2 * RELEASE);
        std::fs::remove_dir_all(p.parent().unwrap()).unwrap();
    }

    #[test]
    fn only_whole_files_of_whole_records_are_mapped() {
        let p = file("partial", &[0u8; RECORD + 3]);
        assert!(MappedKeys::open(&p).unwrap().is_none());
        let e = file("empty", &[]);
        assert!(MappedKeys::open(&e).unwrap().is_none());
        assert!(MappedKeys::open(p.parent().unwrap()).unwrap().is_none());
        assert!(MappedKeys::open(&p.with_extension("missing")).unwrap().is_none());
        for d in [p, e] {
            std::fs::remove_dir_all(d.parent().unwrap()).unwrap();
        }
    }
}
