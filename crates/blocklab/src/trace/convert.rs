//! `blocklab trace convert`: rewrite any readable trace as native CSV or as
//! libCacheSim oracleGeneral.
//!
//! - To `csv`: one streaming pass, one line per request (exact round trip:
//!   reading the output gives the same requests).
//! - To `oracle`: one record per *block access* (requests are split into
//!   blocks of `block_size`; the record's obj_id is the block's cache key
//!   [`block_key`](super::blocks::block_key), its obj_size the block size,
//!   its time the request time truncated to whole seconds). oracleGeneral
//!   needs each record's next-access index, so the conversion reads the input
//!   twice: pass 1 collects the block-key sequence (8 bytes per access), a
//!   reverse pass over it replaces each key with its next-access index (plus
//!   one hash-map entry per unique block), pass 2 re-reads the input and
//!   writes the records. Memory: 8 bytes per access + one map entry per
//!   unique block. `next_access_vtime` is libCacheSim's: the 1-based index
//!   of the next access to the same block, -1 if none.
//!
//! - To `spc`: one line per request `ASU,LBA,Size,Opcode,Timestamp` (the
//!   tenant as the ASU, 512-byte sectors): exact, but SPC addresses whole
//!   sectors, so a request at an offset that is not a multiple of 512 is an
//!   error naming it.
//!
//! An output name ending in `.gz` or `.zst` is compressed. `to = "auto"`
//! takes the format from the output's name ([`target_of`]).

use super::blocks::{BlockOptions, BlockStream};
use super::{native_csv, open, oracle, Request, TraceOptions};
use crate::error::{Error, Result};
use rustc_hash::FxHashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

/// Output formats of [`convert`].
pub const TARGETS: &[&str] = &["csv", "oracle", "spc"];

/// The output format a file name asks for, after a compression extension:
/// `.csv` → csv, `.spc` → spc, `.oracle` or a name containing
/// `oracleGeneral` → oracle (the names `--format auto` reads them by).
pub fn target_of(dst: &Path) -> Option<&'static str> {
    let name = dst.file_name()?.to_string_lossy().to_lowercase();
    let stem = match super::input::compression_ext(&name) {
        Some(ext) => &name[..name.len() - ext.len()],
        None => name.as_str(),
    };
    if stem.ends_with(".csv") {
        Some("csv")
    } else if stem.ends_with(".spc") {
        Some("spc")
    } else if stem.ends_with(".oracle") || stem.contains("oraclegeneral") {
        Some("oracle")
    } else {
        None
    }
}

/// What a conversion did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ConvertSummary {
    pub source: String,
    pub destination: String,
    pub to: String,
    /// Requests read from the source.
    pub requests: u64,
    /// Records written (requests for csv, block accesses for oracle).
    pub records: u64,
    /// Unique blocks (oracle only).
    pub unique_blocks: Option<u64>,
    pub block_size: Option<u64>,
    /// Malformed source records skipped (`skip_bad`).
    pub skipped: u64,
}

/// A buffered writer for `path`, compressing by extension.
pub(crate) fn create(path: &Path) -> Result<Box<dyn Write>> {
    let name = path.display().to_string();
    let file = File::create(path).map_err(|e| Error::io(&name, e))?;
    let buf = BufWriter::with_capacity(1 << 20, file);
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    Ok(match ext {
        "gz" => Box::new(flate2::write::GzEncoder::new(buf, flate2::Compression::default())),
        "zst" | "zstd" => Box::new(
            zstd::stream::write::Encoder::new(buf, 3)
                .map_err(|e| Error::io(&name, e))?
                .auto_finish(),
        ),
        _ => Box::new(buf),
    })
}

/// Convert `src` (read with `opts`) to `dst` in format `to` (`csv` or `oracle`).
pub fn convert(src: &Path, opts: &TraceOptions, dst: &Path, to: &str, block_size: u64) -> Result<ConvertSummary> {
    let to = if to == "auto" {
        target_of(dst).ok_or_else(|| {
            Error::config(format!(
                "{}: cannot tell the output format from the name (.csv, .spc, .oracle, each optionally .gz/.zst); \
                 give --to ({})",
                dst.display(),
                TARGETS.join(", ")
            ))
        })?
    } else {
        to
    };
    if !TARGETS.contains(&to) {
        return Err(Error::unknown("output format", to, TARGETS));
    }
    let same = src
        .canonicalize()
        .ok()
        .zip(dst.canonicalize().ok())
        .is_some_and(|(a, b)| a == b);
    if same {
        return Err(Error::config("source and destination are the same file"));
    }
    let summary = ConvertSummary {
        source: src.display().to_string(),
        destination: dst.display().to_string(),
        to: to.to_string(),
        requests: 0,
        records: 0,
        unique_blocks: None,
        block_size: None,
        skipped: 0,
    };
    // Open the source first so that a bad source does not leave an empty output.
    let reader = open(src, opts)?;
    let result = match to {
        "csv" => to_csv(reader, dst, summary),
        "spc" => to_spc(reader, dst, summary),
        _ => to_oracle(reader, src, opts, dst, block_size, summary),
    };
    if result.is_err() {
        // A half-written output would look like a shorter trace: remove it.
        let _ = std::fs::remove_file(dst);
    }
    result
}

fn to_csv(mut reader: super::TraceReader, dst: &Path, mut summary: ConvertSummary) -> Result<ConvertSummary> {
    let dname = summary.destination.clone();
    {
        let mut w = create(dst)?;
        let io = |e: std::io::Error| Error::io(&dname, e);
        native_csv::write_header(&mut w).map_err(io)?;
        for r in &mut reader {
            let r: Request = r?;
            native_csv::write_record(&mut w, &r).map_err(io)?;
            summary.requests += 1;
        }
        w.flush().map_err(io)?;
        summary.records = summary.requests;
        summary.skipped = reader.skipped();
        Ok(summary)
    }
}

fn to_spc(mut reader: super::TraceReader, dst: &Path, mut summary: ConvertSummary) -> Result<ConvertSummary> {
    let dname = summary.destination.clone();
    let mut w = create(dst)?;
    let io = |e: std::io::Error| Error::io(&dname, e);
    for r in &mut reader {
        let r: Request = r?;
        if r.offset % 512 != 0 {
            return Err(Error::config(format!(
                "{}: request {} (offset {} B) does not start on a 512-byte sector: SPC cannot hold it",
                summary.source,
                summary.requests + 1,
                r.offset
            )));
        }
        let op = if r.op.is_write() { 'w' } else { 'r' };
        writeln!(w, "{},{},{},{op},{}", r.tenant, r.offset / 512, r.len, r.time).map_err(io)?;
        summary.requests += 1;
    }
    w.flush().map_err(io)?;
    summary.records = summary.requests;
    summary.skipped = reader.skipped();
    Ok(summary)
}

fn to_oracle(
    reader: super::TraceReader,
    src: &Path,
    opts: &TraceOptions,
    dst: &Path,
    block_size: u64,
    mut summary: ConvertSummary,
) -> Result<ConvertSummary> {
    let bopts = BlockOptions {
        block_size,
        reads_only: false,
    };
    let obj_size = u32::try_from(block_size).map_err(|_| {
        Error::config(format!(
            "block size {block_size} does not fit oracleGeneral's u32 obj_size"
        ))
    })?;
    // Pass 1: the block-key sequence.
    let mut keys: Vec<u64> = Vec::new();
    let mut stream = BlockStream::new(reader, bopts)?;
    for a in &mut stream {
        keys.push(a?.key);
    }
    // Reverse pass: each key becomes the index of the next access to it.
    const NONE: u64 = u64::MAX;
    let mut last: FxHashMap<u64, u64> = FxHashMap::default();
    for i in (0..keys.len()).rev() {
        let next = last.insert(keys[i], i as u64).unwrap_or(NONE);
        keys[i] = next;
    }
    summary.unique_blocks = Some(last.len() as u64);
    drop(last);
    // Pass 2: write the records.
    let dname = dst.display().to_string();
    let io = |e: std::io::Error| Error::io(&dname, e);
    let mut w = create(dst)?;
    let mut stream = BlockStream::new(open(src, opts)?, bopts)?;
    let mut i = 0usize;
    for a in &mut stream {
        let a = a?;
        let Some(&next) = keys.get(i) else {
            return Err(Error::config(format!(
                "{}: changed while being converted",
                summary.source
            )));
        };
        if !(a.time >= 0.0 && a.time < 4294967296.0) {
            return Err(Error::config(format!(
                "{}: time {} s of block access {i} does not fit oracleGeneral's u32 seconds",
                summary.source, a.time
            )));
        }
        let next = if next == NONE { -1 } else { next as i64 + 1 };
        oracle::write_record(&mut w, a.time as u32, a.key, obj_size, next).map_err(io)?;
        i += 1;
    }
    if i != keys.len() {
        return Err(Error::config(format!(
            "{}: changed while being converted",
            summary.source
        )));
    }
    w.flush().map_err(io)?;
    summary.requests = stream.requests();
    summary.records = i as u64;
    summary.block_size = Some(block_size);
    summary.skipped = stream.skipped();
    Ok(summary)
}
