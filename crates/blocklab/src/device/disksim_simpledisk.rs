//! DiskSim's simple disk (`disksim_simpledisk`): every access takes the
//! same time whatever its address and size.
//!
//! As DiskSim times it (`disksim_simpledisk.c`): the command overhead, then
//! the constant media access time, then the data crosses the bus at the
//! slower of the disk's `Bulk sector transfer time` and its bus's per-block
//! time (for a write the transfer comes before the access; the sum is the
//! same). `Bus transaction latency` is added to each of the interrupts a
//! request sends up: arrival, and completion (a read also disconnects and
//! reconnects when `Never disconnect` is 0: two more). There is no
//! mechanism, so the "cylinder" a scheduler orders by is the block number.

use super::disksim_params::Block;
use super::{DevRequest, DeviceModel, TimeSplit};
use crate::array::plan::DiskOpKind;
use crate::error::{Error, Location, Result};

/// A constant-access-time disk.
#[derive(Debug, Clone, PartialEq)]
pub struct SimpleDisk {
    pub blocks: u64,
    /// `Access time` (ms): the media access, whatever the request.
    pub access_ms: f64,
    /// `Command overhead` (ms), once per request.
    pub overhead_ms: f64,
    /// `Bus transaction latency` (ms), per interrupt sent to the host.
    pub bus_latency_ms: f64,
    /// Per-sector transfer time (ms) of reads and of writes: the disk's
    /// bulk time or its bus's, whichever is slower.
    pub sector_read_ms: f64,
    pub sector_write_ms: f64,
    pub never_disconnect: bool,
}

impl SimpleDisk {
    /// The disk of a `disksim_simpledisk` block; `bus_read` / `bus_write`:
    /// the per-block times of the bus it sits on.
    pub fn from_block(b: &Block, bus_read: f64, bus_write: f64) -> Result<SimpleDisk> {
        let nonneg = |key: &str, default: Option<f64>| -> Result<f64> {
            let v = match default {
                Some(d) => b.num_or(key, d)?,
                None => b.num(key)?,
            };
            if !(v.is_finite() && v >= 0.0) {
                let (file, line) = b.get(key).map_or((&b.file, b.line), |p| (&p.file, p.line));
                return Err(Error::parse(
                    file,
                    Location::Line(line),
                    format!("disksim_simpledisk {}: {key}", b.name.as_deref().unwrap_or("")),
                    format!("{v}: must be a non-negative number"),
                ));
            }
            Ok(v)
        };
        let blocks = nonneg("Block count", None)?;
        if blocks < 1.0 || blocks.fract() != 0.0 {
            return Err(b
                .get("Block count")
                .expect("read above")
                .err("must be a positive integer"));
        }
        // DiskSim accepts the access time under either name.
        let access_ms = match b.get("Access time") {
            Some(_) => nonneg("Access time", None)?,
            None => nonneg("Constant access time", None)?,
        };
        let bulk = nonneg("Bulk sector transfer time", Some(0.0))?;
        Ok(SimpleDisk {
            blocks: blocks as u64,
            access_ms,
            overhead_ms: nonneg("Command overhead", Some(0.0))?,
            bus_latency_ms: nonneg("Bus transaction latency", Some(0.0))?,
            sector_read_ms: bulk.max(bus_read),
            sector_write_ms: bulk.max(bus_write),
            never_disconnect: b.num_or("Never disconnect", 0.0)? != 0.0,
        })
    }

    /// Interrupts a request sends up, each paying the bus transaction latency.
    fn interrupts(&self, kind: DiskOpKind) -> f64 {
        match (kind, self.never_disconnect) {
            // Ready-to-transfer and completion.
            (_, true) | (DiskOpKind::Write, false) => 2.0,
            // Disconnect, reconnect, completion.
            (DiskOpKind::Read, false) => 3.0,
        }
    }

    fn transfer_ms(&self, req: &DevRequest) -> f64 {
        let per = match req.kind {
            DiskOpKind::Read => self.sector_read_ms,
            DiskOpKind::Write => self.sector_write_ms,
        };
        per * req.sectors as f64
    }
}

impl DeviceModel for SimpleDisk {
    fn service(&mut self, _now_ms: f64, req: &DevRequest) -> f64 {
        self.overhead_ms + self.access_ms + self.transfer_ms(req) + self.bus_latency_ms * self.interrupts(req.kind)
    }

    fn positioning_estimate(&self, _now_ms: f64, _req: &DevRequest) -> f64 {
        self.access_ms
    }

    fn cylinder(&self, lbn: u64) -> u64 {
        lbn
    }

    fn capacity_sectors(&self) -> u64 {
        self.blocks
    }

    fn last_split(&self) -> Option<TimeSplit> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::disksim_params::parse_str;

    fn disk(body: &str) -> Result<SimpleDisk> {
        let src = format!("disksim_simpledisk SD0 {{\n{body}\n}}\n");
        let pf = parse_str(&src, "t.parv", std::path::Path::new("."))?;
        let b = pf.blocks_of("disksim_simpledisk").next().unwrap();
        SimpleDisk::from_block(b, 0.0, 0.0)
    }

    #[test]
    fn every_access_takes_overhead_plus_access_time_whatever_its_size() {
        // synthsimpledisk's SD0: 0.5 + 9.5 ms, no transfer or bus cost.
        let mut d = disk("Block count = 100000,\n Access time = 9.5,\n Command overhead = 0.5").unwrap();
        for (lbn, sectors, kind) in [(0, 8, DiskOpKind::Read), (99_000, 200, DiskOpKind::Write)] {
            let t = d.service(3.0, &DevRequest { kind, lbn, sectors });
            assert_eq!(t, 10.0);
        }
        assert_eq!(d.capacity_sectors(), 100_000);
    }

    #[test]
    fn transfer_and_bus_latency_add_as_disksim_counts_them() {
        let mut d = disk(
            "Block count = 100,\n Constant access time = 2,\n Command overhead = 1,\n\
             Bulk sector transfer time = 0.25,\n Bus transaction latency = 0.5",
        )
        .unwrap();
        // A read: 1 + 2 + 4 × 0.25, and three interrupts of 0.5 (disconnect,
        // reconnect, completion).
        let r = DevRequest {
            kind: DiskOpKind::Read,
            lbn: 0,
            sectors: 4,
        };
        assert_eq!(d.service(0.0, &r), 5.5);
        // A write: ready-to-transfer and completion only.
        let w = DevRequest {
            kind: DiskOpKind::Write,
            ..r
        };
        assert_eq!(d.service(0.0, &w), 5.0);
    }

    #[test]
    fn a_missing_or_negative_time_names_its_key() {
        let e = disk("Block count = 10").unwrap_err().to_string();
        assert!(e.contains("Constant access time"), "{e}");
        let e = disk("Block count = 10,\n Access time = -1").unwrap_err().to_string();
        assert!(e.contains("Access time") && e.contains("line 3"), "{e}");
    }
}
