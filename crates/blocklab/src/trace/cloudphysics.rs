//! CloudPhysics CSV (as shipped with libCacheSim): header
//! `version,time,op,size,lbn`; time in seconds, op the SCSI opcode in hex
//! (`28` READ(10), `2a` WRITE(10), and the other READ/WRITE variants), size
//! in bytes, lbn in 512-byte sectors. Single tenant.

use super::input::{field, missing, request, scaled, size_field, time_field};
use super::vscsi::scsi_op;
use super::{ParseCtx, Request, TextFormat};
use crate::error::{Location, Result};

#[derive(Default)]
pub struct CloudPhysics;

impl TextFormat for CloudPhysics {
    fn parse_line(&mut self, line: &str, lineno: u64, ctx: &ParseCtx) -> Result<Option<Request>> {
        if line.starts_with('#') || (lineno == 1 && line.trim_start().starts_with(|c: char| c.is_ascii_alphabetic())) {
            return Ok(None);
        }
        let loc = Location::Line(lineno);
        let mut cols = line.split(',');
        let _version: u32 = field(cols.next(), "version", lineno, ctx)?;
        let time = time_field(cols.next(), "time", lineno, ctx)?;
        let op_s = cols.next().ok_or_else(|| missing("op", lineno, ctx))?.trim();
        let hex = op_s.strip_prefix("0x").unwrap_or(op_s);
        let code = u16::from_str_radix(hex, 16).map_err(|e| ctx.err(loc, "op", format!("`{op_s}`: {e}")))?;
        let Some(op) = scsi_op(code) else {
            return Err(ctx.err(loc, "op", format!("`{op_s}` is not a SCSI read or write opcode")));
        };
        let len = size_field(cols.next(), "size", lineno, ctx)?;
        let lbn = size_field(cols.next(), "lbn", lineno, ctx)?;
        let offset = scaled(lbn, 512, "lbn", loc, ctx)?;
        request(time, op, offset, len, 0, loc, ctx).map(Some)
    }
}
