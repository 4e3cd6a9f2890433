//! SPC / UMass trace repository (Financial, WebSearch): CSV
//! `ASU,LBA,Size,Opcode,Timestamp[,...]`. LBA in 512-byte sectors, size in
//! bytes, opcode `r`/`R`/`w`/`W`, timestamp in seconds. The ASU (application
//! specific unit) becomes the tenant. Extra trailing columns are ignored.

use super::input::{field, request, scaled, size_field, time_field};
use super::{Op, ParseCtx, Request, TextFormat};
use crate::error::{Location, Result};

#[derive(Default)]
pub struct Spc;

impl TextFormat for Spc {
    fn parse_line(&mut self, line: &str, lineno: u64, ctx: &ParseCtx) -> Result<Option<Request>> {
        if line.starts_with('#') || (lineno == 1 && line.trim_start().starts_with(|c: char| c.is_ascii_alphabetic())) {
            return Ok(None); // comment or a header line
        }
        let mut cols = line.split(',');
        let asu: u32 = field(cols.next(), "ASU", lineno, ctx)?;
        let lba = size_field(cols.next(), "LBA", lineno, ctx)?;
        let len = size_field(cols.next(), "Size", lineno, ctx)?;
        let op = match cols.next().map(str::trim) {
            Some("r") | Some("R") => Op::Read,
            Some("w") | Some("W") => Op::Write,
            Some(other) => return Err(ctx.err(Location::Line(lineno), "Opcode", format!("`{other}` is not r/R/w/W"))),
            None => return Err(ctx.err(Location::Line(lineno), "Opcode", "missing column")),
        };
        let time = time_field(cols.next(), "Timestamp", lineno, ctx)?;
        let offset = scaled(lba, 512, "LBA", Location::Line(lineno), ctx)?;
        request(time, op, offset, len, asu, Location::Line(lineno), ctx).map(Some)
    }
}
