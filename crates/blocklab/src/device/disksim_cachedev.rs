//! DiskSim's cache device (`disksim_cachedev` in a type-3 smart controller):
//! one disk (the `Cached device`) cached on another (the `Cache device`),
//! sector *b* at sector *b*, with a valid and a dirty bit per sector and no
//! replacement (`disksim_cachedev.c`).
//!
//! The controller takes one request at a time (`Maximum queue length = 0`),
//! so the pair is one server in the driver's queue; what the cache does in
//! the background (filling the cache device after a miss, flushing dirty
//! sectors when idle) keeps its disk busy and delays the requests after it:
//!
//! * A read whose sectors are all valid (and end before `Cache size`) is
//!   read from the cache device; otherwise from the cached disk, and once
//!   that read is done the request completes and the same sectors are
//!   written to the cache device in the background (valid when written).
//! * A write ending before `Cache size` is written to the cache device and
//!   completes with it (valid and dirty); a write past it goes to the disk.
//! * `Flush idle delay` after the cached disk's last access, if neither
//!   disk has work, the first run of dirty sectors is read from the cache
//!   device and then written to the disk (after a request that reached the
//!   idle disk meanwhile); while both stay idle the next run follows at
//!   once. A request for the disk cancels the wait.
//!
//! Each disk serves its accesses in the order they are issued.

use std::collections::{BTreeSet, HashMap};

use super::disksim_params::{Block, Value};
use super::{DevRequest, DeviceModel};
use crate::array::plan::DiskOpKind;
use crate::error::Result;

/// The parameters of a `disksim_cachedev` block.
#[derive(Debug, Clone, PartialEq)]
pub struct CacheDevParams {
    /// Sectors cached (requests ending at or past it bypass the cache).
    pub size: u64,
    pub cache_device: String,
    pub cached_device: String,
    /// ms of the cached disk's idleness before flushing (None: never).
    pub idle_delay: Option<f64>,
}

impl CacheDevParams {
    pub fn from_block(b: &Block) -> Result<CacheDevParams> {
        let size = b.num("Cache size")?;
        if !(size >= 1.0 && size.fract() == 0.0) {
            return Err(b.key_error("Cache size", format!("{size}: expected a positive integer")));
        }
        if b.num_or("Write scheme", 3.0)? != 3.0 {
            return Err(b.key_error("Write scheme", "only 3 (write-back) is modelled"));
        }
        if b.num_or("Flush policy", 0.0)? != 0.0 {
            // DiskSim itself stops on a periodic flush of a cache device.
            return Err(b.key_error(
                "Flush policy",
                "only 0 is modelled (periodic flushing is not in DiskSim either)",
            ));
        }
        let delay = b.num_or("Flush idle delay", 0.0)?;
        if delay < 0.0 {
            return Err(b.key_error(
                "Flush idle delay",
                format!("{delay}: must not be negative (0: no idle flush)"),
            ));
        }
        Ok(CacheDevParams {
            size: size as u64,
            cache_device: b.word("Cache device")?,
            cached_device: b.word("Cached device")?,
            idle_delay: (delay > 0.0).then_some(delay),
        })
    }
}

/// The `Cache = disksim_cachedev { ... }` of a controller block, if any.
pub fn of_controller(ctlr: &Block) -> Result<Option<(CacheDevParams, &Block)>> {
    let Some(p) = ctlr.get("Cache") else { return Ok(None) };
    let Value::Block(c) = &p.value else {
        return Err(p.err("expected a `disksim_cachedev { ... }` block"));
    };
    if c.type_name != "disksim_cachedev" {
        return Ok(None);
    }
    CacheDevParams::from_block(c).map(|p| Some((p, c)))
}

/// One of the pair with the time its last access ends.
struct Disk {
    model: Box<dyn DeviceModel>,
    free_at: f64,
}

impl Disk {
    /// An access issued at `t`: it starts when the disk is free; its end.
    fn access(&mut self, t: f64, kind: DiskOpKind, lbn: u64, sectors: u64) -> f64 {
        let start = t.max(self.free_at);
        let req = DevRequest {
            kind,
            lbn,
            sectors: sectors as u32,
        };
        self.free_at = start + self.model.service(start, &req);
        self.free_at
    }
}

/// A disk cached on another disk.
pub struct CacheDev {
    disk: Disk,
    cache: Disk,
    size: u64,
    idle_delay: Option<f64>,
    /// Valid sectors of the cache device, each since when.
    valid: HashMap<u64, f64>,
    dirty: BTreeSet<u64>,
    /// When the idle flush is due (None: not armed).
    idle_at: Option<f64>,
    /// A flush read from the cache disk: (when it is read, first, count);
    /// its write to the disk is issued then, after what reached the disk before.
    flush_write: Option<(f64, u64, u64)>,
}

impl CacheDev {
    pub fn new(disk: Box<dyn DeviceModel>, cache: Box<dyn DeviceModel>, p: &CacheDevParams) -> Self {
        CacheDev {
            disk: Disk {
                model: disk,
                free_at: 0.0,
            },
            cache: Disk {
                model: cache,
                free_at: 0.0,
            },
            size: p.size,
            idle_delay: p.idle_delay,
            valid: HashMap::new(),
            dirty: BTreeSet::new(),
            idle_at: None,
            flush_write: None,
        }
    }

    /// The cached disk finished an access at `t`: arm the idle flush.
    fn disk_done(&mut self, t: f64) {
        self.idle_at = self.idle_delay.map(|d| t + d);
    }

    /// The first run of dirty sectors (start, count).
    fn dirty_run(&self) -> Option<(u64, u64)> {
        let first = *self.dirty.first()?;
        let n = self
            .dirty
            .range(first..)
            .zip(first..)
            .take_while(|(s, want)| **s == *want)
            .count();
        Some((first, n as u64))
    }

    /// Background work due before `now` (a request arrives at `now`), in
    /// time order: a flush's write to the disk once its read from the cache
    /// disk is done, and the idle wait's expiry.
    fn settle(&mut self, now: f64) {
        loop {
            if let Some((ready, first, n)) = self.flush_write.filter(|f| f.0 < now) {
                self.flush_write = None;
                let done = self.disk.access(ready, DiskOpKind::Write, first, n);
                for s in first..first + n {
                    self.dirty.remove(&s);
                }
                self.disk_done(done);
                // Both idle when it ends: the next run follows at once.
                if done < now {
                    self.idle_at = Some(done);
                }
                continue;
            }
            let Some(t) = self.idle_at.filter(|&t| t < now) else {
                return;
            };
            self.idle_at = None;
            // Either disk still busy: the wait is over without a flush.
            if self.disk.free_at > t || self.cache.free_at > t || self.flush_write.is_some() {
                continue;
            }
            let Some((first, n)) = self.dirty_run() else { continue };
            let read = self.cache.access(t, DiskOpKind::Read, first, n);
            self.flush_write = Some((read, first, n));
        }
    }
}

impl DeviceModel for CacheDev {
    fn service(&mut self, now_ms: f64, req: &DevRequest) -> f64 {
        self.settle(now_ms);
        let (lbn, n) = (req.lbn, req.sectors.max(1) as u64);
        let fits = lbn + n < self.size;
        let done = match req.kind {
            DiskOpKind::Read => {
                let hit = fits && (lbn..lbn + n).all(|s| self.valid.get(&s).is_some_and(|&at| at <= now_ms));
                if hit {
                    self.cache.access(now_ms, DiskOpKind::Read, lbn, n)
                } else {
                    self.idle_at = None;
                    let read = self.disk.access(now_ms, DiskOpKind::Read, lbn, n);
                    self.disk_done(read);
                    // Populate the cache device behind the reply.
                    let filled = self.cache.access(read, DiskOpKind::Write, lbn, n);
                    for s in lbn..lbn + n {
                        self.valid.insert(s, filled);
                    }
                    read
                }
            }
            DiskOpKind::Write if fits => {
                let t = self.cache.access(now_ms, DiskOpKind::Write, lbn, n);
                for s in lbn..lbn + n {
                    self.valid.insert(s, t);
                    self.dirty.insert(s);
                }
                t
            }
            DiskOpKind::Write => {
                self.idle_at = None;
                let t = self.disk.access(now_ms, DiskOpKind::Write, lbn, n);
                self.disk_done(t);
                t
            }
        };
        done - now_ms
    }

    fn positioning_estimate(&self, now_ms: f64, req: &DevRequest) -> f64 {
        self.disk.model.positioning_estimate(now_ms, req)
    }

    fn cylinder(&self, lbn: u64) -> u64 {
        self.disk.model.cylinder(lbn)
    }

    fn capacity_sectors(&self) -> u64 {
        self.disk.model.capacity_sectors()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    type Log = Arc<Mutex<Vec<(&'static str, DiskOpKind, u64, u32, f64)>>>;

    /// 1 ms per access plus 0.1 ms per sector, logging (disk, kind, lbn, sectors, start).
    struct D(&'static str, Log);
    impl DeviceModel for D {
        fn service(&mut self, now: f64, r: &DevRequest) -> f64 {
            self.1.lock().unwrap().push((self.0, r.kind, r.lbn, r.sectors, now));
            1.0 + 0.1 * r.sectors as f64
        }
        fn positioning_estimate(&self, _: f64, _: &DevRequest) -> f64 {
            0.0
        }
        fn cylinder(&self, lbn: u64) -> u64 {
            lbn
        }
        fn capacity_sectors(&self) -> u64 {
            1000
        }
    }

    fn pair(idle: Option<f64>) -> (CacheDev, Log) {
        let log: Log = Default::default();
        let p = CacheDevParams {
            size: 100,
            cache_device: "c".into(),
            cached_device: "d".into(),
            idle_delay: idle,
        };
        (
            CacheDev::new(Box::new(D("disk", log.clone())), Box::new(D("cache", log.clone())), &p),
            log,
        )
    }

    fn rq(kind: DiskOpKind, lbn: u64, sectors: u32) -> DevRequest {
        DevRequest { kind, lbn, sectors }
    }

    use DiskOpKind::{Read as R, Write as W};

    #[test]
    fn a_miss_reads_the_disk_and_fills_the_cache_behind_the_reply() {
        let (mut c, log) = pair(None);
        // Miss: 1.4 ms on the disk; the fill runs 1.4..2.8 on the cache device.
        assert!((c.service(0.0, &rq(R, 10, 4)) - 1.4).abs() < 1e-12);
        // Before the fill is written the sectors are not valid: a miss again
        // (the disk is free at 1.4; the reply at 2.6).
        assert!((c.service(1.4, &rq(R, 10, 2)) - 1.2).abs() < 1e-12);
        // After: a hit on the cache device, which its second fill keeps busy until 4.0.
        assert!((c.service(5.0, &rq(R, 11, 2)) - 1.2).abs() < 1e-12);
        let l = log.lock().unwrap();
        assert_eq!(l.iter().filter(|e| e.0 == "disk").count(), 2);
        assert_eq!(l.last().unwrap().0, "cache");
        // Past the cache's size: the disk.
        drop(l);
        c.service(10.0, &rq(W, 98, 2));
        assert_eq!(log.lock().unwrap().last().unwrap().0, "disk");
    }

    #[test]
    fn writes_land_on_the_cache_device_and_are_flushed_when_idle() {
        let (mut c, log) = pair(Some(100.0));
        assert!((c.service(0.0, &rq(W, 20, 4)) - 1.4).abs() < 1e-12);
        assert!((c.service(2.0, &rq(W, 24, 2)) - 1.2).abs() < 1e-12);
        assert!((c.service(4.0, &rq(W, 50, 1)) - 1.1).abs() < 1e-12);
        // The disk has not been used: no idle wait is armed, nothing flushed.
        c.service(500.0, &rq(R, 20, 1)); // a hit
        assert!(log.lock().unwrap().iter().all(|e| e.0 == "cache"));
        // A miss arms it: 100 ms after the miss ends (601.1) the first run
        // (20..26) is read from the cache device and written to the disk,
        // then at once the next (50).
        c.service(600.0, &rq(R, 70, 1));
        c.service(1000.0, &rq(R, 20, 1));
        let l = log.lock().unwrap();
        let flush: Vec<_> = l
            .iter()
            .filter(|e| e.4 > 700.0 && e.4 < 1000.0)
            .map(|e| (e.0, e.1, e.2, e.3))
            .collect();
        assert_eq!(
            flush,
            [
                ("cache", R, 20, 6),
                ("disk", W, 20, 6),
                ("cache", R, 50, 1),
                ("disk", W, 50, 1)
            ]
        );
        assert!(c.dirty.is_empty());
    }

    #[test]
    fn a_request_reaching_the_idle_disk_during_a_flush_read_goes_before_its_write() {
        let (mut c, log) = pair(Some(100.0));
        c.service(0.0, &rq(W, 20, 6)); // dirty 20..26 on the cache device
        c.service(600.0, &rq(R, 70, 1)); // a miss: the disk is done at 601.1
                                         // 701.1: the flush reads 20..26 from the cache device until 702.7; a
                                         // miss at 702.0 finds the disk idle and is read first (702.0..703.1),
                                         // the flush's write follows.
        assert!((c.service(702.0, &rq(R, 80, 1)) - 1.1).abs() < 1e-9);
        c.service(2000.0, &rq(R, 20, 1));
        let l = log.lock().unwrap();
        let disk: Vec<_> = l
            .iter()
            .filter(|e| e.0 == "disk" && e.4 > 700.0 && e.4 < 2000.0)
            .map(|e| (e.1, e.2, e.4))
            .collect();
        assert_eq!(disk.len(), 2, "{disk:?}");
        assert_eq!((disk[0].0, disk[0].1), (R, 80));
        assert_eq!((disk[1].0, disk[1].1), (W, 20));
        assert!((disk[1].2 - 703.1).abs() < 1e-9, "{disk:?}");
    }
}
