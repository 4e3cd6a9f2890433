//! `msr-cut`: the MSR Cambridge excerpts used by Heimdall / FlashNet
//! (`msr.cut.*.trace`): space-separated `ts_ms dev offset_bytes size_bytes op`
//! with op 1 = read, 0 = write. `dev` becomes the tenant.

use super::input::{field, request, size_field, time_field};
use super::{Op, ParseCtx, Request, TextFormat};
use crate::error::{Location, Result};

#[derive(Default)]
pub struct MsrCut;

impl TextFormat for MsrCut {
    fn parse_line(&mut self, line: &str, lineno: u64, ctx: &ParseCtx) -> Result<Option<Request>> {
        if line.starts_with('#') {
            return Ok(None);
        }
        let mut cols = line.split_ascii_whitespace();
        let ms = time_field(cols.next(), "ts_ms", lineno, ctx)?;
        let dev: u32 = field(cols.next(), "dev", lineno, ctx)?;
        let offset = size_field(cols.next(), "offset", lineno, ctx)?;
        let len = size_field(cols.next(), "size", lineno, ctx)?;
        let op = match cols.next() {
            Some("1") => Op::Read,
            Some("0") => Op::Write,
            Some(other) => {
                return Err(ctx.err(
                    Location::Line(lineno),
                    "op",
                    format!("`{other}` is not 1 (read) or 0 (write)"),
                ))
            }
            None => return Err(ctx.err(Location::Line(lineno), "op", "missing column")),
        };
        request(ms * 1e-3, op, offset, len, dev, Location::Line(lineno), ctx).map(Some)
    }
}
