//! A simple SSD: pages striped over independent channels, each page costing
//! a fixed read or write latency plus its transfer at the channel bandwidth.
//! No mechanical state: positioning is free and every LBN is "cylinder" 0.
//! (Garbage collection and write amplification are not modelled.)

use serde::{Deserialize, Serialize};

use crate::array::plan::DiskOpKind;
use crate::device::{DevRequest, DeviceModel};
use crate::error::{Error, Result};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SsdParams {
    /// Capacity in GB (10^9 bytes).
    pub capacity_gb: f64,
    /// Flash page read latency (array to register), µs.
    pub read_latency_us: f64,
    /// Page program latency, µs.
    pub write_latency_us: f64,
    /// Independent channels; page p goes to channel p mod channels.
    pub channels: u32,
    /// Transfer bandwidth of one channel, MB/s (10^6 bytes).
    pub channel_mb_s: f64,
    /// Page size in KiB.
    #[serde(default = "default_page_kib")]
    pub page_kib: u32,
    /// Fixed controller overhead per request, µs.
    #[serde(default)]
    pub overhead_us: f64,
}

fn default_page_kib() -> u32 {
    4
}

pub struct Ssd {
    p: SsdParams,
    /// When each channel becomes free (ms).
    free: Vec<f64>,
    page_sectors: u64,
    capacity: u64,
}

impl Ssd {
    pub fn new(p: SsdParams) -> Result<Ssd> {
        if p.channels == 0 || !(p.channel_mb_s > 0.0) || p.page_kib == 0 || !(p.capacity_gb > 0.0) {
            return Err(Error::config(
                "ssd: channels, channel_mb_s, page_kib and capacity_gb must be positive",
            ));
        }
        if p.read_latency_us < 0.0 || p.write_latency_us < 0.0 || p.overhead_us < 0.0 {
            return Err(Error::config("ssd: latencies must not be negative"));
        }
        Ok(Ssd {
            free: vec![0.0; p.channels as usize],
            page_sectors: p.page_kib as u64 * 2,
            capacity: (p.capacity_gb * 1e9 / 512.0) as u64,
            p,
        })
    }

    fn page_ms(&self, kind: DiskOpKind) -> f64 {
        let lat = match kind {
            DiskOpKind::Read => self.p.read_latency_us,
            DiskOpKind::Write => self.p.write_latency_us,
        };
        let xfer_us = self.p.page_kib as f64 * 1024.0 / self.p.channel_mb_s; // bytes / (MB/s) = µs
        (lat + xfer_us) / 1000.0
    }
}

impl DeviceModel for Ssd {
    fn service(&mut self, now_ms: f64, req: &DevRequest) -> f64 {
        let start = now_ms + self.p.overhead_us / 1000.0;
        let first = req.lbn / self.page_sectors;
        let last = (req.lbn + req.sectors.max(1) as u64 - 1) / self.page_sectors;
        let per = self.page_ms(req.kind);
        let mut done = start;
        let n = self.free.len() as u64;
        for page in first..=last {
            let c = (page % n) as usize;
            let end = self.free[c].max(start) + per;
            self.free[c] = end;
            done = done.max(end);
        }
        done - now_ms
    }

    fn positioning_estimate(&self, _now_ms: f64, _req: &DevRequest) -> f64 {
        0.0
    }

    fn cylinder(&self, _lbn: u64) -> u64 {
        0
    }

    fn capacity_sectors(&self) -> u64 {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ssd() -> Ssd {
        Ssd::new(SsdParams {
            capacity_gb: 1.0,
            read_latency_us: 50.0,
            write_latency_us: 500.0,
            channels: 2,
            channel_mb_s: 409.6, // 4 KiB in 10 µs
            page_kib: 4,
            overhead_us: 0.0,
        })
        .unwrap()
    }

    #[test]
    fn pages_spread_over_channels_and_queue_behind_each_other() {
        let mut d = ssd();
        let r = |lbn, sectors| DevRequest {
            kind: DiskOpKind::Read,
            lbn,
            sectors,
        };
        // One page: 50 + 10 µs.
        assert!((d.service(0.0, &r(0, 8)) - 0.060).abs() < 1e-12);
        // Three pages at t = 1 ms over two channels: channel 0 serves pages
        // 0 and 2 back to back → 120 µs.
        assert!((d.service(1.0, &r(0, 24)) - 0.120).abs() < 1e-12);
        let w = DevRequest {
            kind: DiskOpKind::Write,
            lbn: 8,
            sectors: 8,
        };
        assert!((d.service(2.0, &w) - 0.510).abs() < 1e-12);
    }
}
