//! blocklab's native CSV: header `timestamp,op,offset,size[,tenant]`,
//! timestamp in seconds, op `R`/`W`, offset and size in bytes.

use super::input::{field, time_field};
use super::{Op, ParseCtx, Request, TextFormat};
use crate::error::{Location, Result};

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
            None => return Err(ctx.err(Location::Line(lineno), "op", "missing column")),
        };
        let offset: u64 = field(cols.next(), "offset", lineno, ctx)?;
        let len: u64 = field(cols.next(), "size", lineno, ctx)?;
        let tenant: u32 = match cols.next() {
            Some(t) if !t.trim().is_empty() => field(Some(t), "tenant", lineno, ctx)?,
            _ => 0,
        };
        Ok(Some(Request { time, op, offset, len, tenant }))
    }
}
