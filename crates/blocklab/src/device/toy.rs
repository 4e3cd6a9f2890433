//! A toy device for tests and for running without a drive model: service
//! time = `base_ms + per_cyl_ms * |cylinder distance| + per_sector_ms *
//! sectors`, cylinders of `sectors_per_cyl` sectors. With the last two
//! coefficients 0 it is a constant-service device (hand-computable queueing).
//!
//! Spec strings (CLI `MODEL` argument): `const:MS` or
//! `toy:base=MS,cyl=MS,sector=MS,spc=N,cap=SECTORS` (any subset of keys).
//!
//! Its time splits into overhead (`base`, the write extra), seek (the
//! cylinder part) and transfer (the sector part); no rotation. Asked to read
//! opportunistically it reads ahead after a read at `sector` ms a sector
//! while idle (whole sectors by the time a request arrives; nothing without
//! a per-sector time), and has no rotational latency to read in.

use crate::array::plan::DiskOpKind;
use crate::device::{DevRequest, DeviceModel, Dispatch, FreeRun, Opportunism, TimeSplit};
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
    /// The last service's split and the opportunistic read-ahead.
    pub state: ToyState,
}

/// What a toy device remembers besides its head.
#[derive(Debug, Clone, Default)]
pub struct ToyState {
    split: TimeSplit,
    /// Preemptible read-ahead: sectors past the demand read (None: not asked).
    readahead: Option<u64>,
    /// Read-ahead in progress: next sector, when the previous one ended, limit.
    ra: Option<(u64, f64, u64)>,
    /// End of the last demand read, and of the last read.
    anchor: u64,
    last_read_end: Option<u64>,
    free: Vec<FreeRun>,
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
            state: ToyState::default(),
        }
    }

    /// Read ahead up to `until`: whole sectors only; `stop` ends it.
    fn read_ahead(&mut self, until: f64, stop: bool) {
        let Some((next, t, limit)) = self.state.ra else { return };
        let k = if self.per_sector_ms > 0.0 {
            (((until - t) / self.per_sector_ms).max(0.0).floor() as u64).min(limit - next)
        } else {
            0
        };
        if k > 0 {
            let at = t + k as f64 * self.per_sector_ms;
            self.state.free.push(FreeRun {
                lbn: next,
                sectors: k,
                at_ms: at,
            });
            self.head = self.cylinder(next + k - 1);
            self.state.ra = (next + k < limit).then_some((next + k, at, limit));
        }
        if stop {
            self.state.ra = None;
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
        let seek = self.per_cyl_ms * self.cylinder(req.lbn).abs_diff(self.head) as f64;
        let transfer = self.per_sector_ms * req.sectors as f64;
        self.state.split = TimeSplit {
            seek_ms: seek,
            rotation_ms: 0.0,
            transfer_ms: transfer,
        };
        let t = self.positioning_estimate(now_ms, req)
            + transfer
            + if req.kind == DiskOpKind::Write {
                self.write_extra_ms
            } else {
                0.0
            };
        self.head = self.cylinder(req.lbn + req.sectors.max(1) as u64 - 1);
        t
    }
    fn serve(&mut self, now_ms: f64, req: &DevRequest, d: &Dispatch) -> f64 {
        let Some(cap) = self.state.readahead else {
            return self.service(now_ms, req);
        };
        self.read_ahead(d.arrived_ms.min(now_ms), true);
        let t = self.service(now_ms, req);
        let end = req.lbn + req.sectors.max(1) as u64;
        if req.kind == DiskOpKind::Read {
            // A background read following the last read keeps the limit.
            if d.demand || self.state.last_read_end != Some(req.lbn) {
                self.state.anchor = end;
            }
            let limit = (self.state.anchor + cap).min(self.capacity);
            self.state.ra = (limit > end).then_some((end, now_ms + t, limit));
            self.state.last_read_end = Some(end);
        } else {
            self.state.last_read_end = None;
        }
        t
    }
    fn last_split(&self) -> Option<TimeSplit> {
        Some(self.state.split)
    }
    fn set_opportunism(&mut self, o: Opportunism) -> bool {
        self.state.readahead = Some(o.readahead_sectors);
        true
    }
    fn advance_idle(&mut self, until_ms: f64) {
        self.read_ahead(until_ms, false);
    }
    fn take_free(&mut self, out: &mut Vec<FreeRun>) {
        out.append(&mut self.state.free);
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
