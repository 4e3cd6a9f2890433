//! A toy device for tests and for running without a drive model: service
//! time = `base_ms + per_cyl_ms * |cylinder distance| + per_sector_ms *
//! sectors`, cylinders of `sectors_per_cyl` sectors. With the last two
//! coefficients 0 it is a constant-service device (hand-computable queueing).
//!
//! Spec strings (CLI `MODEL` argument): `const:MS` or
//! `toy:base=MS,cyl=MS,sector=MS,spc=N,cap=SECTORS` (any subset of keys).

use crate::array::plan::DiskOpKind;
use crate::device::{DevRequest, DeviceModel};
use crate::error::{Error, Result};

#[derive(Debug, Clone)]
pub struct ToyDisk {
    pub base_ms: f64,
    pub per_cyl_ms: f64,
    pub per_sector_ms: f64,
    pub sectors_per_cyl: u64,
    pub capacity: u64,
    /// Extra time of a write (ms).
    pub write_extra_ms: f64,
    pub head: u64,
}

impl ToyDisk {
    pub fn constant(ms: f64) -> Self {
        ToyDisk {
            base_ms: ms,
            per_cyl_ms: 0.0,
            per_sector_ms: 0.0,
            sectors_per_cyl: 1000,
            capacity: 1 << 40,
            write_extra_ms: 0.0,
            head: 0,
        }
    }

    pub fn linear(base_ms: f64, per_cyl_ms: f64, sectors_per_cyl: u64) -> Self {
        ToyDisk {
            per_cyl_ms,
            sectors_per_cyl: sectors_per_cyl.max(1),
            ..Self::constant(base_ms)
        }
    }

    /// Parse a `const:` / `toy:` spec; `None` if `spec` is neither.
    pub fn parse(spec: &str) -> Option<Result<Self>> {
        if let Some(ms) = spec.strip_prefix("const:") {
            return Some(
                ms.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite() && *v >= 0.0)
                    .map(ToyDisk::constant)
                    .ok_or_else(|| Error::config(format!("model `{spec}`: `const:` needs a service time in ms >= 0"))),
            );
        }
        let body = spec
            .strip_prefix("toy:")
            .or(if spec == "toy" { Some("") } else { None })?;
        let mut d = ToyDisk::linear(1.0, 0.001, 1000);
        for kv in body.split(',').filter(|s| !s.trim().is_empty()) {
            let (k, v) = match kv.split_once('=') {
                Some(x) => x,
                None => return Some(Err(Error::config(format!("model `{spec}`: `{kv}` is not key=value")))),
            };
            let bad = || Error::config(format!("model `{spec}`: bad value `{v}` for `{k}`"));
            let f = || v.trim().parse::<f64>().ok().filter(|x| x.is_finite() && *x >= 0.0);
            let n = || v.trim().parse::<u64>().ok().filter(|x| *x > 0);
            match k.trim() {
                "base" => match f() {
                    Some(x) => d.base_ms = x,
                    None => return Some(Err(bad())),
                },
                "cyl" => match f() {
                    Some(x) => d.per_cyl_ms = x,
                    None => return Some(Err(bad())),
                },
                "sector" => match f() {
                    Some(x) => d.per_sector_ms = x,
                    None => return Some(Err(bad())),
                },
                "write" => match f() {
                    Some(x) => d.write_extra_ms = x,
                    None => return Some(Err(bad())),
                },
                "spc" => match n() {
                    Some(x) => d.sectors_per_cyl = x,
                    None => return Some(Err(bad())),
                },
                "cap" => match n() {
                    Some(x) => d.capacity = x,
                    None => return Some(Err(bad())),
                },
                other => {
                    return Some(Err(Error::unknown(
                        "toy model key",
                        other,
                        &["base", "cyl", "sector", "write", "spc", "cap"],
                    )))
                }
            }
        }
        Some(Ok(d))
    }
}

impl DeviceModel for ToyDisk {
    fn service(&mut self, now_ms: f64, req: &DevRequest) -> f64 {
        let t = self.positioning_estimate(now_ms, req)
            + self.per_sector_ms * req.sectors as f64
            + if req.kind == DiskOpKind::Write {
                self.write_extra_ms
            } else {
                0.0
            };
        self.head = self.cylinder(req.lbn + req.sectors.max(1) as u64 - 1);
        t
    }
    fn positioning_estimate(&self, _now_ms: f64, req: &DevRequest) -> f64 {
        self.base_ms + self.per_cyl_ms * self.cylinder(req.lbn).abs_diff(self.head) as f64
    }
    fn cylinder(&self, lbn: u64) -> u64 {
        lbn / self.sectors_per_cyl
    }
    fn capacity_sectors(&self) -> u64 {
        self.capacity
    }
}
