//! Trace readers: every supported format becomes one stream of [`Request`]s.
//!
//! Readers stream: a trace is never loaded whole. Compressed inputs (.gz, .zst,
//! .bz2, .xz) are decompressed on the fly (see [`input`]). Each format lives in
//! its own file behind [`TextFormat`] (line-oriented) or [`BinaryFormat`]
//! (fixed-size records).

pub mod blocks;
pub mod input;
pub mod native_csv;
pub mod synth;

use crate::error::{Error, Location, Result};
use std::path::Path;

/// Read or write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Op {
    Read,
    Write,
}

impl Op {
    pub fn is_write(self) -> bool {
        self == Op::Write
    }
    pub fn letter(self) -> char {
        match self {
            Op::Read => 'R',
            Op::Write => 'W',
        }
    }
}

/// One block I/O request, in bytes and seconds.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Request {
    /// Issue time in seconds since the start of the trace's clock.
    pub time: f64,
    pub op: Op,
    /// Byte offset on the (logical) device.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
    /// Tenant / stream / volume / ASU / device number.
    pub tenant: u32,
}

impl Request {
    /// The blocks of `block_size` bytes this request overlaps: bytes
    /// [offset, offset+len) touch blocks first..end. A zero-length request
    /// touches no block.
    #[inline]
    pub fn blocks(&self, block_size: u64) -> std::ops::Range<u64> {
        if self.len == 0 {
            let b = self.offset / block_size;
            return b..b;
        }
        let first = self.offset / block_size;
        let last = (self.offset + self.len - 1) / block_size;
        first..last + 1
    }
}

/// Parsing state shared by all formats: the file name for messages and
/// whether malformed records are skipped.
#[derive(Debug, Clone)]
pub struct ParseCtx {
    pub file: String,
}

impl ParseCtx {
    pub fn err(&self, location: Location, field: &str, message: impl Into<String>) -> Error {
        Error::parse(self.file.clone(), location, field, message)
    }
}

/// A line-oriented format. `parse_line` returns `Ok(None)` for lines that
/// carry no request (headers, comments, events of other kinds).
pub trait TextFormat: Send {
    fn parse_line(&mut self, line: &str, lineno: u64, ctx: &ParseCtx) -> Result<Option<Request>>;
}

/// A format of fixed-size binary records.
pub trait BinaryFormat: Send {
    /// Bytes per record.
    fn record_size(&self) -> usize;
    /// Bytes of file header to skip before the first record.
    fn header_size(&self) -> usize {
        0
    }
    fn parse_record(&mut self, rec: &[u8], index: u64, ctx: &ParseCtx) -> Result<Option<Request>>;
}

/// Options of a trace reader.
#[derive(Debug, Clone)]
pub struct TraceOptions {
    pub format: String,
    /// Skip malformed records instead of stopping (they are counted).
    pub skip_bad: bool,
    /// blkparse: which event marks a request (`Q` queue, default; `D` dispatch).
    pub blkparse_event: char,
}

impl Default for TraceOptions {
    fn default() -> Self {
        TraceOptions {
            format: "auto".into(),
            skip_bad: false,
            blkparse_event: 'Q',
        }
    }
}

/// Every format name the readers accept (besides `auto`).
pub const FORMATS: &[&str] = &["csv"];

/// A streaming trace reader: an iterator of requests.
pub struct TraceReader {
    inner: Box<dyn Iterator<Item = Result<Request>> + Send>,
    skip_bad: bool,
    skipped: u64,
    done: bool,
}

impl TraceReader {
    /// Number of malformed records skipped so far (`skip_bad` only).
    pub fn skipped(&self) -> u64 {
        self.skipped
    }
}

impl Iterator for TraceReader {
    type Item = Result<Request>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        loop {
            match self.inner.next() {
                None => {
                    self.done = true;
                    return None;
                }
                Some(Ok(r)) => return Some(Ok(r)),
                Some(Err(e @ Error::Parse { .. })) if self.skip_bad => {
                    let _ = e;
                    self.skipped += 1;
                }
                Some(Err(e)) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

/// Open a trace file with the given options.
pub fn open(path: &Path, opts: &TraceOptions) -> Result<TraceReader> {
    let ctx = ParseCtx {
        file: path.display().to_string(),
    };
    let format = if opts.format == "auto" {
        "csv".to_string()
    } else {
        opts.format.clone()
    };
    let inner: Box<dyn Iterator<Item = Result<Request>> + Send> = match format.as_str() {
        "csv" => Box::new(input::TextRecords::open(path, ctx, native_csv::NativeCsv::default())?),
        other => return Err(Error::unknown("trace format", other, FORMATS)),
    };
    Ok(TraceReader {
        inner,
        skip_bad: opts.skip_bad,
        skipped: 0,
        done: false,
    })
}
