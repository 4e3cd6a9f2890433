//! `--format auto`: recognise a trace's format.
//!
//! Rules, in order:
//! 1. By name, after stripping a compression extension (.gz .zst .bz2 .xz):
//!    `*.vscsi` → vscsi, `*.srt` → hpsrt, a name containing `oracleGeneral`
//!    or ending in `.oracle` → oracle, a name containing `lbn_u32le` or ending
//!    in `.lbn32` → lbn32, `*.blkparse` → blkparse, `*.spc` → spc.
//! 2. By content (the first 64 KiB, decompressed):
//!    - starts with `$$TR_IOREC` → hpsrt;
//!    - contains a NUL byte (binary): vscsi if the first records look like
//!      vscsi v1/v2 records (version byte 1 or 2, SCSI opcodes, at least one
//!      read or write among the first 8 records);
//!      otherwise an error (oracle and lbn32 have no signature);
//!    - text: every text format parses the first 200 lines; the formats that
//!      accept all of them without error and find at least one request are
//!      the candidates. One candidate → that format; none → an error; more
//!      than one (e.g. `disksim`, `mqsim` and `msr-cut` share a shape: they
//!      differ only in units) → an error listing them and asking for
//!      `--format`.

use super::input::{compression_ext, peek};
use super::{vscsi, ParseCtx};
use crate::error::{Error, Result};
use std::path::Path;

const SAMPLE_BYTES: usize = 64 << 10;
const SAMPLE_LINES: usize = 200;

/// The format name for `path` by the rules above.
pub fn sniff(path: &Path) -> Result<&'static str> {
    let file = path.display().to_string();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let stem = match compression_ext(&name) {
        Some(ext) => &name[..name.len() - ext.len()],
        None => name.as_str(),
    };
    if let Some(f) = by_name(stem) {
        return Ok(f);
    }
    let sample = peek(path, SAMPLE_BYTES)?;
    if sample.is_empty() {
        return Err(Error::config(format!(
            "{file}: empty file; cannot recognise its format, pass --format"
        )));
    }
    if sample.starts_with(b"$$TR_IOREC") {
        return Ok("hpsrt");
    }
    if sample.contains(&0) {
        if looks_vscsi(&sample) {
            return Ok("vscsi");
        }
        return Err(Error::config(format!(
            "{file}: binary trace of unrecognised format; pass --format (binary formats: oracle, lbn32, vscsi, hpsrt)"
        )));
    }
    let candidates = by_content(&sample, sample.len() == SAMPLE_BYTES);
    match candidates.as_slice() {
        [one] => Ok(one),
        [] => Err(Error::config(format!(
            "{file}: could not recognise the trace format; pass --format (one of: {})",
            super::FORMATS.join(", ")
        ))),
        many => Err(Error::config(format!(
            "{file}: ambiguous trace format, could be any of: {}; pass --format",
            many.join(", ")
        ))),
    }
}

/// The formats that read the start of `path` (its signature, or every line
/// of the sample parsing), for a hint when a named format fails on it.
pub fn readers_of(path: &Path) -> Vec<&'static str> {
    let Ok(sample) = peek(path, SAMPLE_BYTES) else {
        return Vec::new();
    };
    if sample.starts_with(b"$$TR_IOREC") {
        vec!["hpsrt"]
    } else if sample.contains(&0) {
        if looks_vscsi(&sample) {
            vec!["vscsi"]
        } else {
            Vec::new()
        }
    } else {
        by_content(&sample, sample.len() == SAMPLE_BYTES)
    }
}

fn by_name(stem: &str) -> Option<&'static str> {
    if stem.ends_with(".vscsi") {
        Some("vscsi")
    } else if stem.ends_with(".srt") {
        Some("hpsrt")
    } else if stem.contains("oraclegeneral") || stem.ends_with(".oracle") {
        Some("oracle")
    } else if stem.contains("lbn_u32le") || stem.ends_with(".lbn32") {
        Some("lbn32")
    } else if stem.ends_with(".blkparse") {
        Some("blkparse")
    } else if stem.ends_with(".spc") {
        Some("spc")
    } else {
        None
    }
}

/// Whether the first (up to 8) records look like vscsi v1 or v2 records.
fn looks_vscsi(sample: &[u8]) -> bool {
    let Some(version) = vscsi::Vscsi::version_of(sample) else {
        return false;
    };
    let size = if version == 2 { 40 } else { 32 };
    let n = (sample.len() / size).min(8);
    let mut data = 0;
    for i in 0..n {
        let rec = &sample[i * size..(i + 1) * size];
        let cmd = u16::from_le_bytes([rec[12], rec[13]]);
        let ver = u16::from_le_bytes([rec[14], rec[15]]) >> 8;
        if ver != version as u16 || !(vscsi::scsi_op(cmd).is_some() || vscsi::non_data(cmd)) {
            return false;
        }
        data += vscsi::scsi_op(cmd).is_some() as usize;
    }
    data > 0
}

/// Every text format that parses the sample's lines without error.
fn by_content(sample: &[u8], truncated: bool) -> Vec<&'static str> {
    let text = String::from_utf8_lossy(sample);
    let mut lines: Vec<&str> = text.lines().collect();
    if truncated && lines.len() > 1 {
        lines.pop(); // the last line may be cut
    }
    lines.truncate(SAMPLE_LINES);
    let candidates = super::text_formats();
    let ctx = ParseCtx { file: String::new() };
    candidates
        .into_iter()
        .filter_map(|(name, mut f)| {
            let mut requests = 0;
            for (i, line) in lines.iter().enumerate() {
                let line = line.trim_end_matches('\r');
                let line = if i == 0 {
                    line.strip_prefix('\u{feff}').unwrap_or(line)
                } else {
                    line
                };
                if line.trim().is_empty() {
                    continue;
                }
                match f.parse_line(line, i as u64 + 1, &ctx) {
                    Ok(Some(_)) => requests += 1,
                    Ok(None) => {}
                    Err(_) => return None,
                }
            }
            (requests > 0).then_some(name)
        })
        .collect()
}
