//! Trace readers: every supported format becomes one stream of [`Request`]s.
//!
//! Readers stream: a trace is never loaded whole. Compressed inputs (.gz, .zst,
//! .bz2, .xz) are decompressed on the fly (see [`input`]). Each format lives in
//! its own file behind [`TextFormat`] (line-oriented) or [`BinaryFormat`]
//! (fixed-size records); `hpsrt` (variable-size records) has its own iterator.
//! [`FORMAT_INFO`] lists them, [`sniff`] implements `--format auto`, and
//! [`convert`] writes native CSV and oracleGeneral, [`merge`] interleaves
//! several traces by time as tenants of one. docs/trace-formats.md
//! describes every format's units and mapping to [`Request`].

pub mod blkparse;
pub mod blocks;
pub mod cloudphysics;
pub mod convert;
pub mod disksim;
pub mod hpsrt;
pub mod hpsrt_csv;
pub mod input;
pub mod lbn32;
pub mod merge;
pub mod msr;
pub mod msr_cut;
pub mod native_csv;
pub mod oracle;
pub mod order;
pub mod sniff;
pub mod spc;
pub mod synth;
pub mod systor;
pub mod tencent;
pub mod tencent_cut;
pub mod txt;
pub mod vscsi;

#[cfg(test)]
mod tests;

use crate::error::{Error, Location, Result};
use crate::fsmodel::kind::{Tag, KINDS};
use order::{Orderer, Reordered, TimeOrder};
use std::path::{Path, PathBuf};

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
    /// What the file system says the blocks are, when the trace says it
    /// (native CSV's `owner,kind,parent` columns); [`FsTag::NONE`] otherwise.
    #[serde(default, skip_serializing_if = "FsTag::is_none")]
    pub fs: FsTag,
}

/// A request's file-system annotation — the owner's inode, the block kind,
/// the owner's directory ([`Tag`]) — packed in one word so that a
/// [`Request`] stays small (40 bytes): the kind in bits 0..4 (0: none),
/// the owner in bits 4..34, the parent in bits 34..64. Inode numbers up to
/// [`FsTag::MAX_INODE`]. The D-GRAID array places blocks by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct FsTag(u64);

impl FsTag {
    /// No annotation (every trace format but annotated native CSV).
    pub const NONE: FsTag = FsTag(0);
    /// The largest owner or parent inode number a tag holds (2^30 − 1).
    pub const MAX_INODE: u64 = (1 << 30) - 1;

    /// The packed form of `t`; an owner or parent beyond
    /// [`MAX_INODE`](Self::MAX_INODE) is an error naming the field.
    pub fn new(t: &Tag) -> std::result::Result<FsTag, (&'static str, String)> {
        for (field, v) in [("owner", t.owner), ("parent", t.parent)] {
            if v > Self::MAX_INODE {
                return Err((
                    field,
                    format!("inode {v} is beyond the largest an annotation holds (2^30 - 1)"),
                ));
            }
        }
        let k = KINDS
            .iter()
            .position(|(k, _)| *k == t.kind)
            .expect("every kind is listed") as u64
            + 1;
        Ok(FsTag(k | t.owner << 4 | t.parent << 34))
    }

    /// The annotation, if any.
    pub fn get(self) -> Option<Tag> {
        let k = (self.0 & 0xf) as usize;
        (k > 0).then(|| Tag::of(self.0 >> 4 & Self::MAX_INODE, KINDS[k - 1].0, self.0 >> 34))
    }

    pub fn is_none(&self) -> bool {
        self.0 & 0xf == 0
    }
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
    /// What to do when times go back (see [`order`]); default: nothing.
    pub order: TimeOrder,
}

impl Default for TraceOptions {
    fn default() -> Self {
        TraceOptions {
            format: "auto".into(),
            skip_bad: false,
            blkparse_event: 'Q',
            order: TimeOrder::Any,
        }
    }
}

/// Every format name the readers accept (besides `auto`).
pub const FORMATS: &[&str] = &[
    "csv",
    "spc",
    "msr",
    "msr-cut",
    "disksim",
    "mqsim",
    "blkparse",
    "vscsi",
    "cloudphysics",
    "oracle",
    "lbn32",
    "tencent",
    "tencent-cut",
    "systor",
    "hpsrt",
    "hpsrt-csv",
    "txt",
];

/// Every line-oriented format with its name (blkparse reading Q events),
/// in the order of [`FORMATS`]: what content sniffing tries, and what the
/// parser properties and the fuzz target exercise.
pub fn text_formats() -> Vec<(&'static str, Box<dyn TextFormat>)> {
    vec![
        ("csv", Box::new(native_csv::NativeCsv)),
        ("spc", Box::new(spc::Spc)),
        ("msr", Box::new(msr::Msr::default())),
        ("msr-cut", Box::new(msr_cut::MsrCut)),
        ("disksim", Box::new(disksim::DiskSim::millis())),
        ("mqsim", Box::new(disksim::DiskSim::nanos())),
        ("blkparse", Box::new(blkparse::Blkparse::new('Q'))),
        ("cloudphysics", Box::new(cloudphysics::CloudPhysics)),
        ("tencent", Box::new(tencent::Tencent)),
        ("tencent-cut", Box::new(tencent_cut::TencentCut)),
        ("systor", Box::new(systor::Systor)),
        ("hpsrt-csv", Box::new(hpsrt_csv::HpSrtCsv)),
    ]
}

/// One-line description of every format, in the order of [`FORMATS`].
pub const FORMAT_INFO: &[(&str, &str)] = &[
    (
        "csv",
        "blocklab native CSV: timestamp,op,offset,size[,tenant[,owner,kind[,parent]]] (seconds, R/W, bytes)",
    ),
    (
        "spc",
        "SPC/UMass CSV: ASU,LBA,Size,Opcode,Timestamp (512 B sectors, bytes, r/w, s; ASU = tenant)",
    ),
    (
        "msr",
        "MSR Cambridge CSV: Timestamp(filetime),Hostname,DiskNumber,Type,Offset,Size,ResponseTime",
    ),
    (
        "msr-cut",
        "MSR Cambridge cuts: ts_ms dev offset_bytes size_bytes op(1=R,0=W), space-separated",
    ),
    (
        "disksim",
        "DiskSim ASCII: time_ms devno blkno bcount flags (512 B sectors, flags bit0 = read)",
    ),
    (
        "mqsim",
        "MQSim/DiskSim ASCII with times in ns: time_ns devno blkno bcount flags",
    ),
    (
        "blkparse",
        "default blkparse text output (Q events; D with --blkparse-event D)",
    ),
    (
        "vscsi",
        "CloudPhysics vscsi binary (v1 32-byte / v2 40-byte records, µs, 512 B sectors)",
    ),
    (
        "cloudphysics",
        "CloudPhysics CSV: version,time,op(hex SCSI),size,lbn (s, bytes, 512 B sectors)",
    ),
    (
        "oracle",
        "libCacheSim oracleGeneral binary: 24-byte records, one 4 KiB block access each",
    ),
    (
        "lbn32",
        "little-endian u32 block numbers, one 4 KiB block read each, no time",
    ),
    (
        "tencent",
        "Tencent CBS CSV: ts_s,offset_sectors,size_sectors,type(0=R,1=W),volume_id",
    ),
    (
        "tencent-cut",
        "Tencent CBS cuts: ts_ms,latency_us,op(1=R,0=W),size_bytes,offset_bytes,...",
    ),
    ("systor", "SYSTOR'17 CSV: Timestamp,Response,IOType,LUN,Offset,Size"),
    ("hpsrt", "HP SRT binary (HP Labs 1992, DiskSim's HPL format)"),
    (
        "hpsrt-csv",
        "CSV rendering of an HP SRT trace: time_s,devno,lba512,size_bytes,op,service_us",
    ),
    (
        "txt",
        "libCacheSim plain text: one object id per line, one 4 KiB block read each, no time",
    ),
];

/// A record iterator that knows where in its file the last record was.
pub trait Located: Iterator<Item = Result<Request>> + Send {
    fn location(&self) -> Location;
}

/// A streaming trace reader: an iterator of requests.
pub struct TraceReader {
    inner: Records,
    path: PathBuf,
    /// The format was named (not sniffed): a failure may hint at another.
    named: Option<&'static str>,
    skip_bad: bool,
    skipped: u64,
    read: u64,
    done: bool,
    orderer: Orderer,
}

impl TraceReader {
    /// Number of malformed records skipped so far (`skip_bad` only).
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// With [`TimeOrder::Sort`]: the requests it moved so far.
    pub fn reordered(&self) -> Option<Reordered> {
        self.orderer.report()
    }

    /// The next request as the file has it.
    fn next_record(&mut self) -> Option<Result<Request>> {
        if self.done {
            return None;
        }
        loop {
            match self.inner.next() {
                None => {
                    self.done = true;
                    return None;
                }
                Some(Ok(r)) => {
                    self.read += 1;
                    return Some(Ok(r));
                }
                Some(Err(e @ Error::Parse { .. })) if self.skip_bad => {
                    let _ = e;
                    self.skipped += 1;
                }
                Some(Err(e)) => {
                    self.done = true;
                    return Some(Err(self.with_hint(e)));
                }
            }
        }
    }

    /// A named format that fails on the first record: say which formats
    /// read the file (the user may have named the wrong one).
    fn with_hint(&self, e: Error) -> Error {
        let (
            Some(format),
            0,
            Error::Parse {
                file,
                location,
                field,
                message,
            },
        ) = (self.named, self.read, &e)
        else {
            return e;
        };
        let others: Vec<&str> = sniff::readers_of(&self.path)
            .into_iter()
            .filter(|f| *f != format)
            .collect();
        if others.is_empty() {
            return e;
        }
        Error::parse(
            file.clone(),
            *location,
            field.clone(),
            format!(
                "{message} (not {format}? the file reads as {}: try --format {})",
                others.join(", "),
                others[0]
            ),
        )
    }
}

impl Iterator for TraceReader {
    type Item = Result<Request>;
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(r) = self.orderer.pop(self.done) {
                return Some(Ok(r));
            }
            let req = match self.next_record() {
                // The input has ended: what a sort still holds comes out in order.
                None => return self.orderer.pop(true).map(Ok),
                Some(Ok(r)) => r,
                Some(Err(e)) => return Some(Err(e)),
            };
            if self.orderer.order() == TimeOrder::Any {
                return Some(Ok(req));
            }
            match self.orderer.admit(req, self.inner.location(), &self.path) {
                Ok(Some(r)) => return Some(Ok(r)),
                Ok(None) => {}
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

/// Open a trace file with the given options. `auto` sniffs the format
/// (see [`sniff`]).
/// Whether `path` is read as a stream that can be read once (a pipe, standard
/// input, a character device), not a regular file a second pass can reopen.
pub fn is_stream(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir())
}

pub fn open(path: &Path, opts: &TraceOptions) -> Result<TraceReader> {
    let ctx = ParseCtx {
        file: path.display().to_string(),
    };
    if opts.format != "auto" && !FORMATS.contains(&opts.format.as_str()) {
        return Err(Error::unknown("trace format", &opts.format, &with_auto()));
    }
    if !path.exists() {
        return Err(Error::io(ctx.file, "no such file"));
    }
    if path.is_dir() {
        return Err(Error::io(ctx.file, "is a directory, not a trace file"));
    }
    if opts.format == "auto" && is_stream(path) {
        // Sniffing reads the first bytes, and a pipe does not give them twice.
        return Err(Error::config(format!(
            "{}: a pipe (not a regular file): its format cannot be detected without consuming it; name it with --format",
            ctx.file
        )));
    }
    let format = if opts.format == "auto" {
        sniff::sniff(path)?
    } else {
        opts.format.as_str()
    };
    let inner = open_format(format, path, ctx, opts)?;
    Ok(TraceReader {
        inner,
        path: path.to_path_buf(),
        named: FORMATS.iter().copied().find(|f| opts.format == *f),
        skip_bad: opts.skip_bad,
        skipped: 0,
        read: 0,
        done: false,
        orderer: Orderer::new(opts.order)?,
    })
}

type Records = Box<dyn Located>;

/// The record iterator of one named format.
pub(crate) fn open_format(format: &str, path: &Path, ctx: ParseCtx, opts: &TraceOptions) -> Result<Records> {
    use input::{BinaryRecords, TextRecords};
    Ok(match format {
        "csv" => Box::new(TextRecords::open(path, ctx, native_csv::NativeCsv)?),
        "spc" => Box::new(TextRecords::open(path, ctx, spc::Spc)?),
        "msr" => Box::new(TextRecords::open(path, ctx, msr::Msr::default())?),
        "msr-cut" => Box::new(TextRecords::open(path, ctx, msr_cut::MsrCut)?),
        "disksim" => Box::new(TextRecords::open(path, ctx, disksim::DiskSim::millis())?),
        "mqsim" => Box::new(TextRecords::open(path, ctx, disksim::DiskSim::nanos())?),
        "blkparse" => {
            let event = opts.blkparse_event.to_ascii_uppercase();
            if event != 'Q' && event != 'D' {
                return Err(Error::config(format!(
                    "blkparse event must be Q or D, not `{}`",
                    opts.blkparse_event
                )));
            }
            Box::new(TextRecords::open(path, ctx, blkparse::Blkparse::new(event))?)
        }
        "cloudphysics" => Box::new(TextRecords::open(path, ctx, cloudphysics::CloudPhysics)?),
        "tencent" => Box::new(TextRecords::open(path, ctx, tencent::Tencent)?),
        "tencent-cut" => Box::new(TextRecords::open(path, ctx, tencent_cut::TencentCut)?),
        "systor" => Box::new(TextRecords::open(path, ctx, systor::Systor)?),
        "hpsrt-csv" => Box::new(TextRecords::open(path, ctx, hpsrt_csv::HpSrtCsv)?),
        // Not in `text_formats()`: any one-field line reads as txt, so content sniffing
        // never picks it (like oracle and lbn32, it has no signature).
        "txt" => Box::new(TextRecords::open(path, ctx, txt::Txt::default())?),
        "oracle" => Box::new(BinaryRecords::open(path, ctx, oracle::Oracle)?),
        "lbn32" => Box::new(BinaryRecords::open(path, ctx, lbn32::Lbn32)?),
        "vscsi" => {
            // The version is announced by the first record; an empty file has none.
            let first = input::peek(path, 16)?;
            let version = if first.is_empty() {
                1
            } else {
                vscsi::Vscsi::version_of(&first).ok_or_else(|| {
                    ctx.err(
                        Location::Record(0),
                        "ver",
                        "not a vscsi v1 or v2 record (version byte not 1 or 2)",
                    )
                })?
            };
            Box::new(BinaryRecords::open(path, ctx, vscsi::Vscsi::new(version))?)
        }
        "hpsrt" => Box::new(hpsrt::HpSrtRecords::open(path, ctx)?),
        other => return Err(Error::unknown("trace format", other, &with_auto())),
    })
}

/// Format names including `auto`, for error messages.
fn with_auto() -> Vec<&'static str> {
    let mut v = vec!["auto"];
    v.extend_from_slice(FORMATS);
    v
}
