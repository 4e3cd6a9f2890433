//! SYSTOR'17 VDI traces (SNIA IOTTA): CSV
//! `Timestamp,Response,IOType,LUN,Offset,Size` with the timestamp in Unix
//! seconds, IOType `R`/`W`, offset and size in bytes. The LUN becomes the
//! tenant; the response time is not used.

use super::input::{field, request, size_field, time_field};
use super::{Op, ParseCtx, Request, TextFormat};
use crate::error::{Location, Result};

#[derive(Default)]
pub struct Systor;

impl TextFormat for Systor {
    fn parse_line(&mut self, line: &str, lineno: u64, ctx: &ParseCtx) -> Result<Option<Request>> {
        if line.starts_with('#') || (lineno == 1 && line.trim_start().starts_with(|c: char| c.is_ascii_alphabetic())) {
            return Ok(None);
        }
        let loc = Location::Line(lineno);
        let mut cols = line.split(',');
        let time = time_field(cols.next(), "Timestamp", lineno, ctx)?;
        let _response: f64 = field(cols.next(), "Response", lineno, ctx)?;
        let op = match cols.next().map(str::trim) {
            Some("R") | Some("r") => Op::Read,
            Some("W") | Some("w") => Op::Write,
            Some(other) => return Err(ctx.err(loc, "IOType", format!("`{other}` is not R or W"))),
            None => return Err(ctx.err(loc, "IOType", "missing column")),
        };
        let lun: u32 = field(cols.next(), "LUN", lineno, ctx)?;
        let offset = size_field(cols.next(), "Offset", lineno, ctx)?;
        let len = size_field(cols.next(), "Size", lineno, ctx)?;
        request(time, op, offset, len, lun, loc, ctx).map(Some)
    }
}
