//! Default text output of `blkparse`:
//!
//! ```text
//!   8,16   5        2     0.000001850 18615  Q   R 1444645666 + 256 [java]
//!   dev   cpu     seq       time(s)     pid act rwbs sector + count [process]
//! ```
//!
//! Only events of one action are requests: queue (`Q`, default) or dispatch
//! (`D`, option `blkparse_event`). Lines of other actions (A, G, I, M, C, m,
//! ...), events without a data payload (no `sector + count`, e.g. flushes or
//! plugs) and RWBS fields without R or W (discards `D`, `N`) are ignored, as
//! are the summary lines blkparse prints at the end (they do not start with a
//! `major,minor` device field). Sector and count are 512-byte sectors; the
//! time is blkparse's (seconds since the start of tracing). Each device
//! (`major,minor`) becomes a tenant numbered in order of first appearance.

use super::input::{request, scaled, size_field, time_field};
use super::{Op, ParseCtx, Request, TextFormat};
use crate::error::{Location, Result};

pub struct Blkparse {
    event: char,
    /// (major, minor) of each tenant, in order of first appearance (few entries).
    devices: Vec<(u32, u32)>,
}

impl Blkparse {
    pub fn new(event: char) -> Self {
        Blkparse {
            event,
            devices: Vec::new(),
        }
    }

    fn tenant(&mut self, dev: (u32, u32)) -> u32 {
        match self.devices.iter().position(|d| *d == dev) {
            Some(i) => i as u32,
            None => {
                self.devices.push(dev);
                (self.devices.len() - 1) as u32
            }
        }
    }
}

/// `major,minor` of an event line, or None for other lines.
fn device(tok: &str) -> Option<(u32, u32)> {
    let (a, b) = tok.split_once(',')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

impl TextFormat for Blkparse {
    fn parse_line(&mut self, line: &str, lineno: u64, ctx: &ParseCtx) -> Result<Option<Request>> {
        let mut cols = line.split_ascii_whitespace();
        let Some(dev) = cols.next().and_then(device) else {
            return Ok(None); // summary or other non-event line
        };
        let loc = Location::Line(lineno);
        // cpu, sequence number
        let (Some(_cpu), Some(_seq)) = (cols.next(), cols.next()) else {
            return Err(ctx.err(loc, "time", "missing column"));
        };
        let time_s = cols.next();
        let _pid = cols.next();
        let action = match cols.next() {
            Some(a) => a,
            None => return Err(ctx.err(loc, "action", "missing column")),
        };
        if action.len() != 1 || !action.starts_with(self.event) {
            return Ok(None);
        }
        let time = time_field(time_s, "time", lineno, ctx)?;
        let rwbs = cols.next().ok_or_else(|| ctx.err(loc, "rwbs", "missing column"))?;
        let op = if rwbs.contains('R') {
            Op::Read
        } else if rwbs.contains('W') {
            Op::Write
        } else {
            return Ok(None); // discard, flush-only or no-data event
        };
        let sector_s = cols.next();
        if cols.next() != Some("+") {
            return Ok(None); // no payload (e.g. `Q FWS [kworker]`)
        }
        let sector = size_field(sector_s, "sector", lineno, ctx)?;
        let count = size_field(cols.next(), "count", lineno, ctx)?;
        let offset = scaled(sector, 512, "sector", loc, ctx)?;
        let len = scaled(count, 512, "count", loc, ctx)?;
        let tenant = self.tenant(dev);
        request(time, op, offset, len, tenant, loc, ctx).map(Some)
    }
}
