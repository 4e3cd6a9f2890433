//! Opening trace files: transparent decompression and the generic drivers
//! that turn a [`TextFormat`] or [`BinaryFormat`] into a request iterator.

use super::{BinaryFormat, ParseCtx, Request, TextFormat};
use crate::error::{Error, Location, Result};
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// Open `path` for reading, decompressing by extension (.gz, .zst, .bz2, .xz).
pub fn open_decompressed(path: &Path) -> Result<Box<dyn Read + Send>> {
    let name = path.display().to_string();
    let file = File::open(path).map_err(|e| Error::io(&name, e))?;
    let file = BufReader::with_capacity(1 << 20, file);
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    Ok(match ext {
        "gz" => Box::new(flate2::read::MultiGzDecoder::new(file)),
        "zst" | "zstd" => Box::new(zstd::stream::read::Decoder::with_buffer(file).map_err(|e| Error::io(&name, e))?),
        "bz2" => Box::new(bzip2::read::MultiBzDecoder::new(file)),
        "xz" => Box::new(xz2::read::XzDecoder::new_multi_decoder(file)),
        _ => Box::new(file),
    })
}

/// Lines of a text trace fed to a [`TextFormat`].
pub struct TextRecords<F: TextFormat> {
    reader: BufReader<Box<dyn Read + Send>>,
    format: F,
    ctx: ParseCtx,
    /// Raw bytes of the current line (reused: no allocation per record).
    line: Vec<u8>,
    lineno: u64,
    failed: bool,
}

impl<F: TextFormat> TextRecords<F> {
    pub fn open(path: &Path, ctx: ParseCtx, format: F) -> Result<Self> {
        let reader = BufReader::with_capacity(1 << 16, open_decompressed(path)?);
        Ok(TextRecords {
            reader,
            format,
            ctx,
            line: Vec::with_capacity(256),
            lineno: 0,
            failed: false,
        })
    }
}

impl<F: TextFormat> Iterator for TextRecords<F> {
    type Item = Result<Request>;
    fn next(&mut self) -> Option<Result<Request>> {
        if self.failed {
            return None;
        }
        loop {
            self.line.clear();
            match self.reader.read_until(b'\n', &mut self.line) {
                Ok(0) => return None,
                Ok(_) => {}
                Err(e) => {
                    // An I/O or decompression failure: nothing after it can be trusted.
                    self.failed = true;
                    self.lineno += 1;
                    return Some(Err(self.ctx.err(Location::Line(self.lineno), "line", e.to_string())));
                }
            }
            self.lineno += 1;
            // A line that is not UTF-8 is one bad record, not the end of the input.
            let text = match std::str::from_utf8(&self.line) {
                Ok(t) => t,
                Err(_) => {
                    return Some(Err(self.ctx.err(Location::Line(self.lineno), "line", "not valid UTF-8 text")));
                }
            };
            let mut text = text.trim_end_matches(['\n', '\r']);
            if self.lineno == 1 {
                text = text.strip_prefix('\u{feff}').unwrap_or(text);
            }
            if text.trim().is_empty() {
                continue;
            }
            match self.format.parse_line(text, self.lineno, &self.ctx) {
                Ok(Some(r)) => return Some(Ok(r)),
                Ok(None) => continue,
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

/// Fixed-size records of a binary trace fed to a [`BinaryFormat`].
pub struct BinaryRecords<F: BinaryFormat> {
    reader: Box<dyn Read + Send>,
    format: F,
    ctx: ParseCtx,
    buf: Vec<u8>,
    index: u64,
    done: bool,
}

impl<F: BinaryFormat> BinaryRecords<F> {
    pub fn open(path: &Path, ctx: ParseCtx, format: F) -> Result<Self> {
        let mut reader = open_decompressed(path)?;
        let header = format.header_size();
        if header > 0 {
            let mut skip = vec![0u8; header];
            reader
                .read_exact(&mut skip)
                .map_err(|_| ctx.err(Location::Whole, "header", format!("file shorter than its {header}-byte header")))?;
        }
        let buf = vec![0u8; format.record_size()];
        Ok(BinaryRecords { reader: Box::new(BufReader::with_capacity(1 << 20, reader)), format, ctx, buf, index: 0, done: false })
    }
}

/// Fill `buf` completely; Ok(false) on a clean end of input, Err on a partial record.
fn read_record(reader: &mut dyn Read, buf: &mut [u8]) -> std::io::Result<(bool, usize)> {
    let mut got = 0;
    while got < buf.len() {
        match reader.read(&mut buf[got..]) {
            Ok(0) => return Ok((false, got)),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok((true, got))
}

impl<F: BinaryFormat> Iterator for BinaryRecords<F> {
    type Item = Result<Request>;
    fn next(&mut self) -> Option<Result<Request>> {
        while !self.done {
            let index = self.index;
            match read_record(&mut self.reader, &mut self.buf) {
                Ok((true, _)) => {}
                Ok((false, 0)) => {
                    self.done = true;
                    return None;
                }
                Ok((false, got)) => {
                    self.done = true;
                    return Some(Err(self.ctx.err(
                        Location::Record(index),
                        "record",
                        format!("truncated record: {got} of {} bytes", self.buf.len()),
                    )));
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(self.ctx.err(Location::Record(index), "record", e.to_string())));
                }
            }
            self.index += 1;
            match self.format.parse_record(&self.buf, index, &self.ctx) {
                Ok(Some(r)) => return Some(Ok(r)),
                Ok(None) => continue,
                Err(e) => return Some(Err(e)),
            }
        }
        None
    }
}

/// Parse a number field, naming the field on failure.
pub fn field<T: std::str::FromStr>(s: Option<&str>, name: &str, lineno: u64, ctx: &ParseCtx) -> Result<T>
where
    T::Err: std::fmt::Display,
{
    let s = s.ok_or_else(|| ctx.err(Location::Line(lineno), name, "missing column"))?;
    s.trim()
        .parse::<T>()
        .map_err(|e| ctx.err(Location::Line(lineno), name, format!("`{}`: {e}", s.trim())))
}

/// A finite, non-negative float field (timestamps).
pub fn time_field(s: Option<&str>, name: &str, lineno: u64, ctx: &ParseCtx) -> Result<f64> {
    let v: f64 = field(s, name, lineno, ctx)?;
    if !v.is_finite() || v < 0.0 {
        return Err(ctx.err(Location::Line(lineno), name, format!("`{v}` is not a finite non-negative time")));
    }
    Ok(v)
}

/// A byte count or sector count: a non-negative integer, with a clear message
/// for negative values.
pub fn size_field(s: Option<&str>, name: &str, lineno: u64, ctx: &ParseCtx) -> Result<u64> {
    let s = s.ok_or_else(|| ctx.err(Location::Line(lineno), name, "missing column"))?;
    let t = s.trim();
    if t.starts_with('-') {
        return Err(ctx.err(Location::Line(lineno), name, format!("negative size `{t}`")));
    }
    t.parse::<u64>()
        .map_err(|e| ctx.err(Location::Line(lineno), name, format!("`{t}`: {e}")))
}

/// `value * unit` (sectors to bytes, ...), an error naming the field on overflow.
pub fn scaled(value: u64, unit: u64, name: &str, loc: Location, ctx: &ParseCtx) -> Result<u64> {
    value
        .checked_mul(unit)
        .ok_or_else(|| ctx.err(loc, name, format!("`{value}` × {unit} overflows 64 bits")))
}

/// Build a request, checking that its byte range fits in 64 bits (so that
/// every consumer can compute `offset + len` safely).
#[inline]
pub fn request(time: f64, op: super::Op, offset: u64, len: u64, tenant: u32, loc: Location, ctx: &ParseCtx) -> Result<Request> {
    if offset.checked_add(len).is_none() {
        return Err(ctx.err(loc, "size", format!("offset {offset} + size {len} overflows 64 bits")));
    }
    if !time.is_finite() {
        return Err(ctx.err(loc, "timestamp", "not a finite time"));
    }
    Ok(Request { time, op, offset, len, tenant })
}

/// Error for a missing column.
pub fn missing(name: &str, lineno: u64, ctx: &ParseCtx) -> crate::error::Error {
    ctx.err(Location::Line(lineno), name, "missing column")
}

/// The first (up to) `n` bytes of a (possibly compressed) file.
pub fn peek(path: &Path, n: usize) -> Result<Vec<u8>> {
    let name = path.display().to_string();
    let mut buf = Vec::with_capacity(n);
    open_decompressed(path)?
        .take(n as u64)
        .read_to_end(&mut buf)
        .map_err(|e| Error::io(&name, e))?;
    Ok(buf)
}

/// The compression extension of a file name, if any.
pub fn compression_ext(name: &str) -> Option<&'static str> {
    [".gz", ".zst", ".zstd", ".bz2", ".xz"].into_iter().find(|e| name.ends_with(e))
}
