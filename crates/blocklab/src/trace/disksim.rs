//! DiskSim ASCII traces: whitespace-separated `time devno blkno bcount flags`.
//! blkno and bcount are 512-byte sectors; flags is hexadecimal (as DiskSim
//! reads it) and bit 0 set means read. devno becomes the tenant.
//!
//! Two names share this parser and differ only in the time unit:
//! `disksim` (milliseconds, DiskSim's own convention) and `mqsim`
//! (nanoseconds, as in MQSim's traces such as `data/wsrch-small.trace`).

use super::input::{field, missing, request, scaled, size_field, time_field};
use super::{Op, ParseCtx, Request, TextFormat};
use crate::error::{Location, Result};

pub struct DiskSim {
    /// Seconds per unit of the time column.
    seconds_per_unit: f64,
}

impl DiskSim {
    /// DiskSim proper: times in milliseconds.
    pub fn millis() -> Self {
        DiskSim { seconds_per_unit: 1e-3 }
    }
    /// MQSim's variant: times in nanoseconds.
    pub fn nanos() -> Self {
        DiskSim { seconds_per_unit: 1e-9 }
    }
}

impl TextFormat for DiskSim {
    fn parse_line(&mut self, line: &str, lineno: u64, ctx: &ParseCtx) -> Result<Option<Request>> {
        if line.starts_with('#') {
            return Ok(None);
        }
        let mut cols = line.split_ascii_whitespace();
        let t = time_field(cols.next(), "time", lineno, ctx)?;
        let dev: u32 = field(cols.next(), "devno", lineno, ctx)?;
        let blkno = size_field(cols.next(), "blkno", lineno, ctx)?;
        let bcount = size_field(cols.next(), "bcount", lineno, ctx)?;
        let flags_s = cols.next().ok_or_else(|| missing("flags", lineno, ctx))?;
        let hex = flags_s
            .strip_prefix("0x")
            .or_else(|| flags_s.strip_prefix("0X"))
            .unwrap_or(flags_s);
        let flags = u32::from_str_radix(hex, 16)
            .map_err(|e| ctx.err(Location::Line(lineno), "flags", format!("`{flags_s}`: {e}")))?;
        let op = if flags & 1 == 1 { Op::Read } else { Op::Write };
        let loc = Location::Line(lineno);
        let offset = scaled(blkno, 512, "blkno", loc, ctx)?;
        let len = scaled(bcount, 512, "bcount", loc, ctx)?;
        request(t * self.seconds_per_unit, op, offset, len, dev, loc, ctx).map(Some)
    }
}
