//! Tencent CBS (SNIA IOTTA, OSCA ATC'20) CSV:
//! `timestamp,offset,size,type,volume_id` with the timestamp in Unix seconds,
//! offset and size in 512-byte sectors, type 0 = read, 1 = write. The volume
//! id becomes the tenant.

use super::input::{field, request, scaled, size_field, time_field};
use super::{Op, ParseCtx, Request, TextFormat};
use crate::error::{Location, Result};

#[derive(Default)]
pub struct Tencent;

impl TextFormat for Tencent {
    fn parse_line(&mut self, line: &str, lineno: u64, ctx: &ParseCtx) -> Result<Option<Request>> {
        if line.starts_with('#') || (lineno == 1 && line.trim_start().starts_with(|c: char| c.is_ascii_alphabetic())) {
            return Ok(None);
        }
        let loc = Location::Line(lineno);
        let mut cols = line.split(',');
        let time = time_field(cols.next(), "timestamp", lineno, ctx)?;
        let off = size_field(cols.next(), "offset", lineno, ctx)?;
        let size = size_field(cols.next(), "size", lineno, ctx)?;
        let op = match cols.next().map(str::trim) {
            Some("0") => Op::Read,
            Some("1") => Op::Write,
            Some(other) => return Err(ctx.err(loc, "type", format!("`{other}` is not 0 (read) or 1 (write)"))),
            None => return Err(ctx.err(loc, "type", "missing column")),
        };
        let volume: u32 = field(cols.next(), "volume_id", lineno, ctx)?;
        let offset = scaled(off, 512, "offset", loc, ctx)?;
        let len = scaled(size, 512, "size", loc, ctx)?;
        request(time, op, offset, len, volume, loc, ctx).map(Some)
    }
}
