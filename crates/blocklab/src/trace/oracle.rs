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

use super::blocks::BLOCK_BITS;
use super::{BinaryFormat, Op, ParseCtx, Request};
use crate::error::Result;
use std::io::Write;

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
