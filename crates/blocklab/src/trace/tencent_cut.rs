//! `tencent-cut`: the single-volume Tencent CBS excerpts of FlashNet
//! (`tencent.cut.*.trace`): CSV
//! `ts_ms,latency_us,op,size_bytes,offset_bytes,submit_ts,size` with op
//! 1 = read, 0 = write. Only the first five columns are used (the latency
//! and submit time come from a later replay, not from the original trace).
//! Single tenant.

use super::input::{field, request, size_field, time_field};
use super::{Op, ParseCtx, Request, TextFormat};
use crate::error::{Location, Result};

#[derive(Default)]
pub struct TencentCut;

impl TextFormat for TencentCut {
    fn parse_line(&mut self, line: &str, lineno: u64, ctx: &ParseCtx) -> Result<Option<Request>> {
        if line.starts_with('#') || (lineno == 1 && line.trim_start().starts_with(|c: char| c.is_ascii_alphabetic())) {
            return Ok(None);
        }
        let loc = Location::Line(lineno);
        let mut cols = line.split(',');
        let ms = time_field(cols.next(), "ts_ms", lineno, ctx)?;
        let _latency: f64 = field(cols.next(), "latency_us", lineno, ctx)?;
        let op = match cols.next().map(str::trim) {
            Some("1") => Op::Read,
            Some("0") => Op::Write,
            Some(other) => return Err(ctx.err(loc, "op", format!("`{other}` is not 1 (read) or 0 (write)"))),
            None => return Err(ctx.err(loc, "op", "missing column")),
        };
        let len = size_field(cols.next(), "size", lineno, ctx)?;
        let offset = size_field(cols.next(), "offset", lineno, ctx)?;
        request(ms * 1e-3, op, offset, len, 0, loc, ctx).map(Some)
    }
}
