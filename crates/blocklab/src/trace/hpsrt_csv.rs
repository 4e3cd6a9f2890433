//! `hpsrt-csv`: the plain CSV rendering of an HP SRT trace shipped beside
//! `ajw.1week.srt`: header `time_s,devno,lba512,size_bytes,op,service_us`,
//! op `R`/`W`, lba in 512-byte sectors. devno becomes the tenant; the
//! service time is not used.

use super::input::{field, request, scaled, size_field, time_field};
use super::{Op, ParseCtx, Request, TextFormat};
use crate::error::{Location, Result};

#[derive(Default)]
pub struct HpSrtCsv;

impl TextFormat for HpSrtCsv {
    fn parse_line(&mut self, line: &str, lineno: u64, ctx: &ParseCtx) -> Result<Option<Request>> {
        if line.starts_with('#') || (lineno == 1 && line.trim_start().starts_with(|c: char| c.is_ascii_alphabetic())) {
            return Ok(None);
        }
        let loc = Location::Line(lineno);
        let mut cols = line.split(',');
        let time = time_field(cols.next(), "time_s", lineno, ctx)?;
        let dev: u32 = field(cols.next(), "devno", lineno, ctx)?;
        let lba = size_field(cols.next(), "lba512", lineno, ctx)?;
        let len = size_field(cols.next(), "size_bytes", lineno, ctx)?;
        let op = match cols.next().map(str::trim) {
            Some("R") | Some("r") => Op::Read,
            Some("W") | Some("w") => Op::Write,
            Some(other) => return Err(ctx.err(loc, "op", format!("`{other}` is not R or W"))),
            None => return Err(ctx.err(loc, "op", "missing column")),
        };
        let offset = scaled(lba, 512, "lba512", loc, ctx)?;
        request(time, op, offset, len, dev, loc, ctx).map(Some)
    }
}
