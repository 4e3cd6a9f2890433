//! HP SRT binary traces (HP Labs, 1992; shipped with DiskSim, e.g.
//! `ajw.1week.srt`). Layout, as read by DiskSim's HPL reader:
//!
//! - a text header starting with `$$TR_IOREC`, ended by a form feed (0x0C);
//! - then big-endian records of u32 words, each starting with
//!   `size` (bytes of the record, including this word) and
//!   `id` (`id >> 16` the record version, `id & 0xffff` the type);
//! - I/O records (type 1, "short I/O") continue with
//!   `sec, usec, start_us, stop_us, bytes, sector, devno, drivertype, cylno,
//!   flags, info` and, from version 4 on, `queuelen`.
//!
//! A request is issued at `sec + usec/1e6` seconds; `sector` is in 512-byte
//! units, `bytes` its length; the disk is `(devno >> 8) & 0xff` (the tenant);
//! flags bit 0 (B_READ) set means read. Records of other types (suspect I/O,
//! file-system records, ...) are skipped by their size word. Checked against
//! `ajw.1week.converted.csv`: all 44,519 records agree in time, disk, sector,
//! size, op and service time.

use super::input::open_decompressed;
use super::{Op, ParseCtx, Request};
use crate::error::{Location, Result};
use std::io::{BufReader, Read};
use std::path::Path;

const MAGIC: &[u8] = b"$$TR_IOREC";
/// Header bytes scanned for the form feed before giving up.
const MAX_HEADER: usize = 1 << 20;
/// Largest record accepted (the known records are 52–60 bytes).
const MAX_RECORD: usize = 4096;
const SHORT_IO: u32 = 1;

/// Iterator of the I/O requests of an HP SRT file.
pub struct HpSrtRecords {
    reader: BufReader<Box<dyn Read + Send>>,
    ctx: ParseCtx,
    buf: Vec<u8>,
    index: u64,
    done: bool,
}

impl super::Located for HpSrtRecords {
    fn location(&self) -> Location {
        Location::Record(self.index.saturating_sub(1))
    }
}

impl HpSrtRecords {
    pub fn open(path: &Path, ctx: ParseCtx) -> Result<Self> {
        let mut reader = BufReader::with_capacity(1 << 16, open_decompressed(path)?);
        let mut magic = [0u8; 10];
        let bad_header = |ctx: &ParseCtx, m: &str| ctx.err(Location::Whole, "header", m.to_string());
        if reader.read_exact(&mut magic).is_err() || magic != MAGIC {
            return Err(bad_header(&ctx, "not an HP SRT trace: no `$$TR_IOREC` header"));
        }
        // Skip the header up to and including the form feed.
        let mut seen = magic.len();
        let mut byte = [0u8; 1];
        loop {
            match reader.read(&mut byte) {
                Ok(1) if byte[0] == 0x0c => break,
                Ok(1) => {
                    seen += 1;
                    if seen > MAX_HEADER {
                        return Err(bad_header(&ctx, "header has no end (form feed) in its first MiB"));
                    }
                }
                Ok(_) => return Err(bad_header(&ctx, "file ends inside its header")),
                Err(e) => return Err(bad_header(&ctx, &e.to_string())),
            }
        }
        Ok(HpSrtRecords {
            reader,
            ctx,
            buf: Vec::with_capacity(64),
            index: 0,
            done: false,
        })
    }

    /// An error after which the record framing is lost: the stream ends.
    fn fatal(&mut self, field: &str, message: impl Into<String>) -> Option<Result<Request>> {
        self.done = true;
        Some(Err(self.ctx.err(Location::Record(self.index), field, message)))
    }

    /// Read exactly `buf.len()` bytes; Ok(got) tells how many arrived before EOF.
    fn fill(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut got = 0;
        while got < buf.len() {
            match reader.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(got)
    }

    fn next_record(&mut self) -> Option<Result<Request>> {
        loop {
            let mut size_word = [0u8; 4];
            match Self::fill(&mut self.reader, &mut size_word) {
                Ok(0) => return None,
                Ok(4) => {}
                Ok(n) => return self.fatal("size", format!("truncated record: {n} of 4 bytes of its size")),
                Err(e) => return self.fatal("record", e.to_string()),
            }
            let size = u32::from_be_bytes(size_word) as usize;
            if size < 16 || !size.is_multiple_of(4) || size > MAX_RECORD {
                // Without a sane size word the following records cannot be found.
                return self.fatal(
                    "size",
                    format!("record size {size} is not a multiple of 4 in 16..={MAX_RECORD}"),
                );
            }
            self.buf.resize(size - 4, 0);
            match Self::fill(&mut self.reader, &mut self.buf) {
                Ok(n) if n == size - 4 => {}
                Ok(n) => return self.fatal("record", format!("truncated record: {} of {size} bytes", n + 4)),
                Err(e) => return self.fatal("record", e.to_string()),
            }
            let index = self.index;
            self.index += 1;
            // Words after `size`: w(1) is id, w(2) sec, ... as in the module doc.
            let w = |i: usize| u32::from_be_bytes(self.buf[(i - 1) * 4..i * 4].try_into().unwrap());
            let id = w(1);
            if id & 0xffff != SHORT_IO {
                continue;
            }
            let loc = Location::Record(index);
            if size < 13 * 4 {
                return Some(Err(self.ctx.err(
                    loc,
                    "size",
                    format!("I/O record of {size} bytes, need at least 52"),
                )));
            }
            let (sec, usec) = (w(2), w(3));
            if usec >= 1_000_000 {
                return Some(Err(self.ctx.err(loc, "usec", format!("{usec} is not below 1000000"))));
            }
            let bytes = w(6) as u64;
            let sector = w(7) as u64;
            let disk = (w(8) >> 8) & 0xff;
            let flags = w(11);
            let op = if flags & 1 == 1 { Op::Read } else { Op::Write };
            let time = sec as f64 + usec as f64 * 1e-6;
            return Some(Ok(Request {
                time,
                op,
                offset: sector * 512,
                len: bytes,
                tenant: disk,
                fs: Default::default(),
            }));
        }
    }
}

impl Iterator for HpSrtRecords {
    type Item = Result<Request>;
    fn next(&mut self) -> Option<Result<Request>> {
        if self.done {
            return None;
        }
        let r = self.next_record();
        if r.is_none() {
            self.done = true;
        }
        r
    }
}
