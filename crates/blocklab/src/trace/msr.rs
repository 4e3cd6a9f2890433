//! SNIA IOTTA MSR Cambridge CSV:
//! `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`.
//! Timestamp is a Windows filetime (100 ns ticks since 1601); it becomes
//! seconds relative to the first record (computed in integers, so no
//! precision is lost on the 18-digit ticks). Type is `Read`/`Write`; offset
//! and size are bytes; the response time is not used.
//!
//! **Tenant = (Hostname, DiskNumber)**, so that volumes of different servers
//! stay apart when traces are merged (hm_0 and web_0 are different data):
//! tenant = host id · 256 + disk, disk 0..=255. The host id is stable across
//! files: the 13 servers of the MSR Cambridge set, [`HOSTS`] in alphabetical
//! order, are 1..=13 (hm → 1, so hm_0 is tenant 256 and web_0 is 13·256 =
//! 3328); any other host name gets 14 + (FNV-1a-32 of its lowercase bytes
//! mod 65,522), a deterministic id below 2^16 (two unknown names may share
//! one, with odds of about 1 in 65,522). Tenants stay below 2^24, as cache
//! keys require.

use super::input::{field, missing, request, size_field};
use super::{Op, ParseCtx, Request, TextFormat};
use crate::error::{Location, Result};

/// The servers of the MSR Cambridge traces; host id = position + 1.
pub const HOSTS: &[&str] = &[
    "hm", "mds", "prn", "proj", "prxy", "rsrch", "src1", "src2", "stg", "ts", "usr", "wdev", "web",
];

/// The host id of a host name (see the module notes).
pub fn host_id(host: &str) -> u32 {
    let host = host.trim();
    if let Some(i) = HOSTS.iter().position(|h| h.eq_ignore_ascii_case(host)) {
        return i as u32 + 1;
    }
    let mut h: u32 = 0x811c_9dc5;
    for b in host.bytes() {
        h ^= b.to_ascii_lowercase() as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    let known = HOSTS.len() as u32 + 1;
    known + h % ((1 << 16) - known)
}

/// The tenant of a (host, disk) pair; None when the disk exceeds 255.
pub fn tenant(host: &str, disk: u32) -> Option<u32> {
    (disk < 256).then(|| host_id(host) << 8 | disk)
}

/// The `host_disk` name of a tenant whose host is one of [`HOSTS`] (`hm_0`).
pub fn volume_name(tenant: u32) -> Option<String> {
    let host = HOSTS.get(((tenant >> 8) as usize).checked_sub(1)?)?;
    Some(format!("{host}_{}", tenant & 0xff))
}

#[derive(Default)]
pub struct Msr {
    first: Option<u64>,
}

impl TextFormat for Msr {
    fn parse_line(&mut self, line: &str, lineno: u64, ctx: &ParseCtx) -> Result<Option<Request>> {
        if line.starts_with('#') || (lineno == 1 && line.trim_start().starts_with(|c: char| c.is_ascii_alphabetic())) {
            return Ok(None);
        }
        let mut cols = line.split(',');
        let ticks: u64 = field(cols.next(), "Timestamp", lineno, ctx)?;
        let host = cols.next().ok_or_else(|| missing("Hostname", lineno, ctx))?;
        if host.trim().is_empty() {
            return Err(ctx.err(Location::Line(lineno), "Hostname", "empty"));
        }
        let disk: u32 = field(cols.next(), "DiskNumber", lineno, ctx)?;
        let tenant = tenant(host, disk).ok_or_else(|| {
            ctx.err(
                Location::Line(lineno),
                "DiskNumber",
                format!("{disk} exceeds 255 (the tenant is host id · 256 + disk)"),
            )
        })?;
        let op = match cols.next().map(str::trim) {
            Some(t) if t.eq_ignore_ascii_case("read") => Op::Read,
            Some(t) if t.eq_ignore_ascii_case("write") => Op::Write,
            Some(other) => {
                return Err(ctx.err(
                    Location::Line(lineno),
                    "Type",
                    format!("`{other}` is not Read or Write"),
                ))
            }
            None => return Err(missing("Type", lineno, ctx)),
        };
        let offset = size_field(cols.next(), "Offset", lineno, ctx)?;
        let len = size_field(cols.next(), "Size", lineno, ctx)?;
        let first = *self.first.get_or_insert(ticks);
        // Signed difference: a record earlier than the first one is kept as a
        // negative time (ordering is not checked here).
        let time = (ticks as i128 - first as i128) as f64 * 1e-7;
        request(time, op, offset, len, tenant, Location::Line(lineno), ctx).map(Some)
    }
}
