//! blocklab's native CSV: header `timestamp,op,offset,size[,tenant]`,
//! timestamp in seconds, op `R`/`W`, offset and size in bytes.
//!
//! The writer ([`write_record`]) prints times with Rust's shortest
//! round-trip float formatting, so a written record parses back to exactly
//! the same [`Request`].

use super::input::{field, missing, request, size_field, time_field};
use super::{Op, ParseCtx, Request, TextFormat};
use crate::error::{Location, Result};
use std::io::Write;

#[derive(Default)]
pub struct NativeCsv;

pub const HEADER: &str = "timestamp,op,offset,size,tenant";

impl TextFormat for NativeCsv {
    fn parse_line(&mut self, line: &str, lineno: u64, ctx: &ParseCtx) -> Result<Option<Request>> {
        if line.starts_with('#') || (lineno == 1 && line.starts_with("timestamp")) {
            return Ok(None);
        }
        let mut cols = line.split(',');
        let time = time_field(cols.next(), "timestamp", lineno, ctx)?;
        let op = match cols.next().map(str::trim) {
            Some("R") | Some("r") => Op::Read,
            Some("W") | Some("w") => Op::Write,
            Some(other) => return Err(ctx.err(Location::Line(lineno), "op", format!("`{other}` is not R or W"))),
            None => return Err(missing("op", lineno, ctx)),
        };
        let offset: u64 = size_field(cols.next(), "offset", lineno, ctx)?;
        let len: u64 = size_field(cols.next(), "size", lineno, ctx)?;
        let tenant: u32 = match cols.next() {
            Some(t) if !t.trim().is_empty() => field(Some(t), "tenant", lineno, ctx)?,
            _ => 0,
        };
        request(time, op, offset, len, tenant, Location::Line(lineno), ctx).map(Some)
    }
}

/// Write the header line.
pub fn write_header(w: &mut impl Write) -> std::io::Result<()> {
    writeln!(w, "{HEADER}")
}

/// Write one request as a native CSV line.
#[inline]
pub fn write_record(w: &mut impl Write, r: &Request) -> std::io::Result<()> {
    writeln!(w, "{},{},{},{},{}", r.time, r.op.letter(), r.offset, r.len, r.tenant)
}
