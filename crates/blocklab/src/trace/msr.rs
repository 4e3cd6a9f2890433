//! SNIA IOTTA MSR Cambridge CSV:
//! `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`.
//! Timestamp is a Windows filetime (100 ns ticks since 1601); it becomes
//! seconds relative to the first record (computed in integers, so no
//! precision is lost on the 18-digit ticks). DiskNumber becomes the tenant;
//! Type is `Read`/`Write`; offset and size are bytes; the hostname and the
//! response time are not used.

use super::input::{field, missing, request, size_field};
use super::{Op, ParseCtx, Request, TextFormat};
use crate::error::{Location, Result};

#[derive(Default)]
pub struct Msr {
    first: Option<u64>,
}

impl TextFormat for Msr {
    fn parse_line(&mut self, line: &str, lineno: u64, ctx: &ParseCtx) -> Result<Option<Request>> {
        if line.starts_with('#') || (lineno == 1 && line.trim_start().starts_with(|c: char| c.is_ascii_alphabetic())) {
            return Ok(None);
        }
        let mut cols = line.split(',');
        let ticks: u64 = field(cols.next(), "Timestamp", lineno, ctx)?;
        cols.next().ok_or_else(|| missing("Hostname", lineno, ctx))?;
        let disk: u32 = field(cols.next(), "DiskNumber", lineno, ctx)?;
        let op = match cols.next().map(str::trim) {
            Some(t) if t.eq_ignore_ascii_case("read") => Op::Read,
            Some(t) if t.eq_ignore_ascii_case("write") => Op::Write,
            Some(other) => {
                return Err(ctx.err(
                    Location::Line(lineno),
                    "Type",
                    format!("`{other}` is not Read or Write"),
                ))
            }
            None => return Err(missing("Type", lineno, ctx)),
        };
        let offset = size_field(cols.next(), "Offset", lineno, ctx)?;
        let len = size_field(cols.next(), "Size", lineno, ctx)?;
        let first = *self.first.get_or_insert(ticks);
        // Signed difference: a record earlier than the first one is kept as a
        // negative time (ordering is not checked here).
        let time = (ticks as i128 - first as i128) as f64 * 1e-7;
        request(time, op, offset, len, disk, Location::Line(lineno), ctx).map(Some)
    }
}
