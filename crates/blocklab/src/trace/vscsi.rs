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

/// One vscsi record as libCacheSim's reader takes it: an object whose id is
/// the record's `lbn` and whose size is its `len` in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Object {
    pub id: u64,
    pub size: u64,
}

/// Every record of a vscsi file as an [`Object`] — libCacheSim's view
/// (`traceReader/customizedReader/vscsi.h`): one object per record, the
/// opcode not looked at, so non-data commands are requests too (of their
/// `len`, usually 0). The version comes from the first record, as for
/// [`Vscsi`]; compressed files are read as any trace.
pub struct Objects {
    reader: Box<dyn std::io::Read + Send>,
    file: String,
    record: Vec<u8>,
    version: u8,
    index: u64,
    done: bool,
}

/// Open `path` for [`Objects`].
pub fn objects(path: &std::path::Path) -> Result<Objects> {
    let file = path.display().to_string();
    let first = super::input::peek(path, 16)?;
    let version = Vscsi::version_of(&first).ok_or_else(|| {
        crate::error::Error::parse(
            file.clone(),
            Location::Record(0),
            "ver",
            "not a vscsi trace (the first record's version is neither 1 nor 2)",
        )
    })?;
    let size = Vscsi::new(version).record_size();
    Ok(Objects {
        reader: super::input::open_decompressed(path)?,
        file,
        record: vec![0; size],
        version,
        index: 0,
        done: false,
    })
}

impl Iterator for Objects {
    type Item = Result<Object>;

    fn next(&mut self) -> Option<Result<Object>> {
        if self.done {
            return None;
        }
        let mut got = 0;
        while got < self.record.len() {
            match self.reader.read(&mut self.record[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.done = true;
                    return Some(Err(crate::error::Error::io(&self.file, e)));
                }
            }
        }
        let loc = Location::Record(self.index);
        if got < self.record.len() {
            self.done = true;
            return (got > 0).then(|| {
                Err(crate::error::Error::parse(
                    self.file.clone(),
                    loc,
                    "record",
                    format!("truncated record: {got} of {} bytes", self.record.len()),
                ))
            });
        }
        let rec = &self.record;
        let ver = u16::from_le_bytes([rec[14], rec[15]]) >> 8;
        if ver != self.version as u16 {
            self.done = true;
            let msg = format!("version {ver} in a version {} trace", self.version);
            return Some(Err(crate::error::Error::parse(self.file.clone(), loc, "ver", msg)));
        }
        self.index += 1;
        Some(Ok(Object {
            id: u64::from_le_bytes(rec[16..24].try_into().unwrap()),
            size: u32::from_le_bytes(rec[4..8].try_into().unwrap()) as u64,
        }))
    }
}
