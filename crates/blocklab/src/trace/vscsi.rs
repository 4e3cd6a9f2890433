//! CloudPhysics vscsi binary traces (as read by libCacheSim), little-endian
//! records:
//!
//! ```text
//! v1 (32 bytes): u32 sn, u32 len, u32 nSG, u16 cmd, u16 ver, u64 lbn, u64 ts
//! v2 (40 bytes): the same followed by u64 rt (response time)
//! ```
//!
//! `ver >> 8` is the version (read from the first record); `len` is the
//! request size in bytes, `lbn` is in 512-byte sectors, `ts` in
//! microseconds (becomes seconds), `cmd` the SCSI opcode. Single tenant.
//! Verified on `cloudPhysicsIO.vscsi` against its CSV rendering
//! (all 113,872 records agree); v2 follows the same layout but has not been
//! checked against a real v2 file.
//!
//! Non-data SCSI commands (TEST UNIT READY, INQUIRY, MODE SENSE, READ
//! CAPACITY, SYNCHRONIZE CACHE, REPORT LUNS, ...) carry no I/O and are
//! skipped; any other unknown opcode is an error.

use super::{BinaryFormat, Op, ParseCtx, Request};
use crate::error::{Location, Result};

/// Read/write SCSI opcodes (6, 10, 12 and 16-byte CDBs).
pub fn scsi_op(code: u16) -> Option<Op> {
    match code {
        0x08 | 0x28 | 0xa8 | 0x88 => Some(Op::Read),
        0x0a | 0x2a | 0xaa | 0x8a => Some(Op::Write),
        _ => None,
    }
}

/// Non-data SCSI commands that may appear in a vscsi trace and carry no I/O.
pub(crate) fn non_data(code: u16) -> bool {
    matches!(
        code,
        0x00 | 0x03 | 0x12 | 0x1a | 0x1b | 0x1e | 0x25 | 0x35 | 0x4d | 0x5a | 0x91 | 0x9e | 0xa0 | 0xa3
    )
}

pub struct Vscsi {
    version: u8,
}

impl Vscsi {
    pub fn new(version: u8) -> Self {
        Vscsi { version }
    }

    /// The version announced by a trace's first record (`ver >> 8`), if it
    /// looks like a vscsi record at all.
    pub fn version_of(first: &[u8]) -> Option<u8> {
        if first.len() < 16 {
            return None;
        }
        let ver = u16::from_le_bytes([first[14], first[15]]) >> 8;
        match ver {
            1 | 2 => Some(ver as u8),
            _ => None,
        }
    }
}

impl BinaryFormat for Vscsi {
    fn record_size(&self) -> usize {
        if self.version == 2 {
            40
        } else {
            32
        }
    }

    fn parse_record(&mut self, rec: &[u8], index: u64, ctx: &ParseCtx) -> Result<Option<Request>> {
        let u32_at = |i: usize| u32::from_le_bytes(rec[i..i + 4].try_into().unwrap());
        let u64_at = |i: usize| u64::from_le_bytes(rec[i..i + 8].try_into().unwrap());
        let loc = Location::Record(index);
        let len = u32_at(4) as u64;
        let cmd = u16::from_le_bytes([rec[12], rec[13]]);
        let ver = u16::from_le_bytes([rec[14], rec[15]]) >> 8;
        if ver != self.version as u16 {
            return Err(ctx.err(loc, "ver", format!("version {ver} in a version {} trace", self.version)));
        }
        let lbn = u64_at(16);
        let ts = u64_at(24);
        let op = match scsi_op(cmd) {
            Some(op) => op,
            None if non_data(cmd) => return Ok(None),
            None => return Err(ctx.err(loc, "cmd", format!("unknown SCSI opcode {cmd:#04x}"))),
        };
        let offset = super::input::scaled(lbn, 512, "lbn", loc, ctx)?;
        super::input::request(ts as f64 * 1e-6, op, offset, len, 0, loc, ctx).map(Some)
    }
}
