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

/// Longest line a text reader accepts.
const MAX_LINE: u64 = 1 << 20;

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

impl<F: TextFormat> super::Located for TextRecords<F> {
    fn location(&self) -> Location {
        Location::Line(self.lineno)
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
            match (&mut self.reader).take(MAX_LINE).read_until(b'\n', &mut self.line) {
                Ok(0) => return None,
                Ok(n) if n as u64 == MAX_LINE && self.line.last() != Some(&b'\n') => {
                    // Not a line-oriented file (or a broken one): do not slurp it whole.
                    self.failed = true;
                    self.lineno += 1;
                    return Some(Err(self.ctx.err(
                        Location::Line(self.lineno),
                        "line",
                        format!("line longer than {MAX_LINE} bytes"),
                    )));
                }
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
                    return Some(Err(self.ctx.err(
                        Location::Line(self.lineno),
                        "line",
                        "not valid UTF-8 text",
                    )));
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
///
/// Records are sliced out of a large reused block (refilled by bulk reads),
/// not copied one by one through a `dyn Read`: binary traces are the fast
/// path of the counted simulator.
pub struct BinaryRecords<F: BinaryFormat> {
    reader: Box<dyn Read + Send>,
    format: F,
    ctx: ParseCtx,
    block: Vec<u8>,
    pos: usize,
    filled: usize,
    eof: bool,
    index: u64,
    done: bool,
}

/// Records per bulk read.
const RECORDS_PER_BLOCK: usize = 16 * 1024;

impl<F: BinaryFormat> BinaryRecords<F> {
    pub fn open(path: &Path, ctx: ParseCtx, format: F) -> Result<Self> {
        let mut reader = open_decompressed(path)?;
        let header = format.header_size();
        if header > 0 {
            let mut skip = vec![0u8; header];
            reader.read_exact(&mut skip).map_err(|_| {
                ctx.err(
                    Location::Whole,
                    "header",
                    format!("file shorter than its {header}-byte header"),
                )
            })?;
        }
        let block = vec![0u8; format.record_size().max(1) * RECORDS_PER_BLOCK];
        Ok(BinaryRecords {
            reader,
            format,
            ctx,
            block,
            pos: 0,
            filled: 0,
            eof: false,
            index: 0,
            done: false,
        })
    }

    /// Keep the unread tail, then read until the block is full or the input ends.
    fn refill(&mut self) -> std::io::Result<()> {
        self.block.copy_within(self.pos..self.filled, 0);
        self.filled -= self.pos;
        self.pos = 0;
        while !self.eof && self.filled < self.block.len() {
            match self.reader.read(&mut self.block[self.filled..]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

impl<F: BinaryFormat> super::Located for BinaryRecords<F> {
    fn location(&self) -> Location {
        Location::Record(self.index.saturating_sub(1))
    }
}

impl<F: BinaryFormat> Iterator for BinaryRecords<F> {
    type Item = Result<Request>;
    #[inline]
    fn next(&mut self) -> Option<Result<Request>> {
        let size = self.format.record_size();
        while !self.done {
            let index = self.index;
            if self.filled - self.pos < size {
                if let Err(e) = self.refill() {
                    self.done = true;
                    return Some(Err(self.ctx.err(Location::Record(index), "record", e.to_string())));
                }
                let got = self.filled - self.pos;
                if got == 0 {
                    self.done = true;
                    return None;
                }
                if got < size {
                    self.done = true;
                    return Some(Err(self.ctx.err(
                        Location::Record(index),
                        "record",
                        format!("truncated record: {got} of {size} bytes"),
                    )));
                }
            }
            let rec = &self.block[self.pos..self.pos + size];
            self.pos += size;
            self.index += 1;
            match self.format.parse_record(rec, index, &self.ctx) {
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
    trimmed(s)
        .parse::<T>()
        .map_err(|e| ctx.err(Location::Line(lineno), name, format!("`{}`: {e}", s.trim())))
}

/// `s.trim()`, without its Unicode scan in the common case of a column
/// that already starts and ends with a visible ASCII character (split on
/// whitespace or commas): such a column has nothing to trim.
#[inline]
fn trimmed(s: &str) -> &str {
    match (s.as_bytes().first(), s.as_bytes().last()) {
        (Some(a), Some(b)) if a.is_ascii_graphic() && b.is_ascii_graphic() => s,
        _ => s.trim(),
    }
}

/// A finite, non-negative float field (timestamps).
pub fn time_field(s: Option<&str>, name: &str, lineno: u64, ctx: &ParseCtx) -> Result<f64> {
    let v: f64 = field(s, name, lineno, ctx)?;
    if !v.is_finite() || v < 0.0 {
        return Err(ctx.err(
            Location::Line(lineno),
            name,
            format!("`{v}` is not a finite non-negative time"),
        ));
    }
    Ok(v)
}

/// A byte count or sector count: a non-negative integer, with a clear message
/// for negative values.
pub fn size_field(s: Option<&str>, name: &str, lineno: u64, ctx: &ParseCtx) -> Result<u64> {
    let s = s.ok_or_else(|| ctx.err(Location::Line(lineno), name, "missing column"))?;
    let t = trimmed(s);
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
pub fn request(
    time: f64,
    op: super::Op,
    offset: u64,
    len: u64,
    tenant: u32,
    loc: Location,
    ctx: &ParseCtx,
) -> Result<Request> {
    if offset.checked_add(len).is_none() {
        return Err(ctx.err(loc, "size", format!("offset {offset} + size {len} overflows 64 bits")));
    }
    if !time.is_finite() {
        return Err(ctx.err(loc, "timestamp", "not a finite time"));
    }
    Ok(Request {
        time,
        op,
        offset,
        len,
        tenant,
        fs: Default::default(),
    })
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
    [".gz", ".zst", ".zstd", ".bz2", ".xz"]
        .into_iter()
        .find(|e| name.ends_with(e))
}

#[cfg(test)]
mod binary_records_tests {
    use super::*;
    use crate::trace::oracle::{write_record, Oracle};

    fn file(name: &str, records: u64, extra: &[u8]) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("blocklab-binrec-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("t.oracleGeneral");
        let mut buf = Vec::new();
        for i in 0..records {
            write_record(&mut buf, i as u32, i + 1, 1, -1).unwrap();
        }
        buf.extend_from_slice(extra);
        std::fs::write(&p, buf).unwrap();
        p
    }

    fn ctx(p: &Path) -> ParseCtx {
        ParseCtx {
            file: p.display().to_string(),
        }
    }

    #[test]
    fn records_across_block_boundaries() {
        let n = (RECORDS_PER_BLOCK * 2 + 5) as u64;
        let p = file("many", n, &[]);
        let reqs: Vec<Request> = BinaryRecords::open(&p, ctx(&p), Oracle)
            .unwrap()
            .collect::<Result<_>>()
            .unwrap();
        assert_eq!(reqs.len() as u64, n);
        assert!(reqs.iter().enumerate().all(|(i, r)| r.offset == (i as u64 + 1) * 4096));
        std::fs::remove_dir_all(p.parent().unwrap()).unwrap();
    }

    #[test]
    fn truncated_last_record_is_an_error_naming_it() {
        let p = file("trunc", 2, &[7u8; 10]);
        let got: Vec<Result<Request>> = BinaryRecords::open(&p, ctx(&p), Oracle).unwrap().collect();
        assert_eq!(got.len(), 3);
        assert!(got[0].is_ok() && got[1].is_ok());
        let e = got[2].as_ref().unwrap_err().to_string();
        assert!(
            e.contains("record 2") && e.contains("truncated record: 10 of 24 bytes"),
            "{e}"
        );
        std::fs::remove_dir_all(p.parent().unwrap()).unwrap();
    }
}
