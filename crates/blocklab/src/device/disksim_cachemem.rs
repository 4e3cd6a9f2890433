//! DiskSim's controller memory cache (`disksim_cachemem` in a type-3 smart
//! controller) in front of one disk.
//!
//! The controller takes one request at a time (`Maximum queue length = 0`:
//! the driver sends the next only when this one is done), so controller and
//! disk together are one server in the driver's queue: a request's service
//! is the disk accesses the cache makes for it, one after another
//! (`disksim_cachemem.c`):
//!
//! * The cache holds `Cache size` sectors in lines of `Line size` sectors,
//!   one valid and one dirty bit per sector (`Bit granularity = 1`), fully
//!   associative, replaced least recently used (`SLRU segments = [1.0]`,
//!   a hit moving the line to the recent end; `Replacement policy = 1`,
//!   FIFO, never reorders).
//! * A line the request needs and the cache lacks takes the place of the
//!   least recently used line of another request; a dirty victim is first
//!   written back (strict allocation: the request waits). The write covers
//!   the victim's dirty sectors up to the first invalid one after them, and
//!   when it starts (ends) at the line's edge it grows over the dirty
//!   sectors of the lines before (after) it, up to `Flush max line
//!   cluster` lines, stopping at a clean line end or an absent sector.
//! * A read fills the request's invalid sectors from the disk: each run of
//!   them one read, issued when a valid sector follows it or the request
//!   ends (no prefetch). A write (write-back, `Write scheme = 3`) only
//!   marks its sectors valid and dirty: it costs the write-backs its
//!   allocations needed. Dirty data leaves only when replaced (`Flush
//!   policy = 0`, no idle flush).
//!
//! The host side (the driver–controller bus and the controller's own
//! times, all 0 in DiskSim's files) costs nothing here.

use std::collections::{BTreeMap, HashMap};

use super::disksim_params::{Block, Value};
use super::{DevRequest, DeviceModel};
use crate::array::plan::DiskOpKind;
use crate::error::Result;

/// The cache's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CacheMemParams {
    /// Sectors of a line.
    pub line: u64,
    /// Lines the cache holds.
    pub lines: usize,
    /// Hits reorder the lines (LRU); false: FIFO.
    pub lru: bool,
    /// Lines a write-back may cover at most.
    pub max_cluster: u64,
    /// Lines a fill may span before it is issued (`Max gather`; 0: any).
    pub max_gather: u64,
}

#[derive(Debug, Clone)]
struct Line {
    valid: Vec<bool>,
    dirty: Vec<bool>,
    /// Replacement order: the smallest goes first.
    stamp: u64,
}

/// A disk behind a controller memory cache.
pub struct CacheMem {
    disk: Box<dyn DeviceModel>,
    p: CacheMemParams,
    lines: HashMap<u64, Line>,
    order: BTreeMap<u64, u64>,
    clock: u64,
}

impl CacheMemParams {
    /// The parameters of a `disksim_cachemem` block; what is not modelled
    /// is an error naming its key.
    pub fn from_block(b: &Block) -> Result<CacheMemParams> {
        let int = |key: &str, default: f64| -> Result<u64> {
            let v = b.num_or(key, default)?;
            if !(v >= 0.0 && v.fract() == 0.0) {
                return Err(b.key_error(key, format!("{v}: expected a non-negative integer")));
            }
            Ok(v as u64)
        };
        let must = |key: &str, default: f64, want: &[f64], what: &str| -> Result<()> {
            let v = b.num_or(key, default)?;
            if !want.contains(&v) {
                return Err(b.key_error(key, format!("{v} is not modelled; only {what}")));
            }
            Ok(())
        };
        let size = int("Cache size", 0.0)?;
        let line = int("Line size", 0.0)?;
        if line == 0 || size < line {
            return Err(b.key_error(
                "Line size",
                format!("{line}: only lines of at least one sector, at most the cache size ({size}), are modelled"),
            ));
        }
        must("Bit granularity", 1.0, &[1.0], "1 (a valid and a dirty bit per sector)")?;
        let policy = b.num_or("Replacement policy", 2.0)?;
        let lru = match policy {
            1.0 => false,
            2.0 => {
                if let Some(p) = b.get("SLRU segments") {
                    let segs = p.nums()?;
                    if segs.len() != 1 {
                        return Err(b.key_error("SLRU segments", "only one segment (plain LRU) is modelled"));
                    }
                }
                true
            }
            other => {
                return Err(b.key_error(
                    "Replacement policy",
                    format!("{other} is not modelled; only 1 (FIFO) and 2 (SLRU of one segment: LRU)"),
                ))
            }
        };
        must(
            "Allocation policy",
            0.0,
            &[0.0],
            "0 (a dirty victim is written back first)",
        )?;
        must("Write scheme", 3.0, &[3.0], "3 (write-back)")?;
        must("Flush policy", 0.0, &[0.0], "0 (dirty lines leave when replaced)")?;
        if b.num_or("Flush idle delay", -1.0)? >= 0.0 {
            return Err(b.key_error("Flush idle delay", "idle flushing is not modelled; only -1 (off)"));
        }
        must("Read prefetch type", 0.0, &[0.0], "0 (no prefetch)")?;
        must("Write prefetch type", 0.0, &[0.0], "0 (no prefetch)")?;
        must("Line-by-line fetches", 0.0, &[0.0], "0")?;
        Ok(CacheMemParams {
            line,
            lines: (size / line) as usize,
            lru,
            max_cluster: int("Flush max line cluster", 1.0)?.max(1),
            max_gather: int("Max gather", 0.0)?,
        })
    }
}

/// The `Cache = disksim_cachemem { ... }` of a controller block, if any.
pub fn of_controller(ctlr: &Block) -> Result<Option<CacheMemParams>> {
    let Some(p) = ctlr.get("Cache") else { return Ok(None) };
    let Value::Block(c) = &p.value else {
        return Err(p.err("expected a `disksim_cachemem { ... }` block"));
    };
    if c.type_name != "disksim_cachemem" {
        return Ok(None);
    }
    CacheMemParams::from_block(c).map(Some)
}

impl CacheMem {
    pub fn new(disk: Box<dyn DeviceModel>, p: CacheMemParams) -> Self {
        CacheMem {
            disk,
            p,
            lines: HashMap::new(),
            order: BTreeMap::new(),
            clock: 0,
        }
    }

    /// (valid, dirty) of a sector, None if its line is absent.
    fn atom(&self, s: u64) -> Option<(bool, bool)> {
        let l = self.lines.get(&(s / self.p.line))?;
        let i = (s % self.p.line) as usize;
        Some((l.valid[i], l.dirty[i]))
    }

    fn clean(&mut self, s: u64) {
        if let Some(l) = self.lines.get_mut(&(s / self.p.line)) {
            l.dirty[(s % self.p.line) as usize] = false;
        }
    }

    fn touch(&mut self, line: u64) {
        self.clock += 1;
        let stamp = self.clock;
        if let Some(l) = self.lines.get_mut(&line) {
            self.order.remove(&l.stamp);
            l.stamp = stamp;
            self.order.insert(stamp, line);
        }
    }

    /// DiskSim's `cache_flush_cluster`: from the dirty sector `from`, grow
    /// the write-back in direction `dir` over neighbouring lines.
    fn cluster(&mut self, from: u64, mut linecnt: u64, dir: i64) -> u64 {
        let mut edge = from;
        let mut lastclean = false;
        let mut at: Option<u64> = None;
        while linecnt <= self.p.max_cluster {
            let Some(s) = at else {
                let next = edge as i64 + dir;
                if next < 0 || lastclean || self.atom(next as u64).is_none() {
                    break;
                }
                at = Some(next as u64);
                linecnt += 1;
                continue;
            };
            let (valid, dirty) = self.atom(s).expect("within a present line");
            if dirty {
                self.clean(s);
                lastclean = false;
                edge = s;
            } else if !valid {
                break;
            } else {
                lastclean = true;
            }
            // The next sector of the same line, None at its edge.
            let n = s as i64 + dir;
            at = (n >= 0 && (n as u64) / self.p.line == s / self.p.line).then_some(n as u64);
        }
        edge
    }

    /// Write back the dirty sectors of `line` (DiskSim's
    /// `cache_initiate_dirty_block_flush`); the time it takes from `t`.
    fn flush(&mut self, line: u64, t: f64) -> f64 {
        let first = line * self.p.line;
        let last = first + self.p.line - 1;
        let mut runs = Vec::new();
        let mut run: Option<(u64, u64)> = None;
        // DiskSim grows forward only a write-back of a line dirty from its first sector.
        let from_edge = self.atom(first).expect("the victim is present").1;
        let first_dirty = (first..=last)
            .find(|&s| self.atom(s).is_some_and(|a| a.1))
            .unwrap_or(first);
        for s in first..=last {
            let (valid, dirty) = self.atom(s).expect("the victim is present");
            if dirty {
                self.clean(s);
                run = Some(run.map_or((s, s), |(a, _)| (a, s)));
            } else if let (Some((a, b)), false) = (run, valid) {
                let a = if a == first && self.p.max_cluster > 1 {
                    self.cluster(a, 1, -1)
                } else {
                    a
                };
                runs.push((a, b));
                run = None;
            }
        }
        if let Some((a, b)) = run {
            let a = if a == first && self.p.max_cluster > 1 {
                self.cluster(a, 1, -1)
            } else {
                a
            };
            let linecnt = 1 + first_dirty.saturating_sub(a) / self.p.line;
            let b = if from_edge && linecnt < self.p.max_cluster && b == last {
                self.cluster(b, linecnt, 1)
            } else {
                b
            };
            runs.push((a, b));
        }
        let mut took = 0.0;
        for (a, b) in runs {
            took += self.access(t + took, DiskOpKind::Write, a, b - a + 1);
        }
        took
    }

    fn access(&mut self, t: f64, kind: DiskOpKind, lbn: u64, sectors: u64) -> f64 {
        let req = DevRequest {
            kind,
            lbn,
            sectors: sectors as u32,
        };
        self.disk.service(t, &req)
    }

    /// Make `line` present (empty), replacing the oldest line not in `busy`
    /// (the request's lines before it); the time its write-back takes from `t`.
    fn allocate(&mut self, line: u64, busy: std::ops::Range<u64>, t: f64) -> f64 {
        let mut took = 0.0;
        if self.lines.len() >= self.p.lines {
            let victim = self
                .order
                .values()
                .copied()
                .find(|l| !busy.contains(l))
                .expect("a cache of more lines than one request spans");
            if self.lines[&victim].dirty.iter().any(|&d| d) {
                took = self.flush(victim, t);
            }
            let v = self.lines.remove(&victim).expect("present");
            self.order.remove(&v.stamp);
        }
        self.clock += 1;
        let n = self.p.line as usize;
        self.lines.insert(
            line,
            Line {
                valid: vec![false; n],
                dirty: vec![false; n],
                stamp: self.clock,
            },
        );
        self.order.insert(self.clock, line);
        took
    }
}

impl DeviceModel for CacheMem {
    fn service(&mut self, now_ms: f64, req: &DevRequest) -> f64 {
        let (lbn, n) = (req.lbn, req.sectors.max(1) as u64);
        let ls = self.p.line;
        let (first_line, last_line) = (lbn / ls, (lbn + n - 1) / ls);
        let mut t = now_ms;
        // A run of invalid sectors waiting to be filled.
        let mut fill: Option<(u64, u64)> = None;
        for line in first_line..=last_line {
            if !self.lines.contains_key(&line) {
                t += self.allocate(line, first_line..line, t);
            }
            let (a, b) = (lbn.max(line * ls), (lbn + n).min((line + 1) * ls));
            for s in a..b {
                let (valid, _) = self.atom(s).expect("allocated above");
                if req.kind == DiskOpKind::Write {
                    let l = self.lines.get_mut(&line).expect("present");
                    let i = (s % ls) as usize;
                    l.valid[i] = true;
                    l.dirty[i] = true;
                } else if !valid {
                    fill = Some(fill.map_or((s, s), |(f, _)| (f, s)));
                } else if let Some((f, e)) = fill.take() {
                    t += self.access(t, DiskOpKind::Read, f, e - f + 1);
                }
            }
            // A fill spanning more lines than the controller gathers goes now.
            if let Some((f, e)) = fill {
                if self.p.max_gather > 0 && line - f / ls >= self.p.max_gather {
                    t += self.access(t, DiskOpKind::Read, f, e - f + 1);
                    fill = None;
                }
            }
        }
        if let Some((f, e)) = fill {
            t += self.access(t, DiskOpKind::Read, f, e - f + 1);
        }
        if req.kind == DiskOpKind::Read {
            for s in lbn..lbn + n {
                let l = self.lines.get_mut(&(s / ls)).expect("allocated above");
                l.valid[(s % ls) as usize] = true;
            }
        }
        if self.p.lru {
            for line in first_line..=last_line {
                self.touch(line);
            }
        }
        t - now_ms
    }

    fn positioning_estimate(&self, now_ms: f64, req: &DevRequest) -> f64 {
        self.disk.positioning_estimate(now_ms, req)
    }

    fn cylinder(&self, lbn: u64) -> u64 {
        self.disk.cylinder(lbn)
    }

    fn capacity_sectors(&self) -> u64 {
        self.disk.capacity_sectors()
    }

    fn last_hit(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A disk that takes 1 ms per access plus 0.1 ms per sector, and logs them.
    struct Log(std::sync::Arc<std::sync::Mutex<Vec<(DiskOpKind, u64, u32)>>>);
    impl DeviceModel for Log {
        fn service(&mut self, _now: f64, r: &DevRequest) -> f64 {
            self.0.lock().unwrap().push((r.kind, r.lbn, r.sectors));
            1.0 + 0.1 * r.sectors as f64
        }
        fn positioning_estimate(&self, _: f64, _: &DevRequest) -> f64 {
            0.0
        }
        fn cylinder(&self, lbn: u64) -> u64 {
            lbn
        }
        fn capacity_sectors(&self) -> u64 {
            1 << 20
        }
    }

    type Ops = std::sync::Arc<std::sync::Mutex<Vec<(DiskOpKind, u64, u32)>>>;

    fn cache(lines: usize, lru: bool, max_cluster: u64) -> (CacheMem, Ops) {
        let log: Ops = Default::default();
        let p = CacheMemParams {
            line: 4,
            lines,
            lru,
            max_cluster,
            max_gather: 0,
        };
        (CacheMem::new(Box::new(Log(log.clone())), p), log)
    }

    fn rq(kind: DiskOpKind, lbn: u64, sectors: u32) -> DevRequest {
        DevRequest { kind, lbn, sectors }
    }

    use DiskOpKind::{Read as R, Write as W};

    #[test]
    fn reads_fill_only_their_missing_sectors_and_then_hit() {
        let (mut c, log) = cache(4, true, 1);
        // Sectors 2..6 over lines 0 and 1: one fill of 4 sectors.
        assert!((c.service(0.0, &rq(R, 2, 4)) - 1.4).abs() < 1e-12);
        assert_eq!(*log.lock().unwrap(), [(R, 2, 4)]);
        // Inside what was read: a hit, no disk access.
        assert_eq!(c.service(5.0, &rq(R, 3, 2)), 0.0);
        // 0..8: sectors 0, 1 missing, then valid, then 6, 7: two fills.
        c.service(9.0, &rq(R, 0, 8));
        assert_eq!(log.lock().unwrap()[1..], [(R, 0, 2), (R, 6, 2)]);
    }

    #[test]
    fn writes_are_absorbed_and_written_back_when_replaced() {
        let (mut c, log) = cache(2, true, 1);
        assert_eq!(c.service(0.0, &rq(W, 0, 2)), 0.0); // line 0, dirty 0..2
        assert_eq!(c.service(1.0, &rq(W, 4, 4)), 0.0); // line 1, all dirty
        c.service(2.0, &rq(R, 1, 1)); // a hit: line 0 most recent
        assert!(log.lock().unwrap().is_empty());
        // Line 2 replaces line 1 (least recent): its 4 dirty sectors first.
        let t = c.service(3.0, &rq(R, 8, 1));
        assert_eq!(*log.lock().unwrap(), [(W, 4, 4), (R, 8, 1)]);
        assert!((t - (1.4 + 1.1)).abs() < 1e-12);
        // FIFO: the hit does not save line 0.
        let (mut c, log) = cache(2, false, 1);
        c.service(0.0, &rq(W, 0, 2));
        c.service(1.0, &rq(W, 4, 4));
        c.service(2.0, &rq(R, 1, 1));
        c.service(3.0, &rq(R, 8, 1));
        assert_eq!(log.lock().unwrap()[0], (W, 0, 2));
    }

    #[test]
    fn a_write_back_clusters_over_neighbouring_dirty_lines() {
        let (mut c, log) = cache(3, true, 8);
        c.service(0.0, &rq(W, 2, 2)); // line 0: 2, 3 dirty (0, 1 invalid)
        c.service(1.0, &rq(W, 4, 4)); // line 1: all dirty
        c.service(2.0, &rq(W, 8, 2)); // line 2: 8, 9 dirty
        c.service(3.0, &rq(R, 2, 1)); // line 0 most recent
        c.service(4.0, &rq(R, 8, 1)); // line 2 most recent: line 1 goes first
                                      // Line 1 is dirty from edge to edge: the write grows back over 2, 3
                                      // (line 0 starts invalid: stop) and on over 8, 9 (line 2's 10 is
                                      // invalid: stop), one write of 2..10; the neighbours become clean.
        c.service(5.0, &rq(R, 12, 1));
        assert_eq!(*log.lock().unwrap(), [(W, 2, 8), (R, 12, 1)]);
        assert_eq!(c.atom(3), Some((true, false)));
        assert_eq!(c.atom(9), Some((true, false)));
    }
}
